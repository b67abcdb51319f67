"""The result cache (explorer/result_cache.py): an equal request is translated once, also when thirty arrive at
once; each caller gets a result of its own around the same translations; failures are not kept."""
import threading

import pytest

from explorer.registry import discover
from explorer.request import Request
from explorer.result_cache import ResultCache, capacity_from_environment
from explorer.session import ModelService, run

from .conftest import ROOT


def test_an_equal_key_is_computed_once_and_the_oldest_leaves_first():
    cache, calls = ResultCache(capacity=2), []

    def compute(value):
        calls.append(value)
        return value * 10

    assert cache.get_or_compute("a", lambda: compute(1)) == (10, False)
    assert cache.get_or_compute("a", lambda: compute(99)) == (10, True)
    cache.get_or_compute("b", lambda: compute(2))
    cache.get_or_compute("c", lambda: compute(3))  # "a" is the oldest: it leaves
    assert cache.get_or_compute("a", lambda: compute(4)) == (40, False)
    assert calls == [1, 2, 3, 4] and (cache.hits, cache.misses) == (1, 4)


def test_callers_of_a_running_computation_wait_for_it_instead_of_running_it_again():
    cache, calls, release = ResultCache(), [], threading.Event()

    def slow():
        calls.append(1)
        release.wait(10)
        return "translated"

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get_or_compute("same", slow)))
               for _ in range(30)]
    for thread in threads:
        thread.start()
    while cache.misses + cache.hits < 30:  # every caller has asked
        threading.Event().wait(0.01)
    release.set()
    for thread in threads:
        thread.join(10)
    assert len(calls) == 1 and len(results) == 30
    assert sorted(shared for _, shared in results) == [False] + [True] * 29
    assert {value for value, _ in results} == {"translated"}


def test_a_failure_reaches_every_waiting_caller_and_is_not_kept():
    cache, release = ResultCache(), threading.Event()

    def failing():
        release.wait(10)
        raise RuntimeError("no memory")

    errors = []

    def ask():
        try:
            cache.get_or_compute("k", failing)
        except RuntimeError as error:
            errors.append(str(error))

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for thread in threads:
        thread.start()
    while cache.misses + cache.hits < 3:
        threading.Event().wait(0.01)
    release.set()
    for thread in threads:
        thread.join(10)
    assert errors == ["no memory"] * 3
    assert cache.get_or_compute("k", lambda: "now it works") == ("now it works", False)


def test_capacity_zero_computes_every_time():
    cache, calls = ResultCache(capacity=0), []
    for _ in range(2):
        cache.get_or_compute("a", lambda: calls.append(1))
    assert len(calls) == 2


@pytest.mark.parametrize("text", ["many", "-1", "1.5"])
def test_a_bad_setting_is_named(monkeypatch, text):
    monkeypatch.setenv("ATTENTION_EXPLORER_RESULT_CACHE", text)
    with pytest.raises(ValueError, match="ATTENTION_EXPLORER_RESULT_CACHE must be a whole number"):
        capacity_from_environment()


@pytest.fixture(scope="module")
def registry():
    return discover(ROOT / "checkpoints")


def test_the_service_translates_an_equal_request_once_and_gives_each_caller_its_own_result(registry):
    service = ModelService(registry, ResultCache())
    first = service.run(Request.from_api(registry, "A dog runs.", strategy="beam", settings={"beam_size": 2}))
    first.rendered_views.add("live")
    second = service.run(Request.from_api(registry, "A dog runs.\n", strategy="beam", settings={"beam_size": 2}))
    assert second.from_cache and not first.from_cache
    assert second.translations is first.translations and second.rendered_views == set()
    assert second.request.text == "A dog runs.\n"  # the caller's own request, for its link
    # and the cached answer is what translating it again gives
    fresh = run(registry, second.request)
    assert [t.tgt_ids for t in fresh.translations] == [t.tgt_ids for t in second.translations]
    other = service.run(Request.from_api(registry, "A dog runs.", strategy="beam", settings={"beam_size": 3}))
    assert not other.from_cache and service.cache.misses == 2


