"""Requests decoded together (explorer/batching.py, session.run_batch): each batched answer equals the same request
decoded alone; requests waiting together leave as one batch and a lone one leaves at once; sampling decodes alone;
past the bound a request is refused at once and the admitted ones lose nothing."""
import dataclasses
import shutil
import threading
import time

import numpy as np
import pytest
import torch

from explorer import api, session, translation_load
from explorer.batch_costs import BatchCosts
from explorer.batching import Batcher, Overloaded, batch_key
from explorer.registry import discover
from explorer.request import Request
from explorer.result_cache import ResultCache
from explorer.run_pool import RunPool
from explorer.session import EVERY_ANALYSIS, ModelService, run, run_batch
from transformer import Tokenizer, Transformer
from transformer.checkpoint import save_checkpoint
from transformer.core.capture import record
from transformer.core.fused_step import FusedStep
from transformer.core.probes import ATTENTION_KINDS
from transformer.decoding.step_decoder import StepDecoder, encode_batch

from .conftest import tiny_config

LONG = " ".join(["a man rides a red bike in the park near the water"] * 8)  # past the model's 63 source tokens
# sources of different lengths (padding), one request of two lines, one cut to the model's positions
TEXTS = ("a man rides a red bike in the park near the water .", "dog", "two girls play with a ball .\nthe boy jumps",
         LONG)
STRATEGIES = {"greedy": ("greedy", {}), "beam 2": ("beam", {"beam_size": 2}), "beam 3": ("beam", {"beam_size": 3}),
              "sample": ("sample", {"seed": 3, "temperature": 1.2, "top_p": 0.9})}
GATE_S = 60  # how long a held decode waits for the others to queue before the test fails


@pytest.fixture(scope="module")
def registry(random_translator, tokenizer_file, tmp_path_factory):
    """Two tiny checkpoints: `python`, float32 weights that float16 would round (every step in Python and F.linear),
    and `kernel`, weights float16 holds exactly, as a shipped checkpoint's (the float16 kernel's fused step)."""
    root = tmp_path_factory.mktemp("batching")
    shutil.copytree(random_translator.source, root / "python")
    torch.manual_seed(2)
    model = Transformer(tiny_config(Tokenizer.load(tokenizer_file).vocab_size, d_model=32, n_layers=2))
    with torch.no_grad():  # norms away from their 1 / 0 start, as trained ones are
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.add_(torch.rand_like(parameter) - 0.5)
    save_checkpoint(root / "kernel", model, tokenizer_file, dtype=torch.float16)
    return discover(root)


def requests(registry, model, strategy, settings, texts=TEXTS, **asked):
    return [Request.from_api(registry, text, model, strategy=strategy, settings=settings, max_length=12, **asked)
            for text in texts]


# A batch and a sentence alone run torch's kernels on other shapes (and beam 3's batch the Python step where the
# sentence alone runs the float16 kernel): floats agree to float32 rounding (tests/conftest.py's FLOAT32_ROUNDING), in
# relative terms; a hidden state of order 4 differs by an ulp or two (~5e-7) wherever it is, so a component that
# cancels to near 0 needs absolute slack, 1e-5 here, twentyfold that and still far below any real change.
BATCH_ROUNDING = dict(rtol=1e-5, atol=1e-5)


def assert_same_numbers(got, want, where: str = "result") -> None:
    """Every field equal, recursively: tokens, texts and every other value exactly, floats (and float arrays) within
    BATCH_ROUNDING."""
    if dataclasses.is_dataclass(want) and not isinstance(want, type):
        assert type(got) is type(want), f"{where}: {type(got).__name__} != {type(want).__name__}"
        for field in dataclasses.fields(want):
            assert_same_numbers(getattr(got, field.name), getattr(want, field.name), f"{where}.{field.name}")
    elif isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), f"{where}: keys {list(got)} != {list(want)}"
        for key in want:
            assert_same_numbers(got[key], want[key], f"{where}[{key!r}]")
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want), f"{where}: {got!r} != {want!r}"
        for index, (a, b) in enumerate(zip(got, want)):
            assert_same_numbers(a, b, f"{where}[{index}]")
    elif isinstance(want, (np.ndarray, torch.Tensor, float, np.floating)):
        got, want = np.asarray(got), np.asarray(want)
        assert got.shape == want.shape and got.dtype == want.dtype, f"{where}: {got.shape} != {want.shape}"
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, **BATCH_ROUNDING, err_msg=where)
        else:
            np.testing.assert_array_equal(got, want, err_msg=where)
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def assert_results_equal(got, want) -> None:
    """A RunResult against one computed alone; only the decoding time may differ."""
    assert got.translations and all(t.contributions is not None for t in got.translations)
    assert_same_numbers(dataclasses.replace(got, milliseconds=0.0), dataclasses.replace(want, milliseconds=0.0))


def fused_rows(monkeypatch) -> list[int]:
    """The rows of every step the float16 kernel's fused step decodes from now on."""
    rows, step = [], FusedStep.step
    monkeypatch.setattr(FusedStep, "step", lambda self, tokens: rows.append(len(tokens)) or step(self, tokens))
    return rows


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_batched_answer_equals_the_request_decoded_alone(registry, monkeypatch, strategy):
    """Python path: the batch and the sentences alone run the Python step; different source lengths pad the batch."""
    asked = requests(registry, "python", *STRATEGIES[strategy])
    rows = fused_rows(monkeypatch)
    batched = run_batch(registry, asked, EVERY_ANALYSIS)
    assert [len(result.translations) for result in batched] == [1, 1, 2, 1]
    for result, request in zip(batched, asked):
        assert_results_equal(result, run(registry, request, EVERY_ANALYSIS))
    assert not rows  # float32 weights that float16 would round: never the kernel
    # each request its own notices: only the long one was cut
    assert [any("source tokens" in notice for notice in result.notices) for result in batched] == [0, 0, 0, 1]


NINE_LINES = tuple(f"the {word} plays ." for word in "man woman dog child girl boy ball bike water".split())


@pytest.mark.kernel
@pytest.mark.parametrize("strategy, texts", [(name, TEXTS[:3]) for name in STRATEGIES] + [("greedy", NINE_LINES)],
                         ids=[*STRATEGIES, "greedy 9 lines"])
def test_a_batched_answer_equals_the_request_decoded_alone_on_the_kernel(registry, kernel, monkeypatch, strategy,
                                                                         texts):
    """The float16 kernel's fused step decodes each request alone, and the batch of 4 lines (its beams' rows too); a
    batch of more sentences than MAX_ROWS takes the Python step: the same numbers either way."""
    asked = requests(registry, "kernel", *STRATEGIES[strategy], texts=texts)
    rows = fused_rows(monkeypatch)
    batched = run_batch(registry, asked, EVERY_ANALYSIS)
    assert bool(rows) == (len(texts) < 8), rows  # TEXTS[:3]: 4 lines
    for result, request in zip(batched, asked):
        rows.clear()
        assert_results_equal(result, run(registry, request, EVERY_ANALYSIS))
        assert rows and max(rows) <= 2 * STRATEGIES[strategy][1].get("beam_size", 1)  # alone: on the kernel


@pytest.mark.parametrize("model", ["python", pytest.param("kernel", marks=pytest.mark.kernel)])
def test_a_forced_prefix_and_heads_off_batch_as_they_decode_alone(registry, model):
    asked = requests(registry, model, "greedy", {}, texts=TEXTS[:3], prefix="ein mann", heads_off="cross 1 2")
    batched = run_batch(registry, asked, EVERY_ANALYSIS)
    for result, request in zip(batched, asked):
        assert_results_equal(result, run(registry, request, EVERY_ANALYSIS))
        forced = len(registry.get(model).translator.prefix_ids("ein mann", 12))
        assert all([step.forced for step in t.steps] == [i < forced for i in range(len(t.steps))]
                   for t in result.translations)
        assert result.settings["heads_off"] and result.request.heads_off == (("cross", 0, 1),)


@pytest.mark.parametrize("model", ["python", pytest.param("kernel", marks=pytest.mark.kernel)])
def test_padded_keys_get_exactly_zero_weight(registry, model):
    """In a batch, a short source's padded keys get weight 0 exactly (a masked score is -inf before the softmax),
    in the encoder's self-attention and in the decoder's cross-attention."""
    translator = registry.get(model).translator
    long, _ = translator.source_ids(TEXTS[0])
    short, _ = translator.source_ids(TEXTS[1])
    with record(translator.model, ATTENTION_KINDS) as recording:
        memory, src_mask = encode_batch(translator.model, [long, short], "cpu")
        StepDecoder(translator.model, memory, src_mask).step()
        for kind in ("encoder_self", "cross"):
            for weights in recording.take(kind):  # one per layer: (B, H, queries, S)
                assert weights.shape[-1] == len(long)
                assert torch.equal(weights[1, ..., len(short):], torch.zeros_like(weights[1, ..., len(short):]))
                torch.testing.assert_close(weights[1].sum(-1), torch.ones_like(weights[1].sum(-1)))


def test_requests_of_other_settings_are_not_decoded_together(registry):
    greedy = requests(registry, "python", "greedy", {}, texts=TEXTS[:1])
    beam = requests(registry, "python", "beam", {"beam_size": 2}, texts=TEXTS[1:2])
    seeds = [*requests(registry, "python", "sample", {"seed": 3}, texts=TEXTS[:1]),
             *requests(registry, "python", "sample", {"seed": 4}, texts=TEXTS[1:2])]
    for mixed in (greedy + beam, seeds):
        with pytest.raises(ValueError, match="differ in their text only"):
            run_batch(registry, mixed, EVERY_ANALYSIS)
    assert batch_key(seeds[0], frozenset()) != batch_key(seeds[1], frozenset())
    assert batch_key(seeds[0], frozenset()) == batch_key(
        requests(registry, "python", "sample", {"seed": 3}, texts=TEXTS[1:2])[0], frozenset())
    assert batch_key(greedy[0], frozenset()) == batch_key(requests(registry, "python", "greedy", {})[1], frozenset())
    assert batch_key(greedy[0], frozenset()) != batch_key(greedy[0], frozenset({"norms"}))


class HeldDecodes:
    """Counts the batches `ModelService` decodes (session.run_batch) and holds the first until `queued` lines wait in
    the batcher, so that the others arrive while it decodes whatever the threads' timing."""

    def __init__(self, monkeypatch, service: ModelService, queued: int):
        self.sizes, self.counted, self.service, self.queued = [], [], service, queued
        self.started = threading.Event()
        decode = session.run_batch

        def held(registry, batch, analyses):
            first = not self.sizes
            self.sizes.append(len(batch))
            if first:
                self.started.set()
                deadline = time.monotonic() + GATE_S
                while service.batcher.waiting_lines() < self.queued and time.monotonic() < deadline:
                    time.sleep(0.005)
                self.counted.append(translation_load.waiting())
            return decode(registry, batch, analyses)

        monkeypatch.setattr(session, "run_batch", held)


def run_in_threads(service, asked) -> list:
    answers = [None] * len(asked)

    def ask(index):
        try:
            answers[index] = service.run(asked[index], EVERY_ANALYSIS)
        except Exception as error:  # noqa: BLE001  (reported by the assertion below)
            answers[index] = error

    threads = [threading.Thread(target=ask, args=(index,)) for index in range(len(asked))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GATE_S * 2)
    return answers


@pytest.mark.parametrize("strategy", ["greedy", "beam 2"])
def test_requests_arriving_together_are_decoded_together(registry, monkeypatch, strategy):
    service = ModelService(registry, ResultCache(0))
    words = "a man woman dog child rides runs sits".split()
    asked = requests(registry, "python", *STRATEGIES[strategy], texts=[f"the {word} plays ." for word in words])
    held = HeldDecodes(monkeypatch, service, queued=len(asked) - 1)
    answers = run_in_threads(service, asked)
    assert held.sizes == [1, len(asked) - 1]  # the first alone, the others, which waited for it, in one batch
    assert held.counted == [len(asked)]  # every request counted while it waits or runs (translation_load.py)
    assert translation_load.waiting() == 0
    monkeypatch.undo()
    for answer, request in zip(answers, asked):
        assert not isinstance(answer, Exception), answer
        assert answer.request == request and answer.translations[0].source == request.lines[0]
        assert_results_equal(answer, run(registry, request, EVERY_ANALYSIS))


def test_sampling_requests_of_one_seed_decode_together_and_another_seed_apart(registry, monkeypatch):
    """Each sentence draws from a generator of its own, seeded with its request's seed: a batch gives each request
    the tokens it draws alone."""
    service = ModelService(registry, ResultCache(0))
    texts = ["a dog runs", "a girl sits", "the boy jumps", "two men ride", "a cat sleeps"]
    asked = [*requests(registry, "python", "sample", {"seed": 3, "temperature": 1.5}, texts=texts[:4]),
             *requests(registry, "python", "sample", {"seed": 4, "temperature": 1.5}, texts=texts[4:])]
    held = HeldDecodes(monkeypatch, service, queued=len(asked) - 1)
    answers = run_in_threads(service, asked)
    # the first alone; then the seed-3 requests that waited, together, and the seed-4 one apart, in arrival order
    assert held.sizes in ([1, 3, 1], [1, 1, 3], [1, 4]), held.sizes
    monkeypatch.undo()
    for answer, request in zip(answers, asked):
        assert_results_equal(answer, run(registry, request, EVERY_ANALYSIS))


def test_past_the_bound_a_request_is_refused_at_once_and_the_admitted_lose_nothing(registry, monkeypatch):
    service = ModelService(registry, ResultCache(0), bound_s=0.0, admitted_lines=0)  # any line waiting is too much
    asked = requests(registry, "python", "greedy", {}, texts=["a dog runs", "a girl sits\nthe boy jumps", "two men"])
    release, started = threading.Event(), threading.Event()
    decode = session.run_batch

    def held(registry, batch, analyses):
        started.set()
        release.wait(GATE_S)
        return decode(registry, batch, analyses)

    monkeypatch.setattr(session, "run_batch", held)
    admitted = []
    threads = [threading.Thread(target=lambda r=r: admitted.append(service.run(r, EVERY_ANALYSIS))) for r in asked[:2]]
    threads[0].start()  # decodes (held)
    assert started.wait(GATE_S)
    threads[1].start()  # waits: two lines
    wait_until(lambda: service.batcher.waiting_lines() == 2)
    asked_at = time.monotonic()
    with pytest.raises(Overloaded) as refused:
        service.run(asked[2], EVERY_ANALYSIS)
    assert time.monotonic() - asked_at < GATE_S  # it did not wait for the held decode
    assert isinstance(refused.value.retry_after, int) and refused.value.retry_after >= 1
    release.set()
    for thread in threads:
        thread.join(GATE_S)
    monkeypatch.undo()
    assert sorted(result.request.text for result in admitted) == sorted(request.text for request in asked[:2])
    for result in admitted:
        assert_results_equal(result, run(registry, result.request, EVERY_ANALYSIS))
    assert_results_equal(service.run(asked[2], EVERY_ANALYSIS), run(registry, asked[2], EVERY_ANALYSIS))  # later: in


def greedy_request(registry, text: str) -> Request:
    return Request.from_api(registry, text, "python", strategy="greedy", max_length=8)


def wait_until(condition) -> None:
    deadline = time.monotonic() + GATE_S
    while not condition():
        assert time.monotonic() < deadline, "the other requests did not arrive"
        time.sleep(0.005)


def test_retry_after_is_the_waiting_work_estimated_from_the_batches_measured(registry):
    """The waiting requests that share a batch are priced as one batch of their lines, at the line through the
    strategy's measured batches."""
    release, started = threading.Event(), threading.Event()

    def decode(batch, analyses):
        started.set()
        release.wait(GATE_S)
        return [request.text for request in batch]

    costs = BatchCosts()
    costs.record("greedy", requests=1, lines=1, seconds=1.0)  # the line through them: 0.5 s + 0.5 s a line
    costs.record("greedy", requests=2, lines=3, seconds=2.0)
    # fewer than 3 lines waiting are admitted whatever the estimate; from 3 on, the estimate decides
    batcher = Batcher(decode, slots=lambda: 1, bound_s=1.0, costs=costs, admitted_lines=3)
    answers = {}

    def ask_for(text):
        answers[text] = batcher.run(greedy_request(registry, text), frozenset())

    ask = [threading.Thread(target=ask_for, args=(text,)) for text in ("a", "b\nc", "d")]
    ask[0].start()
    assert started.wait(GATE_S)
    for thread, lines in zip(ask[1:], (2, 3)):
        thread.start()
        wait_until(lambda lines=lines: batcher.waiting_lines() == lines)
    with pytest.raises(Overloaded) as refused:  # 3 lines waiting in one batch: 0.5 + 3 * 0.5 = 2 s > 1 s
        batcher.run(greedy_request(registry, "e"), frozenset())
    assert refused.value.retry_after == 2
    release.set()
    for thread in ask:
        thread.join(GATE_S)
    assert answers == {"a": "a", "b\nc": "b\nc", "d": "d"}
    assert batcher.batches == 2  # "b\nc" and "d" waited together


def test_a_lone_request_is_dispatched_without_waiting(registry):
    """No collection window: a request that finds a slot free decodes at once, in its own thread, without waiting
    on anything; with one slot busy, a request takes the other."""
    threads, release, busy = [], threading.Event(), threading.Event()

    def decode(batch, analyses):
        threads.append(threading.get_ident())
        if batch[0].text == "slow":
            busy.set()
            release.wait(GATE_S)
        return [request.text for request in batch]

    def never(*_):
        raise AssertionError("a lone request waited")

    batcher = Batcher(decode, slots=lambda: 2)
    waits = batcher._changed.wait  # noqa: SLF001
    batcher._changed.wait = never  # noqa: SLF001
    assert batcher.run(greedy_request(registry, "a"), frozenset()) == "a"
    assert threads == [threading.get_ident()]
    batcher._changed.wait = waits  # noqa: SLF001
    slow = threading.Thread(target=batcher.run, args=(greedy_request(registry, "slow"), frozenset()))
    slow.start()
    assert busy.wait(GATE_S)
    batcher._changed.wait = never  # noqa: SLF001
    assert batcher.run(greedy_request(registry, "fast"), frozenset()) == "fast"  # the second slot, while "slow" decodes
    release.set()
    slow.join(GATE_S)


def test_one_failing_request_fails_alone(registry):
    release, started = threading.Event(), threading.Event()

    def decode(batch, analyses):
        started.set()
        release.wait(GATE_S)
        if any(request.text == "bad" for request in batch):
            raise RuntimeError("bad input")
        return [request.text.upper() for request in batch]

    batcher, answers = Batcher(decode, lambda: 1), {}

    def ask(text):
        try:
            answers[text] = batcher.run(greedy_request(registry, text), frozenset())
        except RuntimeError as error:
            answers[text] = error

    first = threading.Thread(target=ask, args=("first",))
    first.start()
    assert started.wait(GATE_S)
    rest = [threading.Thread(target=ask, args=(text,)) for text in ("x", "bad", "y")]
    for thread in rest:
        thread.start()
    wait_until(lambda: batcher.waiting_lines() == 3)
    release.set()
    for thread in [first, *rest]:
        thread.join(GATE_S)
    assert answers["first"] == "FIRST" and answers["x"] == "X" and answers["y"] == "Y"
    assert isinstance(answers["bad"], RuntimeError)


def test_the_api_says_the_server_is_busy_and_when_to_retry():
    class Busy:
        def run(self, request, analyses):
            raise Overloaded(4)

    with pytest.raises(Exception) as refused:
        api.run_request(Busy(), lambda: None)
    assert "busy" in str(refused.value) and "Try again in 4 seconds" in str(refused.value)
    assert Overloaded(4).retry_after == 4


def test_batches_run_in_a_worker_process(registry, monkeypatch, tmp_path_factory, random_translator):
    """Through the worker pool: its slots, one batch submitted to a worker, the same numbers as the server's
    process (to float32 rounding: the worker runs the same kernels with the same thread count)."""
    root = tmp_path_factory.mktemp("pool")
    shutil.copytree(random_translator.source, root / "python")
    pool = RunPool(root, 1)
    pool.start()
    try:
        assert pool.wait(120) == "ready", pool.status
        service = ModelService(registry, ResultCache(0))
        service.pool = pool
        assert service.slots() == 1
        sizes, submitted = [], pool.run_batch

        def counted(batch, analyses):
            sizes.append(len(batch))
            if len(sizes) == 1:
                wait_until(lambda: service.batcher.waiting_lines() == 3)
            return submitted(batch, analyses)

        monkeypatch.setattr(pool, "run_batch", counted)
        asked = requests(registry, "python", "beam", {"beam_size": 2},
                         texts=["a dog runs", "a girl sits", "the boy jumps .", "two men ride"])
        answers = run_in_threads(service, asked)
        assert sizes == [1, 3]
        for answer, request in zip(answers, asked):
            assert_results_equal(answer, run(registry, request, EVERY_ANALYSIS))
    finally:
        pool.close()
