"""The command line of `python -m transformer.train`: its flags with their help (`build_parser`), and the arguments a
run uses (`resolve_args`): the ones given, checked, or with --resume the run's saved ones with only its budgets
overridden."""
from __future__ import annotations

import argparse

import torch

from ..command_line import CommandParser, number_type
from ..core.config import NORM_PLACEMENTS, POSITIONAL_ENCODINGS
from ..corpus.data import default_data_dir
from ..tokenizer import Tokenizer
from .resume import saved_args

DESCRIPTION = """Train an encoder-decoder Transformer on a parallel corpus and write a checkpoint folder.

    python -m transformer.train --src en --tgt de --out runs/en-de
    python -m transformer.train --resume runs/en-de --max-minutes 150     # continue that run exactly
    torchrun --standalone --nproc_per_node=2 -m transformer.train --out runs/ddp ...   # data parallel (gloo / NCCL)

Reads {train,val}.{src,tgt} (and test_2016_flickr, only to report it at the end) from --data-dir,
trains a joint sentencepiece vocabulary on the training split only, trains with token-count batches,
validates (loss and greedy BLEU) after every epoch, records the attention-across-training timeline on
8 probe sentences, averages the best checkpoints by val BLEU, and writes config.json, model.safetensors,
spm.model, metrics.json and timeline.*. The run's state is saved under OUT/resume/ after every epoch and
when a budget stops it, so `--resume OUT` continues where it stopped.
"""
RESUMABLE_OVERRIDES = ("max_minutes", "max_updates", "epochs", "threads", "device", "data_dir", "save_epochs")


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description's examples kept line by line, and every flag's default shown (where it has one: a flag
    whose absence means something, such as --threads, says what in its own help)."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="python -m transformer.train", description=DESCRIPTION, formatter_class=HelpFormatter)
    data = p.add_argument_group("data")
    data.add_argument("--data-dir", default=default_data_dir(), help="folder of {split}.{lang} files")
    data.add_argument("--src", default="en", help="source language suffix")
    data.add_argument("--tgt", default="de", help="target language suffix")
    data.add_argument(
        "--test-split", default="test_2016_flickr", help="split reported (never used for selection); '' to skip"
    )
    data.add_argument("--out", help="checkpoint folder to write (required unless --resume)")
    data.add_argument(
        "--vocab-size", type=number_type("--vocab-size", int), default=8000, help="joint sentencepiece vocabulary size"
    )
    data.add_argument("--tokenizer", help="use this sentencepiece model (made by an earlier run on the same training "
                                          "split) instead of training one; --vocab-size is then its size")
    model = p.add_argument_group("model (with --init-from only the two dropouts apply; the shape is the checkpoint's)")
    model.add_argument("--d-model", type=number_type("--d-model", int), default=256, help="width of every layer")
    model.add_argument(
        "--n-heads",
        type=number_type("--n-heads", int),
        default=4,
        help="attention heads per layer (must divide --d-model)",
    )
    model.add_argument("--n-layers", type=number_type("--n-layers", int), default=3, help="layers per stack")
    model.add_argument("--d-ff", type=number_type("--d-ff", int), default=1024, help="feed-forward inner width")
    model.add_argument(
        "--dropout",
        type=number_type("--dropout", float),
        default=0.3,
        help="dropout on the embeddings and on every sub-layer output",
    )
    model.add_argument(
        "--attention-dropout",
        type=number_type("--attention-dropout", float),
        default=0.1,
        help="dropout on the attention probabilities",
    )
    model.add_argument(
        "--max-len", type=number_type("--max-len", int), default=128, help="longest sequence (positions)"
    )
    model.add_argument(
        "--norm", choices=NORM_PLACEMENTS, default="pre", help="LayerNorm before (pre) or after (post) each sublayer"
    )
    model.add_argument(
        "--pos-encoding",
        choices=POSITIONAL_ENCODINGS,
        default="sinusoidal",
        help="fixed sinusoids or learned positions",
    )
    model.add_argument("--no-share-embeddings", action="store_true", help="separate source/target embeddings")
    model.add_argument(
        "--no-tie-output", action="store_true", help="untie the output projection from the target embedding"
    )
    opt = p.add_argument_group("optimisation")
    opt.add_argument(
        "--epochs", type=number_type("--epochs", int), default=80, help="passes over the training split, at most"
    )
    opt.add_argument("--max-minutes", type=number_type("--max-minutes", float), default=None,
                     help="stop cleanly and save once this session has trained this long (resume to go on)")
    opt.add_argument(
        "--max-updates",
        type=number_type("--max-updates", int),
        default=None,
        help="stop cleanly after this many updates in all",
    )
    opt.add_argument(
        "--max-tokens", type=number_type("--max-tokens", int), default=3000, help="padded tokens per (global) batch"
    )
    opt.add_argument("--lr", type=number_type("--lr", float), default=1.2e-3, help="peak learning rate")
    opt.add_argument("--warmup", type=number_type("--warmup", int), default=500, help="warm-up updates")
    opt.add_argument(
        "--label-smoothing",
        type=number_type("--label-smoothing", float),
        default=0.1,
        help="share of the target probability spread over the vocabulary",
    )
    opt.add_argument(
        "--clip-norm", type=number_type("--clip-norm", float), default=1.0, help="gradient norm clipped to this"
    )
    opt.add_argument(
        "--average",
        type=number_type("--average", int),
        default=5,
        help="average the best N epochs by val BLEU (1: no averaging)",
    )
    opt.add_argument(
        "--no-bf16", action="store_true", help="train in float32 even where bfloat16 autocast is supported"
    )
    opt.add_argument(
        "--seed", type=number_type("--seed", int), default=1, help="seeds initialisation, data order and dropout"
    )
    opt.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to train")
    opt.add_argument(
        "--threads",
        type=number_type("--threads", int),
        default=None,
        help="torch CPU threads per process (none given: all cores)",
    )
    opt.add_argument("--init-from", help="start from this checkpoint folder's weights and tokenizer, fresh optimizer")
    opt.add_argument("--resume", metavar="OUT", help="continue the run that writes OUT exactly where it stopped")
    opt.add_argument(
        "--save-epochs", action="store_true", help="also write every epoch's weights (float16) to OUT/epochs/"
    )
    dec = p.add_argument_group("decoding used for the reported scores")
    dec.add_argument(
        "--beam-size",
        type=number_type("--beam-size", int),
        default=4,
        help="beam width for the val and test scores at the end",
    )
    dec.add_argument(
        "--length-penalty",
        type=number_type("--length-penalty", float),
        default=0.6,
        help="GNMT length penalty for those scores (tune it afterwards with transformer.tune_length_penalty)",
    )
    return p


def resolve_args(parser: argparse.ArgumentParser, argv) -> argparse.Namespace:
    """The command line, or with --resume the run's saved arguments with only its budgets overridden."""
    args = parser.parse_args(argv)
    if args.resume:
        given = {k for k, v in vars(args).items() if v != parser.get_default(k)}
        merged = {**saved_args(args.resume), **{k: getattr(args, k) for k in RESUMABLE_OVERRIDES if k in given}}
        args = argparse.Namespace(**{**vars(args), **merged, "resume": args.resume, "out": args.resume})
    elif not args.out:
        parser.error("--out is required (or --resume OUT to continue a run)")
    for name in ("epochs", "max_tokens", "warmup", "average", "vocab_size", "beam_size"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    for name in ("max_minutes", "max_updates"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must not be negative, got {getattr(args, name)}")
    if args.data_dir is None:
        parser.error("no --data-dir given and ../shared/data/multi30k does not exist "
                     "(python -m transformer.data download fetches Multi30k there)")
    if args.tokenizer and args.init_from:
        parser.error("--tokenizer and --init-from both choose the tokenizer: a warm start keeps its checkpoint's")
    if args.tokenizer and not args.resume:
        try:
            Tokenizer.load(args.tokenizer)
        except (FileNotFoundError, ValueError) as error:
            parser.error(f"--tokenizer: {error}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but CUDA is not available")
    return args
