"""A Learn-tab run training beside a load test (`bench/load_test.py --beside-training`): the server is started through
bench/app_training.py, which trains one reverse run in the server's own training queue, in the Learn tab's worker
process (one thread; it pauses between steps while the server translates, explorer/translation_load.py)."""
from __future__ import annotations

import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "app_training.py"
START_S = 60  # the run's worker process started and its first snapshot written


@contextmanager
def training_server_script():
    """Yields (the server's command line after the interpreter, a function that reads the run's latest step)."""
    with tempfile.TemporaryDirectory() as folder:
        progress = Path(folder) / "progress"

        def step() -> str | None:
            return progress.read_text().strip() if progress.exists() else None

        yield [str(SCRIPT), str(progress)], step


def wait_for_training(step, timeout_s: float = START_S) -> str:
    """The run's first step written, or a RuntimeError: the load must not start before the run trains."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = step()
        if now is not None:
            if now.startswith("ended"):
                raise RuntimeError(f"the Learn run beside the load {now}")
            return now
        time.sleep(0.2)
    raise RuntimeError(f"the Learn run beside the load wrote no step in {timeout_s} s")
