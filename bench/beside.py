"""A playground run training beside a load test (`bench/load_test.py --beside-training`): a custom run of the Learn
tab as its worker runs it, on one thread at niceness +10, in a process of its own."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# reverse at its default model, long enough to outlast the load (about 25 updates a second on one thread)
COMMAND = ["-m", "transformer.playground", "train", "--task", "reverse", "--steps", "5000", "--time-cap", "600"]
START_S = 8  # torch imported, the model built and training


@contextmanager
def training_beside(enabled: bool = True):
    """Starts the run (when `enabled`) and yields a function that tells whether it is still training; the run is
    ended on leaving."""
    if not enabled:
        yield lambda: None
        return
    with tempfile.TemporaryDirectory() as out:
        process = subprocess.Popen(["nice", "-n", "10", sys.executable, *COMMAND, "--out", out], cwd=ROOT,
                                   env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        try:
            time.sleep(START_S)
            if process.poll() is not None:
                raise RuntimeError(f"the playground run beside the load ended at once (status {process.returncode})")
            yield lambda: process.poll() is None
        finally:
            process.kill()
            process.wait()
