"""Translations in worker processes (explorer/run_pool.py): the same numbers as the server's own process, a dead
worker costs no request, and the setting is checked."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from explorer.registry import discover
from explorer.request import Request
from explorer.run_pool import SWITCH, RunPool, workers_from_environment
from explorer.session import EVERY_ANALYSIS, ModelService, run
from transformer.decoding.export import to_json

from .conftest import FLOAT32_ROUNDING, ROUNDED_TO_6, assert_json_close

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def served(random_translator, tmp_path_factory):
    """A checkpoints folder holding the tiny model, its registry, and one worker process serving it."""
    root = tmp_path_factory.mktemp("checkpoints")
    shutil.copytree(random_translator.source, root / "tiny")
    registry = discover(root)
    pool = RunPool(root, 1)
    pool.start()
    assert pool.wait(120) == "ready", pool.status
    yield registry, pool
    pool.close()


def assert_same_result(a, b):
    """Every number a client could receive: the export, ALTI+ and the norms. The worker is another process that runs
    torch's kernels (with the server's thread count, on the same CPU), so its floats are compared within float32
    rounding (and the export's rounding to 6 decimals); tokens, texts and settings are compared exactly."""
    assert a.notices == b.notices and a.settings == b.settings
    assert_json_close(json.loads(to_json(a.translations)), json.loads(to_json(b.translations)), **ROUNDED_TO_6)
    for x, y in zip(a.translations, b.translations):
        np.testing.assert_allclose(x.contributions.layers, y.contributions.layers, **FLOAT32_ROUNDING)
        for kind in x.norms:
            np.testing.assert_allclose(x.norms[kind], y.norms[kind], **FLOAT32_ROUNDING)
        np.testing.assert_allclose(x.logit_lens.chosen_prob, y.logit_lens.chosen_prob, **FLOAT32_ROUNDING)
        assert_json_close(x.logit_lens.topk, y.logit_lens.topk, **FLOAT32_ROUNDING)


@pytest.mark.parametrize("strategy, settings", [("greedy", {}), ("beam", {"beam_size": 3}),
                                                ("sample", {"temperature": 0.9, "seed": 5})])
def test_a_worker_returns_what_the_servers_process_computes(served, strategy, settings):
    registry, pool = served
    request = Request.from_api(registry, "a b c d\ne f", strategy=strategy, settings=settings, max_length=12)
    from_worker = pool.run(request, EVERY_ANALYSIS)
    assert from_worker is not None and from_worker.request == request
    assert_same_result(from_worker, run(registry, request, EVERY_ANALYSIS))


def test_a_dead_worker_costs_no_request_and_the_pool_starts_again(served):
    registry, pool = served
    service = ModelService(registry)
    service.cache.capacity = 0  # each run computes
    service.pool = pool
    request = Request.from_api(registry, "g h i", strategy="greedy", max_length=10)
    [old] = pool.pids()
    os.kill(old, signal.SIGKILL)
    time.sleep(0.5)
    result = service.run(request)  # the broken pool is noticed here: this request runs in the test's process
    assert_same_result(result, run(registry, request))
    assert pool.wait(120) == "ready", pool.status
    assert pool.pids() != [old]
    assert_same_result(pool.run(request, EVERY_ANALYSIS), result)


def test_off_and_cuda_requests_stay_in_the_servers_process(served, tmp_path):
    registry, pool = served
    off = RunPool(tmp_path, 0)
    off.start()
    assert off.status == "off" and off.wait(1) == "off"
    request = Request.from_api(registry, "a b", strategy="greedy", max_length=8)
    assert off.run(request, EVERY_ANALYSIS) is None
    assert pool.run(Request.from_api(registry, "a b", device="cuda", strategy="greedy", max_length=8),
                    EVERY_ANALYSIS) is None
    with pytest.raises(ValueError, match="workers must be 0"):
        RunPool(tmp_path, -1)


def test_a_checkpoint_the_worker_cannot_load_leaves_requests_in_the_servers_process(tmp_path):
    pool = RunPool(tmp_path / "missing", 1)  # discover() finds no checkpoint there: the worker fails to start
    pool.start()
    status = pool.wait(120)
    assert status.startswith("unavailable: a worker did not start"), status
    assert pool.pids() == []
    assert "worker processes unavailable" in pool.describe()


@pytest.mark.parametrize("value, expected", [("0", 0), ("3", 3), (" 2 ", 2)])
def test_the_workers_setting(monkeypatch, value, expected):
    monkeypatch.setenv(SWITCH, value)
    assert workers_from_environment() == expected


@pytest.mark.parametrize("value", ["two", "-1", "1.5", ""])
def test_a_bad_workers_setting_is_named(monkeypatch, value):
    monkeypatch.setenv(SWITCH, value)
    with pytest.raises(ValueError, match=f"{SWITCH} must be a whole number of worker processes"):
        workers_from_environment()


BAD_START_UP_SETTINGS = [
    (SWITCH, "many", "must be a whole number of worker processes (0: translate in the server's process), got 'many'"),
    (SWITCH, "²", "must be a whole number of worker processes (0: translate in the server's process), got '²'"),
    ("ATTENTION_EXPLORER_RESULT_CACHE", "lots", "must be a whole number of results to keep (0: no cache), got 'lots'"),
    ("ATTENTION_EXPLORER_RESULT_CACHE", "٣", "must be a whole number of results to keep (0: no cache), got '٣'"),
    ("ATTENTION_EXPLORER_HALF_WEIGHTS", "yes", "must be 1 (decode through the float16 kernel where it helps, the "
                                               "default) or 0 (float32 F.linear only), got 'yes'"),
    ("ATTENTION_EXPLORER_DEFAULT_MODEL", "<b>\x1b[31mxx", "must be one of the served models ['de-en', 'en-de'], got "
                                                          "'<b>\\x1b[31mxx'"),
    ("ATTENTION_EXPLORER_HUB_MODELS", "opus mt", "must be comma-separated Hub model names such as "
                                                 "Helsinki-NLP/opus-mt-en-de (a multilingual one with its direction: "
                                                 "facebook/nllb-200-distilled-600M:eng_Latn:deu_Latn), got 'opus mt'"),
    ("ATTENTION_EXPLORER_TRAINING_SLOTS", "3", "must be how many custom runs may train at once: 0 (none), 1 or 2, "
                                               "got '3'"),
    ("ATTENTION_EXPLORER_TRAINING_SLOTS", "²", "must be how many custom runs may train at once: 0 (none), 1 or 2, "
                                               "got '²'"),
    ("ATTENTION_EXPLORER_BATCH_LOG", "2", "must be 0 (off, the default) or 1 (a line per batch decoded in the log), "
                                          "got '2'"),
]
# app.py run as its own process would run it, once per bad setting, in one process: the imports are paid once
RUN_APP_PER_SETTING = """
import contextlib, io, json, os, runpy, sys
answers = []
for setting, value in json.loads(sys.argv[1]):
    os.environ[setting] = value
    stderr, status = io.StringIO(), None
    try:
        with contextlib.redirect_stderr(stderr):
            runpy.run_path("app.py", run_name="__main__")
    except SystemExit as end:
        status = end.code
    del os.environ[setting]
    answers.append([status, stderr.getvalue()])
print(json.dumps(answers))
"""


@pytest.fixture(scope="module")
def refusals() -> dict:
    """(status, standard error) of app.py for each bad start-up setting, the others unset."""
    cases = [[setting, value] for setting, value, _ in BAD_START_UP_SETTINGS]
    env = {key: value for key, value in os.environ.items() if key not in {setting for setting, _ in cases}}
    ran = subprocess.run([sys.executable, "-c", RUN_APP_PER_SETTING, json.dumps(cases)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:]
    return {(setting, value): answer for (setting, value), answer in zip(cases, json.loads(ran.stdout))}


@pytest.mark.parametrize("setting, value, message", BAD_START_UP_SETTINGS)
def test_the_app_refuses_a_bad_start_up_setting_in_one_line_that_names_it(refusals, setting, value, message):
    """Every start-up setting is checked before the server starts: one line naming it, its value shown as text
    (escapes for control characters), status 2, no traceback."""
    status, stderr = refusals[setting, value]
    assert status == 2, stderr[-2000:]
    assert stderr.strip() == f"app.py: {setting} {message}"


def test_workers_end_with_a_server_stopped_while_they_start(served):
    """A server killed outright leaves its workers no message; each ends itself once the server is gone, including
    a worker still starting when it went (it must not take its new parent for the server)."""
    _, pool = served
    script = (f"import multiprocessing, os, sys, time; sys.path.insert(0, {str(ROOT)!r}); "
              "from explorer.run_pool import RunPool; "
              f"pool = RunPool({str(pool.root)!r}, 2); pool.start(); "
              "deadline = time.time() + 30\n"
              "while len(multiprocessing.active_children()) < 2 and time.time() < deadline: time.sleep(0.01)\n"
              "print(' '.join(str(p.pid) for p in multiprocessing.active_children()), flush=True); os._exit(0)")
    server = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    workers = [int(pid) for pid in server.stdout.split()]
    assert len(workers) >= 2, server.stderr[-2000:]

    def alive(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"

    deadline = time.time() + 60
    while any(alive(pid) for pid in workers) and time.time() < deadline:
        time.sleep(0.2)
    assert not any(alive(pid) for pid in workers), "a worker outlived its server"
