"""The same request twice is translated once: a class typing the sentence on the board sends it thirty times at once.

Every request is deterministic (sampling draws from its `seed`), so equal requests get equal translations. The
cache keeps the last `capacity` results' translations by request, and a request equal to one still running waits
for it instead of running again (each caller then gets its own RunResult around the shared translations, so what
one visitor's page has drawn stays its own). Nothing is stored for a request that failed.

    ATTENTION_EXPLORER_RESULT_CACHE=0 python app.py     # off; a number: how many results it keeps (default 64)
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from .environment import whole_number_setting

SWITCH = "ATTENTION_EXPLORER_RESULT_CACHE"
DEFAULT_CAPACITY = 64


def capacity_from_environment() -> int:
    """The cache's size from ATTENTION_EXPLORER_RESULT_CACHE (0: off), with a message that names it when bad."""
    return whole_number_setting(SWITCH, DEFAULT_CAPACITY, "a whole number of results to keep (0: no cache)")


def request_key(request, analyses: frozenset[str]) -> tuple:
    """Everything that decides a result: two requests with equal keys get equal translations."""
    return (request.model, request.device, request.strategy, tuple(sorted(request.settings.items())),
            request.max_length, request.prefix, request.heads_off, request.lines, tuple(sorted(analyses)),
            request.source_lang, request.target_lang)


@dataclass
class _Running:
    done: threading.Event
    value: object = None
    error: BaseException | None = None


class ResultCache:
    def __init__(self, capacity: int = DEFAULT_CAPACITY):
        if capacity < 0:
            raise ValueError(f"capacity must be 0 (off) or more, got {capacity}")
        self.capacity = capacity
        self._kept: OrderedDict[tuple, object] = OrderedDict()
        self._running: dict[tuple, _Running] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get_or_compute(self, key: tuple, compute) -> tuple[object, bool]:
        """(value, whether it came from an earlier or a running computation); `compute()` runs at most once at a
        time per key, and its exception reaches every caller waiting on it."""
        if self.capacity == 0:
            return compute(), False
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                self.hits += 1
                return self._kept[key], True
            running = self._running.get(key)
            leader = running is None
            if leader:
                running = self._running[key] = _Running(threading.Event())
                self.misses += 1
            else:
                self.hits += 1
        if not leader:
            running.done.wait()
            if running.error is not None:
                raise running.error
            return running.value, True
        try:
            running.value = compute()
        except BaseException as error:
            running.error = error
            raise
        finally:
            with self._lock:
                del self._running[key]
                if running.error is None:
                    self._kept[key] = running.value
                    while len(self._kept) > self.capacity:
                        self._kept.popitem(last=False)
            running.done.set()
        return running.value, False
