"""Arguments that every analysis command shares: which checkpoint, where the data is, on what hardware."""
from __future__ import annotations

import argparse

from ..corpus.data import default_data_dir


def add_checkpoint_and_data(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", required=True,
                        help="checkpoint folder, or a shipped one by name (en-de, de-en); the result is written into it")
    parser.add_argument("--data-dir", default=default_data_dir(),
                        help="folder of {split}.{lang} files (default: ../shared/data/multi30k)")


def add_hardware(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's choice, all cores)")


def check_data_dir(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.data_dir is None:
        parser.error("no --data-dir given and ../shared/data/multi30k does not exist")
