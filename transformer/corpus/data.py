"""Parallel corpora in the Multi30k layout ({split}.{lang}, one sentence per line), token-count batching,
and `python -m transformer.data download` to fetch Multi30k task 1 to where training and evaluation look.

Where they look by default: ../shared/data/multi30k beside the repository, else data/multi30k inside it
(the download's default destination, ignored by git)."""
from __future__ import annotations

import argparse
import gzip
import random
import sys
import urllib.request
from pathlib import Path

import torch

from ..command_line import CommandParser, number_type
from .mix import mix
from .parallel import CorpusError, ParallelCorpus, read_lines, read_parallel

REPOSITORY = Path(__file__).resolve().parents[2]
SHARED_MULTI30K = REPOSITORY.parent / "shared" / "data" / "multi30k"
LOCAL_MULTI30K = REPOSITORY / "data" / "multi30k"
MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{split}.{lang}.gz"
MULTI30K_SPLITS = ("train", "val", "test_2016_flickr")


def default_data_dir() -> Path | None:
    return next((folder for folder in (SHARED_MULTI30K, LOCAL_MULTI30K) if (folder / "train.en").is_file()), None)


def read_parallel_or_exit(data_dir, split: str, src_lang: str, tgt_lang: str) -> ParallelCorpus:
    """read_parallel for a command line: a bad corpus ends the program with one line naming the file, exit code 2
    (argparse's, for a bad input) and no traceback, before the caller has written anything."""
    try:
        return read_parallel(data_dir, split, src_lang, tgt_lang)
    except CorpusError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def token_batches(lengths: list[int], max_tokens: int, shuffle: bool, seed: int = 0) -> list[list[int]]:
    """Groups example indices into batches of about `max_tokens` padded tokens.

    Examples are sorted by length inside large random chunks (length bucketing), so a batch holds
    sentences of similar length and little padding, while the order still changes every epoch.
    """
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    if shuffle:
        rng.shuffle(order)
    chunk = max(1, 100 * max_tokens // max(1, max(lengths, default=1)))
    batches = []
    for start in range(0, len(order), chunk):
        bucket = sorted(order[start : start + chunk], key=lambda i: lengths[i])
        batch, longest = [], 0
        for index in bucket:
            longest_if_added = max(longest, lengths[index])
            if batch and longest_if_added * (len(batch) + 1) > max_tokens:
                batches.append(batch)
                batch, longest_if_added = [], lengths[index]
            batch.append(index)
            longest = longest_if_added
        if batch:
            batches.append(batch)
    if shuffle:
        rng.shuffle(batches)
    return batches


def pad(sequences: list[list[int]], pad_id: int) -> torch.Tensor:
    longest = max(len(s) for s in sequences)
    out = torch.full((len(sequences), longest), pad_id, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        out[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
    return out


def download_multi30k(dest, languages=("en", "de", "fr")) -> list[Path]:
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for split in MULTI30K_SPLITS:
        for lang in languages:
            with urllib.request.urlopen(MULTI30K_URL.format(split=split, lang=lang), timeout=60) as response:
                text = gzip.decompress(response.read())
            (dest / f"{split}.{lang}").write_bytes(text)
            written.append(dest / f"{split}.{lang}")
    return written


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="python -m transformer.data", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    download = commands.add_parser("download", help="fetch Multi30k task-1 raw files (train, val, test_2016_flickr)")
    download.add_argument("--dest", default=str(LOCAL_MULTI30K),
                          help=f"folder to write {{split}}.{{lang}} files into (default: {LOCAL_MULTI30K}, where "
                               "train and evaluate look when ../shared/data/multi30k is absent)")
    download.add_argument("--langs", default="en,de,fr", help="comma-separated languages (default: en,de,fr)")
    mixing = commands.add_parser("mix", help="one training folder from several corpora (see transformer/corpus/mix.py)")
    mixing.add_argument("folders", nargs="+", help="corpus folders of {split}.{lang} files, each with train and val")
    mixing.add_argument("--out", required=True, help="folder to write train.*, val.* and mix.json into")
    mixing.add_argument("--repeat", type=number_type("--repeat", int), nargs="+", default=None,
                        help="how many times each folder's training split is repeated, one count per folder "
                             "(default: 1 each)")
    mixing.add_argument("--langs", default="en,de", help="the two languages, comma-separated (default: en,de)")
    return parser


def main(argv=None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "mix":
        run_mix(parser, args)
        return
    for path in download_multi30k(args.dest, args.langs.split(",")):
        print(f"wrote {path} ({len(read_lines(path))} lines)")


def run_mix(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    languages = tuple(args.langs.split(","))
    if len(languages) != 2 or not all(languages):
        parser.error(f"--langs needs two languages separated by a comma, got '{args.langs}'")
    repeats = args.repeat or [1] * len(args.folders)
    if any(r < 1 for r in repeats):
        parser.error(f"--repeat counts must be at least 1, got {' '.join(map(str, repeats))}")
    if any(Path(args.out).resolve() == Path(f).resolve() for f in args.folders):
        parser.error(f"--out {args.out} is one of the corpus folders: write the mix to a new folder")
    try:
        recipe = mix(args.folders, repeats, args.out, languages)
    except CorpusError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    for corpus in recipe["corpora"]:
        print(f"{corpus['name']}: {corpus['train_lines']:,} training pairs x {corpus['repeat']}, "
              f"val lines {corpus['val'][0]}-{corpus['val'][1]}, tests {', '.join(corpus['tests']) or 'none'}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
