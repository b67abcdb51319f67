"""What a batch costs (explorer/batch_costs.py): the line fitted to the measured batches, the waiting work priced
from it, and the log of every batch read back."""
import logging
import math

import numpy as np
import pytest

from explorer.batch_costs import FIRST_PER_LINE_S, FIXED_PER_LINE, BatchCosts, fitted, parse_line


def costs_of(batches) -> BatchCosts:
    costs = BatchCosts()
    for strategy, lines, seconds in batches:
        costs.record(strategy, requests=lines, lines=lines, seconds=seconds)
    return costs


@pytest.mark.parametrize("fixed,per_line", [(0.03, 0.015), (0.2, 0.001), (0.0, 0.05)])
def test_batches_on_a_line_give_that_line_and_noisy_ones_numpys_least_squares(fixed, per_line):
    sizes = [1, 2, 4, 8, 16, 32, 3]
    exact = costs_of([("greedy", n, fixed + per_line * n) for n in sizes]).price("greedy")
    assert exact.fixed == pytest.approx(fixed, abs=1e-9) and exact.per_line == pytest.approx(per_line)
    noise = np.random.default_rng(0).normal(0, 0.002, len(sizes))
    seconds = [fixed + 0.01 + per_line * n + e for n, e in zip(sizes, noise)]
    slope, intercept = np.polyfit(sizes, seconds, 1)  # the independent fit
    noisy = costs_of([("greedy", n, s) for n, s in zip(sizes, seconds)]).price("greedy")
    assert noisy.per_line == pytest.approx(slope) and noisy.fixed == pytest.approx(intercept)


def test_one_size_measured_keeps_the_bench_proportion_and_none_is_the_bench():
    price = costs_of([("beam", 4, 0.3), ("beam", 4, 0.5)]).price("beam")
    assert price.of(4) == pytest.approx(0.4)  # through the batches measured
    assert price.fixed == pytest.approx(FIXED_PER_LINE * price.per_line)
    assert BatchCosts().price("greedy").of(1) == pytest.approx(FIRST_PER_LINE_S * (1 + FIXED_PER_LINE))


def test_a_line_never_prices_below_zero():
    falling = fitted(costs_of([("greedy", 1, 0.5), ("greedy", 10, 0.1)]).history)
    assert falling.per_line == 0 and falling.fixed == pytest.approx(0.3)  # bigger batches were not dearer
    steep = fitted(costs_of([("greedy", 10, 0.1), ("greedy", 20, 0.3)]).history)
    assert steep.fixed == 0 and steep.per_line == pytest.approx(0.2 / 15)  # through the origin and the mean
    assert steep.of(0) == 0 and falling.of(0) > 0


def test_each_strategy_has_its_own_price_from_its_newest_batches():
    costs = BatchCosts(window=2)
    for lines, seconds in ((1, 9.0), (2, 0.3), (4, 0.5)):  # the first falls out of the window
        costs.record("greedy", 1, lines, seconds)
    costs.record("sampling", 1, 1, 0.7)
    assert costs.price("greedy").per_line == pytest.approx(0.1) and costs.price("greedy").fixed == pytest.approx(0.1)
    assert costs.price("sampling").of(1) == pytest.approx(0.7)
    assert len(costs.history) == 4


def test_waiting_work_is_each_groups_batches_at_its_price_shared_by_the_slots():
    costs = costs_of([("greedy", 1, 0.02), ("greedy", 11, 0.12), ("sampling", 1, 0.5)])  # 0.01 + 0.01 a line
    groups = [("greedy", 40, 40), ("greedy", 3, 1), ("sampling", 1, 1)]
    # 40 one-line requests: two batches of at most 32 lines; one request of 3 lines; a sampling request alone
    expected = (2 * 0.01 + 40 * 0.01) + (0.01 + 3 * 0.01) + 0.5
    assert costs.waiting_seconds(groups, max_lines=32, slots=1) == pytest.approx(expected)
    assert costs.waiting_seconds(groups, max_lines=32, slots=2) == pytest.approx(expected / 2)
    assert costs.waiting_seconds([("greedy", 100, 1)], max_lines=32, slots=1) == pytest.approx(0.01 + 1.0)
    assert costs.waiting_seconds([], max_lines=32, slots=2) == 0


def test_every_batch_is_logged_in_a_line_that_reads_back(caplog):
    costs = BatchCosts()
    with caplog.at_level(logging.INFO, logger="attention-explorer.batches"):
        costs.record("beam", requests=3, lines=5, seconds=0.123456)
        costs.record("greedy", requests=1, lines=1, seconds=0.01)
    read = [parse_line(f"12:00:01 INFO {record.getMessage()}") for record in caplog.records]
    assert [(r.strategy, r.requests, r.lines, math.isclose(r.seconds, 0.1235)) for r in read] == [
        ("beam", 3, 5, True), ("greedy", 1, 1, False)]
    assert parse_line("batch: strategy=greedy requests=x lines=1 seconds=1") is None
    assert parse_line("an unrelated line") is None


def test_bad_sizes_are_refused_with_their_names():
    with pytest.raises(ValueError, match="window and kept"):
        BatchCosts(window=0)
