"""The admission bound replayed on a class's recorded arrivals (explorer/batching.py, explorer/batch_costs.py).

tests/recorded/arrivals_32_clients.json holds when each of 200 distinct requests was sent by 32 clients on the JSON
route, none refused (`python bench/load_test.py --route --plan distinct --record-arrivals ...`, 2-core Intel Xeon,
2026-12-08). The replay sends as many one-line greedy requests at the same moments (time compressed) to a
Batcher whose decode sleeps what a batch costs on a known line, on two slots, as a server that has decoded a few
batches already. Every admission decision
is checked against the waiting work at that moment, priced here at the line the Batcher had learned; the learned
line is checked against the true one."""
import json
import math
import threading
import time
from pathlib import Path

from explorer.batch_costs import BatchCosts, Price
from explorer.batching import MAX_LINES, Batcher, Overloaded
from explorer.request import Request

from .test_batching import registry  # noqa: F401

ARRIVALS = Path(__file__).parent / "recorded" / "arrivals_32_clients.json"
SPEED_UP = 4  # the recorded moments and the batches' seconds, both this many times shorter
TRUE = Price(fixed=0.030 / SPEED_UP, per_line=0.015 / SPEED_UP)  # the bench's line (batch_costs.py's docstring)
SLOTS = 2


class Replayed(Batcher):
    """A Batcher that notes, at each admission, the waiting requests (strategy, key, lines), the greedy price it had
    learned and its decision."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.decisions = []

    def _admit(self) -> None:
        waiting = [(item.request.strategy, item.key, item.lines) for item in self._waiting]
        price = self.costs.price("greedy")
        try:
            super()._admit()
        except Overloaded:
            self.decisions.append((waiting, price, False))
            raise
        self.decisions.append((waiting, price, True))


def priced(waiting, price: Price) -> float:
    """The waiting work at `price`: each set of requests with one key in batches of up to MAX_LINES lines."""
    lines_by_key = {}
    for _, key, lines in waiting:
        lines_by_key[key] = lines_by_key.get(key, 0) + lines
    return sum(math.ceil(lines / MAX_LINES) * price.fixed + lines * price.per_line
               for lines in lines_by_key.values()) / SLOTS


def replay(registry, bound_s: float, admitted_lines: int = 0, cold: bool = False):  # noqa: F811
    """The recorded arrivals replayed on a server that has measured a few batches, or, `cold`, only one, which took
    2.4 s for one line, as one did while the worker processes started."""
    arrivals = json.loads(ARRIVALS.read_text())["arrivals"]

    def decode(batch, analyses):
        time.sleep(TRUE.of(sum(len(request.lines) for request in batch)))
        return [request.text for request in batch]

    costs = BatchCosts()  # a server that has decoded a few batches
    if cold:  # the only batch measured yet
        costs.record("greedy", requests=1, lines=1, seconds=2.4 / SPEED_UP)
    for lines in () if cold else (1, 4, 16):
        costs.record("greedy", requests=lines, lines=lines, seconds=TRUE.of(lines))
    batcher = Replayed(decode, slots=lambda: SLOTS, bound_s=bound_s, costs=costs, admitted_lines=admitted_lines)
    answers = []

    def ask(text):
        try:
            answers.append(batcher.run(Request.from_api(registry, text, "python", strategy="greedy",
                                                        max_length=8), frozenset()))
        except Overloaded as refused:
            answers.append(refused)

    began, threads = time.monotonic(), []
    for number, (at, lines) in enumerate(arrivals):
        time.sleep(max(0.0, began + at / SPEED_UP - time.monotonic()))
        text = "\n".join(f"sentence {number} line {line}" for line in range(lines))
        threads.append(threading.Thread(target=ask, args=(text,)))
        threads[-1].start()
    for thread in threads:
        thread.join(60)
    assert len(answers) == len(arrivals)
    return batcher, answers


def test_the_recorded_class_is_never_refused(registry):  # noqa: F811
    """By the estimate alone (no class's worth of lines admitted regardless) at the server's bound."""
    batcher, answers = replay(registry, bound_s=3.0 / SPEED_UP)
    assert not [answer for answer in answers if isinstance(answer, Overloaded)]
    assert all(admitted for _, _, admitted in batcher.decisions)
    assert max(len(waiting) for waiting, _, _ in batcher.decisions) > 4  # requests did queue


def test_refusals_follow_the_bound_on_the_true_waiting_work(registry):  # noqa: F811
    """With a bound about a batch deep, some requests are refused, each where the waiting work is over the bound and
    never where it is not."""
    bound = TRUE.of(8.5) / SLOTS  # between two whole numbers of lines: no waiting work prices exactly at it
    batcher, answers = replay(registry, bound_s=bound)
    refused = [answer for answer in answers if isinstance(answer, Overloaded)]
    assert refused and len(refused) < len(answers)
    wrong = [(priced(waiting, price), admitted) for waiting, price, admitted in batcher.decisions
             if admitted != (priced(waiting, price) <= bound)]
    assert not wrong, wrong[:5]
    assert all(retry.retry_after >= 1 for retry in refused)
    # the learned line at a usual batch: at least the sleep's, and more only by a busy machine's lateness in waking
    price = batcher.costs.price("greedy")
    assert 0.9 * TRUE.of(8) <= price.of(8) <= 2 * TRUE.of(8) + 0.01


def test_a_class_is_admitted_where_a_cold_batch_made_the_estimate_too_high(registry):  # noqa: F811
    """A batch measured while the machine was crowded prices the next ones far too high: the estimate alone then
    refuses the class; a class's worth of waiting lines (MAX_LINES) is admitted whatever it says."""
    _, answers = replay(registry, bound_s=3.0 / SPEED_UP, cold=True)
    assert [answer for answer in answers if isinstance(answer, Overloaded)]  # what the server did
    batcher, _ = replay(registry, bound_s=3.0 / SPEED_UP, admitted_lines=MAX_LINES, cold=True)
    # the replay sends at the recorded moments whether or not answers came (32 real clients wait for theirs, so
    # fewer than 32 lines wait): on a slow machine more may queue, and past a class's worth the estimate decides
    refused = [sum(lines for _, _, lines in waiting) for waiting, _, admitted in batcher.decisions if not admitted]
    assert all(lines >= MAX_LINES for lines in refused), refused
