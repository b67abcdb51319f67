"""How many translations this server has waiting or running, readable from other processes: a Learn run's worker
process pauses between its training steps while the count is above 0 (training_queue.py), because niceness does not
hold a process back on the VMs a class shares (docs/speed.md). The count lives in shared memory made from the spawn
context, so the processes the training queue spawns can be handed it when they start.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import threading
import time

_lock = threading.Lock()
_shared = None  # multiprocessing.Value("i"), made on first use


def shared_count():
    """The shared counter itself (a `multiprocessing.Value`), to hand to a process at its start."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = multiprocessing.get_context("spawn").Value("i", 0)
        return _shared


@contextlib.contextmanager
def translating():
    """Counts one translation as waiting or running for as long as the block runs."""
    count = shared_count()
    with count.get_lock():
        count.value += 1
    try:
        yield
    finally:
        with count.get_lock():
            count.value -= 1


def waiting(count=None) -> int:
    """How many translations are waiting or running now."""
    return (shared_count() if count is None else count).value


def wait_while_translating(count, poll_s: float = 0.002, most_s: float = 5.0) -> float:
    """Blocks while `count` (the shared counter) is above 0, up to `most_s` seconds, so that a training run under a
    class's steady load still takes a step now and then; returns the seconds it waited."""
    started = time.perf_counter()
    while count.value > 0:
        waited = time.perf_counter() - started
        if waited >= most_s:
            return waited
        time.sleep(poll_s)
    return time.perf_counter() - started
