"""What the search tree and the logit lens cost: translate time of a 30-token sentence with beam 4 and
attention captured, against the package as it was before the trace recorded them (a git worktree of
--base, imported side by side as `transformer_base`), interleaved in one process. Prints JSON.

    python bench/bench_why.py [--base ef1bc7a] [--rounds 15]
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from base_package import base_package  # noqa: E402

SENTENCE = ("A young man in a red jacket and a woman with a blue umbrella are walking their two dogs "
            "along a crowded city street.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="ef1bc7a", help="commit of the package before the tree and the lens")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "en-de"))
    args = parser.parse_args()
    from transformer import Translator

    with base_package(args.base) as base:
        new = Translator.from_pretrained(args.checkpoint)
        old = base.Translator.from_pretrained(args.checkpoint)
        runs = {
            "before (attention captured, no tree, no lens)": lambda: old.translate(
                SENTENCE, strategy="beam", beam_size=4, capture=True),
            "now, attention and tree": lambda: new.translate(SENTENCE, strategy="beam", beam_size=4, capture=True),
            "now, attention, tree and logit lens": lambda: new.translate(
                SENTENCE, strategy="beam", beam_size=4, capture=True, logit_lens=True),
        }
        tokens = len(new.translate(SENTENCE, strategy="beam", beam_size=4).tgt_ids)
        times = {name: [] for name in runs}
        for run in runs.values():
            run()  # warm-up
        for _ in range(args.rounds):  # interleaved, so drift in the machine hits every variant alike
            for name, run in runs.items():
                started = time.perf_counter()
                run()
                times[name].append((time.perf_counter() - started) * 1000)
    medians = {name: round(statistics.median(values), 1) for name, values in times.items()}
    before = medians["before (attention captured, no tree, no lens)"]
    print(
        json.dumps(
            {
                "sentence_pieces": len(new.source_ids(SENTENCE)[0]) - 1,
                "output_tokens": tokens,
                "beam_size": 4,
                "rounds": args.rounds,
                "torch_threads": torch.get_num_threads(),
                "cpu": platform.processor() or platform.machine(),
                "median_ms": medians,
                "overhead_vs_before_percent": {name: round(100 * (ms / before - 1), 1) for name, ms in medians.items()},
                "budget_percent": 15,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
