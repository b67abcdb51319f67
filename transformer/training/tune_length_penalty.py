"""Choose the beam search's length penalty on val: translate the split once per candidate value, score each
with sacreBLEU, and record the sweep and the best value in the checkpoint's metrics.json. `evaluate`, the model
card and `--update-metrics` then decode with that value.

    python -m transformer.tune_length_penalty --checkpoint checkpoints/de-en --values 0.6,1.0,1.5,2.0

Selection is on val only: a split whose name starts with "test" is refused. Scores recorded for other splits
were decoded with the old value, so they are removed; the command prints how to score them again.
"""
from __future__ import annotations

import json
import sys

from tqdm import tqdm

from ..checkpoint import METRICS_FILE, CheckpointError, checkpoint_folder
from ..command_line import CommandParser, add_device, answered, check_writable, number_type, write_atomically
from ..corpus.data import default_data_dir, read_parallel_or_exit
from ..corpus.mix import score_name, score_source
from ..corpus.parallel import CorpusError
from ..corpus.scoring import score, translate_corpus
from ..decoding.strategies import SettingError, get_strategy
from ..decoding.translator import Translator
from ..numbers import NumberError, parsed_number

SWEEP_KEY = "length_penalty_sweep"


def parse_values(text: str) -> list[float]:
    """Comma-separated length penalties, each within the beam strategy's allowed range, without repeats."""
    spec = next(s for s in get_strategy("beam").specs if s.name == "length_penalty")
    try:
        values = [parsed_number("--values", part, float) for part in text.split(",") if part.strip()]
    except NumberError:
        raise SettingError(f"--values must be comma-separated numbers, got {text!r}") from None
    if not values:
        raise SettingError("--values needs at least one length penalty")
    if len(set(values)) != len(values):
        raise SettingError(f"--values repeats a value: {text!r}")
    return [spec.check(value) for value in values]


def best_value(bleu_by_value: dict[float, float]) -> float:
    """The value with the highest BLEU; on a tie the earliest listed, so the listed order states a preference."""
    return max(bleu_by_value, key=lambda value: (bleu_by_value[value], -list(bleu_by_value).index(value)))


def record_choice(metrics: dict, split: str, beam_size: int, bleu_by_value: dict[float, float],
                  chosen_scores: dict) -> list[str]:
    """Writes the sweep and the choice into `metrics`; returns the splits whose scores were dropped as stale."""
    chosen = best_value(bleu_by_value)
    metrics[SWEEP_KEY] = {"split": split, "beam_size": beam_size,
                          "bleu": {f"{value:g}": bleu for value, bleu in bleu_by_value.items()}, "chosen": chosen}
    metrics["decoding"] = {"strategy": "beam", "beam_size": beam_size, "length_penalty": chosen}
    scores = metrics.setdefault("scores", {})
    stale = sorted(name for name in scores if name != split)
    for name in stale:
        del scores[name]
    scores[split] = chosen_scores
    return stale


def main(argv=None) -> None:
    parser = CommandParser(prog="python -m transformer.tune_length_penalty", description=__doc__)
    parser.add_argument(
        "--checkpoint", required=True, help="checkpoint folder (config.json, model.safetensors, spm.model)"
    )
    parser.add_argument("--values", default="0.6,1.0,1.5,2.0",
                        help="comma-separated length penalties to try, each in [0, 2] (default: 0.6,1.0,1.5,2.0)")
    parser.add_argument("--beam-size", type=number_type("--beam-size", int), default=None,
                        help="beam size (default: the checkpoint's recorded one, else 4)")
    parser.add_argument("--split", default="val", help="split to select on (default: val; test splits are refused)")
    parser.add_argument(
        "--data-dir",
        default=default_data_dir(),
        help="folder of {split}.{lang} files (default: ../shared/data/multi30k)",
    )
    parser.add_argument("--batch-size", type=number_type("--batch-size", int, 1), default=64,
                        help="sentences per batch (default: 64)")
    add_device(parser)
    args = parser.parse_args(argv)
    if args.split.startswith("test"):
        parser.error(f"--split {args.split}: the length penalty is selected on val, never on a test split")
    if args.data_dir is None:
        parser.error("no --data-dir given and ../shared/data/multi30k does not exist")
    with answered(parser, CheckpointError, CorpusError):
        metrics_file = check_writable(checkpoint_folder(args.checkpoint) / METRICS_FILE)
        if not metrics_file.is_file():
            parser.error(f"--checkpoint {args.checkpoint}: no {METRICS_FILE} there to record the choice in")
        translator = Translator.from_pretrained(args.checkpoint, device=args.device)
        metrics = translator.metrics  # a corrupt metrics.json is said here, before any decoding
        _, recorded = translator.recorded_decoding("beam")
    try:
        values = parse_values(args.values)
        beam_size = args.beam_size if args.beam_size is not None else recorded["beam_size"]
        beam_spec = next(s for s in get_strategy("beam").specs if s.name == "beam_size")
        beam_size = beam_spec.check(beam_size)
    except SettingError as error:
        parser.error(str(error))

    languages = translator.languages
    corpus = read_parallel_or_exit(args.data_dir, args.split, languages["src"], languages["tgt"])
    bleu_by_value, scores_by_value = {}, {}
    with tqdm(total=len(values) * len(corpus.source), unit="sentence", desc=f"{args.split} length penalties",
              dynamic_ncols=True) as bar:
        for value in values:
            hypotheses = translate_corpus(translator, corpus.source, "beam", args.batch_size, progress=bar.update,
                                          beam_size=beam_size, length_penalty=value)
            result = score(hypotheses, corpus.target)
            bleu_by_value[value], scores_by_value[value] = result["bleu"], result
            bar.write(f"length penalty {value:g}: BLEU {result['bleu']}  chrF {result['chrf']}")

    chosen = best_value(bleu_by_value)
    stale = record_choice(
        metrics, score_name(metrics, args.data_dir, args.split), beam_size, bleu_by_value, scores_by_value[chosen]
    )
    write_atomically(metrics_file, json.dumps(metrics, indent=2) + "\n")
    print(f"chosen length penalty {chosen:g} (BLEU {bleu_by_value[chosen]} on {args.split}), "
          f"recorded in {metrics_file}")
    for name in stale:
        folder, split = score_source(metrics, name)
        print(f"scores for {name} were decoded with the old setting and were removed; score again with "
              f"python -m transformer.evaluate --checkpoint {args.checkpoint}"
              f"{f' --data-dir {folder}' if folder else ''} --split {split} --update-metrics")


if __name__ == "__main__":
    sys.exit(main())
