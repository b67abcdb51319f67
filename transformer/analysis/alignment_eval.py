"""How well cross-attention aligns words: AER of every cross-attention head and every layer's head average, read
the plain way (Garg et al., 2019) and the Shift-Att way (Chen et al., 2020), from the weights and from norm-based
attention (Kobayashi et al., 2020), against a statistical aligner.

    python -m transformer.analysis.alignment_eval --checkpoint checkpoints/en-de
    python -m transformer.analysis.alignment_eval --checkpoint checkpoints/de-en --symmetrization intersection

The reference is not human annotation: eflomal (analysis/statistical_aligner.py) is trained on the train split
plus the evaluation split, source and target sides only, as aligners are used, and run in both directions; the
two are symmetrised (grow-diag-final by default) and the evaluation split's part is the reference.

Words. Both sides use the model's own words: sentencepiece pieces of our tokenizer grouped into words as the app
groups them (decoding/words.py, a word starts at a piece beginning with "▁"), so word i of the reference is word
i of the attention reading. Punctuation stays with its word there ("Zaun."); so that eflomal sees "Zaun" and
"Zaun." as one word, each word goes to it with punctuation stripped from its ends (a word of punctuation only
stays as it is), one token per word, so the indices do not move. eflomal lowercases words itself.

The attention is read teacher-forced: the model runs once on (source, reference) with the reference as decoder
input, <s> first, so its cross-attention rows are the positions that predicted each reference piece and </s>,
exactly the rows a translation's trace has (decoding/trace.py). Sure links = the reference links, no possible
links, so AER = 1 - 2 |A & S| / (|A| + |S|).
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from ..checkpoint import CheckpointError
from ..command_line import (
    CommandParser,
    answered,
    check_writable,
    command_text,
    number_type,
    write_atomically,
    write_json_atomically,
)
from ..core.capture import record
from ..core.head_ref import layer_label, shown
from ..corpus.data import (
    pad,
    read_parallel_or_exit,
)
from ..corpus.parallel import CorpusError
from ..decoding.translator import Translator
from .alignment import (
    Alignment,
    align,
    best,
    diagonal_alignment,
    format_pharaoh,
    scored,
    shift_align,
)
from .alignment_reference import PieceSentence, eflomal_reference, piece_sentences, read_reference, words_of
from .cli import add_checkpoint_and_data, add_hardware, check_data_dir, use_threads
from .norms import weighted_norms
from .statistical_aligner import AlignerMissing, eflomal_version
from .symmetrize import SYMMETRIZATIONS

RESULT_FILE = "alignment.json"
READERS = {"attention": align, "shift": shift_align}


@torch.no_grad()
def teacher_forced_cross(model, sentences: Sequence[PieceSentence],
                         batch_size: int = 64) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(cross-attention (L, H, T, S), the norms ‖f(x_s)‖ of what each head moves from each source piece (L, H, S))
    of each sentence, in order: one forward pass per batch on model(src, <s> + reference) with both recorded,
    each sentence's padding cut away."""
    pad_id = model.config.pad_id
    for start in range(0, len(sentences), batch_size):
        batch = sentences[start : start + batch_size]
        src = pad([s.src_ids for s in batch], pad_id).to(model.device)
        decoder_input = pad([s.tgt_ids[:-1] for s in batch], pad_id).to(model.device)
        with record(model, ["cross", "cross.transported"]) as recording:
            model(src, decoder_input)
        cross = recording.cross.float().cpu().numpy()  # (L, B, H, T, S)
        norms = recording["cross.transported"].float().cpu().numpy()  # (L, B, H, S)
        for row, sentence in enumerate(batch):
            length = len(sentence.src_pieces)
            yield cross[:, row, :, : len(sentence.tgt_pieces), :length], norms[:, row, :, :length]


@dataclass(frozen=True)
class Reading:
    """One way of reading alignments off the cross-attention."""

    layer: int  # 0-based
    head: int | None  # 0-based; None: the layer's heads averaged
    method: str  # "attention" (Garg et al.) or "shift" (Shift-Att)
    measure: str = "weights"  # or "norms": ‖α f(x)‖, norm-based attention (Kobayashi et al., 2020)


MEASURES = ("weights", "norms")


def readings(layers: int, heads: int) -> list[Reading]:
    return [Reading(layer, head, method, measure) for measure in MEASURES for method in READERS
            for layer in range(layers) for head in [*range(heads), None]]


def read_alignments(cross: np.ndarray, sentence: PieceSentence, readings_: Sequence[Reading],
                    norms: np.ndarray | None = None) -> list[Alignment]:
    """The alignment each reading gives for one sentence's (L, H, T, S) cross-attention; a norm-based reading
    weighs it by `norms` (L, H, S) first, and its layer average is the mean of the heads' weighted norms."""
    by_measure = {"weights": cross.astype(np.float64)}
    if norms is not None:
        by_measure["norms"] = weighted_norms(by_measure["weights"], norms.astype(np.float64))
    means = {measure: values.mean(axis=1) for measure, values in by_measure.items()}
    return [
        READERS[r.method](
            by_measure[r.measure][r.layer, r.head] if r.head is not None else means[r.measure][r.layer],
            sentence.tgt_pieces,
            sentence.src_pieces,
        )
        for r in readings_
    ]


def score_readings(model, sentences: Sequence[PieceSentence], reference: Sequence[Alignment], batch_size: int = 64,
                   progress: Callable[[int], None] | None = None) -> list[dict]:
    """One row per reading: its AER, precision and recall over the corpus against `reference` (sure links)."""
    if len(reference) != len(sentences):
        raise ValueError(f"{len(reference)} reference alignments for {len(sentences)} sentences")
    table = readings(model.config.decoder.layers, model.config.decoder.heads)  # the cross-attention's heads
    predicted: list[list[Alignment]] = [[] for _ in table]
    for index, (sentence, (cross, norms)) in enumerate(
        zip(sentences, teacher_forced_cross(model, sentences, batch_size))
    ):
        for column, links in zip(predicted, read_alignments(cross, sentence, table, norms)):
            column.append(links)
        if progress is not None and ((index + 1) % batch_size == 0 or index + 1 == len(sentences)):
            progress(index + 1)
    return [scored(alignments, reference, reading="head" if reading.head is not None else "layer average",
                   layer=shown(reading.layer), head=None if reading.head is None else shown(reading.head),
                   method=reading.method, measure=reading.measure) for reading, alignments in zip(table, predicted)]


def diagonal_row(sentences: Sequence[PieceSentence], reference: Sequence[Alignment]) -> dict:
    alignments = [diagonal_alignment(len(words_of(s.src_pieces)), len(words_of(s.tgt_pieces))) for s in sentences]
    return scored(alignments, reference, reading="diagonal baseline", layer=None, head=None, method=None)


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m transformer.analysis.alignment_eval", description=__doc__)
    add_checkpoint_and_data(parser)
    parser.add_argument("--split", default="test_2016_flickr",
                        help="split whose alignments are scored (default: test_2016_flickr)")
    parser.add_argument("--aligner-splits", default="train",
                        help="comma-separated splits eflomal also learns from, besides --split (default: train)")
    parser.add_argument("--symmetrization", choices=list(SYMMETRIZATIONS), default="grow-diag-final",
                        help="how eflomal's two directions become the reference (default: grow-diag-final)")
    parser.add_argument("--reference",
                        help="score against this Pharaoh file (one line per sentence of --split, source-target word "
                             "indices over our words) instead of running eflomal")
    parser.add_argument("--reference-out", help="also write the reference alignments here, in Pharaoh format")
    parser.add_argument(
        "--batch-size",
        type=number_type("--batch-size", int, 1),
        default=64,
        help="sentences per teacher-forced pass (default: 64)",
    )
    add_hardware(parser)
    parser.add_argument("--out", help=f"write the JSON here instead of CHECKPOINT/{RESULT_FILE}")
    return parser


def main(argv=None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_data_dir(parser, args)

    started = time.perf_counter()
    use_threads(args)
    with answered(parser, CheckpointError, CorpusError):
        translator = Translator.from_pretrained(args.checkpoint, device=args.device)
        out = check_writable(args.out if args.out else translator.source / RESULT_FILE)
        if args.reference_out:
            check_writable(args.reference_out)
        if not args.reference:
            try:
                eflomal_version()  # a missing aligner is said before the corpus is read
            except AlignerMissing as error:
                parser.error(f"{error}; or score against a file with --reference")
    languages = translator.languages
    src, tgt, max_len = languages["src"], languages["tgt"], translator.model.config.max_len
    evaluated = read_parallel_or_exit(args.data_dir, args.split, src, tgt)
    sentences = piece_sentences(translator.tokenizer, evaluated.source, evaluated.target, max_len)

    if args.reference:
        with answered(parser, CheckpointError, CorpusError):
            reference = read_reference(args.reference, sentences, args.split)
        described = {"what": f"alignments read from {args.reference}", "file": str(args.reference)}
    else:
        extra = [read_parallel_or_exit(args.data_dir, split, src, tgt)
                 for split in args.aligner_splits.split(",") if split]
        reference, described = eflomal_reference(translator.tokenizer, sentences, extra, evaluated, max_len,
                                                 args.symmetrization)
    if args.reference_out:
        write_atomically(args.reference_out, "".join(format_pharaoh(a) + "\n" for a in reference))

    with tqdm(total=len(sentences), unit="sentence", desc=f"{args.split} cross-attention", dynamic_ncols=True) as bar:
        rows = score_readings(translator.model, sentences, reference, args.batch_size,
                              lambda done: bar.update(done - bar.n))
    result = report(args, f"{src}-{tgt}", sentences, reference, described, rows) | {
        "command": command_text("transformer.analysis.alignment_eval", argv),
        "minutes": round((time.perf_counter() - started) / 60, 2),
    }
    write_json_atomically(out, result)
    print_summary(result, rows, translator.model.config.decoder.layers, out)


def report(args, direction: str, sentences, reference, described: dict, rows: list[dict]) -> dict:
    """alignment.json: what was scored against what, how, and every reading's row."""
    return {
        "checkpoint": str(args.checkpoint), "direction": direction, "split": args.split,
        "sentences": len(sentences), "reference_links": sum(map(len, reference)),
        "reference": described,
        "readings": "teacher-forced on (source, reference); attention: each target word to its most-attended source "
                    "word at the step that predicted it (Garg et al., 2019); shift: at the next step, whose decoder "
                    "input is that word (Shift-Att, Chen et al., 2020); words merged from pieces as the app does",
        "aer": "1 - 2 |A & S| / (|A| + |S|) summed over the corpus, sure links S = the reference, no possible links",
        "numbering": "layer and head count from 1, as the app shows them",
        "measures": "weights: the attention weights α; norms: ‖α f(x)‖, each weight times the norm of what the head "
                    "moves from that source piece (Kobayashi et al., 2020)",
        "best_head": best(rows, reading="head", measure="weights"),
        "best_head_by_method": {method: best(rows, reading="head", method=method, measure="weights")
                                for method in READERS},
        "best_head_by_measure": {measure: {method: best(rows, reading="head", method=method, measure=measure)
                                           for method in READERS} for measure in MEASURES},
        "table": rows,
        "baseline": diagonal_row(sentences, reference),
    }


def print_summary(result: dict, rows: list[dict], layers: int, out) -> None:
    head = result["best_head"]
    print(f"{result['split']}: {result['sentences']} sentences, {result['reference_links']} reference links")
    print(f"best head: cross L{head['layer']} H{head['head']} ({head['method']}), AER {head['aer']}")
    for layer in range(layers):
        averages = {(r["measure"], r["method"]): r["aer"] for r in rows
                    if r["reading"] == "layer average" and r["layer"] == shown(layer)}
        print(
            f"{layer_label(layer)} average: AER {averages['weights', 'attention']} "
            f"(shift-att {averages['weights', 'shift']}); "
            f"norm-based {averages['norms', 'attention']} (shift-att {averages['norms', 'shift']})"
        )
    print(f"diagonal baseline (no attention): AER {result['baseline']['aer']}")
    print(f"wrote {out} ({result['minutes']} min)")


if __name__ == "__main__":
    sys.exit(main())
