"""Where the work of a run happens: in this process (`local`, the default: worker threads, best
for pipelines that wait on a service), in worker processes on this machine (`processes`: for
CPU-bound pipelines, which threads do not speed up), or on a Dask cluster (`dask`). The last two
are the same thing: `processes` is a Dask cluster of this machine's own processes, one thread each.
Both take the pipeline calls and the scoring of batches of runs.

On Dask, every worker builds what it needs once, from the config file, and keeps it: the gold
set, the corpus, the encoder and support scorer for scoring, and one instance of each pipeline
per worker thread for calls (a `python` pipeline's factory runs once per worker thread, as it runs
once per local worker). The config, gold set and corpus must therefore be readable at the same
paths on every machine (a shared folder), and the model installed there too. Results come back in
the order they were asked for and fold together exactly as a local run's would: the report of a
Dask run is the report of the same run done locally. A task whose worker dies is given to another;
a call that kills every worker it is given to becomes that run's `pipeline_error`.
"""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path

from ragaudit.errors import PipelineStartError, UsageError, require
from ragaudit.io.files import sha256_file

KINDS = ("local", "processes", "dask")
CONNECT_TIMEOUT_S = 30  # how long a scheduler that does not answer is waited for (then exit 4)
WATCH_S = 5.0  # how often a wait on a cluster of our own looks whether it still has workers
_cached: dict = {}  # on a worker: (config path, digest) -> Inputs
_pipelines = threading.local()


def _inputs(config_path: str, digest: str):
    key = (config_path, digest)
    if key not in _cached:
        from ragaudit.inputs import Inputs
        from ragaudit.io.config import load_config

        if sha256_file(Path(config_path)) != digest:
            raise UsageError(f"{config_path} on this worker differs from the config of the run")
        _cached[key] = Inputs(load_config(config_path))
    return _cached[key]


def _worker_pipeline(config_path: str, digest: str, name: str):
    """This worker thread's own instance of a pipeline, built on first use."""
    from ragaudit.pipelines.pool import build_pipeline

    inputs = _inputs(config_path, digest)
    mine = getattr(_pipelines, "built", None)
    if mine is None:
        mine = _pipelines.built = {}
    if (config_path, digest, name) not in mine:
        spec = next(p for p in inputs.config.pipelines if p.name == name)
        mine[(config_path, digest, name)] = build_pipeline(spec, inputs)
    return mine[(config_path, digest, name)]


def remote_run(config_path: str, digest: str, name: str, request):
    """One pipeline call on a worker."""
    pipeline = _worker_pipeline(config_path, digest, name)
    return pipeline.run(request), pipeline.index_info()


def remote_run_many(config_path: str, digest: str, name: str, requests: list):
    """Several pipeline calls on a worker, in order: one task for many short calls."""
    pipeline = _worker_pipeline(config_path, digest, name)
    return [pipeline.run(request) for request in requests], pipeline.index_info()


def remote_score(config_path: str, digest: str, traces: list, keep: bool):
    """Validate and score one batch of runs on a worker."""
    from ragaudit.auditing import score_batch
    from ragaudit.metrics.evaluate import Settings

    inputs = _inputs(config_path, digest)
    gold: dict = {}
    for item in inputs.items:
        gold.setdefault(item.qid, item)
    return score_batch(inputs.subject(), Settings.from_config(inputs.config), gold, traces, keep=keep)


class DaskExecutor:
    """A Dask client for one run. `scheduler` is an address (`tcp://host:8786`) or a Client."""

    name = "dask"

    def __init__(
        self, scheduler, config_path: Path, *, in_flight: int | None = None, cluster=None, size: int | None = None
    ):
        """`cluster`: a cluster of our own, of `size` workers, closed with the executor."""
        from distributed import Client

        self.client = scheduler if isinstance(scheduler, Client) else connect(scheduler)
        self.owned = not isinstance(scheduler, Client)
        self.cluster, self.size = cluster, size
        self.config_path = str(Path(config_path).resolve())
        self.digest = sha256_file(Path(self.config_path))
        threads = sum(self.client.nthreads().values()) or 1
        self.in_flight = in_flight or 2 * threads

    def workers(self) -> int:
        return sum(self.client.nthreads().values()) or 1

    def result(self, future):
        """The future's result. On a cluster of our own the wait also keeps the cluster going: a
        worker that a call kills is restarted by its nanny, but a restart can fail (the call may
        kill the new worker as it starts), and a cluster left without any worker would wait
        forever; once it has had none for a while, new workers are started."""
        if self.cluster is None or not self.size:
            return future.result()
        empty = 0
        while True:
            try:
                return future.result(timeout=WATCH_S)
            except TimeoutError:
                pass
            empty = 0 if self.client.nthreads() else empty + 1
            if empty >= 3:
                self._restore()
                empty = 0

    def _restore(self) -> None:
        """Close the nannies left without a worker, then start as many new ones."""
        import time

        self.cluster.scale(0)
        deadline = time.monotonic() + 60
        while self.cluster.workers and time.monotonic() < deadline:
            time.sleep(0.1)
        self.cluster.scale(self.size)

    def pipeline(self, name: str) -> "RemotePipeline":
        return RemotePipeline(self, name)

    def scorer(self, keep: bool) -> "RemoteScoring":
        return RemoteScoring(self, keep)

    def close(self) -> None:
        if self.owned:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()


class RemotePipeline:
    """A pipeline whose calls run on the cluster; the runner treats it as a shared instance.

    A call that ends its worker process (os._exit, a segmentation fault, the memory limit) is
    given to another worker, as any task whose worker dies; when it ends every worker it is given
    to, the cluster gives up on it (KilledWorker) and that run becomes a `pipeline_error`; the
    other runs go on. A task of several calls that the cluster gives up on is asked again one call
    per task, so only the call that kills its worker is lost. A call given up on is asked once more,
    alone, before it counts as an error: a call that ran or waited on a worker beside one that
    killed it shares its deaths."""

    def __init__(self, executor: DaskExecutor, name: str):
        self.executor, self.name = executor, name
        self._index = None
        self._futures: set = set()
        self.killed = False

    def run(self, request):
        if self.killed:
            from ragaudit.pipelines.base import error_trace

            return error_trace(self.name, request, f"pipeline {self.name!r} was stopped")
        return self._call(request, again=True)

    def _call(self, request, *, again: bool):
        """One call in a task of its own; when the cluster gives up on it, once more (`again`): a
        call can be given up on for sharing a worker with one that kills it."""
        future = self._submit(remote_run, request)
        self._futures.add(future)
        try:
            trace, index = self.executor.result(future)
        except PipelineStartError:
            raise
        except Exception as exc:  # noqa: BLE001 - a call that kills its workers is that run's error
            if not _worker_died(exc):
                raise
            return self._call(request, again=False) if again and not self.killed else self._died(request, exc)
        finally:
            self._futures.discard(future)
            future.release()
        self._index = index or self._index
        return trace

    def submit_many(self, requests: list):
        """Send several calls as one task (pipelines without limits or retries: a task costs a few
        milliseconds, a call of a CPU-bound pipeline often less)."""
        future = self._submit(remote_run_many, requests)
        future.requests = requests
        return future

    def results(self, future) -> list:
        """The traces of a task of `submit_many`, in order; when the cluster gave up on the task,
        each of its calls is asked again in a task of its own."""
        try:
            traces, index = self.executor.result(future)
        except PipelineStartError:
            raise
        except Exception as exc:  # noqa: BLE001 - see the class docstring
            if not _worker_died(exc):
                raise
            future.release()
            return self._one_by_one(future.requests)
        future.release()
        self._index = index or self._index
        return traces

    def _one_by_one(self, requests: list) -> list:
        """Each call in a task of its own, all at once; a call the cluster gives up on is asked
        once more, alone, once the others are done."""
        futures = [self._submit(remote_run, request) for request in requests]
        self._futures.update(futures)
        traces: list = []
        try:
            for request, future in zip(requests, futures):
                try:
                    trace, index = self.executor.result(future)
                except PipelineStartError:
                    raise
                except Exception as exc:  # noqa: BLE001 - see the class docstring
                    if not _worker_died(exc):
                        raise
                    trace, index = None, None  # asked again once the others are done
                self._index = index or self._index
                traces.append(trace)
        finally:
            for future in futures:
                self._futures.discard(future)
                future.release()
        return [self._call(r, again=False) if t is None else t for r, t in zip(requests, traces)]

    def _submit(self, function, requests):
        return self.executor.client.submit(
            function, self.executor.config_path, self.executor.digest, self.name, requests, pure=False, retries=1
        )

    def _died(self, request, exc: Exception):
        from ragaudit.pipelines.base import error_trace

        tries = getattr(exc, "allowed_failures", None)
        times = f" {tries + 1} times, on as many workers" if isinstance(tries, int) else ""
        return error_trace(
            self.name,
            request,
            f"WorkerDied: the worker process running this call died{times} (the pipeline ended its process: "
            "os._exit, a crash such as a segmentation fault, or the worker's memory limit)",
            self._index,
        )

    def index_info(self):
        return self._index

    def kill(self) -> None:
        self.killed = True
        for future in list(self._futures):
            future.cancel()

    def close(self) -> str | None:
        return None


def _worker_died(exc: BaseException) -> bool:
    from distributed import KilledWorker

    return isinstance(exc, KilledWorker)


class RemoteScoring:
    """Batches of runs scored on the cluster, handed back in the order they were sent."""

    def __init__(self, executor: DaskExecutor, keep: bool):
        self.executor, self.keep = executor, keep
        self._pending: deque = deque()

    def submit(self, batch: list) -> list:
        """Send a batch; return the results now ready in order (waiting when too many are out)."""
        client = self.executor.client
        self._pending.append(
            client.submit(
                remote_score, self.executor.config_path, self.executor.digest, batch, self.keep, pure=False, retries=1
            )
        )
        ready = []
        while self._pending and (self._pending[0].done() or len(self._pending) > self.executor.in_flight):
            ready.append(self.executor.result(self._pending.popleft()))
        return ready

    def drain(self) -> list:
        out = [self.executor.result(future) for future in self._pending]
        self._pending.clear()
        return out


def connect(scheduler):
    """A Dask client of the scheduler at `scheduler`; a usage error without one, a start error
    (exit 4) when it cannot be reached."""
    if not scheduler:
        raise UsageError("--executor dask needs --scheduler ADDRESS (or [executor] scheduler in the config)")
    require("distributed", extra="dask", purpose="--executor dask")
    from distributed import Client

    try:
        return Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s")
    except OSError as exc:
        raise PipelineStartError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None


def local_processes(workers: int, config_path: Path) -> DaskExecutor:
    """A Dask cluster of `workers` processes on this machine, one thread each."""
    require("distributed", extra="dask", purpose="--executor processes")
    import dask
    from distributed import LocalCluster

    # A worker is sent only the task it runs, so when a call kills it few others share the blame;
    # and a task is given up on after its second dead worker, not its fourth: each death is a
    # restart, and a call that kills is asked again alone anyway.
    settings = {"distributed.scheduler.worker-saturation": 1.0, "distributed.scheduler.allowed-failures": 1}
    with dask.config.set(settings):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    try:
        return DaskExecutor(cluster.scheduler_address, config_path, cluster=cluster, size=workers)
    except BaseException:
        cluster.close()
        raise


def make_executor(kind: str, scheduler, config_path: Path | None, workers: int = 2):
    if kind == "local":
        return None
    if config_path is None:  # workers build everything from the config file
        raise UsageError(f"the {kind} executor needs a config file")
    if kind == "processes":
        return local_processes(workers, config_path)
    if kind == "dask":
        return DaskExecutor(scheduler, config_path)
    raise UsageError(f"expected an executor in {', '.join(KINDS)}, found {kind!r}")
