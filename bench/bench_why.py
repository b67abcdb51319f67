"""What the search tree and the logit lens cost: translate time of a 30-token sentence with beam 4 and
attention captured, against the package as it was before the trace recorded them (a git worktree of
--base, imported side by side as `transformer_base`), interleaved in one process. Prints JSON.

    python bench/bench_why.py [--base ef1bc7a] [--rounds 15]
"""
from __future__ import annotations

import argparse
import importlib
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SENTENCE = ("A young man in a red jacket and a woman with a blue umbrella are walking their two dogs "
            "along a crowded city street.")


def base_package(commit: str, scratch: Path):
    """The `transformer` package at `commit`, importable as `transformer_base` (its imports are relative)."""
    worktree = scratch / "base"
    subprocess.run(["git", "worktree", "add", "--detach", "-f", str(worktree), commit], cwd=ROOT, check=True,
                   capture_output=True)
    (scratch / "packages").mkdir()
    (scratch / "packages" / "transformer_base").symlink_to(worktree / "transformer")
    sys.path.insert(0, str(scratch / "packages"))
    return importlib.import_module("transformer_base"), worktree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="ef1bc7a", help="commit of the package before the tree and the lens")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "en-de"))
    args = parser.parse_args()
    from transformer import Translator

    with tempfile.TemporaryDirectory() as scratch:
        base, worktree = base_package(args.base, Path(scratch))
        try:
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
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, capture_output=True)
    medians = {name: round(statistics.median(values), 1) for name, values in times.items()}
    before = medians["before (attention captured, no tree, no lens)"]
    print(json.dumps({
        "sentence_pieces": len(new.source_ids(SENTENCE)[0]) - 1, "output_tokens": tokens, "beam_size": 4,
        "rounds": args.rounds, "torch_threads": torch.get_num_threads(), "cpu": platform.processor() or platform.machine(),
        "median_ms": medians,
        "overhead_vs_before_percent": {name: round(100 * (ms / before - 1), 1) for name, ms in medians.items()},
        "budget_percent": 15,
    }, indent=2))


if __name__ == "__main__":
    main()
