"""What a dictionary feature costs on the shipped en-de model: a steered translation (greedy, one latent removed at
every source position, through patch()) against the same translation unsteered, and "which features cause this
word" with the best 10 measured exactly, against one teacher-forced pass; and the Features tab's drawing (its
handler, without the browser): the first picture with the sentence read afresh and with its latents cached, and a
latent's page. Interleaved rounds in one process; medians. Prints JSON.

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


def features_tab(latent: int) -> dict:
    """The Features tab's handler on a page built on the shipped models: (name -> run)."""
    from explorer.registry import discover
    from explorer.request import Request
    from explorer.shell import build_demo
    from explorer.views import features

    _, ui = build_demo(discover(ROOT / "checkpoints"))
    result = ui.translate(Request.build(ui.registry, SENTENCE, "en-de"), only=ui.first_screen)["result"]
    state = {"sentence": 0, "features_point": FOLDER.name, "features_latent": None, "features_scale": None}

    def afresh():
        features.reading.cache_clear()
        return features.drawn(ui.registry, result, state)

    return {"Features tab, first picture, the sentence read afresh": afresh,
            "Features tab, first picture, its latents cached": lambda: features.drawn(ui.registry, result, state),
            "Features tab, a latent's page": lambda: features.drawn(ui.registry, result,
                                                                    state | {"features_latent": latent})}


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

    tab = features_tab(latent)
    runs = {"translate, greedy": lambda: translator.translate(SENTENCE, strategy="greedy").text,
            "translate, greedy, one latent removed": steered,
            "one teacher-forced pass": forward,
            "which features cause piece 3, best 10 exact": lambda: causes(translator, saved, SENTENCE, target, 2, 10),
            **tab}
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
