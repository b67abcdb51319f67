"""What a batch costs, learned from the batches decoded: the admission bound's estimate of the waiting work
(batching.py), and the log of every batch.

A batch pays a fixed price per decoding step whatever its rows (the Python between small operators), and a price per
row: seconds = fixed + per_line * lines (bench/bench_batching.py: greedy 42.0 ms for a sentence alone, 16.7 ms a
sentence in a batch of 16). Each strategy has its own line, fitted by least squares over its newest batches. With a
single size measured so far, the line goes through that batch with the bench's proportion of fixed to per-line
price; before any batch, it is the bench's line. A moving average of seconds per line, which this replaces, took the
price of the small batches of a quiet start for the price of every line of a class's big batch, and refused a class
that its big batches could serve (46 of 200 requests from 32 clients, on a 2-core Xeon).

Every batch is logged (the `attention-explorer.batches` logger, at INFO, which `ATTENTION_EXPLORER_BATCH_LOG=1`
switches on in app.py): its strategy, requests, lines and seconds, one line each, which bench/load_test.py reads back
into their distribution.
"""
from __future__ import annotations

import logging
import math
import threading
from collections import deque
from dataclasses import dataclass

from .environment import whole_number_setting

log = logging.getLogger("attention-explorer.batches")
SWITCH = "ATTENTION_EXPLORER_BATCH_LOG"

FIRST_PER_LINE_S = 0.015  # the bench's price of one more line in a batch, before anything is measured here
FIXED_PER_LINE = 1.8  # the bench's fixed price as a multiple of its price per line (27 ms to 15 ms)
WINDOW = 64  # newest batches of a strategy that its line is fitted to


def batch_log_from_environment() -> bool:
    """Whether ATTENTION_EXPLORER_BATCH_LOG (0, the default, or 1) asks for a line per batch in the server's log."""
    return whole_number_setting(SWITCH, 0, "0 (off, the default) or 1 (a line per batch decoded in the log)",
                                most=1) == 1


@dataclass(frozen=True)
class BatchRecord:
    """One decoded batch: its strategy, requests, lines and seconds."""

    strategy: str
    requests: int
    lines: int
    seconds: float

    def line(self) -> str:
        return (f"batch: strategy={self.strategy} requests={self.requests} lines={self.lines} "
                f"seconds={self.seconds:.4f}")


@dataclass(frozen=True)
class Price:
    """seconds = fixed + per_line * lines."""

    fixed: float
    per_line: float

    def of(self, lines: int) -> float:
        return self.fixed + self.per_line * lines


def fitted(records: list[BatchRecord]) -> Price:
    """The line through `records` by least squares, neither price below zero; through the mean with the bench's
    proportion when they hold a single size (or none)."""
    if not records:
        return Price(FIXED_PER_LINE * FIRST_PER_LINE_S, FIRST_PER_LINE_S)
    sizes = [r.lines for r in records]
    mean_lines = sum(sizes) / len(sizes)
    mean_seconds = sum(r.seconds for r in records) / len(records)
    spread = sum((n - mean_lines) ** 2 for n in sizes)
    if spread == 0:
        per_line = mean_seconds / (mean_lines + FIXED_PER_LINE)
        return Price(FIXED_PER_LINE * per_line, per_line)
    per_line = sum((r.lines - mean_lines) * (r.seconds - mean_seconds) for r in records) / spread
    per_line = max(per_line, 0.0)
    fixed = mean_seconds - per_line * mean_lines
    if fixed < 0:  # the data say no fixed price: the line through the origin and the mean
        return Price(0.0, mean_seconds / mean_lines)
    return Price(fixed, per_line)


class BatchCosts:
    """The newest batches per strategy, the price each strategy's batches are estimated at, and the log."""

    def __init__(self, window: int = WINDOW, kept: int = 10_000):
        if window < 1 or kept < 1:
            raise ValueError(f"window and kept must be at least 1; got {window} and {kept}")
        self._by_strategy: dict[str, deque[BatchRecord]] = {}
        self._prices: dict[str, Price] = {}
        self.window = window
        self.history: deque[BatchRecord] = deque(maxlen=kept)  # every strategy, oldest first
        self._lock = threading.Lock()

    def record(self, strategy: str, requests: int, lines: int, seconds: float) -> BatchRecord:
        """Adds a decoded batch (logged) and fits its strategy's price again."""
        record = BatchRecord(strategy, requests, lines, seconds)
        log.info("%s", record.line())
        with self._lock:
            newest = self._by_strategy.setdefault(strategy, deque(maxlen=self.window))
            newest.append(record)
            self.history.append(record)
            self._prices[strategy] = fitted(list(newest))
        return record

    def price(self, strategy: str) -> Price:
        with self._lock:
            return self._prices.get(strategy) or fitted([])

    def waiting_seconds(self, groups: list[tuple[str, int, int]], max_lines: int, slots: int) -> float:
        """Seconds to serve the waiting work on `slots` slots: `groups` holds (strategy, lines, requests) for each
        set of requests that can share batches (a request that decodes alone is a group of its own); each group is
        served in batches of at most `max_lines` lines (a request of more lines still makes one batch)."""
        total = 0.0
        for strategy, lines, requests in groups:
            price = self.price(strategy)
            batches = min(requests, max(1, math.ceil(lines / max_lines)))
            total += batches * price.fixed + lines * price.per_line
        return total / max(1, slots)


def parse_line(text: str) -> BatchRecord | None:
    """A batch logged by `BatchCosts.record`, read back from a log line (None for any other line)."""
    at = text.find("batch: strategy=")
    if at < 0:
        return None
    fields = dict(part.split("=", 1) for part in text[at + len("batch: "):].split())
    try:
        return BatchRecord(fields["strategy"], int(fields["requests"]), int(fields["lines"]), float(fields["seconds"]))
    except (KeyError, ValueError):
        return None
