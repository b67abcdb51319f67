"""Translations in worker processes, so that both of the server's cores decode.

Why: a translation with its trace is about 23 ms of work (bench/load_test.py's distinct requests, one after
another in one process), much of it Python between small torch operators, which holds the interpreter's lock. Two
requests in two threads of the server's process used 1.2 of the 2 cores, and 32 clients waited p95 1.3 s. Each
worker process has a lock of its own. The server's process keeps the event loop, the result cache and every later
question about a result (the views re-run on the models it holds as well).

A worker loads the same checkpoints (`discover`, as app.py does), with the server's torch thread count, and must
decode on the server's path (the float16 kernel or float32 `F.linear`): a request gets the same numbers in a
worker as in the server's process (tests/test_run_pool.py). Until the workers are ready (about 2 s after start),
after a worker died (the pool then starts again), for CUDA, and with the pool off, requests run in the server's
process.

    ATTENTION_EXPLORER_WORKERS=0 python app.py     # off; a number: how many worker processes (default: one per core)
"""
from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import torch

from transformer.core.half_linear import KERNEL

from .environment import whole_number_setting
from .language import warm_up
from .registry import Registry, discover
from .request import Request
from .session import RunResult, run_batch

log = logging.getLogger(__name__)

SWITCH = "ATTENTION_EXPLORER_WORKERS"
START_TIMEOUT_S = 120  # generous: a worker may wait for the float16 kernel's build


def decode_on_one_thread() -> None:
    """The server decodes each request on one torch thread (app.py says why), as its workers do (load_models)."""
    torch.set_num_threads(1)


def workers_from_environment() -> int:
    """How many worker processes ATTENTION_EXPLORER_WORKERS asks for (0: none), with a message that names it when
    bad."""
    return whole_number_setting(SWITCH, os.cpu_count() or 1,
                                "a whole number of worker processes (0: translate in the server's process)")


class RunPool:
    """Worker processes that run `session.run_batch`; `status` says whether requests go to them and, if not, why."""

    def __init__(self, root: Path, workers: int, extra=()):
        """`root` and `extra`: the checkpoints the workers serve, as `registry.discover` takes them."""
        if workers < 0:
            raise ValueError(f"workers must be 0 (off) or more, got {workers}")
        self.root, self.workers, self.extra = Path(root), workers, tuple(str(folder) for folder in extra)
        self.status = "off" if workers == 0 else "not started"
        self._executor: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._settled = threading.Event()  # set when a start has ended, ready or not

    def start(self) -> None:
        """Starts the workers in a background thread; requests run in the server's process until they are ready."""
        with self._lock:
            if self.workers == 0 or self.status in ("starting", "ready"):
                return
            self.status = "starting"
            self._settled.clear()
        threading.Thread(target=self._start, name="run-pool-start", daemon=True).start()

    def wait(self, timeout: float | None = None) -> str:
        """The status once the workers are ready or could not start (or `timeout` seconds have passed)."""
        if self.status == "starting":
            self._settled.wait(timeout)
        return self.status

    def _start(self) -> None:
        try:
            self.status = self._launch()
        finally:
            self._settled.set()
        if self.status != "ready":
            log.warning("worker processes: %s", self.status)

    def _launch(self) -> str:
        KERNEL.wait()  # the workers must decode on the path this process decodes on
        context = multiprocessing.get_context("spawn")  # fork would copy the server's threads' locks mid-use
        barrier = context.Barrier(self.workers)
        with main_module_hidden():
            executor = ProcessPoolExecutor(self.workers, mp_context=context, initializer=load_models,
                                           initargs=(str(self.root), torch.get_num_threads(), barrier, os.getpid(),
                                                     self.extra))
            # one task each: spawning happens at submit, so every worker exists (and loads) before this returns
            started = [executor.submit(decoding_status) for _ in range(self.workers)]
        try:
            statuses = {future.result(timeout=START_TIMEOUT_S) for future in started}
        except Exception as error:  # noqa: BLE001  (any failure leaves requests in the server's process)
            executor.shutdown(wait=False, cancel_futures=True)
            return f"unavailable: a worker did not start ({type(error).__name__}: {str(error)[:200]})"
        if statuses != {KERNEL.status}:
            executor.shutdown(wait=False, cancel_futures=True)
            return (f"unavailable: the workers' float16 kernel is {sorted(statuses)}, this process's is "
                    f"{KERNEL.status!r}; translating here keeps the numbers the same")
        self._executor = executor
        return "ready"

    def run(self, request: Request, analyses: frozenset[str]) -> RunResult | None:
        """The RunResult from a worker, or None where the server's process must run it (see the module docstring)."""
        results = self.run_batch([request], analyses)
        return None if results is None else results[0]

    def run_batch(self, requests: list[Request], analyses: frozenset[str]) -> list[RunResult] | None:
        """`session.run_batch` of the requests in a worker, or None where the server's process must run them."""
        executor = self._executor
        if executor is None or any(request.device == "cuda" for request in requests):
            return None
        try:
            return executor.submit(run_batch_in_worker, list(requests), analyses).result()
        except BrokenProcessPool:  # a worker died (killed, out of memory): these requests run here, the pool restarts
            with self._lock:
                if self._executor is not executor:
                    return None
                self._executor, self.status = None, "not started"
            log.warning("a worker process died: translating in the server's process while the workers restart")
            executor.shutdown(wait=False, cancel_futures=True)
            self.start()
            return None

    def pids(self) -> list[int]:
        executor = self._executor
        return [] if executor is None else sorted(executor._processes)  # noqa: SLF001  (tests kill one)

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        self.status = "closed"

    def describe(self) -> str:
        """For the footer."""
        if self.status == "ready":
            return f"Translations run in {self.workers} worker process{'es' if self.workers > 1 else ''}."
        if self.status == "off":
            return "Translations run in the server's process (worker processes off)."
        return f"Translations run in the server's process: worker processes {self.status}."


@contextlib.contextmanager
def main_module_hidden():
    """A spawned worker runs the parent's main script again (multiprocessing imports it as __mp_main__) unless the
    main module names no file; app.py loads every model and builds the whole page at import, and a worker needs
    only the models, which it loads itself."""
    main = sys.modules["__main__"]
    path = main.__dict__.pop("__file__", None)
    try:
        yield
    finally:
        if path is not None:
            main.__file__ = path


# what a worker process holds: its own copy of the served models, loaded once by `load_models`
_registry: Registry | None = None


def load_models(root: str, threads: int, barrier, server: int, extra: tuple[str, ...] = ()) -> None:
    global _registry
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C stops the server, which then ends its workers
    threading.Thread(target=exit_with_parent, args=(server,), name="parent-watch", daemon=True).start()
    torch.set_num_threads(threads)
    _registry = discover(Path(root), [Path(folder) for folder in extra])
    warm_up(_registry)  # the language identifier, before the first request needs it
    KERNEL.wait()
    barrier.wait(START_TIMEOUT_S)


def exit_with_parent(server: int) -> None:
    """A server killed outright (SIGKILL, SIGTERM) cannot stop its workers, and their task queue never closes
    (each worker holds one of its ends): a worker ends itself when its parent is no longer the server. The server's
    pid comes from the server, not from os.getppid() here: a server stopped while the worker was still starting has
    already left it to another parent."""
    while os.getppid() == server:
        time.sleep(0.5)
    os._exit(0)


def decoding_status() -> str:
    return KERNEL.status


def run_batch_in_worker(requests: list[Request], analyses: frozenset[str]) -> list[RunResult]:
    return run_batch(_registry, requests, analyses)
