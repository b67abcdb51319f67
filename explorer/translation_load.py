"""How many translations this server has waiting or running, readable from other processes: a Learn run's worker
process pauses between its training steps while the count is above 0 (training_queue.py), because niceness does not
hold a process back on the VMs a class shares (docs/speed.md). The count lives in shared memory made from the spawn
context, so the processes the training queue spawns can be handed it when they start.

Only the server's process writes the count (its threads, under a thread lock); the workers only read it, and take no
lock to read it: a lock shared between processes stays held for good when its holder is killed, and a worker is
ended by killing its process (Stop, a visitor who left). One so killed while it read the count through a
`multiprocessing.Value`'s lock left every later translation and every later run's worker waiting on that lock
forever.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import threading
import time

_lock = threading.Lock()  # made once, and every change of the count: the server's threads are its only writers
_shared = None  # multiprocessing.RawValue("i"), made on first use


def new_count():
    """A count of 0 in shared memory, with no lock of its own (the module's docstring says why)."""
    return multiprocessing.get_context("spawn").RawValue("i", 0)


def shared_count():
    """The server's counter itself, to hand to a process at its start."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = new_count()
        return _shared


@contextlib.contextmanager
def translating(count=None):
    """Counts one translation as waiting or running for as long as the block runs (on the server's count, or
    `count`)."""
    count = shared_count() if count is None else count
    with _lock:
        count.value += 1
    try:
        yield
    finally:
        with _lock:
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
