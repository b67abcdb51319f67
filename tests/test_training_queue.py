"""The Learn tab's run queue (explorer/training_queue.py) with one slot: three runs asked at once train one at a time,
the later two told their places; a run closed half-way ends its process and frees its slot; a run closed while it
waits leaves the queue; Stop, by the run's token, ends a run that trains, waits, or has not begun; a run pauses between
its steps while the server translates, and Stop still ends it there. Tiny runs (width 8, a few updates) in real worker
processes."""
import contextlib
import multiprocessing
import re
import threading
import time

import pytest

from explorer.training_queue import MOST_PAUSE_S, RUNS_OFF, SLOTS_SETTING, TrainingQueue, slots_from_environment
from explorer.translation_load import new_count, translating, wait_while_translating, waiting
from transformer.playground import PlaygroundRun, Settings

TINY = {"task": "copy", "layers": 1, "heads": 1, "width": 8, "steps": 4, "redraw_every": 2, "seed": 1,
        "held_out": 10}


@pytest.fixture(scope="module")
def queue(tmp_path_factory):
    training = TrainingQueue(slots=1, root=tmp_path_factory.mktemp("runs"))
    yield training
    training.close()


def test_three_runs_at_once_take_turns(queue):
    runs = [queue.train(TINY, wait_every=0.05) for _ in range(3)]
    assert next(runs[0])[0] == "snapshot"  # the first starts at once
    assert [next(runs[1]), next(runs[2])] == [("waiting", 1), ("waiting", 2)]
    assert queue.running == 1
    events = list(runs[0])
    assert [kind for kind, _ in events] == ["snapshot", "snapshot", "done"]
    run_id, folder, stopped_by = events[-1][1]
    assert queue.run_folder(run_id) == folder and stopped_by is None
    second = list(runs[1])  # the second starts when the first is done; the third still waits
    assert second[0][0] == "snapshot" and second[-1][0] == "done"
    assert [kind for kind, _ in runs[2]][-1] == "done"
    assert queue.running == 0


def test_a_run_closed_half_way_ends_its_process(queue):
    run = queue.train({**TINY, "steps": 5000, "redraw_every": 1})
    assert next(run)[0] == "snapshot"
    worker = next(w for w in queue._running_workers)  # noqa: SLF001  (the process this run trains in)
    run.close()
    assert not worker.process.is_alive() and queue.running == 0


def test_a_run_closed_while_waiting_leaves_the_queue(queue):
    first = queue.train({**TINY, "steps": 5000, "redraw_every": 1})
    next(first)
    waiting = queue.train(TINY)
    assert next(waiting) == ("waiting", 1)
    waiting.close()
    assert queue.place(object()) == 0 and len(queue._waiting) == 0  # noqa: SLF001
    first.close()
    assert queue.running == 0


def test_stop_ends_a_training_run_by_its_token_and_no_other(queue):
    other = queue.train(TINY, token="other")  # not stopped: it trains to the end below
    run = queue.train({**TINY, "steps": 5000, "redraw_every": 1}, wait_every=0.05, token="mine")
    assert next(run)[0] == "snapshot"
    worker = next(w for w in queue._running_workers)  # noqa: SLF001
    queue.stop("mine")
    rest = list(run)
    assert rest[-1] == ("stopped", None) and all(kind == "snapshot" for kind, _ in rest[:-1])
    assert not worker.process.is_alive() and queue.running == 0
    assert [kind for kind, _ in other][-1] == "done"


def test_stop_before_a_run_begins_or_while_it_waits(queue):
    queue.stop("early")  # Stop's request reached the server before its Train's
    assert list(queue.train(TINY, token="early")) == [("stopped", None)]
    assert queue.running == 0 and len(queue._waiting) == 0  # noqa: SLF001
    first = queue.train({**TINY, "steps": 5000, "redraw_every": 1})
    next(first)
    waiting = queue.train(TINY, wait_every=0.05, token="queued")
    assert next(waiting) == ("waiting", 1)
    queue.stop("queued")
    assert list(waiting) == [("stopped", None)] and len(queue._waiting) == 0  # noqa: SLF001
    first.close()
    assert queue.running == 0


def test_the_learn_tabs_stop_ends_its_visitors_run(tmp_path):
    """Train then Stop as the Learn tab wires them (views/learn.py): the run stops at the step it reached and says
    so; a Stop with no token of ours (none, not text, too long) stops nothing and raises nothing."""
    import types

    from explorer.views import learn

    page = types.SimpleNamespace(training=TrainingQueue(slots=1, root=tmp_path))
    training = learn.train(page, "copy", 1, 1, 8, "sinusoidal", "pre", 1, 5000, "token-1")
    assert next(training)[0].startswith("Training: step 0 of 5000")
    for bad in (None, 42, "", "x" * (learn.TOKEN_LENGTH + 1)):
        learn.stop(page, bad)
    assert next(training)[0].startswith("Training: step")
    learn.stop(page, "token-1")
    last = list(training)[-1][0]
    assert re.fullmatch(r"Stopped at step \d+: the run's process ended\.", last), last
    assert page.training.running == 0 and not list(tmp_path.iterdir())  # no run kept: it did not finish
    page.training.close()


# Generous for a CI machine whose 2 cores are busy: a tiny run's update or redraw takes milliseconds alone
SETTLE_S = 1.0  # for the update or redraw under way when the server starts translating to end and be received
HELD_S = 1.5  # watched for no progress, after SETTLE_S, both well within the pause's MOST_PAUSE_S
RESUME_S = 30.0  # the most a run may take to advance once free to


@contextlib.contextmanager
def watched(queue, token):
    """A long tiny run read in a thread of its own, since a paused run's generator yields nothing: yields the list of
    the steps of the snapshots received so far, and its events; the run is stopped on leaving."""
    run = queue.train({**TINY, "steps": 5000, "redraw_every": 1}, wait_every=0.05, token=token)
    steps, events = [], []

    def read():
        for kind, value in run:
            events.append(kind)
            if kind == "snapshot":
                steps.append(value.step)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield steps, events
    finally:
        queue.stop(token)
        reader.join(timeout=RESUME_S)
    assert not reader.is_alive(), "the run did not end within RESUME_S of its Stop"


def advances(steps, within_s: float = RESUME_S) -> bool:
    """Whether a snapshot of a later step than the last one received arrives within `within_s`."""
    last, deadline = steps[-1] if steps else -1, time.monotonic() + within_s
    while time.monotonic() < deadline:
        if steps and steps[-1] > last:
            return True
        time.sleep(0.01)
    return False


def test_a_run_pauses_while_the_server_translates(queue):
    """The count of translations is shared with the worker process: held above 0 here, the run takes no step; at 0 it
    trains on, before and after."""
    assert SETTLE_S + HELD_S < MOST_PAUSE_S  # else the pause's limit could let a step through while watched
    with watched(queue, "paused") as (steps, _):
        assert advances(steps) and advances(steps, within_s=HELD_S)  # nothing translating: not held back
        with translating():
            time.sleep(SETTLE_S)
            paused_at = steps[-1]
            time.sleep(HELD_S)
            assert steps[-1] == paused_at
        assert advances(steps)


def test_a_paused_run_still_stops(queue):
    with translating():
        with watched(queue, "paused-stop") as (steps, events):
            assert advances(steps)  # its first snapshot, before the first update: then it waits
            worker = next(w for w in queue._running_workers)  # noqa: SLF001
            time.sleep(SETTLE_S)
            queue.stop("paused-stop")
        # the run read to its end (within RESUME_S) while the server still translates
        assert steps == [0] and events[-1] == "stopped"
    assert not worker.process.is_alive() and queue.running == 0


def test_a_worker_killed_while_it_reads_the_count_leaves_it_free():
    """A run's worker is ended by killing it (Stop, a visitor who left), at any moment: also while it reads the count
    of translations, which it does every few ms between its steps while the server translates. Nothing it held may
    stay held: a lock on the count, left held by a killed reader, once kept every later translation and every later
    run (its worker waiting to read the count, the server waiting in poll for its snapshots) waiting forever. Here
    readers killed in a loop that reads as fast as it can; then the count must still move and be read."""
    count = new_count()
    context = multiprocessing.get_context("fork")  # started in milliseconds; the child only reads the count

    def read_forever():
        while True:
            waiting(count)

    def translate():
        with translating(count):
            pass

    for _ in range(10):
        reader = context.Process(target=read_forever, daemon=True)
        reader.start()
        time.sleep(0.05)
        reader.kill()
        reader.join()
    # each in a process or thread of its own, watched for 5 s: a lock left held would hold this test too
    moved = threading.Thread(target=translate, daemon=True)
    moved.start()
    moved.join(timeout=5)
    assert not moved.is_alive(), "a translation waits on something a killed reader held"
    reader = context.Process(target=wait_while_translating, args=(count,), daemon=True)
    reader.start()
    reader.join(timeout=5)
    assert reader.exitcode == 0, "a worker waits on something a killed reader held"
    reader.kill()


def test_a_worker_killed_mid_run_or_while_idle_is_noticed(queue):
    """A worker killed while it trains ends its run with the message and frees the slot; one killed while it waits
    idle for the next run is not sent that run: the run starts a worker of its own and trains to the end."""
    run = queue.train({**TINY, "steps": 5000, "redraw_every": 1}, wait_every=0.05)
    assert next(run)[0] == "snapshot"
    next(w for w in queue._running_workers).process.kill()  # noqa: SLF001
    assert list(run)[-1] == ("error", "the training process ended unexpectedly; try again")
    assert queue.running == 0
    assert [kind for kind, _ in queue.train(TINY)][-1] == "done"  # its worker is kept for the next run
    idle = queue._idle[-1]  # noqa: SLF001
    idle.process.kill()
    idle.process.join()
    assert [kind for kind, _ in queue.train(TINY)][-1] == "done"
    assert idle not in queue._idle and queue.running == 0  # noqa: SLF001


def test_the_run_calls_its_hook_before_each_update_and_each_redraw():
    calls = []
    settings = Settings.checked(**{**TINY, "steps": 7, "redraw_every": 3})
    snapshots = list(PlaygroundRun(settings).snapshots(lambda: calls.append(1)))
    assert len(calls) == 7 + 3  # updates 1..7; redraws at 3, 6 and the last (the one before the first: no wait)
    assert [s.step for s in snapshots] == [0, 3, 6, 7]


def test_unknown_run_ids_name_no_folder(queue):
    assert queue.run_folder("../../etc") is None and queue.run_folder("0" * 12) is None


@pytest.mark.parametrize("text, slots", [(None, 1), ("0", 0), ("2", 2), (" 1 ", 1)])
def test_the_slots_setting(monkeypatch, text, slots):
    if text is None:
        monkeypatch.delenv(SLOTS_SETTING, raising=False)
    else:
        monkeypatch.setenv(SLOTS_SETTING, text)
    assert slots_from_environment() == slots


@pytest.mark.parametrize("text", ["3", "-1", "one", "1.0", "", "١"])
def test_a_bad_slots_setting_is_named(monkeypatch, text):
    monkeypatch.setenv(SLOTS_SETTING, text)
    with pytest.raises(ValueError, match=f"{SLOTS_SETTING} must be how many custom runs may train at once: 0 "):
        slots_from_environment()


def test_no_slots_turns_custom_runs_off_and_starts_no_process(tmp_path):
    training = TrainingQueue(slots=0, root=tmp_path)
    training.warm()  # what opening the Learn tab does
    assert list(training.train(TINY)) == [("error", RUNS_OFF)]
    assert training._idle == [] and training.running == 0  # noqa: SLF001  (no worker started, held or running)
    assert not list(tmp_path.iterdir())
    training.close()


def test_train_on_a_server_with_custom_runs_off_says_so(tmp_path):
    """The Learn tab's Train (views/learn.py) with no slots: the visitor's message, and no run."""
    import types

    import gradio as gr

    from explorer.views import learn

    page = types.SimpleNamespace(training=TrainingQueue(slots=0, root=tmp_path))
    with pytest.raises(gr.Error, match="Custom runs are off on this server"):
        list(learn.train(page, "copy", 1, 1, 8, "sinusoidal", "pre", 1, 4))
    assert page.training.running == 0 and not list(tmp_path.iterdir())


@pytest.mark.parametrize("task", ["reverse", "copy", "numbers"])
def test_watching_the_default_run_puts_its_own_settings_in_the_controls(task):
    """The Learn tab's "Watch the default run": the run shown, and every setting control set to the values it was
    trained with (read here from its replay.json), so that a Train after it trains that run again."""
    import json

    from explorer.views import learn

    values = learn.watch_default_with_settings(task)
    shown, controls = values[:len(learn.SHOWN)], values[len(learn.SHOWN):]
    trained = json.loads((learn.shipped_folder(task) / "replay.json").read_text())["settings"]
    assert dict(zip(learn.SETTING_NAMES[1:], controls)) == {name: trained[name] for name in learn.SETTING_NAMES[1:]}
    assert shown[-1] == {"folder": str(learn.shipped_folder(task)), "run_id": None}
    assert shown[0].startswith("The default run, trained when this app was built.")
