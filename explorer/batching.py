"""Requests decoded together: requests that arrive while others decode wait, and leave together as one batch.

Why: decoding one sentence with its trace is mostly Python between small torch operators, paid per step whatever the
number of rows; a batch pays it once for all its sentences (bench/bench_batching.py measures both). A class pressing
Translate at once sends thirty distinct sentences.

How batches form: there is no collection window. A request starts decoding at once when a slot is free (a lone request
on an idle server waits for nothing); otherwise it waits in arrival order. When a slot frees, the oldest waiting request
leads a batch: every waiting request that shares its `batch_key` (everything but the text) joins it, in arrival order,
up to `max_lines` lines in all. Slots: how many batches decode at once (the worker processes when they are ready, else
the server's own process: `ModelService`). The leader's own thread decodes the batch and hands each request its result.

Every strategy here decodes each sentence of a batch as it would alone, so all of them batch: greedy and beam, and
sampling, which draws each sentence's tokens from a generator of its own seeded with the request's seed
(strategies/sampling.py). Sampling requests batch when their seeds are equal too, as the seed is one of their
settings.

Admission is bounded: a request is refused at once (`Overloaded`) when the work already waiting would take more than
`bound_s` seconds to serve on the slots, estimated from what each strategy's batches have cost at their sizes
(batch_costs.py, which also logs every batch). A class is never refused: while fewer than `admitted_lines` lines
wait (a class's worth, MAX_LINES), a request is admitted whatever the estimate. Batches measured on a cold or
crowded machine (the worker processes still starting: a one-line beam batch once took 2.4 s) price every later one
too high for a while, and 32 clients were then refused.
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from .batch_costs import BatchCosts
from .result_cache import request_key

BATCHED_STRATEGIES = frozenset({"greedy", "beam", "sample"})  # each row decodes as it would alone
MAX_LINES = 32  # per batch: a class's worth; a longer batch gains little per sentence and keeps each of them waiting
BOUND_S = 3.0  # refuse a request when the work already waiting would take longer than this to serve


class Overloaded(RuntimeError):
    """The server has more translations waiting than it can serve soon; `retry_after`: whole seconds (at least 1)
    after which the waiting work should have been served."""

    def __init__(self, retry_after: int):
        super().__init__(f"the server is busy translating: try again in {retry_after} s")
        self.retry_after = retry_after


def busy_message(error: Overloaded) -> str:
    """What a visitor refused by bounded admission reads."""
    return (f"The server is busy: more translations are waiting than it can serve in the next few seconds. Try again "
            f"in {error.retry_after} second{'s' if error.retry_after != 1 else ''}.")


def batch_key(request, analyses: frozenset[str]):
    """Everything but the text that decides a result (result_cache.request_key's rule): requests with equal keys can
    be decoded as one batch. None for a strategy that must decode alone."""
    if request.strategy not in BATCHED_STRATEGIES:
        return None
    return request_key(replace(request, text="", lines=()), analyses)


@dataclass(eq=False)
class Waiting:
    """A request in the batcher, from its arrival until its answer is handed over."""

    request: object  # request.Request
    analyses: frozenset[str]
    key: object  # batch_key; None: decodes alone
    result: object = None
    error: BaseException | None = None
    done: bool = False

    @property
    def lines(self) -> int:
        return len(self.request.lines)

    def joins(self, leader: "Waiting") -> bool:
        return self.key is not None and self.key == leader.key


class Batcher:
    """Runs requests through `decode` in batches (see the module's docstring)."""

    def __init__(self, decode: Callable[[list, frozenset[str]], list], slots: Callable[[], int],
                 max_lines: int = MAX_LINES, bound_s: float = BOUND_S, costs: BatchCosts | None = None,
                 admitted_lines: int = MAX_LINES):
        """`decode(requests, analyses)`: one result per request, in order; `slots()`: how many batches may decode at
        once now; `costs`: what batches have cost (a new BatchCosts by default); `admitted_lines`: fewer lines than
        this waiting, a request is never refused."""
        if max_lines < 1 or bound_s < 0 or admitted_lines < 0:
            raise ValueError(f"max_lines must be at least 1, bound_s and admitted_lines at least 0; got {max_lines}, "
                             f"{bound_s} and {admitted_lines}")
        self.decode, self.slots, self.max_lines, self.bound_s = decode, slots, max_lines, bound_s
        self.admitted_lines = admitted_lines
        self.costs = BatchCosts() if costs is None else costs
        self.batches = 0  # decoded so far
        self._waiting: list[Waiting] = []  # in arrival order
        self._decoding = 0  # batches decoding now
        self._changed = threading.Condition()

    def run(self, request, analyses: frozenset[str]):
        """`request`'s result, decoded in a batch with the compatible requests waiting beside it; raises `Overloaded`
        at once when the work already waiting is more than `bound_s` seconds' worth."""
        item = Waiting(request, analyses, batch_key(request, analyses))
        with self._changed:
            self._admit()
            self._waiting.append(item)
            while not item.done:
                if self._waiting and self._waiting[0] is item and self._decoding < max(1, self.slots()):
                    batch = self._take(item)
                    break
                self._changed.wait()
        if not item.done:
            self._decode(batch)
        if item.error is not None:
            raise item.error
        return item.result

    def waiting_lines(self) -> int:
        """Lines waiting for a slot (not those decoding)."""
        with self._changed:
            return sum(item.lines for item in self._waiting)

    def waiting_seconds(self) -> float:
        """The estimated seconds to serve the requests waiting now (the lock held)."""
        groups: dict[object, list] = {}
        for item in self._waiting:
            group = groups.setdefault(item.key if item.key is not None else id(item),
                                      [item.request.strategy, 0, 0])
            group[1] += item.lines
            group[2] += 1
        return self.costs.waiting_seconds([tuple(group) for group in groups.values()], self.max_lines,
                                          self.slots())

    def _admit(self) -> None:
        if sum(item.lines for item in self._waiting) < self.admitted_lines:
            return
        queued = self.waiting_seconds()
        if queued > self.bound_s:
            raise Overloaded(max(1, math.ceil(queued)))

    def _take(self, leader: Waiting) -> list[Waiting]:
        """The leader's batch, out of the waiting list, and a slot for it (the lock held)."""
        batch, lines = [leader], leader.lines
        for item in self._waiting[1:]:
            if item.joins(leader) and lines + item.lines <= self.max_lines:
                batch.append(item)
                lines += item.lines
        taken = set(map(id, batch))
        self._waiting = [item for item in self._waiting if id(item) not in taken]
        self._decoding += 1
        self._changed.notify_all()  # the next oldest may lead a batch in another free slot
        return batch

    def _decode(self, batch: list[Waiting]) -> None:
        started = time.perf_counter()
        results, errors = [None] * len(batch), [None] * len(batch)
        try:
            results = self.decode([item.request for item in batch], batch[0].analyses)
            if len(results) != len(batch):  # would leave a request waiting for ever
                raise RuntimeError(f"decode returned {len(results)} results for {len(batch)} requests")
        except Exception as error:  # noqa: BLE001  (one request's failure must not fail the others beside it)
            results, errors = self._one_by_one(batch) if len(batch) > 1 else ([None], [error])
        except BaseException as error:
            errors = [error] * len(batch)
            raise
        finally:
            seconds = time.perf_counter() - started
            with self._changed:
                self._decoding -= 1
                self.batches += 1
                if not any(errors):
                    self.costs.record(batch[0].request.strategy, len(batch), sum(item.lines for item in batch),
                                      seconds)
                for item, result, error in zip(batch, results, errors):
                    item.result, item.error, item.done = result, error, True
                self._changed.notify_all()

    def _one_by_one(self, batch: list[Waiting]) -> tuple[list, list]:
        """Each request of a failed batch decoded alone, so that only the one at fault gets the error."""
        results, errors = [], []
        for item in batch:
            try:
                [result] = self.decode([item.request], item.analyses)
                results.append(result)
                errors.append(None)
            except Exception as error:  # noqa: BLE001
                results.append(None)
                errors.append(error)
        return results, errors
