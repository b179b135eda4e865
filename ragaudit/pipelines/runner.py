"""The runner: gold × variants × seeds × pipelines → traces, on parallel workers.

Runs are written to `traces.jsonl` in plan order (pipeline, question, variant, seed) whatever the
number of workers: a finished run waits in a small reorder buffer until every run before it is
written, so the file never needs sorting afterwards and a killed run loses at most the runs in
flight. A recording (a `replay` pipeline) is streamed in its own order instead of being held in
memory. `--resume` finishes a run without losing or repeating one. Each written trace can also be
handed to a `sink` (the streaming audit), so a run is scored as it goes and its traces are read
once.
"""

from __future__ import annotations

import shutil
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, cast

from ragaudit._version import __version__
from ragaudit.core.errors import InputError, PipelineStartError, Problem, UsageError
from ragaudit.core.execution import ClusterLost, worker_count
from ragaudit.core.markers import ALL_FORMS
from ragaudit.core.plan import PlanIndex
from ragaudit.core.progress import Phase, note, phase
from ragaudit.core.types import LiveIndex, Trace
from ragaudit.io import rundir
from ragaudit.io.config import Config
from ragaudit.io.files import DigestedAppend, sha256_file
from ragaudit.io.runfiles import MANIFEST, TRACES
from ragaudit.io.stream import stream_trace_file
from ragaudit.io.traces import dump_trace
from ragaudit.pipelines.base import Request
from ragaudit.pipelines.inputs import Inputs
from ragaudit.pipelines.pool import PipelinePool
from ragaudit.pipelines.workers import Interrupted, Stopper, run_jobs

if TYPE_CHECKING:
    from ragaudit.auditing.executors import Batch, Cluster, RemotePipeline

__all__ = ["Inputs", "RunResult", "run"]

CALLS_PER_TASK = 32  # pipeline calls a cluster task makes, for pipelines without limits or retries


@dataclass(frozen=True, slots=True)
class Job:
    pipeline: str
    position: int  # in plan order
    request: Request


def parity_break(trace: Trace) -> str | None:
    """The first payload whose analyzer differs from the live index's, as `analyzer_mismatch`
    reports it: analyzer parity stops that pipeline (docs/reference.md §5). Cheap: no other rule runs."""
    live = trace.index.analyzer if trace.index else None
    if not live:
        return None
    for i, p in enumerate(trace.retrieved):
        if p.analyzer and p.analyzer != live:
            return (
                f"{trace.qid} v{trace.variant} s{trace.seed}: $.retrieved[{i}].analyzer is {p.analyzer!r}, "
                f"the live index uses {live!r}"
            )
    return None


@dataclass
class RunResult:
    run_dir: Path
    total: int
    executed: int
    resumed: int
    seconds: float
    aborted: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.executed / self.seconds if self.seconds > 0 else 0.0


def new_run_dir(config: Config, out: Path | None) -> Path:
    root = Path(out) if out else config.audit.out
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    digest = sha256_file(config.path)[:6] if config.path else "nofile"
    base = root / f"{stamp}-{digest}"
    run_dir, n = base, 1
    while True:
        try:
            run_dir.mkdir(parents=True)
            return run_dir
        except FileExistsError:  # another run started in the same second
            n += 1
            run_dir = Path(f"{base}-{n}")


def recover_traces(path: Path, markers: frozenset[str] = ALL_FORMS) -> Iterator[Trace]:
    """The finished runs of an interrupted traces file, one at a time; a torn last line (a kill
    mid-write) is cut off first."""
    if not path.exists() or path.stat().st_size == 0:
        return iter(())
    with open(path, "rb+") as handle:
        size = handle.seek(0, 2)
        handle.seek(max(0, size - (1 << 20)))
        tail = handle.read()
        if not tail.endswith(b"\n"):
            cut = tail.rfind(b"\n")
            handle.truncate(size - len(tail) + cut + 1 if cut >= 0 else 0)
    return stream_trace_file(path, markers=markers)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _check_resume(run_dir: Path, config: Config, inputs: Inputs) -> dict[str, Any]:
    """The manifest of the run to resume; refused (exit 2) when an input changed since."""
    manifest = rundir.read_manifest(run_dir)
    now = rundir.input_record(config, inputs.corpus, version=rundir.hash_version(manifest))["inputs"]
    changed = [name for name in rundir.INPUTS if manifest["inputs"].get(name) != now.get(name)]
    if changed:
        raise UsageError(
            f"{', '.join(changed)} changed since the run in {run_dir}; --resume needs the same "
            "config, gold set, corpus, calibration and support params (start a new run instead)"
        )
    return manifest


def run(
    config: Config,
    *,
    inputs: Inputs | None = None,
    out: Path | None = None,
    resume: Path | None = None,
    workers: int | None = None,
    sink: Callable[[Trace], None] | None = None,
    on_start: Callable[[Path], None] | None = None,
    executor: Cluster | None = None,
) -> RunResult:
    """Run every planned run not yet done; `sink` receives every trace of the run directory
    (recovered ones first), in the order they are stored. `on_start(run_dir)` is called once the
    run directory is known and locked. With an `executor` of processes (`ragaudit.auditing.executors.Cluster`),
    pipeline calls run there (a recording is still read here), with as many in flight as it has
    workers × 2."""
    workers = worker_count(workers, config)
    inputs = inputs or Inputs.from_config(config)
    created = resume is None
    if resume is not None:
        run_dir = Path(resume)
        if not (run_dir / MANIFEST).exists():
            raise InputError(Problem(str(run_dir), "expected a run directory with manifest.json, found none"))
    else:
        run_dir = new_run_dir(config, out)
    try:
        with rundir.locked(run_dir):
            if resume is not None:
                manifest = _check_resume(run_dir, config, inputs)
            else:
                manifest = {
                    "ragaudit_version": __version__,
                    **rundir.input_record(config, inputs.corpus),
                    "seeds": list(config.audit.seeds),
                    "paraphrases": config.audit.paraphrases,
                    "embed_model": config.embedder.model,
                    "started": _now(),
                }
                rundir.write_manifest(run_dir, manifest)
            if on_start is not None:
                on_start(run_dir)
            return _Run(run_dir, manifest, config, inputs, workers, sink, executor).go()
    except PipelineStartError:
        traces = run_dir / TRACES
        if created and (not traces.exists() or traces.stat().st_size == 0):
            shutil.rmtree(run_dir, ignore_errors=True)  # nothing ran: leave no run directory behind
        raise


class _Run:
    def __init__(
        self,
        run_dir: Path,
        manifest: dict[str, Any],
        config: Config,
        inputs: Inputs,
        workers: int,
        sink: Callable[[Trace], None] | None,
        executor: Cluster | None = None,
    ) -> None:
        self.run_dir, self.manifest, self.config, self.inputs = run_dir, manifest, config, inputs
        self.workers, self.sink, self.executor = workers, sink or (lambda trace: None), executor
        self.plan = PlanIndex(config, inputs.items)
        self.cuts: dict[str, tuple[int, str]] = {}  # pipeline -> plan position and message of its parity break
        self.pools: dict[str, PipelinePool] = {}
        self.shown: Phase | None = None  # the "runs" phase, while it runs
        self.written = self.resumed = 0
        self.seen_index: dict[str, LiveIndex] = {}  # pipeline -> the live index of its latest trace naming one
        self.k = {p.name: p.options.get("k") or config.metrics.k for p in config.pipelines}

    def go(self) -> RunResult:
        for trace in recover_traces(self.run_dir / TRACES, self.config.audit.marker_forms):
            self.plan.mark(trace)
            self._parity(trace)
            self._saw_index(trace)
            self.sink(trace)
            self.resumed += 1
        warnings: list[str] = []
        note(
            f"plan: {self.plan.size:,} runs (pipelines {len(self.config.pipelines)}, questions "
            f"{len(self.inputs.items)}, variants up to {self.config.audit.paraphrases}, "
            f"seeds {len(self.config.audit.seeds)}), {self.resumed:,} already done; workers {self.workers}"
        )

        def kill_all() -> None:
            for pool in list(self.pools.values()):
                pool.kill()

        stopper = Stopper(kill_all)
        started = time.monotonic()
        with (
            stopper,
            DigestedAppend(self.run_dir / TRACES) as out,
            phase("runs", total=self.plan.size, unit="runs", done=self.resumed) as self.shown,
        ):
            self.out = out
            try:
                for spec in self.config.pipelines:
                    if self._halted(stopper) or spec.name in self.cuts or not any(self.plan.missing([spec.name])):
                        continue
                    if self.executor is not None and spec.kind != "replay":
                        pool = PipelinePool(spec, None, 1, instance=self.executor.pipeline(spec.name))
                        slots = self.executor.in_flight
                    else:
                        building = f"indexing {spec.name}" if spec.kind == "reference" else f"starting {spec.name}"
                        with phase(building, counts_as="indexing" if spec.kind == "reference" else "starting"):
                            pool = PipelinePool(spec, self.inputs, self.workers)
                        slots = self.workers
                    self.pools[spec.name] = pool
                    if self.executor is not None and spec.kind != "replay" and not pool.policy.active:
                        remote = cast("RemotePipeline", pool.instances[0])  # the cluster's, given to the pool above
                        self._ask_in_chunks(spec.name, remote, stopper)
                    elif getattr(pool.instances[0], "streams", False):
                        self._stream(spec.name, pool, stopper)
                    else:
                        with phase(f"preparing {spec.name}", counts_as="indexing"):  # the answerer's vectors
                            pool.prepare(
                                list(
                                    dict.fromkeys(
                                        q
                                        for i in self.inputs.items
                                        for q in i.variants[: self.config.audit.paraphrases]
                                    )
                                )
                            )
                        self._ask(spec.name, pool, stopper, slots)
            finally:
                for name, pool in self.pools.items():
                    warnings += pool.close()
        self.shown = None
        seconds = time.monotonic() - started
        if stopper.stopped:
            signum = stopper.signum or signal.SIGTERM
            name = signal.Signals(signum).name
            raise Interrupted(
                signum,
                f"interrupted by {name}: {self.resumed + self.written} finished runs "
                f"kept in {self.run_dir}; finish with: ragaudit run {self.config.path} "
                f"--resume {self.run_dir}",
            )
        lost = self.executor.lost if self.executor is not None else None
        if lost is not None:  # the calls that were out on it are written, as errors naming its workers
            raise ClusterLost(
                f"{lost}; the run stopped: {self.resumed + self.written} finished runs kept in {self.run_dir} "
                "(a call that was out on the cluster is its run's error); finish on a cluster with workers: "
                f"ragaudit run {self.config.path} --resume {self.run_dir}"
            )
        # every pipeline keeps its identity: as its instance reports it now, else as the run (or the
        # run it resumes) last recorded it, else from its latest trace that names one
        names = {p.name for p in self.config.pipelines}
        index: dict[str, dict[str, Any] | None] = {name: None for name in self.pools}
        index.update({k: _as_dict(v) for k, v in self.seen_index.items() if k in names})
        index.update({k: v for k, v in (self.manifest.get("index") or {}).items() if k in names and v is not None})
        index.update({name: found for name, pool in self.pools.items() if (found := _index_dict(pool)) is not None})
        aborted = {name: message for name, (_, message) in sorted(self.cuts.items())}
        rundir.write_manifest(
            self.run_dir,
            {
                **self.manifest,
                "finished": _now(),
                "aborted": aborted,
                "index": dict(sorted(index.items())),
                "traces_sha256": self.out.hexdigest(),  # hashed as it was written
            },
        )
        return RunResult(self.run_dir, self.plan.size, self.written, self.resumed, seconds, aborted, warnings)

    def _halted(self, stopper: Stopper) -> bool:
        """A stop signal came, or the cluster the run is on lost every worker: nothing new is asked."""
        return stopper.stopped or (self.executor is not None and self.executor.lost is not None)

    def _saw_index(self, trace: Trace) -> None:
        if trace.index is not None and trace.config:
            self.seen_index[trace.config] = trace.index

    def _parity(self, trace: Trace) -> bool:
        """Record a parity break; True when the trace comes after its pipeline's break (not kept)."""
        pipeline = trace.config or ""
        at = self.plan.position(pipeline, trace.qid, trace.variant, trace.seed)
        cut = self.cuts.get(pipeline)
        if cut is not None and at is not None and at > cut[0]:
            return True
        message = parity_break(trace)
        if message and cut is None:
            self.cuts[pipeline] = (at if at is not None else self.plan.size, message)
        return False

    def _write(self, trace: Trace, *, flush: bool = True) -> None:
        """Store a finished run. `flush=False` for a recording's runs: what a kill leaves unwritten
        is read again from the recording by --resume (a torn last line is cut off), whereas a
        pipeline's call is never lost once it returned."""
        if self._parity(trace):
            return
        self.out.write(dump_trace(trace) + "\n")
        if flush:
            self.out.flush()
        self.plan.mark(trace)
        self._saw_index(trace)
        self.sink(trace)
        self.written += 1
        if self.shown is not None:
            self.shown.advance()

    def _jobs(self, name: str) -> Iterator[Job]:
        for r in self.plan.missing([name]):
            at = cast(int, self.plan.position(r.pipeline, r.qid, r.variant, r.seed))  # a missing run is in the plan
            yield Job(name, at, Request(r.qid, r.variant, r.seed, r.query, self.k[name]))

    def _ask(self, name: str, pool: PipelinePool, stopper: Stopper, slots: int) -> None:
        """Request/response pipelines: jobs go out in plan order; each result waits until every
        earlier job's result is written (at most 2 × workers are in flight)."""
        waiting: dict[int, Trace] = {}
        order: deque[int] = deque()  # positions submitted and not yet written, in plan order

        def skip(job: Job) -> bool:
            cut = self.cuts.get(name)
            if (cut is not None and job.position > cut[0]) or self._halted(stopper):
                return True
            order.append(job.position)
            return False

        for job, outcome in run_jobs(
            self._jobs(name), lambda j: pool.run(j.request), workers=slots, stopper=stopper, skip=skip
        ):
            if isinstance(outcome, ClusterLost):
                continue  # asked once the cluster was lost, never sent: --resume asks it
            if isinstance(outcome, BaseException):
                raise outcome
            if stopper.stopped and outcome.error is not None:
                continue  # most likely cut short by the stop itself: --resume runs it again
            waiting[job.position] = outcome
            while order and order[0] in waiting:
                self._write(waiting.pop(order.popleft()))
        while order and order[0] in waiting:  # after a stop: what is contiguous
            self._write(waiting.pop(order.popleft()))

    def _ask_in_chunks(self, name: str, remote: RemotePipeline, stopper: Stopper) -> None:
        """A pipeline on a cluster with no limits, retries or cache: its jobs go out in plan-ordered
        chunks of CALLS_PER_TASK, one task each, and come back written chunk by chunk in order."""
        jobs = self._jobs(name)
        cluster = cast("Cluster", self.executor)  # a pipeline on a cluster: the run has one
        pending: deque[Batch] = deque()
        while not self._halted(stopper) and name not in self.cuts:
            chunk = list(islice(jobs, CALLS_PER_TASK))
            if not chunk:
                break
            try:
                pending.append(remote.submit_many([job.request for job in chunk]))
            except ClusterLost:  # never sent: --resume asks them; the chunks out on it are written as errors
                break
            while pending and (pending[0].done() or len(pending) >= cluster.in_flight):
                for trace in remote.results(pending.popleft()):
                    self._write(trace)
        while pending and not stopper.stopped and name not in self.cuts:
            for trace in remote.results(pending.popleft()):
                self._write(trace)
        for future in pending:  # after a stop or a parity break: --resume runs them
            future.cancel()

    def _stream(self, name: str, pool: PipelinePool, stopper: Stopper) -> None:
        """A recording: its runs in the recording's order, then a not-recorded error for each
        planned run it lacks."""
        replay: Any = pool.instances[0]  # a ReplayPipeline: it streams its recording
        for trace in replay.recorded():
            if stopper.stopped or name in self.cuts:
                return
            at = self.plan.position(name, trace.qid, trace.variant, trace.seed)
            if at is not None and not self.plan.done[at]:
                self._write(trace, flush=False)
        self.out.flush()
        for job in self._jobs(name):
            if stopper.stopped or name in self.cuts:
                return
            self._write(replay.run(job.request))


def _index_dict(pool: PipelinePool) -> dict[str, Any] | None:
    info = pool.instances[0].index_info()
    return None if info is None else _as_dict(info)


def _as_dict(info: LiveIndex) -> dict[str, Any]:
    return {
        "index_hash": info.index_hash,
        "analyzer": info.analyzer,
        "embed_model": info.embed_model,
        "store": info.store,
    }
