"""Arguments that every analysis command shares: which checkpoint, where the data is, on what hardware. The
one-line errors, number checks and atomic writes every command line shares are in ../command_line.py."""
from __future__ import annotations

import argparse

import torch

from ..command_line import add_device, add_threads
from ..corpus.data import default_data_dir


def add_checkpoint_and_data(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint",
        required=True,
        help="checkpoint folder, or a shipped one by name (en-de, de-en); the result is written into it",
    )
    parser.add_argument("--data-dir", default=default_data_dir(),
                        help="folder of {split}.{lang} files (default: ../shared/data/multi30k)")


def add_hardware(parser: argparse.ArgumentParser) -> None:
    add_device(parser)
    add_threads(parser)


def use_threads(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)


def check_data_dir(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.data_dir is None:
        parser.error("no --data-dir given and ../shared/data/multi30k does not exist")
