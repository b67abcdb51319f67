"""Live playground runs for a whole class on a small server: each run trains in a worker process of its own on one torch
thread, at most `slots` at a time (ATTENTION_EXPLORER_TRAINING_SLOTS, default 1; 0 turns custom runs off, the shipped
runs still replay); later runs wait in order and are told their place. A worker process is started ahead of the first
run (when the Learn tab opens), so the first redraw comes within a second of Train.

A process rather than a thread: torch's thread count is per process, a process's memory is returned when it ends,
and a run cancelled half-way (the visitor left, or pressed Stop) is ended by ending its process, not by asking a
loop to notice. Stop names its run by the token its Train was given (`stop`), so that a Stop that reaches the
server before its Train has begun still stops it. Translations keep their own worker processes (run_pool.py).

Translations come first: a run's process waits before each update and each redraw while the server has translations
waiting or running (translation_load.py's count, shared with every worker process as it starts), since a lower
scheduling priority alone did not hold a run back on the VMs a class shares (docs/playground.md). A paused run is
stopped as any other, by ending its process.

Each finished run's folder (checkpoint and replay.json) is kept under the runs folder by its id, for the run's
share link and for opening it in every tab; the oldest are removed past `KEPT_RUNS`.
"""
from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import secrets
import shutil
import tempfile
import threading
from collections import deque
from pathlib import Path

import torch

from transformer.playground import PlaygroundRun, RunError, Settings, save_run

from .environment import whole_number_setting
from .run_pool import main_module_hidden
from .translation_load import shared_count, wait_while_translating

log = logging.getLogger(__name__)
SLOTS_SETTING = "ATTENTION_EXPLORER_TRAINING_SLOTS"
KEPT_RUNS = 50
KEPT_STOPS = 256  # Stop tokens remembered: a Stop may arrive before its run begins
RUN_ID_LENGTH = 12  # hex digits of a run's id: its share link's value
NICENESS = 10  # added to a worker's niceness (Unix): translations come first, where the scheduler heeds it
# the longest a run waits for the server's translations before it takes one step anyway: under a class that keeps
# translating without a gap the run still advances, an update or a redraw at least every MOST_PAUSE_S seconds, and
# its time cap (which counts the pauses) ends it, rather than it holding its slot, and the runs queued behind it,
# for as long as the class translates
MOST_PAUSE_S = 5.0


MAX_SLOTS = 2  # on the 2-core machine a class shares, more runs at once would take the cores from translations
RUNS_OFF = (f"Custom runs are off on this server ({SLOTS_SETTING}=0): press \"Watch the default run\" to replay "
            "the task's shipped run.")


def slots_from_environment() -> int:
    """How many custom runs may train at once (ATTENTION_EXPLORER_TRAINING_SLOTS; 0: none), with a message that names
    it when bad. app.py checks it before it serves."""
    return whole_number_setting(SLOTS_SETTING, 1, "how many custom runs may train at once: 0 (none), 1 or 2",
                                most=MAX_SLOTS)


def worker(connection, translations) -> None:
    """A worker process: one torch thread; runs the settings it is sent, streaming each snapshot back, then saves
    the run into the folder it was given and says so. `translations`: the server's shared count of translations
    waiting or running; the run waits between its steps while it is above 0."""
    torch.set_num_threads(1)
    # below the translation workers in the scheduler's eyes, where it heeds niceness (not on every VM: hence the pause
    # between steps below)
    os.nice(NICENESS)
    # one update of the smallest model first: torch's first calls in a process (its kernels' set-up) happen here,
    # before a visitor's Train, not between it and the first redraw
    PlaygroundRun(Settings.checked(task="copy", layers=1, heads=1, width=8, steps=1, held_out=1)).train()
    connection.send(("ready", None))
    while True:
        job = connection.recv()
        if job is None:
            return
        settings, folder = job
        run = PlaygroundRun(Settings.checked(**settings))
        try:
            for snapshot in run.snapshots(lambda: wait_while_translating(translations, most_s=MOST_PAUSE_S)):
                connection.send(("snapshot", snapshot))
            save_run(run, folder)
            connection.send(("done", run.stopped_by))
        except RunError as error:
            connection.send(("error", str(error)))
        del run  # the model and its optimizer's memory, before the next job


class Worker:
    def __init__(self):
        # a fork server: it imports torch, the playground and this module (the worker's own, with the explorer
        # modules it imports: 0.8 s more per worker otherwise) once, and each worker after the first is a fork of it
        # (about a second, its warm-up run included, where a spawned one imports torch again); never a fork of the
        # server itself, which would copy its threads' locks mid-use
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["torch", "transformer.playground", __name__])
        self.connection, child = context.Pipe()
        # the count is handed over as the process starts: shared memory cannot be sent down the pipe later
        self.process = context.Process(target=worker, args=(child, shared_count()), name="playground-run",
                                       daemon=True)
        with main_module_hidden():  # not app.py again in the fork server: it loads every model at import
            self.process.start()
        child.close()
        self.receive(None)  # "ready": torch loaded and warmed up (a dead process raises EOFError here)

    def receive(self, timeout: float | None):
        """The worker's next message, or None if none came within `timeout` seconds (None: no limit). Raises EOFError
        once the process has ended with nothing left to read: its end of the pipe closing would say so too, but not
        while a copy of it lives on in another process, and the process's sentinel always does."""
        ready = multiprocessing.connection.wait([self.connection, self.process.sentinel], timeout)
        if self.connection in ready:  # what it sent before it ended is read first
            return self.connection.recv()
        if ready:
            raise EOFError("the worker process ended")
        return None

    def end(self) -> None:
        if self.process.is_alive():
            self.process.terminate()
        self.process.join(timeout=5)
        self.connection.close()


class TrainingQueue:
    def __init__(self, slots: int = 1, root: Path | None = None):
        self.slots = slots
        self.root = Path(root or Path(tempfile.gettempdir()) / "attention-explorer-runs")
        self._lock = threading.Condition()
        self._waiting: deque[object] = deque()
        self._running = 0
        self._idle: list[Worker] = []  # started workers with no run
        self._running_workers: set[Worker] = set()
        self._stopped: deque[str] = deque(maxlen=KEPT_STOPS)  # the tokens of runs a visitor stopped

    def stop(self, token: str) -> None:
        """The run given `token` stops at its next check (within `wait_every`), whether it trains, waits or has not
        begun yet; a token of no run stops nothing."""
        with self._lock:
            self._stopped.append(token)
            self._lock.notify_all()

    def _stop_asked(self, token: str | None) -> bool:
        with self._lock:
            return token is not None and token in self._stopped

    def warm(self) -> None:
        """Starts an idle worker in the background when none is ready (the Learn tab opened)."""
        with self._lock:
            if self._idle or self._running >= self.slots:
                return
            self._idle.append(None)  # a place held while it starts
        threading.Thread(target=self._start_idle, name="playground-warm", daemon=True).start()

    def _start_idle(self) -> None:
        started = None
        try:
            started = Worker()
        except (EOFError, OSError) as error:  # the worker died starting (the server stopping, out of memory)
            log.warning("a playground worker did not start: %s", type(error).__name__)
        finally:  # a worker that failed to start leaves no place held: the next Train starts its own
            with self._lock:
                self._idle.remove(None)
                if started is not None:
                    self._idle.append(started)
                self._lock.notify_all()

    def _take_worker(self) -> Worker:
        """An idle worker, or a new one; an idle one that has died since (killed, out of memory) is ended, not sent a
        run it would never answer."""
        with self._lock:
            dead = [w for w in self._idle if w is not None and not w.process.is_alive()]
            for w in dead:
                self._idle.remove(w)
            ready = next((w for w in self._idle if w is not None), None)
            if ready is not None:
                self._idle.remove(ready)
        for w in dead:
            w.end()
        return ready or Worker()

    def place(self, ticket) -> int:
        """1 for the next run to start, 2 for the one after, ...; 0 once it runs."""
        with self._lock:
            return self._waiting.index(ticket) + 1 if ticket in self._waiting else 0

    @property
    def running(self) -> int:
        return self._running

    def run_folder(self, run_id: str) -> Path | None:
        """A kept run's folder by its id, None for an id that names none (ids are hex, so no path tricks)."""
        if len(run_id) != RUN_ID_LENGTH or any(c not in "0123456789abcdef" for c in run_id):
            return None
        folder = self.root / run_id
        return folder if (folder / "replay.json").is_file() else None

    def train(self, settings: dict, wait_every: float = 0.5, token: str | None = None):
        """A generator: ("waiting", place) while the run waits, ("snapshot", Snapshot) as it trains, and finally
        ("done", (run_id, folder, stopped_by)), ("error", message), or ("stopped", None) once `stop(token)` was
        called. Stopping it, or closing it (the visitor left), ends the run's process and frees its slot."""
        if self.slots == 0:
            yield "error", RUNS_OFF
            return
        ticket, worker, started, finished = object(), None, False, False
        with self._lock:
            self._waiting.append(ticket)
        try:
            told = None
            while not started:
                if self._stop_asked(token):
                    yield "stopped", None
                    return
                with self._lock:
                    if self._waiting[0] is ticket and self._running < self.slots:
                        self._waiting.popleft()
                        self._running += 1
                        started = True
                        break
                    place = self._waiting.index(ticket) + 1
                if place != told:
                    told = place
                    yield "waiting", place
                with self._lock:
                    self._lock.wait(timeout=wait_every)
            worker = self._take_worker()
            with self._lock:
                self._running_workers.add(worker)
            run_id = secrets.token_hex(RUN_ID_LENGTH // 2)
            folder = self.root / run_id
            folder.parent.mkdir(parents=True, exist_ok=True)
            worker.connection.send((settings, str(folder)))
            while True:
                if self._stop_asked(token):  # between snapshots too: they can come faster than `wait_every`
                    yield "stopped", None
                    return
                try:
                    message = worker.receive(wait_every)
                except (EOFError, OSError):  # the process died (out of memory, killed)
                    yield "error", "the training process ended unexpectedly; try again"
                    break
                if message is None:
                    continue
                kind, value = message
                if kind == "snapshot":
                    yield kind, value
                    continue
                finished = True
                yield (kind, (run_id, folder, value)) if kind == "done" else (kind, value)
                break
        finally:
            self._finish(worker, started, finished, ticket)

    def _finish(self, worker: Worker | None, started: bool, finished: bool, ticket) -> None:
        with self._lock:
            self._running_workers.discard(worker)
            if started:
                self._running -= 1
            elif ticket in self._waiting:  # closed while it waited
                self._waiting.remove(ticket)
            keep = finished and worker is not None and not self._idle
            if keep:
                self._idle.append(worker)
            self._lock.notify_all()
        if worker is not None and not keep:
            worker.end()
        self._prune()

    def _prune(self) -> None:
        if not self.root.is_dir():
            return
        runs = sorted((p for p in self.root.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
        for old in runs[:-KEPT_RUNS]:
            shutil.rmtree(old, ignore_errors=True)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = [w for w in self._idle if w is not None], []
        for w in idle:
            w.connection.send(None)
            w.end()
