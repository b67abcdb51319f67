"""Trains each playground task's default run (its default model, seed 1) on one thread and writes it into
transformer/playground/shipped/<task>/: the checkpoint every tool opens and its replay.json, which the Learn tab
opens without training anything on the server.

    python scripts/playground_replays.py            # every task
    python scripts/playground_replays.py reverse    # one
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from transformer.playground import TASKS, PlaygroundRun, Settings, default_settings, save_run
from transformer.playground.settings import LIMITS
from transformer.playground.shipped import SHIPPED


def main(names: list[str]) -> int:
    torch.set_num_threads(1)
    for name in names or list(TASKS):
        # no time cap that a busy machine could reach: a shipped run is its settings' whole run
        run = PlaygroundRun(Settings.checked(**{**default_settings(name).to_dict(), "time_cap": LIMITS["time_cap"][2]}))
        last = run.train()
        if run.stopped_by:
            raise SystemExit(f"{name}: stopped by the {run.stopped_by} at step {last.step}")
        folder = save_run(run, SHIPPED / name, torch.float16)  # half the bytes in the repository
        size = sum(f.stat().st_size for f in Path(folder).iterdir())
        print(f"{name}: step {last.step}, exact match {last.accuracy:.1%}, {last.seconds:.1f} s, {size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
