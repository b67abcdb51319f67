"""What a dictionary feature costs on the shipped en-de model: a steered translation (greedy, one latent removed at
every source position, through patch()) against the same translation unsteered, and "which features cause this
word" with the best 10 measured exactly, against one teacher-forced pass. Interleaved rounds in one process; medians.
Prints JSON.

    python bench/bench_features.py [--rounds 9] [--threads 2]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SENTENCE = "The boat is on the river."
FOLDER = ROOT / "checkpoints" / "en-de" / "features" / "encoder_layers.3.output"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dictionary", default=str(FOLDER))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from transformer import Translator
    from transformer.features import load_dictionary
    from transformer.features.steering import Edit, causes, steering, teacher_forced
    from transformer.playground.replay import cpu_name

    translator = Translator.from_pretrained("en-de")
    saved = load_dictionary(args.dictionary)
    target = translator.translate(SENTENCE, strategy="greedy").text
    src, tgt, _ = teacher_forced(translator, SENTENCE, target)
    latent = causes(translator, saved, SENTENCE, target, piece=2, exact=1)[0].latent

    def steered():
        with steering(translator.model, saved, [Edit(latent, 0.0)]):
            return translator.translate(SENTENCE, strategy="greedy").text

    def forward():
        with torch.no_grad():
            translator.model(src, tgt)

    runs = {"translate, greedy": lambda: translator.translate(SENTENCE, strategy="greedy").text,
            "translate, greedy, one latent removed": steered,
            "one teacher-forced pass": forward,
            "which features cause piece 3, best 10 exact": lambda: causes(translator, saved, SENTENCE, target, 2, 10)}
    times = {name: [] for name in runs}
    for name, run in runs.items():
        run()  # warm
    for _ in range(args.rounds):
        for name, run in runs.items():
            began = time.perf_counter()
            run()
            times[name].append(1000 * (time.perf_counter() - began))
    print(json.dumps({
        "cpu": cpu_name(), "threads": args.threads, "rounds": args.rounds, "sentence": SENTENCE, "target": target,
        "steered": steered(), "latent": latent, "dictionary": saved.origin.point,
        "median_ms": {name: round(statistics.median(values), 1) for name, values in times.items()},
    }, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
