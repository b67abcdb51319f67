"""How much each attention head matters: the drop in BLEU and in reference log-likelihood when that head alone
is switched off, and the pruning curve (heads switched off cumulatively, least important first), after Michel et
al., 2019, "Are Sixteen Heads Really Better than One?".

    python -m transformer.analysis.importance --checkpoint checkpoints/en-de
    python -m transformer.analysis.importance --checkpoint checkpoints/de-en --limit 200

Heads are switched off with the model's own head masking (core/head_mask.py): the head's output is zeroed before
the output projection. BLEU comes from greedy decoding of the split (sacreBLEU, as training/evaluate.py scores);
the log-likelihood is teacher-forced over the references, label smoothing 0: the summed log-probability of every
reference piece (</s> included) divided by the number of pieces. A drop is the unmasked score minus the masked
one, so a positive drop means the head helps.

Writes head_importance.json into the checkpoint folder; layers and heads are numbered from 1 there, as the app
shows them, and every head also carries `heads_off_entry`, the 0-based [kind, layer, head] that
`Translator.translate(..., heads_off=[...])` takes.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch
from tqdm import tqdm

from ..checkpoint import CheckpointError
from ..command_line import CommandParser, answered, check_writable, command_text, number_type, write_json_atomically
from ..core.head_mask import HeadKey, attention_modules, heads_masked
from ..core.head_ref import HeadRef, shown
from ..corpus.data import (
    REPOSITORY,
    ParallelCorpus,
    pad,
    read_parallel_or_exit,
    token_batches,
)
from ..corpus.parallel import CorpusError
from ..corpus.scoring import EncodedCorpus, batch_loss, score, translate_corpus
from ..decoding.translator import Translator
from .cli import add_checkpoint_and_data, add_hardware, check_data_dir, use_threads

RESULT_FILE = "head_importance.json"
STRATEGY = "greedy"  # one deterministic output per sentence, and the cheapest search: 70-odd passes stay affordable


def all_heads(model) -> list[HeadKey]:
    """Every (kind, layer, head), 0-based, in the order kind (encoder_self, decoder_self, cross), layer, head."""
    return [(kind, layer, head) for kind, modules in attention_modules(model).items()
            for layer, module in enumerate(modules) for head in range(module.n_heads)]


class CorpusScorer:
    """Scores one model on one corpus with some heads switched off: greedy BLEU and reference log-likelihood."""

    def __init__(self, translator: Translator, corpus: ParallelCorpus, batch_size: int = 64, max_tokens: int = 4000):
        self.translator = translator
        self.corpus = corpus
        self.batch_size = batch_size  # sentences per decoding batch
        self.max_tokens = max_tokens  # padded tokens per teacher-forced batch
        self.encoded = EncodedCorpus.build(corpus, translator.tokenizer, translator.model.config.max_len)
        self.bleu_signature: str | None = None

    def bleu(self, heads_off: Sequence[HeadKey] = ()) -> float:
        hypotheses = translate_corpus(self.translator, self.corpus.source, STRATEGY, self.batch_size,
                                      heads_off=list(heads_off))
        scores = score(hypotheses, self.corpus.target)
        self.bleu_signature = scores["bleu_signature"]
        return scores["bleu"]

    @torch.no_grad()
    def log_likelihood(self, heads_off: Sequence[HeadKey] = ()) -> float:
        """Mean log-probability per reference piece, teacher-forced (the negated validation loss of training)."""
        model, pad_id = self.translator.model, self.translator.model.config.pad_id
        total, tokens = 0.0, 0
        with heads_masked(model, list(heads_off)):
            for batch in token_batches(self.encoded.lengths(), self.max_tokens, shuffle=False):
                src = pad([self.encoded.source[i] for i in batch], pad_id).to(model.device)
                tgt = pad([self.encoded.target[i] for i in batch], pad_id).to(model.device)
                loss, count = batch_loss(model, src, tgt, 0.0, False, pad_id)
                total, tokens = total + float(loss), tokens + count
        return -total / max(tokens, 1)


@dataclass
class HeadImportance:
    head: HeadKey  # 0-based (kind, layer, head)
    bleu: float  # with this head alone switched off
    log_likelihood: float
    bleu_drop: float  # base - masked: positive when the head helps
    log_likelihood_drop: float


@dataclass
class PruningPoint:
    heads_off: int  # how many heads are switched off
    added: HeadKey | None  # the head switched off at this point (None at the start)
    bleu: float


def head_importance(scorer: CorpusScorer, heads: Sequence[HeadKey], progress: Callable[[str], None] | None = None
                    ) -> tuple[dict, list[HeadImportance]]:
    """The unmasked scores {"bleu", "log_likelihood"} and every head's scores and drops with it alone off.
    `progress(label)` is called after each corpus pass (two per head, two for the base)."""
    def report(label: str) -> None:
        if progress is not None:
            progress(label)

    base = {"bleu": scorer.bleu()}
    report("base BLEU")
    base["log_likelihood"] = scorer.log_likelihood()
    report("base log-likelihood")
    results = []
    for head in heads:
        bleu = scorer.bleu([head])
        report(f"BLEU without {head_label(head)}")
        log_likelihood = scorer.log_likelihood([head])
        report(f"log-likelihood without {head_label(head)}")
        results.append(HeadImportance(head, bleu, log_likelihood, round(base["bleu"] - bleu, 2),
                                      base["log_likelihood"] - log_likelihood))
    return base, results


def pruning_order(importances: Sequence[HeadImportance]) -> list[HeadKey]:
    """Least important first: smallest BLEU drop, ties broken by the smaller log-likelihood drop, then by the
    head's place in the model (so equal heads keep a stable order)."""
    position = {item.head: index for index, item in enumerate(importances)}
    ranked = sorted(importances, key=lambda item: (item.bleu_drop, item.log_likelihood_drop, position[item.head]))
    return [item.head for item in ranked]


def pruning_curve(scorer: CorpusScorer, order: Sequence[HeadKey], base_bleu: float,
                  progress: Callable[[str], None] | None = None) -> list[PruningPoint]:
    """BLEU with the first k heads of `order` switched off, k = 0 (the base, not decoded again) .. len(order)."""
    curve = [PruningPoint(0, None, base_bleu)]
    for count in range(1, len(order) + 1):
        curve.append(PruningPoint(count, order[count - 1], scorer.bleu(order[:count])))
        if progress is not None:
            progress(f"BLEU with {count} heads off")
    return curve


def head_label(head: HeadKey) -> str:
    """'cross L2 H3': layer and head numbered from 1, as the app shows them."""
    ref = HeadRef(*head)
    return f"{ref.kind} L{shown(ref.layer)} H{shown(ref.head)}"


def head_entry(head: HeadKey) -> dict:
    ref = HeadRef(*head)
    return {**ref.numbered(), "heads_off_entry": list(ref)}


def result_json(base: dict, importances: Sequence[HeadImportance], curve: Sequence[PruningPoint], **about) -> dict:
    """The file's content: `about` (split, sentences, decoding, command, ...) first, then the numbers."""
    ranks = {head: rank for rank, head in enumerate(reversed(pruning_order(importances)), start=1)}
    heads = [{**head_entry(item.head), "rank": ranks[item.head],
              **{k: round(v, 4) for k, v in asdict(item).items() if k != "head"}} for item in importances]
    half = (len(curve) - 1) // 2  # curve[k] has k heads off (curve[0] is the base): 18 of 36
    return {
        **about,
        "numbering": "layer and head count from 1 as the app shows them; heads_off_entry is the 0-based "
                     "[kind, layer, head] that Translator.translate(heads_off=[...]) takes",
        "drop": "unmasked score minus the score with that head alone switched off: positive when the head helps",
        "rank": "1 = most important (largest BLEU drop, ties broken by the log-likelihood drop)",
        "base": {"bleu": base["bleu"], "log_likelihood": round(base["log_likelihood"], 4)},
        "heads": heads,
        "pruning": {
            "order": "least important first; each point switches one more head off, keeping the earlier ones off",
            "curve": [{"heads_off": p.heads_off, "added": None if p.added is None else head_entry(p.added),
                       "bleu": p.bleu} for p in curve],
            "half_pruned": {"heads_off": curve[half].heads_off, "bleu": curve[half].bleu,
                            "bleu_kept": round(curve[half].bleu / base["bleu"], 4) if base["bleu"] else None},
        },
    }


def main(argv=None) -> None:
    parser = CommandParser(prog="python -m transformer.analysis.importance", description=__doc__)
    add_checkpoint_and_data(parser)
    parser.add_argument("--split", default="val", help="split to score: {split}.{src} and {split}.{tgt} (default: val)")
    parser.add_argument("--limit", type=number_type("--limit", int, 1), default=None,
                        help="score only the first N sentences (default: all)")
    parser.add_argument("--batch-size", type=number_type("--batch-size", int, 1), default=64,
                        help="sentences per greedy decoding batch (default: 64)")
    parser.add_argument("--max-tokens", type=number_type("--max-tokens", int, 1), default=4000,
                        help="padded tokens per teacher-forced batch for the log-likelihood (default: 4000)")
    add_hardware(parser)
    parser.add_argument("--out", help=f"write the JSON here instead of CHECKPOINT/{RESULT_FILE}")
    args = parser.parse_args(argv)
    check_data_dir(parser, args)

    started = time.perf_counter()
    use_threads(args)
    with answered(parser, CheckpointError, CorpusError):
        translator = Translator.from_pretrained(args.checkpoint, device=args.device)
        out = check_writable(args.out if args.out else translator.source / RESULT_FILE)
    languages = translator.languages
    corpus = read_parallel_or_exit(args.data_dir, args.split, languages["src"], languages["tgt"])
    if args.limit is not None:
        corpus = ParallelCorpus(corpus.source[: args.limit], corpus.target[: args.limit], corpus.source_file,
                                corpus.target_file)
    scorer = CorpusScorer(translator, corpus, args.batch_size, args.max_tokens)
    heads = all_heads(translator.model)
    passes = 2 + 2 * len(heads) + len(heads)  # base, each head alone (BLEU and log-likelihood), the pruning curve
    with tqdm(total=passes, unit="pass", desc="head importance", dynamic_ncols=True) as bar:
        def progress(label: str) -> None:
            bar.set_postfix_str(label)
            bar.update()

        base, importances = head_importance(scorer, heads, progress)
        curve = pruning_curve(scorer, pruning_order(importances), base["bleu"], progress)

    result = result_json(
        base,
        importances,
        curve,
        checkpoint=str(args.checkpoint),
        direction=f"{languages['src']}-{languages['tgt']}",
        split=args.split,
        sentences=len(corpus),
        data_files=[os.path.relpath(path, REPOSITORY) for path in (corpus.source_file, corpus.target_file)],
        decoding={"strategy": STRATEGY, "batch_size": args.batch_size, "max_length": None},
        log_likelihood="teacher-forced mean log-probability per reference piece (</s> included), label smoothing 0",
        bleu_signature=scorer.bleu_signature,
        command=command_text("transformer.analysis.importance", argv),
        minutes=round((time.perf_counter() - started) / 60, 2),
    )
    write_json_atomically(out, result)
    ranked = sorted(importances, key=lambda item: (-item.bleu_drop, -item.log_likelihood_drop))
    half = result["pruning"]["half_pruned"]
    print(f"base {args.split} BLEU {base['bleu']}, log-likelihood {base['log_likelihood']:.4f} per piece "
          f"({len(corpus)} sentences)")
    print("most important:  " + ", ".join(f"{head_label(i.head)} (-{i.bleu_drop} BLEU)" for i in ranked[:3]))
    print("least important: " + ", ".join(f"{head_label(i.head)} ({-i.bleu_drop:+} BLEU)" for i in ranked[-3:]))
    print(f"{half['heads_off']} of {len(heads)} heads off: BLEU {half['bleu']}; all off: BLEU {curve[-1].bleu}")
    print(f"wrote {out} ({result['minutes']} min)")


if __name__ == "__main__":
    sys.exit(main())
