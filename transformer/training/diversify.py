"""Data diversification (Nguyen et al., 2020): a training split grown threefold from itself, by two trained models.

The new training split holds, in this order:
  1. the original pairs;
  2. every original source with the forward model's translation as its target (sequence-level knowledge
     distillation, Kim & Rush, 2016);
  3. every original target with the backward model's translation as its source (back-translation,
     Sennrich et al., 2016).
Only the training split is translated; every other split is copied unchanged, so models are still selected on
val and reported on test against human references.

    python -m transformer.diversify --forward checkpoints/en-de --backward checkpoints/de-en \
        --out data/diversified-en-de
    python -m transformer.train --data-dir data/diversified-en-de --init-from checkpoints/en-de ...
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from tqdm import tqdm

from ..command_line import CommandParser, number_type
from ..corpus.data import default_data_dir, read_parallel
from ..corpus.scoring import translate_corpus
from ..decoding.strategies import SettingError, build_settings
from ..decoding.translator import Translator
from ..paths import portable_path

PROVENANCE_FILE = "diversified.json"


class DiversifyError(ValueError):
    pass


def pair_of(translator: Translator) -> tuple[str, str]:
    return translator.languages["src"], translator.languages["tgt"]


def check_directions(
    forward: Translator, backward: Translator, forward_name: str, backward_name: str
) -> tuple[str, str]:
    src, tgt = pair_of(forward)
    if pair_of(backward) != (tgt, src):
        back_src, back_tgt = pair_of(backward)
        raise DiversifyError(f"--backward {backward_name} translates {back_src}→{back_tgt}, but --forward "
                             f"{forward_name} translates {src}→{tgt}: the backward model must translate {tgt}→{src}")
    return src, tgt


def copy_other_splits(data_dir: Path, out: Path, languages: tuple[str, str]) -> list[str]:
    """Every split but train, unchanged: val selects and test reports against human references."""
    copied = []
    for language in languages:
        for path in sorted(data_dir.glob(f"*.{language}")):
            if path.stem != "train" and path.is_file():
                shutil.copyfile(path, out / path.name)
                copied.append(path.name)
    return copied


def diversify(data_dir, corpus, out, forward: Translator, backward: Translator, forward_decoding: tuple[str, dict],
              backward_decoding: tuple[str, dict], batch_size: int = 64, progress=None,
              names: tuple[str, str] = ("forward", "backward")) -> dict:
    """Writes the diversified training split (`corpus`, data_dir's train split read by the caller) and the other
    splits to `out`; returns its provenance record. `names` say where the two models came from, for that record."""
    data_dir, out = Path(data_dir), Path(out)
    src, tgt = pair_of(forward)
    if (out / f"train.{src}").exists() or (out / f"train.{tgt}").exists():
        raise DiversifyError(f"{out} already holds a training split: choose a new --out, or delete it to redo it")
    started = time.perf_counter()
    forward_strategy, forward_settings = forward_decoding
    backward_strategy, backward_settings = backward_decoding
    distilled = translate_corpus(forward, corpus.source, forward_strategy, batch_size, progress, **forward_settings)
    back_translated = translate_corpus(backward, corpus.target, backward_strategy, batch_size, progress,
                                       **backward_settings)
    out.mkdir(parents=True, exist_ok=True)
    sources = corpus.source + corpus.source + back_translated
    targets = corpus.target + distilled + corpus.target
    (out / f"train.{src}").write_text("\n".join(sources) + "\n", encoding="utf-8")
    (out / f"train.{tgt}").write_text("\n".join(targets) + "\n", encoding="utf-8")
    return {
        "method": "data diversification (Nguyen et al., 2020): original, forward-translated, back-translated",
        "from": portable_path(data_dir), "languages": {"src": src, "tgt": tgt},
        "train_lines": {"original": len(corpus), "forward_translated": len(distilled),
                        "back_translated": len(back_translated), "total": len(sources)},
        "forward": {"checkpoint": names[0], "strategy": forward_strategy, **forward_settings},
        "backward": {"checkpoint": names[1], "strategy": backward_strategy, **backward_settings},
        "copied": copy_other_splits(data_dir, out, (src, tgt)),
        "seconds": round(time.perf_counter() - started, 1),
    }


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="python -m transformer.diversify", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--forward", required=True, help="checkpoint folder translating src→tgt (decides the pair)")
    parser.add_argument("--backward", required=True, help="checkpoint folder translating tgt→src")
    parser.add_argument(
        "--out", required=True, help="folder to write {split}.{lang} files to (must not hold a train split)"
    )
    parser.add_argument("--data-dir", default=default_data_dir(), help="folder of {split}.{lang} files to grow "
                        "(default: ../shared/data/multi30k)")
    parser.add_argument("--forward-strategy", choices=["greedy", "beam"], default=None,
                        help="decoding for the distilled targets (default: the forward checkpoint's recorded one, "
                             "with its settings)")
    parser.add_argument("--backward-strategy", choices=["greedy", "beam"], default="greedy",
                        help="decoding for the back-translated sources (default: greedy)")
    parser.add_argument("--batch-size", type=number_type("--batch-size", int, 1), default=128,
                        help="sentences per batch (default: 128)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where to translate (default: cpu)")
    return parser


def main(argv=None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.data_dir is None:
        parser.error("no --data-dir given and ../shared/data/multi30k does not exist")
    if Path(args.out).resolve() == Path(args.data_dir).resolve():
        parser.error("--out must differ from --data-dir: the original training split would be overwritten")
    forward = Translator.from_pretrained(args.forward, device=args.device)
    backward = Translator.from_pretrained(args.backward, device=args.device)
    try:
        check_directions(forward, backward, args.forward, args.backward)
        decodings = forward.recorded_decoding(args.forward_strategy), backward.recorded_decoding(args.backward_strategy)
        for strategy, settings in decodings:
            build_settings(strategy, settings)
        corpus = read_parallel(args.data_dir, "train", *pair_of(forward))
        with tqdm(total=2 * len(corpus), unit="sentence", desc="translating train", dynamic_ncols=True) as bar:
            record = diversify(args.data_dir, corpus, args.out, forward, backward, *decodings,
                               batch_size=args.batch_size, progress=bar.update,
                               names=(portable_path(args.forward), portable_path(args.backward)))
    except (DiversifyError, SettingError, FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    (Path(args.out) / PROVENANCE_FILE).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record["train_lines"]))


if __name__ == "__main__":
    sys.exit(main())
