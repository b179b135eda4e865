"""Running jobs on worker threads (`ragaudit.core.execution.Threads`) and stopping cleanly on
SIGINT/SIGTERM (progress: `ragaudit.core.progress`).

Workers are daemon threads: a user pipeline that hangs in a call can hold a worker, never the
process's exit. A signal stops new work, gives the runs in flight a short grace to finish (their
traces are kept), kills the process groups of `command` children, and ends the run with exit
130 (SIGINT) or 143 (SIGTERM), so `--resume` can finish it. A python pipeline's call still running
then (in native code, say, a model's `generate()`) ends with the process (`end_process`).
"""

from __future__ import annotations

import functools
import os
import queue
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ragaudit.core.errors import RagauditError

if TYPE_CHECKING:
    from concurrent.futures import Future
    from types import FrameType

GRACE_S = 2.0  # how long runs in flight may still finish after a stop signal


class Interrupted(RagauditError):
    """The run was stopped by SIGINT or SIGTERM; finished runs are kept."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.exit_code = 128 + signum


class Stopper:
    """Turns SIGINT/SIGTERM into a stop request for the duration of a run (main thread only), and
    runs `on_stop` (kill the children) from the handler at once."""

    def __init__(self, on_stop: Callable[[], None] = lambda: None):
        self.signum: int | None = None
        self.on_stop = on_stop
        self._previous: dict[int, Any] = {}  # what signal.signal returned: a handler, SIG_DFL or None

    def __enter__(self) -> "Stopper":
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum
        self.on_stop()

    @property
    def stopped(self) -> bool:
        return self.signum is not None


def run_jobs(
    jobs: Iterable[Any],
    work: Callable[[Any], Any],
    *,
    workers: int,
    stopper: Stopper,
    skip: Callable[[Any], bool] = lambda job: False,
) -> Iterable[tuple[Any, Any]]:
    """Yield (job, result or raised exception) as jobs finish on `workers` threads
    (`ragaudit.core.execution.Threads`), at most `2 × workers` in flight, submitted in the order given.
    `skip(job)` is asked just before submitting. After a stop signal nothing new is submitted and
    the runs in flight get GRACE_S to finish."""
    from ragaudit.core.execution import Threads

    finished: queue.SimpleQueue[tuple[Any, Future[Any]]] = queue.SimpleQueue()
    threads = Threads(workers)
    pending = iter(jobs)
    in_flight = 0
    try:

        def submit() -> bool:
            nonlocal in_flight
            for job in pending:
                if not skip(job):
                    threads.submit(work, job).add_done_callback(functools.partial(_put, finished, job))
                    in_flight += 1
                    return True
            return False

        for _ in range(2 * workers):
            if not submit():
                break
        deadline = None
        while in_flight:
            if stopper.stopped and deadline is None:
                deadline = time.monotonic() + GRACE_S
            if deadline is not None and time.monotonic() > deadline:
                return
            try:
                job, task = finished.get(timeout=0.1)
            except queue.Empty:
                continue
            in_flight -= 1
            yield job, raised if (raised := task.exception()) is not None else task.result()
            if not stopper.stopped:
                submit()
    finally:
        threads.close()


def _put(finished: queue.SimpleQueue[tuple[Any, Future[Any]]], job: Any, task: Future[Any]) -> None:
    finished.put((job, task))


def end_process(code: int | str | None) -> None:
    """Before the program exits with `code` (a `SystemExit`'s): when a call into a python pipeline
    still runs on its thread (abandoned after a timeout or a stop signal), finalising the
    interpreter would tear the runtime down under it, and native code there aborts the process (a
    C++ runtime's "terminate called without an active exception": exit 134, not 143). Then what is
    written is flushed and the process ends at once with `code`; otherwise this returns."""
    from ragaudit.pipelines.python import calls_left_running

    if not calls_left_running():
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can reach it
            pass
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)
