"""Where work runs, behind one small interface, and how many workers it gets.

An executor takes tasks, `submit(fn, *args)`, each a module-level function and its arguments, and
hands back a task handle (`result()`, `done()`, `cancel()`); `map_ordered` runs a function over
items and gives the results in the order of the items, a bounded number ahead; `close()` ends it
(a task still running is abandoned). There are three:

* `Threads`: daemon threads of this process (`--executor local`). A call that hangs holds a
  worker, never the process's exit.
* `Processes`: spawned worker processes of this machine (`--executor processes`, `validate
  --workers N`), one task at a time each, each with its own pipe. A worker whose task ends its
  process is replaced at once and the task is given to another worker; a task that has ended
  `tries` workers is given up on: its `result()` raises `WorkerDied`. A worker whose parent dies
  exits, even in the middle of a task, and ignores ctrl-C, which is the parent's.
* `ragaudit.auditing.executors.DaskClient`: a Dask cluster (`--executor dask`), with the same behaviour
  for a task whose workers die.

The worker count, when none is asked for, is `default_workers`: `[audit] workers` of the config,
else DEFAULT_WORKERS; a command that calls no pipeline takes `cpu_workers`, the CPUs it may use.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import queue
import signal
import threading
import time
import traceback
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Protocol

from ragaudit.core.errors import PipelineStartError
from ragaudit.core.wire import dumps, received

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from ragaudit.io.config import Config

DEFAULT_WORKERS = 1  # without --workers and without a config that sets [audit] workers
TRIES = 2  # workers a task may end before it is given up on: the first death may be bad luck
START_TRIES = 3  # workers in a row that may die before they are ready, in one place
PARENT_CHECK_S = 0.5  # how often a worker process looks whether its parent is still there


def default_workers(config: Config | None = None) -> int:
    """The worker count of a command given no --workers: the config's `[audit] workers`, else
    DEFAULT_WORKERS. Every command counts its threads or processes this way."""
    return max(1, config.audit.workers) if config is not None else DEFAULT_WORKERS


MAX_CPU_WORKERS = 8


def cpu_workers() -> int:
    """The CPUs this process may run on, at most MAX_CPU_WORKERS: the worker count of a command
    that calls no pipeline (`validate`), whose work is this machine's alone."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_CPU_WORKERS))


def worker_count(requested: int | None, config: Config | None = None) -> int:
    """`requested` (--workers) when given, else `default_workers(config)`."""
    return max(1, requested) if requested else default_workers(config)


class WorkerDied(RuntimeError):
    """The worker process running a task died, `deaths` times, on as many workers; it was given up on."""

    def __init__(self, deaths: int = 0):
        times = f" {deaths} times, on as many workers" if deaths else ""
        super().__init__(f"the worker process running this task died{times}")
        self.deaths = deaths


class ClusterLost(PipelineStartError):
    """Every worker of a cluster is gone and none came back within the bound the run allows: what
    was out on it is given up on, and a run on it stops (exit 4) once what it had is recorded."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process (the `__cause__` of the exception)."""


def remote_traceback(exc: BaseException) -> str:
    """Where a task raised `exc` in its worker process, or here when it was raised here."""
    cause = exc.__cause__
    if isinstance(cause, RemoteTraceback):
        return str(cause)
    return "".join(traceback.format_exception(exc))


class Task(Protocol):
    """What `submit` hands back."""

    def result(self, timeout: float | None = None) -> Any: ...

    def done(self) -> bool: ...

    def cancel(self) -> bool: ...


class Executor(Protocol):
    """Runs tasks: `workers` at once (threads, processes, or a cluster's threads)."""

    name: str

    @property
    def workers(self) -> int: ...

    def submit(self, fn: Callable[..., Any], *args: Any) -> Task: ...

    def close(self) -> None: ...


class ClusterExecutor(Executor, Protocol):
    """An executor on other machines: what every task reads is sent to each worker once."""

    def scatter(self, value: Any) -> Any:
        """A handle to `value` on every worker, to pass as a task's argument in its place."""
        ...


def map_ordered(
    executor: Executor, fn: Callable[..., Any], items: Iterable[Any], *args: Any, ahead: int
) -> Iterator[Any]:
    """`fn(item, *args)` for each item, on `executor`: the results in the order of `items`, with at
    most `ahead` tasks submitted beyond the one whose result comes next. Tasks not yet handed out
    when the caller stops early are cancelled."""
    pending: deque[Task] = deque()
    source = iter(items)
    more = True
    try:
        while True:
            while more and len(pending) <= ahead:
                item = next(source, _END)
                if item is _END:
                    more = False
                else:
                    pending.append(executor.submit(fn, item, *args))
            if not pending:
                return
            yield pending.popleft().result()
    finally:
        for task in pending:
            task.cancel()


_END = object()


class Threads:
    """Daemon threads of this process, taking tasks in the order they are submitted."""

    name = "local"

    def __init__(self, workers: int, *, name: str = "ragaudit-worker"):
        self.workers = workers
        self._tasks: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._threads = [threading.Thread(target=self._serve, name=f"{name}-{i}", daemon=True) for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def _serve(self) -> None:
        while (task := self._tasks.get()) is not None:
            future, fn, args = task
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the task
                    future.set_exception(exc)
            del task, future, fn, args

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._tasks.put((future, fn, args))
        return future

    def close(self) -> None:
        """Let the threads end once idle; one held by a call that hangs is left to the process's exit."""
        for _ in self._threads:
            self._tasks.put(None)


@dataclass(eq=False)
class _Job:
    future: Future[Any]
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    deaths: int = 0
    running: bool = False  # handed to a worker once (its future says so)


@dataclass(eq=False)
class _Slot:
    process: Any
    pipe: Any
    job: _Job | None = None
    ready: bool = False  # started: it said so once its setup was done
    failed_starts: int = 0  # workers in a row that died here before they were ready


class Processes:
    """Spawned worker processes (the parent may hold threads, which `fork` would copy in an unknown
    state). `setup`, a module-level function and its arguments, runs once in each worker before
    its first task (loading what every task reads); when it fails, every task of that worker fails
    with its traceback. A thread of this process hands tasks out as workers come free."""

    name = "processes"

    def __init__(
        self,
        workers: int,
        *,
        setup: tuple[Callable[..., Any], tuple[Any, ...]] | None = None,
        tries: int = TRIES,
        name: str = "ragaudit-worker",
        when_ready: bool = False,
    ):
        """`when_ready`: a task goes to a worker only once it has started (else at once, to wait in
        its pipe); until then it stays here, where `cancel` takes it back, for a caller that does
        the work itself meanwhile (`validate`)."""
        import multiprocessing

        self.workers, self.tries, self._setup, self._name = workers, tries, setup, name
        self.when_ready = when_ready
        self._mp = multiprocessing.get_context("spawn")
        self._queue: deque[_Job] = deque()
        self._lock = threading.Lock()
        self._closed = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._slots: list[_Slot] = []
        try:
            for _ in range(workers):
                self._slots.append(self._start())
        except BaseException:
            self.close()
            raise
        self._thread = threading.Thread(target=self._dispatch, name=f"{name}-dispatch", daemon=True)
        self._thread.start()

    def _start(self) -> _Slot:
        ours, theirs = self._mp.Pipe()
        process = self._mp.Process(target=_serve, args=(theirs, self._setup, os.getpid()), name=self._name, daemon=True)
        process.start()
        theirs.close()  # so that the worker alone holds its end, and sees ours close
        return _Slot(process, ours)

    def pids(self) -> list[int]:
        """The worker processes' ids, as they are now."""
        return [slot.process.pid for slot in self._slots]

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._closed or not self._slots:
                raise RuntimeError("the executor is closed" if self._closed else "no worker process could start")
            self._queue.append(_Job(future, fn, args))
        self._wake()
        return future

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def _dispatch(self) -> None:
        from multiprocessing.connection import wait

        while not self._closed:
            self._hand_out()
            pipes = {slot.pipe: slot for slot in self._slots}
            for ready in wait([*pipes, self._wake_r]):
                if ready == self._wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._wake_r, 4096)
                elif not self._closed:
                    self._receive(pipes[ready])

    def _hand_out(self) -> None:
        with self._lock:
            for slot in self._slots:
                while slot.job is None and (slot.ready or not self.when_ready) and self._queue:
                    job = self._queue.popleft()
                    if not job.running and not job.future.set_running_or_notify_cancel():
                        continue  # cancelled while it waited
                    job.running = True
                    slot.job = job
                    try:
                        slot.pipe.send_bytes(dumps((job.fn, job.args)))
                    except OSError:
                        pass  # the worker is gone: its pipe reads as closed, and the job goes elsewhere
                    except Exception as exc:  # noqa: BLE001 - arguments pickle refuses fail their task
                        slot.job = None
                        job.future.set_exception(exc)

    def _receive(self, slot: _Slot) -> None:
        try:
            reply = received(slot.pipe)
        except (EOFError, OSError):
            self._replace(slot)
            return
        except Exception as unreadable:  # noqa: BLE001 - a reply this process cannot rebuild fails its task, not the pool
            reply = ("raised", RuntimeError(f"the worker's reply cannot be read here: {unreadable!r}"), "")
        if reply[0] == "ready":
            slot.ready = True
            return
        job, slot.job = slot.job, None
        if job is None:
            return
        if reply[0] == "done":
            job.future.set_result(reply[1])
        else:
            exc = reply[1]
            exc.__cause__ = RemoteTraceback(reply[2])
            job.future.set_exception(exc)

    def _replace(self, slot: _Slot) -> None:
        """A worker died: start another in its place, and give its task to the next free worker, or
        give the task up once it has ended `tries` workers."""
        slot.process.join(1)
        slot.pipe.close()
        job = slot.job
        ready = slot.ready
        failed_starts = 0 if ready else slot.failed_starts + 1
        fresh: _Slot | BaseException
        try:
            # workers that keep dying before they are ready would never stop being replaced
            fresh = (
                self._start()
                if failed_starts < START_TRIES
                else RuntimeError(f"worker processes die as they start (exit code {slot.process.exitcode})")
            )
        except Exception as exc:  # noqa: BLE001 - no worker can start
            fresh = exc
        if isinstance(fresh, _Slot):
            slot.process, slot.pipe, slot.job, slot.ready = fresh.process, fresh.pipe, None, False
            slot.failed_starts = failed_starts
        else:
            with self._lock:
                self._slots.remove(slot)
        if job is not None:
            job.deaths += 1 if ready else 0  # a worker that was not ready never ran its task
            if job.deaths >= self.tries:
                job.future.set_exception(WorkerDied(job.deaths))
            else:
                with self._lock:
                    self._queue.appendleft(job)
        if not self._slots:
            self._fail_all(fresh if isinstance(fresh, BaseException) else RuntimeError("no worker process"))

    def _fail_all(self, exc: BaseException) -> None:
        with self._lock:
            waiting, self._queue = list(self._queue), deque()
        for job in waiting:
            if job.running or job.future.set_running_or_notify_cancel():
                job.future.set_exception(exc)

    def close(self) -> None:
        """End the workers: idle ones when told, busy ones (their task is no longer wanted) at once.
        Tasks still waiting are cancelled."""
        with self._lock:
            self._closed = True
            waiting, self._queue = list(self._queue), deque()
        self._wake()
        thread = getattr(self, "_thread", None)
        if thread is not None:
            thread.join(5)
        for job in waiting:
            job.future.cancel()
        for slot in self._slots:
            held = slot.job
            with contextlib.suppress(OSError, ValueError):
                if held is None:
                    slot.pipe.send(None)
            slot.pipe.close()
            if held is not None:
                slot.process.terminate()
                if not held.future.done():
                    held.future.set_exception(RuntimeError("the executor was closed"))
        for slot in self._slots:
            slot.process.join(5)
            if slot.process.is_alive():
                slot.process.kill()
                slot.process.join()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)


def _serve(pipe: Connection[Any, Any], setup: tuple[Callable[..., Any], tuple[Any, ...]] | None, parent: int) -> None:
    """A worker's life: the setup once, then tasks until told to stop or orphaned."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ctrl-C is for the parent, which stops us
    # the parent's id as the parent saw it: it may have died before this process got here
    threading.Thread(target=_watch_parent, args=(parent,), name="ragaudit-parent-watch", daemon=True).start()
    broken: tuple[str, BaseException, str] | None = None
    if setup is not None:
        try:
            setup[0](*setup[1])
        except Exception as exc:  # noqa: BLE001 - every task of this worker reports it
            broken = _raised(exc)
    try:
        pipe.send(("ready", None))
    except OSError:
        return
    while True:
        enabled = gc.isenabled()
        gc.disable()  # as for `received`; and through the task too, when it runs `without_collector`
        try:
            try:
                task = pipe.recv()
            except (EOFError, OSError):
                return  # the parent is gone
            if task is None:
                return
            if enabled and not getattr(task[0], "without_collector", False):
                gc.enable()
            reply: tuple[Any, ...]
            if broken is not None:
                reply = broken
            else:
                try:
                    reply = ("done", task[0](*task[1]))
                except Exception as exc:  # noqa: BLE001 - handed to the parent, with where it was raised
                    reply = _raised(exc)
            del task
        finally:
            if enabled:
                gc.enable()
        try:
            pipe.send_bytes(dumps(reply))
        except OSError:
            return
        except Exception as exc:  # noqa: BLE001 - a result pickle refuses fails its task
            with contextlib.suppress(OSError):
                pipe.send(_raised(exc))


def _watch_parent(parent: int) -> None:
    """End this worker once its parent is gone, even in a task that never returns."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(1)


def _raised(exc: BaseException) -> tuple[str, BaseException, str]:
    """An exception as a reply the parent can read: the exception itself when it survives pickling,
    else a RuntimeError saying what it was; with its traceback either way."""
    text = "".join(traceback.format_exception(exc))
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - an exception of a class that cannot be rebuilt
        exc = RuntimeError(f"{type(exc).__name__}: {exc}")
    return ("raised", exc, text)
