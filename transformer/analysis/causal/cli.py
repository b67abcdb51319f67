"""python -m transformer.analysis patch: what causes one piece of a translation, as one JSON object on stdout.

    python -m transformer.analysis patch --model en-de --clean "The bank of the river." \\
        --corrupted "The bank of the city." --target 2 [--contrast PIECE] [--analyses trace,heads,path,attribution]

Both sentences are translated with the checkpoint's recorded decoding; the target piece (counted from 1) is a piece
of the clean translation, teacher-forced; the contrast piece, where given, is a piece of the vocabulary (from the
corrupted translation, say). `--replace-piece N` corrupts by putting the nearest piece of the same kind in place of
the clean source's piece N (the piece count kept); `--noise-word N` by Gaussian noise on that piece instead.
For each analysis the JSON gives the sites patched, the names of its axes (counted from 1), the restored shares as
nested lists (null where nothing was patched), and p_clean and p_corrupted of the target piece.
"""
from __future__ import annotations

import json
import sys

import torch

from ...checkpoint import CheckpointError
from ...command_line import CommandParser, add_threads, answered, number_type, sentence_type
from ...decoding.translator import Translator
from ..registry import ModelAccess
from .analysis import ANALYSES, causal_patching, check_analyses, patching_json, question_of
from .question import replaced_source, same_count_suggestions
from .redecode import patched_translation


def analyses_type(text: str) -> tuple[str, ...]:
    try:
        return check_analyses(part.strip() for part in text.split(",") if part.strip())
    except ValueError as error:
        import argparse

        raise argparse.ArgumentTypeError(str(error).removeprefix("analyses: ")) from None


def parser() -> CommandParser:
    command = CommandParser(prog="python -m transformer.analysis patch", description=__doc__)
    command.add_argument("--model", required=True,
                         help="a shipped checkpoint by name (en-de, de-en) or a checkpoint folder (a converted Marian "
                              "model included)")
    command.add_argument("--clean", required=True, type=sentence_type("--clean"),
                         help="the clean sentence (one line)")
    command.add_argument("--corrupted", type=sentence_type("--corrupted"),
                         help="the corrupted sentence (or give --noise-word)")
    command.add_argument("--noise-word", type=number_type("--noise-word", int, 1), default=None,
                         help="corrupt by noise (3 x the embeddings' standard deviation, as ROME) on this clean "
                              "source piece, counted from 1, instead of a corrupted sentence")
    command.add_argument("--replace-piece", type=number_type("--replace-piece", int, 1), default=None,
                         help="corrupt by replacing this clean source piece (from 1) with the nearest piece of the "
                              "same kind (by embedding), so the piece count stays and every position lines up")
    command.add_argument("--target", required=True, type=number_type("--target", int, 1),
                         help="the target piece of the clean translation, counted from 1")
    command.add_argument("--contrast", help="a contrast piece: the logit difference target - contrast is reported")
    command.add_argument("--analyses", type=analyses_type, default=ANALYSES,
                         help=f"comma-separated, some of {','.join(ANALYSES)} (default: all)")
    add_threads(command)
    return command


def run(argv=None) -> dict:
    command = parser()
    args = command.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if sum(x is not None for x in (args.corrupted, args.noise_word, args.replace_piece)) != 1:
        command.error("give one of --corrupted TEXT, --replace-piece N or --noise-word N")
    with answered(command, CheckpointError, ValueError):
        translator = Translator.from_pretrained(args.model)
        strategy, settings = translator.recorded_decoding()
        clean = translator.translate(args.clean, strategy=strategy, **settings)
        access = ModelAccess(translator.model, translator.tokenizer)
        suggestions = None
        if args.replace_piece is not None:
            suggestions = same_count_suggestions(translator.model, translator.tokenizer, clean.src_ids,
                                                 args.replace_piece - 1)
            args.corrupted = replaced_source(clean.src_tokens, args.replace_piece - 1, suggestions[0])
        question = question_of(access, clean, args.corrupted, args.target, args.contrast, args.noise_word)
        result = causal_patching(translator.model, question, args.analyses)
    pieces = lambda ids: [translator.tokenizer.id_to_piece(i) for i in ids]  # noqa: E731
    corrupted_text = (translator.translate(args.corrupted, strategy=strategy, **settings).text
                      if args.corrupted is not None else
                      translator.tokenizer.decode(patched_translation(translator.model, question, None)))
    return {"model": args.model, "clean": {"text": args.clean, "translation": clean.text,
                                           "translation_pieces": clean.tgt_tokens},
            "corrupted": {"text": args.corrupted, "translation": corrupted_text, "suggestions": suggestions},
            **patching_json(result, pieces)}


def main(argv=None) -> None:
    print(json.dumps(run(argv), ensure_ascii=False))
    sys.stdout.flush()


__all__ = ["main", "parser", "run"]
