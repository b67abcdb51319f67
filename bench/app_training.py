"""`python app.py` serving as it always does, with one Learn-tab run training in the server's own training queue
(explorer/training_queue.py): the run's worker process is the Learn tab's, and pauses while the server translates, as
a visitor's Train does. `bench/load_test.py --beside-training` starts the server through this script.

    python bench/app_training.py PROGRESS_FILE     # the run's latest step is written to PROGRESS_FILE
"""
from __future__ import annotations

import os
import runpy
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# reverse at its default model, long enough to outlast the load (about 25 updates a second on one thread, unpaused)
SETTINGS = {"task": "reverse", "steps": 5000, "time_cap": 600.0}


def train(progress: Path) -> None:
    from explorer.training_queue import TrainingQueue

    queue = TrainingQueue(1)
    for kind, value in queue.train(dict(SETTINGS)):
        if kind == "snapshot":
            progress.write_text(f"{value.step}\n")
        elif kind in ("done", "error", "stopped"):
            progress.write_text(f"ended: {kind}\n")


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(f"usage: python {sys.argv[0]} PROGRESS_FILE")
    progress = Path(sys.argv[1])
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    sys.argv = [str(ROOT / "app.py")]
    app = runpy.run_path(str(ROOT / "app.py"), run_name="app")  # everything but its serving, which follows here
    app["launch"]()
    app["after_launch"]()
    threading.Thread(target=train, args=(progress,), name="learn-run", daemon=True).start()
    app["demo"].block_thread()


if __name__ == "__main__":
    main()
