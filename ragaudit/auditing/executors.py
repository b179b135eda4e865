"""Where the work of a run happens: in this process (`local`, the default: worker threads, best
for pipelines that wait on a service), in worker processes on this machine (`processes`: for
CPU-bound pipelines, which threads do not speed up), or on a Dask cluster (`dask`). The last two
are the same thing for a run (`Cluster`): executors of `ragaudit.core.execution` whose workers are
processes, one thread each for `processes` (`ragaudit.core.execution.Processes`), those of the cluster
for `dask` (`DaskClient`). Both take the pipeline calls and the scoring of batches of runs.

Every worker process builds what it needs once, from the config file, and keeps it: the gold
set, the corpus, the encoder and support scorer for scoring, and one instance of each pipeline
per worker thread for calls (a `python` pipeline's factory runs once per worker thread, as it runs
once per local worker). The config, gold set and corpus must therefore be readable at the same
paths on every machine (a shared folder), and the model installed there too. Results come back in
the order they were asked for and fold together exactly as a local run's would: the report of a
run on processes is the report of the same run done locally. A task whose worker dies is given to another;
a call that kills every worker it is given to becomes that run's `pipeline_error`.

No wait on a cluster is endless. A Dask cluster whose workers are all gone (a nanny that cannot
restart them, a machine that went away) is given `[executor] worker_wait_s` to have one again;
then it is lost (`ClusterLost`): the calls out on it become `pipeline_error`s naming the workers it
had, nothing more is sent, and the run stops with exit 4, its finished runs kept for `--resume`.
Worker processes of this machine that cannot start again fail their tasks at once
(`ragaudit.core.execution.Processes`).
"""

from __future__ import annotations

import gc
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ragaudit.auditing.dask_tasks import DaskTask, DaskWorkers
from ragaudit.core.errors import PipelineStartError, UsageError, require
from ragaudit.core.execution import ClusterLost, Executor, Processes, Task, WorkerDied
from ragaudit.core.types import EXECUTORS
from ragaudit.core.wire import without_collector
from ragaudit.io.files import sha256_file

if TYPE_CHECKING:
    from ragaudit.auditing.audit import Scoring
    from ragaudit.core.types import GoldItem, LiveIndex, Trace
    from ragaudit.pipelines.base import Pipeline, Request
    from ragaudit.pipelines.inputs import Inputs

CONNECT_TIMEOUT_S = 30  # how long a scheduler that does not answer is waited for (then exit 4)
WORKER_WAIT_S = 120.0  # [executor] worker_wait_s: how long a cluster left without a worker may take to have one
_cached: dict[tuple[str, str], Inputs] = {}  # on a worker: (config path, digest) -> Inputs
_pipelines = threading.local()


def _inputs(config_path: str, digest: str) -> Inputs:
    key = (config_path, digest)
    if key not in _cached:
        from ragaudit.io.config import load_config
        from ragaudit.pipelines.inputs import Inputs

        if sha256_file(Path(config_path)) != digest:
            raise UsageError(f"{config_path} on this worker differs from the config of the run")
        _cached[key] = Inputs.from_config(load_config(config_path))
        gc.freeze()  # the gold set and corpus are never garbage: collections skip them, as in the parent
    return _cached[key]


def _worker_pipeline(config_path: str, digest: str, name: str) -> Pipeline:
    """This worker thread's own instance of a pipeline, built on first use."""
    from ragaudit.pipelines.pool import build_pipeline

    inputs = _inputs(config_path, digest)
    mine: dict[tuple[str, str, str], Pipeline] | None = getattr(_pipelines, "built", None)
    if mine is None:
        mine = _pipelines.built = {}
    if (config_path, digest, name) not in mine:
        spec = next(p for p in inputs.config.pipelines if p.name == name)
        mine[(config_path, digest, name)] = build_pipeline(spec, inputs)
    return mine[(config_path, digest, name)]


def remote_run(config_path: str, digest: str, name: str, request: Request) -> tuple[Trace, LiveIndex | None]:
    """One pipeline call on a worker."""
    pipeline = _worker_pipeline(config_path, digest, name)
    return pipeline.run(request), pipeline.index_info()


def remote_run_many(
    config_path: str, digest: str, name: str, requests: list[Request]
) -> tuple[list[Trace], LiveIndex | None]:
    """Several pipeline calls on a worker, in order: one task for many short calls."""
    pipeline = _worker_pipeline(config_path, digest, name)
    return [pipeline.run(request) for request in requests], pipeline.index_info()


@without_collector
def remote_score(config_path: str, digest: str, traces: list[Trace], keep: bool) -> Scoring:
    """Validate and score one batch of runs on a worker."""
    from ragaudit.auditing.audit import score_batch
    from ragaudit.checks.metrics.evaluate import Settings

    inputs = _inputs(config_path, digest)
    gold: dict[str, GoldItem] = {}
    for item in inputs.items:
        gold.setdefault(item.qid, item)
    # as in this process's own scoring (StreamingAudit): a batch makes no cycles worth collecting
    enabled = gc.isenabled()
    gc.disable()
    try:
        return score_batch(inputs, Settings.from_config(inputs.config), gold, traces, keep=keep)
    finally:
        if enabled:
            gc.enable()


class DaskClient:
    """A Dask cluster as an executor (`ragaudit.core.execution.Executor`): `scheduler` is an address
    (`tcp://host:8786`) or a Client (then left open by `close`). A cluster without a worker for
    `worker_wait_s` seconds is lost (`lost`), and every wait on it ends with ClusterLost."""

    name = "dask"

    def __init__(self, scheduler: Any, *, retries: int = 0, worker_wait_s: float = WORKER_WAIT_S):
        self.owned = scheduler is None or isinstance(scheduler, str)
        self.client = connect(scheduler) if self.owned else scheduler
        self.retries = retries  # times a task that raises is run again
        self.watch = DaskWorkers(self.client, worker_wait_s)

    @property
    def workers(self) -> int:
        try:
            return sum(self.client.nthreads(callback_timeout=CONNECT_TIMEOUT_S).values()) or 1
        except (OSError, TimeoutError):
            raise PipelineStartError(f"the Dask scheduler did not answer within {CONNECT_TIMEOUT_S} s") from None

    @property
    def lost(self) -> ClusterLost | None:
        return self.watch.verdict()

    def submit(self, fn: Callable[..., Any], *args: Any) -> DaskTask:
        if (lost := self.lost) is not None:
            raise lost
        return DaskTask(self.client.submit(fn, *args, pure=False, retries=self.retries or None), self.watch)

    def scatter(self, value: Any) -> Any:
        """`value` sent to every worker once; pass what this returns as a task's argument."""
        try:
            return self.client.scatter(value, broadcast=True, hash=False, timeout=self.watch.wait_s)
        except TimeoutError:  # no worker to send it to, in all that time
            raise ClusterLost(self.watch.said(none_came=True)) from None

    def close(self) -> None:
        if self.owned:
            self.client.close()


class Cluster:
    """A run's pipeline calls and scoring on an executor of processes (`Processes`, `DaskClient`)."""

    def __init__(self, executor: Executor, config_path: Path, *, in_flight: int | None = None):
        self.executor = executor
        self.name = executor.name
        self.config_path = str(Path(config_path).resolve())
        self.digest = sha256_file(Path(self.config_path))
        self.in_flight = in_flight or 2 * executor.workers  # pipeline calls out at once
        # batches of runs out for scoring while this process reads the next. On this machine, one
        # per worker: the core a worker leaves while the next batch is read goes to the reading, and
        # more batches would only hold their runs and make the end of a run wait for the last of
        # them. A cluster's workers have cores of their own: as many as pipeline calls.
        self.scoring_ahead = executor.workers if isinstance(executor, Processes) else self.in_flight

    def submit(self, fn: Callable[..., Any], *args: Any) -> Task:
        return self.executor.submit(fn, self.config_path, self.digest, *args)

    def pipeline(self, name: str) -> RemotePipeline:
        return RemotePipeline(self, name)

    def scorer(self, keep: bool) -> RemoteScoring:
        return RemoteScoring(self, keep)

    @property
    def lost(self) -> ClusterLost | None:
        """ClusterLost once the executor's workers are gone for good (a Dask cluster's), else None."""
        return getattr(self.executor, "lost", None)

    @property
    def on_this_machine(self) -> Executor | None:
        """The executor, when its workers are processes of this machine, which see this machine's
        files (`--executor processes`); None for a cluster."""
        return self.executor if isinstance(self.executor, Processes) else None

    def close(self) -> None:
        self.executor.close()


class RemotePipeline:
    """A pipeline whose calls run on the cluster; the runner treats it as a shared instance.

    A call that ends its worker process (os._exit, a segmentation fault, the memory limit) is
    given to another worker, as any task whose worker dies; when it ends every worker it is given
    to, the executor gives up on it (WorkerDied) and that run becomes a `pipeline_error`; the
    other runs go on. A task of several calls that the cluster gives up on is asked again one call
    per task, so only the call that kills its worker is lost. A call given up on is asked once more,
    alone, before it counts as an error: a call that ran or waited on a worker beside one that
    killed it shares its deaths. A call out on a cluster that lost every worker becomes that run's
    error too, naming the workers (ClusterLost); one asked after that raises it, never sent."""

    def __init__(self, executor: Cluster, name: str):
        self.executor, self.name = executor, name
        self._index: LiveIndex | None = None
        self._futures: set[Task] = set()
        self.killed = False

    def run(self, request: Request) -> Trace:
        if self.killed:
            from ragaudit.pipelines.base import error_trace

            return error_trace(self.name, request, f"pipeline {self.name!r} was stopped")
        return self._call(request, again=True)

    def _call(self, request: Request, *, again: bool) -> Trace:
        """One call in a task of its own; when the cluster gives up on it, once more (`again`): a
        call can be given up on for sharing a worker with one that kills it."""
        future = self.executor.submit(remote_run, self.name, request)  # ClusterLost: never sent, not a run
        self._futures.add(future)
        try:
            answered: tuple[Trace, LiveIndex | None] = future.result()  # remote_run's
            trace, index = answered
        except WorkerDied as exc:  # a call that kills its workers is that run's error
            return self._call(request, again=False) if again and not self.killed else self._died(request, exc)
        except ClusterLost as exc:
            return self._gone(request, exc)
        finally:
            self._futures.discard(future)
        self._index = index or self._index
        return trace

    def submit_many(self, requests: list[Request]) -> Batch:
        """Send several calls as one task (pipelines without limits or retries: a task costs a few
        milliseconds, a call of a CPU-bound pipeline often less)."""
        return Batch(self.executor.submit(remote_run_many, self.name, requests), requests)

    def results(self, batch: Batch) -> list[Trace]:
        """The traces of a task of `submit_many`, in order; when the cluster gave up on the task,
        each of its calls is asked again in a task of its own."""
        try:
            answered: tuple[list[Trace], LiveIndex | None] = batch.task.result()  # remote_run_many's
            traces, index = answered
        except WorkerDied:  # see the class docstring
            return self._one_by_one(batch.requests)
        except ClusterLost as exc:
            return [self._gone(request, exc) for request in batch.requests]
        self._index = index or self._index
        return traces

    def _one_by_one(self, requests: list[Request]) -> list[Trace]:
        """Each call in a task of its own, all at once; a call the cluster gives up on is asked
        once more, alone, once the others are done."""
        futures: list[Task] = []
        traces: list[Trace | None] = []
        try:
            for request in requests:
                futures.append(self.executor.submit(remote_run, self.name, request))
                self._futures.add(futures[-1])
            for future, request in zip(futures, requests):
                try:
                    trace, index = future.result()
                except WorkerDied:  # see the class docstring
                    trace, index = None, None  # asked again once the others are done
                self._index = index or self._index
                traces.append(trace)
        except ClusterLost as exc:  # the calls of the task were out on the cluster: each is that run's error
            traces += [self._gone(request, exc) for request in requests[len(traces) :]]
            for future in futures:
                future.cancel()
        finally:
            for future in futures:
                self._futures.discard(future)
        out = []
        for request, trace in zip(requests, traces):
            if trace is None:
                try:
                    trace = self._call(request, again=False)
                except ClusterLost as exc:
                    trace = self._gone(request, exc)
            out.append(trace)
        return out

    def _died(self, request: Request, exc: WorkerDied) -> Trace:
        from ragaudit.pipelines.base import error_trace

        times = f" {exc.deaths} times, on as many workers" if exc.deaths else ""
        return error_trace(
            self.name,
            request,
            f"WorkerDied: the worker process running this call died{times} (the pipeline ended its process: "
            "os._exit, a crash such as a segmentation fault, or the worker's memory limit)",
            self._index,
        )

    def _gone(self, request: Request, exc: ClusterLost) -> Trace:
        from ragaudit.pipelines.base import error_trace

        return error_trace(self.name, request, f"ClusterLost: {exc}", self._index)

    def index_info(self) -> LiveIndex | None:
        return self._index

    def kill(self) -> None:
        self.killed = True
        for future in list(self._futures):
            future.cancel()

    def close(self) -> str | None:
        return None


@dataclass(frozen=True)
class Batch:
    """A task of several pipeline calls, and the calls it makes."""

    task: Task
    requests: list[Request]

    def done(self) -> bool:
        return self.task.done()

    def cancel(self) -> bool:
        return self.task.cancel()


class RemoteScoring:
    """Batches of runs scored on the cluster, handed back in the order they were sent, at most
    `scoring_ahead` of them out once `submit` returns. Scoring never ends a worker of its own doing:
    a batch the cluster gave up on (WorkerDied) shared its workers with pipeline calls that ended
    them, and is sent again, up to TRIES times in all. Once the cluster is lost (ClusterLost) nothing
    more is sent or scored: the run stops, its traces kept, and `drain` raises it."""

    TRIES = 3

    def __init__(self, executor: Cluster, keep: bool):
        self.executor, self.keep = executor, keep
        self._pending: deque[tuple[Task, list[Trace]]] = deque()
        self.lost: ClusterLost | None = None

    def submit(self, batch: list[Trace]) -> list[Scoring]:
        """Send a batch; return the results now ready in order (waiting when too many are out)."""
        if self.lost is not None:
            return []
        ready = []
        try:
            self._pending.append((self.executor.submit(remote_score, batch, self.keep), batch))
            while self._pending and (self._pending[0][0].done() or len(self._pending) > self.executor.scoring_ahead):
                ready.append(self._result(*self._pending.popleft()))
        except ClusterLost as exc:  # the run stops on it (the runner reads Cluster.lost)
            self.lost = exc
            self._pending.clear()
            return []
        return ready

    def drain(self) -> list[Scoring]:
        if self.lost is not None:
            raise self.lost
        out = [self._result(future, batch) for future, batch in self._pending]
        self._pending.clear()
        return out

    def _result(self, future: Task, batch: list[Trace]) -> Scoring:
        for tries in range(1, self.TRIES + 1):
            try:
                scored: Scoring = future.result()  # remote_score's
                return scored
            except WorkerDied:
                if tries == self.TRIES:
                    raise
                future = self.executor.submit(remote_score, batch, self.keep)
        raise AssertionError("unreachable: the last try raises")  # for the type checker: range() may look empty


def connect(scheduler: str | None) -> Any:  # a distributed.Client, whose methods are unannotated
    """A Dask client of the scheduler at `scheduler`; a usage error without one, a start error
    (exit 4) when it cannot be reached."""
    if not scheduler:
        raise UsageError("--executor dask needs --scheduler ADDRESS (or [executor] scheduler in the config)")
    require("distributed", extra="dask", purpose="--executor dask")
    from distributed import Client

    try:
        return Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s")  # type: ignore[no-untyped-call]  # distributed leaves Client.__init__ unannotated
    except OSError as exc:
        raise PipelineStartError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None


def local_processes(workers: int, config_path: Path) -> Cluster:
    """`workers` processes of this machine (`ragaudit.core.execution.Processes`) for a run."""
    return Cluster(Processes(workers), config_path)


def make_executor(
    kind: str,
    scheduler: str | None,
    config_path: Path | None,
    workers: int = 2,
    *,
    worker_wait_s: float = WORKER_WAIT_S,
) -> Cluster | None:
    """Where a run's pipeline calls and scoring go: None for `local` (the runner's own threads).
    `worker_wait_s`: how long a Dask cluster left without a worker may take to have one again."""
    if kind not in EXECUTORS:
        raise UsageError(f"expected an executor in {', '.join(EXECUTORS)}, found {kind!r}")
    if not EXECUTORS[kind].elsewhere:
        return None
    if config_path is None:  # workers build everything from the config file
        raise UsageError(f"the {kind} executor needs a config file")
    if kind == "processes":
        return local_processes(workers, config_path)
    return Cluster(DaskClient(scheduler, retries=1, worker_wait_s=worker_wait_s), config_path)
