"""Translate a split and score it with sacreBLEU (cased, 13a tokenisation, detokenised output).

    python -m transformer.evaluate --checkpoint checkpoints/en-de --split test_2016_flickr
    python -m transformer.evaluate --checkpoint checkpoints/en-de --strategy sample --temperature 0.7 --seed 3
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tqdm import tqdm

from ..checkpoint import METRICS_FILE, CheckpointError
from ..command_line import CommandParser, add_device, answered, check_writable, number_type, write_atomically
from ..corpus.data import default_data_dir, read_parallel_or_exit
from ..corpus.mix import score_name
from ..corpus.parallel import CorpusError
from ..corpus.scoring import score, translate_corpus
from ..decoding.strategies import STRATEGIES, SettingError, all_settings, build_settings
from ..decoding.translator import Translator


def add_strategy_arguments(parser: argparse.ArgumentParser) -> None:
    """--strategy and one flag per registered strategy setting, with its range, from the registry."""
    parser.add_argument(
        "--strategy",
        choices=list(STRATEGIES),
        default=None,
        help="decoding strategy (default: the one recorded in the checkpoint's metrics.json, else beam)",
    )
    group = parser.add_argument_group("strategy settings (default: from metrics.json, else the strategy's default); "
                                      "a flag sets the chosen strategy's setting of that name")
    by_name: dict[str, list] = {}
    for spec in all_settings():
        by_name.setdefault(spec.name, []).append(spec)
    for name, specs in by_name.items():  # strategies may share a setting's name: one flag, each range listed
        kind = specs[0].kind if all(spec.kind is specs[0].kind for spec in specs) else float
        flag = "--" + name.replace("_", "-")
        group.add_argument(flag, type=number_type(flag, kind), default=None, help="; ".join(
            f"{s.strategy}: {s.label}, in [{s.minimum}, {s.maximum}], default {s.default}" for s in specs))


def chosen_settings(args, translator: Translator) -> tuple[str, dict]:
    """The strategy and its settings: the command line first, then the checkpoint's recorded decoding."""
    strategy, settings = translator.recorded_decoding(args.strategy)
    given = {spec.name: getattr(args, spec.name) for spec in all_settings() if getattr(args, spec.name) is not None}
    foreign = sorted(set(given) - set(settings))
    if foreign:
        flags = ", ".join("--" + name.replace("_", "-") for name in foreign)
        raise SettingError(f"{flags}: not a setting of strategy {strategy!r}, whose settings are {sorted(settings)}")
    return strategy, {**settings, **given}


def main(argv=None) -> None:
    parser = CommandParser(prog="python -m transformer.evaluate", description=__doc__)
    parser.add_argument(
        "--checkpoint", required=True, help="checkpoint folder (config.json, model.safetensors, spm.model)"
    )
    parser.add_argument(
        "--split", default="val", help="split name: reads {split}.{src} and {split}.{tgt} (default: val)"
    )
    parser.add_argument(
        "--data-dir",
        default=default_data_dir(),
        help="folder of {split}.{lang} files (default: ../shared/data/multi30k)",
    )
    add_strategy_arguments(parser)
    parser.add_argument("--batch-size", type=number_type("--batch-size", int, 1), default=64,
                        help="sentences per batch (default: 64)")
    add_device(parser)
    parser.add_argument("--out", help="write the translations here, one per line")
    parser.add_argument("--json", action="store_true", help="print the scores as one JSON object")
    parser.add_argument("--update-metrics", action="store_true",
                        help="record these scores in the checkpoint's metrics.json, under scores[SPLIT], or "
                             "scores[CORPUS/SPLIT] for a corpus of the model's training mix")
    args = parser.parse_args(argv)
    if args.data_dir is None:
        parser.error("no --data-dir given and ../shared/data/multi30k does not exist")

    with answered(parser, CheckpointError, CorpusError):
        translator = Translator.from_pretrained(args.checkpoint, device=args.device)
        metrics = translator.metrics or {}  # a corrupt metrics.json is said here, before any decoding
        if args.out:
            check_writable(args.out)
        try:
            strategy, settings = chosen_settings(args, translator)
            build_settings(strategy, settings)
        except SettingError as error:
            parser.error(str(error))
    languages = translator.languages
    corpus = read_parallel_or_exit(args.data_dir, args.split, languages["src"], languages["tgt"])
    started = time.perf_counter()
    with tqdm(total=len(corpus.source), unit="sentence", desc=f"{args.split} ({strategy})", dynamic_ncols=True) as bar:
        hypotheses = translate_corpus(translator, corpus.source, strategy, args.batch_size, progress=bar.update,
                                      **settings)
    elapsed = time.perf_counter() - started
    if args.out:
        write_atomically(args.out, "\n".join(hypotheses) + "\n")
    result = {"split": args.split, "strategy": strategy, **settings, **score(hypotheses, corpus.target),
              "seconds": round(elapsed, 1)}
    if args.update_metrics:
        metrics_file = Path(translator.source) / METRICS_FILE
        metrics.setdefault("scores", {})[score_name(metrics, args.data_dir, args.split)] = {
            k: result[k] for k in ("bleu", "chrf", "bleu_signature", "chrf_signature", "sentences")
        }
        metrics["decoding"] = {"strategy": strategy, **settings}
        write_atomically(metrics_file, json.dumps(metrics, indent=2) + "\n")
    if args.json:
        print(json.dumps(result))
    else:
        described = ", ".join(f"{k} {v}" for k, v in settings.items())
        print(f"{args.split}: BLEU {result['bleu']}  chrF {result['chrf']}  ({len(hypotheses)} sentences, "
              f"{strategy}{' (' + described + ')' if described else ''}, {elapsed:.1f} s)")
        print(f"BLEU signature: {result['bleu_signature']}")
        print(f"chrF signature: {result['chrf_signature']}")


if __name__ == "__main__":
    sys.exit(main())
