"""Which explanation to trust for this model: a deletion test of every source attribution the app draws.

For each val sentence the model translates (greedy), each method scores every (output piece, source piece) pair.
Deleting an output piece's top-k source pieces by that score (each replaced by <unk>, the neutral token; </s> is
never deleted) and scoring the same output teacher-forced gives the deletion curve: the mean log-probability of
the produced pieces after k deletions, k = 0..K. A faithful method names the pieces the output depends on, so its
curve falls fast; AOPC, the mean drop over k = 1..K (Samek et al., 2017), sums that up, and a random order is the
baseline every method must beat.

    python -m transformer.analysis.faithfulness --checkpoint checkpoints/en-de --limit 200   # -> faithfulness.json

Methods: the cross-attention of the checkpoint's best alignment head (alignment.json; else the last layer's head
mean), the mean of every layer and head, attention rollout (rollout.py), norm-based attention (norms.py, mean of
every layer and head), ALTI+'s source contributions (alti.py), input x gradient (attribution.py), and random.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np
import torch
from tqdm import tqdm

from ..checkpoint import CheckpointError
from ..command_line import (
    CommandParser,
    InputError,
    answered,
    check_writable,
    command_text,
    number_type,
    read_json_input,
    write_json_atomically,
)
from ..core.head_ref import from_shown
from ..core.model import Transformer
from ..corpus.data import read_parallel_or_exit
from ..corpus.parallel import CorpusError
from ..decoding.trace import Translation
from ..decoding.translator import Translator
from ..numbers import NumberError, parsed_number
from .alti import alti_plus
from .attribution import input_x_gradient
from .cli import add_checkpoint_and_data, add_hardware, check_data_dir, use_threads
from .norms import add_norms
from .rollout import source_rollout

RESULT_FILE = "faithfulness.json"
METHODS = ("attention, best alignment head", "attention, mean of layers and heads", "attention rollout",
           "norm-based attention", "ALTI+", "input x gradient", "random")


def method_scores(model: Transformer, translation: Translation, best_head: tuple[int, int] | None,
                  rng: np.random.Generator) -> dict[str, np.ndarray]:
    """method -> (T, S) scores of a translation made with capture=True; higher = more important."""
    cross = translation.recorded["cross"].values
    if translation.norms is None:
        add_norms(model, translation)
    layer, head = best_head if best_head is not None else (cross.shape[0] - 1, None)
    return {
        METHODS[0]: cross[layer, head] if head is not None else cross[layer].mean(0),
        METHODS[1]: cross.mean((0, 1)),
        METHODS[2]: source_rollout(translation.recorded["encoder_self"].values, cross),
        METHODS[3]: translation.weighted_norms("cross").mean((0, 1)),
        METHODS[4]: alti_plus(model, translation.src_ids, translation.tgt_ids).matrix[:, : cross.shape[3]],
        METHODS[5]: input_x_gradient(model, translation.src_ids, translation.tgt_ids).scores,
        METHODS[6]: rng.random(cross.shape[2:]),
    }


@torch.no_grad()
def deletion_curve(model: Transformer, src_ids: list[int], tgt_ids: list[int], scores: np.ndarray,
                   steps: int) -> np.ndarray:
    """(steps + 1, T): log p(tgt_ids[t]) teacher-forced after deleting output piece t's top-k source pieces by
    `scores` (T, S), k = 0..steps; the last source piece (</s>) is never deleted. One batched pass per sentence."""
    length, outputs = len(src_ids), len(tgt_ids)
    order = np.argsort(-scores[:, : length - 1], axis=1, kind="stable")  # (T, S - 1), most important first
    sources = np.tile(np.array(src_ids), (steps + 1, outputs, 1))  # (K + 1, T, S)
    for k in range(1, steps + 1):
        for t in range(outputs):
            sources[k, t, order[t, :k]] = model.config.unk_id
    src = torch.tensor(sources.reshape(-1, length), device=model.device)
    tgt_in = torch.tensor([[model.config.decoder_start_id] + list(tgt_ids[:-1])], device=model.device)
    tgt_in = tgt_in.expand(src.size(0), -1)
    logits = model(src, tgt_in)  # (rows, T, V); row (k, t) is read at position t only
    rows = torch.arange(src.size(0), device=model.device)
    positions = torch.arange(outputs, device=model.device).repeat(steps + 1)
    log_probs = logits[rows, positions].float().log_softmax(-1)  # (rows, V)
    chosen = torch.tensor(tgt_ids, device=model.device).repeat(steps + 1)
    return log_probs[rows, chosen].view(steps + 1, outputs).cpu().numpy()


def aopc(curve: np.ndarray) -> float:
    """Area over the perturbation curve: the mean drop from k = 0 over k = 1..K (curve: (K + 1,))."""
    return float(np.mean(curve[0] - curve[1:]))


def faithfulness(model: Transformer, translations: list[Translation], best_head: tuple[int, int] | None,
                 steps: int = 4, seed: int = 0, progress: Callable[[int], None] | None = None) -> dict:
    """Per method, the corpus deletion curve (mean over every produced piece) and its AOPC."""
    rng = np.random.default_rng(seed)
    curves = {method: [] for method in METHODS}
    for index, translation in enumerate(translations):
        for method, scores in method_scores(model, translation, best_head, rng).items():
            curves[method].append(deletion_curve(model, translation.src_ids, translation.tgt_ids, scores, steps))
        if progress is not None:
            progress(index + 1)
    table = []
    for method, per_sentence in curves.items():
        curve = np.concatenate(per_sentence, axis=1).mean(axis=1)  # every produced piece counts once
        table.append({"method": method, "curve": [round(float(v), 4) for v in curve], "aopc": round(aopc(curve), 4)})
    return {"steps": steps, "sentences": len(translations),
            "pieces": int(sum(len(t.tgt_ids) for t in translations)), "table": table}


def main(argv=None) -> None:
    parser = CommandParser(prog="python -m transformer.analysis.faithfulness", description=__doc__)
    add_checkpoint_and_data(parser)
    parser.add_argument("--split", default="val", help="split whose sources are translated and tested (default: val)")
    parser.add_argument("--limit", type=number_type("--limit", int, 1), default=200,
                        help="the first N sentences (default: 200)")
    parser.add_argument("--steps", type=number_type("--steps", int, 1), default=4,
                        help="source pieces deleted at most, K (default: 4)")
    parser.add_argument("--seed", type=number_type("--seed", int, 0), default=0,
                        help="seed of the random order (default: 0)")
    add_hardware(parser)
    parser.add_argument("--out", help=f"write the JSON here instead of CHECKPOINT/{RESULT_FILE}")
    args = parser.parse_args(argv)
    check_data_dir(parser, args)
    use_threads(args)
    started = time.perf_counter()
    with answered(parser, CheckpointError, CorpusError):
        translator = Translator.from_pretrained(args.checkpoint, device=args.device)
        out = check_writable(args.out if args.out else translator.source / RESULT_FILE)
        languages = translator.languages
        sources = read_parallel_or_exit(args.data_dir, args.split, languages["src"], languages["tgt"]).source[
            : args.limit
        ]
        alignment = translator.source / "alignment.json"
        best = read_json_input(alignment).get("best_head") if alignment.is_file() else None
        best_head = best_head_index(best, translator.model.config, alignment)
    with tqdm(total=len(sources), unit="sentence", desc=f"{args.split}: deletion curves", dynamic_ncols=True) as bar:
        translations = [t for start in range(0, len(sources), 32)
                        for t in translator.translate_batch(sources[start : start + 32], capture=True)]
        result = faithfulness(translator.model, translations, best_head, args.steps, args.seed,
                              lambda done: bar.update(done - bar.n))
    result = {"checkpoint": str(args.checkpoint), "split": args.split, "decoding": "greedy, the model's own output",
              "neutral_token": "<unk>", "best_head": best and {"layer": best["layer"], "head": best["head"]},
              "explain": __doc__.split("\n\n")[1].replace("\n", " "), **result,
              "command": command_text("transformer.analysis.faithfulness", argv),
              "minutes": round((time.perf_counter() - started) / 60, 2)}
    write_json_atomically(out, result)
    for row in sorted(result["table"], key=lambda r: -r["aopc"]):
        print(f"{row['method']:38s} AOPC {row['aopc']:.3f}  curve {row['curve']}")
    print(f"wrote {out} ({result['minutes']} min)")


def best_head_index(best, config, path) -> tuple[int, int] | None:
    """(layer, head) from 0 of the alignment report's best head (the file counts from 1); a report whose best head
    is malformed or outside this model is an InputError naming the file."""
    if best is None:
        return None
    try:
        # a cross-attention head: the decoder's stack
        return (from_shown(parsed_number("best_head.layer", best["layer"], int, 1, config.decoder.layers)),
                from_shown(parsed_number("best_head.head", best["head"], int, 1, config.decoder.heads)))
    except (KeyError, TypeError, NumberError) as error:
        raise InputError(f"{path}: best_head is not a layer and head of this model ({error})") from None


if __name__ == "__main__":
    sys.exit(main())
