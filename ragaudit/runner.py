"""The runner: gold × variants × seeds × pipelines → traces, on parallel workers.

Each finished run is appended to `traces.jsonl` as one line and flushed, so a killed run loses at
most the runs in flight; `--resume` finishes it without losing or repeating a run. What the
runner writes in the end is sorted by run, so it does not depend on the worker count.
"""
from __future__ import annotations

import queue
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ragaudit import __version__, rundir
from ragaudit.errors import InputError, PipelineStartError, Problem, UsageError
from ragaudit.io.config import Config, PipelineConfig
from ragaudit.io.corpus import load_corpus
from ragaudit.io.files import atomic_path, sha256_file
from ragaudit.io.gold import read_gold
from ragaudit.io.traces import dump_trace, read_trace_file
from ragaudit.pipelines.base import Pipeline, Request, error_trace
from ragaudit.plan import planned_runs, run_order
from ragaudit.rundir import MANIFEST, TRACES
from ragaudit.types import Corpus, GoldItem, Issue, Trace
from ragaudit.validate import Context, parity_failure
from ragaudit.workers import Interrupted, Progress, Stopper, run_jobs


@dataclass(frozen=True, slots=True)
class Job:
    pipeline: str
    request: Request

    @property
    def key(self) -> tuple[str, str, int, int]:
        return (self.pipeline, self.request.qid, self.request.variant, self.request.seed)


def plan(config: Config, items: list[GoldItem]) -> list[Job]:
    """Every run, in a fixed order: pipeline, question, variant, seed."""
    k = {p.name: p.options.get("k") or config.metrics.get("k", 5) for p in config.pipelines}
    return [Job(r.pipeline, Request(r.qid, r.variant, r.seed, r.query, k[r.pipeline]))
            for r in planned_runs(config, items)]


# ---- building pipelines --------------------------------------------------------------------

class Inputs:
    """The gold set, corpus and (lazily) the encoder and support scorer one run shares across
    its pipelines and its audit."""

    def __init__(self, config: Config, *, encoder=None, support=None):
        if config.gold is None or config.corpus is None:
            raise UsageError(f"{config.path}: [audit] needs gold and corpus paths")
        self.config = config
        self.corpus: Corpus = load_corpus(config.corpus)
        items, problems = read_gold(config.gold)
        if problems:
            raise InputError(problems)
        self.items = items
        self._encoder = encoder
        self._support = support
        self._lock = threading.Lock()

    @property
    def encoder(self):
        with self._lock:
            if self._encoder is None:
                from ragaudit.metrics.embed import make_encoder
                self._encoder = make_encoder(self.config.model)
            return self._encoder

    @property
    def support(self):
        if self._support is None:
            from ragaudit.metrics.support import make_support_scorer
            options = self.config.support
            self._support = make_support_scorer(options["model"] and str(options["model"]),
                                                params=options["params"] and str(options["params"]),
                                                encoder=self.encoder)
        return self._support

    def check_gold(self, *, strict: bool = True) -> list[Issue]:
        """The gold set's findings against the corpus, as `ragaudit gold check` reports them.
        With `strict`, an error finding stops the run (InputError); a duplicate qid always does."""
        from ragaudit.validate.gold import check_gold
        found = check_gold(self.items, self.corpus, file=str(self.config.gold), paraphrases=self.config.paraphrases,
                           encoder=self.encoder)
        fatal = [i for i in found if i.severity == "error" and (strict or i.code == "gold_duplicate_qid")]
        if fatal:
            raise InputError([Problem(i.file or str(self.config.gold), f"{i.code}: {i.message}", i.line, i.path)
                              for i in fatal])
        return found

    def subject(self, gold_findings: list[Issue] = ()):
        from ragaudit.audit import Subject
        return Subject(self.config, self.items, self.corpus, self.encoder, self.support, list(gold_findings))


def build_pipeline(spec: PipelineConfig, inputs: Inputs) -> Pipeline:
    o, unit = spec.options, inputs.config.offset_unit
    if spec.kind == "reference":
        from ragaudit.pipelines.reference import ReferencePipeline
        return ReferencePipeline(spec.name, inputs.corpus, retriever=o["retriever"], analyzer=o["analyzer"],
                                 k=o["k"], chunk_size=o["chunk_size"], chunk_overlap=o["chunk_overlap"],
                                 rerank=o["rerank"], temperature=o["temperature"], encoder=inputs.encoder)
    if spec.kind == "replay":
        from ragaudit.pipelines.replay import ReplayPipeline
        if o["traces"] is None:
            raise UsageError(f"pipeline {spec.name!r}: a replay pipeline needs `traces`")
        return ReplayPipeline(spec.name, o["traces"], offset_unit=unit)
    if spec.kind == "python":
        from ragaudit.pipelines.python import PythonPipeline
        if not o["factory"]:
            raise UsageError(f"pipeline {spec.name!r}: a python pipeline needs `factory = \"module:callable\"`")
        folder = str(Path(inputs.config.path).parent.resolve()) if inputs.config.path else None
        return PythonPipeline(spec.name, o["factory"], o["options"], offset_unit=unit, timeout_s=o["timeout_s"],
                              search_path=folder)
    if spec.kind == "command":
        from ragaudit.pipelines.command import CommandPipeline
        if not o["command"]:
            raise UsageError(f"pipeline {spec.name!r}: a command pipeline needs `command = [...]`")
        cwd = str(inputs.config.path.parent) if inputs.config.path else None
        return CommandPipeline(spec.name, o["command"], timeout_s=o["timeout_s"], cwd=cwd, offset_unit=unit)
    raise UsageError(f"pipeline {spec.name!r}: unknown kind {spec.kind!r}")


SHARED_KINDS = ("reference", "replay")  # one instance serves every worker; others get one per worker


class PipelinePool:
    """Instances of one pipeline handed to workers one at a time. User code that misbehaves here
    (a factory that calls sys.exit, a close() that raises) becomes a start error or a warning,
    never ragaudit's own exit."""

    def __init__(self, spec: PipelineConfig, inputs: Inputs, workers: int):
        self.spec = spec
        size = 1 if spec.kind in SHARED_KINDS else workers
        self.shared = spec.kind in SHARED_KINDS
        self.instances: list[Pipeline] = []
        for _ in range(size):
            try:
                self.instances.append(build_pipeline(spec, inputs))
            except (SystemExit, KeyboardInterrupt) as exc:
                self.close()
                raise PipelineStartError(f"pipeline {spec.name!r}: starting it raised {type(exc).__name__}"
                                         f"({exc})") from None
            except BaseException:
                self.close()
                raise
        self.free: queue.Queue = queue.Queue()
        for instance in self.instances:
            self.free.put(instance)

    def prepare(self, queries: list[str]) -> None:
        prepare = getattr(self.instances[0], "prepare", None)
        if prepare is not None:
            prepare(queries)

    def run(self, request: Request) -> Trace:
        if self.shared:
            return self._guarded(self.instances[0], request)
        instance = self.free.get()
        try:
            return self._guarded(instance, request)
        finally:
            self.free.put(instance)

    def _guarded(self, instance: Pipeline, request: Request) -> Trace:
        try:
            return instance.run(request)
        except PipelineStartError:
            raise  # the pipeline cannot be reached at all: the run stops with exit 4
        except BaseException as exc:  # noqa: BLE001 - a run that crashes is a pipeline_error; the rest goes on
            return error_trace(self.spec.name, request, f"{type(exc).__name__}: {exc}", None)

    def kill(self) -> None:
        """Stop every child process now (on a signal); for kinds without children, nothing."""
        for instance in self.instances:
            kill = getattr(instance, "kill", None)
            if kill is not None:
                kill()

    def close(self) -> list[str]:
        """Close every instance; what went wrong comes back as warnings."""
        warnings = []
        for instance in self.instances:
            try:
                said = instance.close()
            except BaseException as exc:  # noqa: BLE001 - every run has finished: a failing close() loses nothing
                said = f"close() raised {type(exc).__name__}: {exc}"
            if isinstance(said, str) and said:
                warnings.append(said)
        return warnings


# ---- the run -------------------------------------------------------------------------------

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
    root = Path(out) if out else config.out
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = root / f"{stamp}-{sha256_file(config.path)[:6]}"
    run_dir, n = base, 1
    while True:
        try:
            run_dir.mkdir(parents=True)
            return run_dir
        except FileExistsError:  # another run started in the same second
            n += 1
            run_dir = Path(f"{base}-{n}")


def recover_traces(path: Path) -> list[Trace]:
    """The finished runs of an interrupted traces file; a torn last line (a kill mid-write) is cut off."""
    if not path.exists() or path.stat().st_size == 0:
        return []
    with open(path, "rb+") as handle:
        data = handle.read()
        if not data.endswith(b"\n"):
            handle.truncate(data.rfind(b"\n") + 1)
    return read_trace_file(path)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _check_resume(run_dir: Path, config: Config, inputs: "Inputs") -> dict:
    """The manifest of the run to resume; refused (exit 2) when an input changed since."""
    manifest = rundir.read_manifest(run_dir)
    now = rundir.input_record(config, inputs.corpus)["inputs"]
    changed = [name for name in ("config", "gold", "corpus") if manifest["inputs"].get(name) != now[name]]
    if changed:
        raise UsageError(f"{', '.join(changed)} changed since the run in {run_dir}; --resume needs the same "
                         "config, gold set and corpus (start a new run instead)")
    return manifest


def _parity_cuts(traces, ctx: Context, order: dict) -> dict[str, tuple[int, str]]:
    """Per pipeline, the plan position and message of its first analyzer_mismatch."""
    cuts: dict[str, tuple[int, str]] = {}
    for trace in traces:
        failure = parity_failure(trace, ctx)
        if failure:
            at = order.get(run_order(trace), len(order))
            if trace.config not in cuts or at < cuts[trace.config][0]:
                cuts[trace.config] = (at, failure)
    return cuts


def finish_traces(path: Path, cuts: dict[str, tuple[int, str]], order: dict) -> None:
    """Rewrite a finished run's traces in run order (atomically), so the file does not depend on
    the number of workers; runs of a pipeline stopped by analyzer parity that come after its first
    mismatch in plan order are left out, as a one-worker run would never have started them. Only
    the runner does this, at the end of its own run."""
    if not path.exists():
        return
    traces = [t for t in read_trace_file(path)
              if t.config not in cuts or order.get(run_order(t), len(order)) <= cuts[t.config][0]]
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        for trace in sorted(traces, key=run_order):
            out.write(dump_trace(trace) + "\n")


def run(config: Config, *, inputs: Inputs | None = None, out: Path | None = None, resume: Path | None = None,
        workers: int | None = None, progress: bool = True) -> RunResult:
    workers = max(1, workers or config.workers)
    inputs = inputs or Inputs(config)
    ctx = Context(corpus=inputs.corpus, allow_cross_section=config.allow_cross_section,
                  cross_section_whitelist=config.cross_section_whitelist)
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
                manifest = {"ragaudit_version": __version__, **rundir.input_record(config, inputs.corpus),
                            "seeds": list(config.seeds), "paraphrases": config.paraphrases,
                            "embed_model": config.model, "started": _now()}
                rundir.write_manifest(run_dir, manifest)
            return _run_in(run_dir, manifest, config, inputs, ctx, workers, progress)
    except PipelineStartError:
        if created and not (run_dir / TRACES).exists():
            shutil.rmtree(run_dir, ignore_errors=True)  # nothing ran: leave no run directory behind
        raise


def _run_in(run_dir: Path, manifest: dict, config: Config, inputs: Inputs, ctx: Context, workers: int,
            progress: bool) -> RunResult:
    finished = recover_traces(run_dir / TRACES)
    done = {run_order(t) for t in finished}
    jobs = plan(config, inputs.items)
    order = {job.key: i for i, job in enumerate(jobs)}
    cuts = _parity_cuts(finished, ctx, order)
    todo = [j for j in jobs if j.key not in done]
    pools: dict[str, PipelinePool] = {}
    warnings: list[str] = []
    stopper = Stopper(lambda: [pool.kill() for pool in list(pools.values())])
    executed, started = 0, time.monotonic()
    with stopper:
        try:
            for spec in config.pipelines:
                if spec.name not in cuts and any(j.pipeline == spec.name for j in todo) and not stopper.stopped:
                    pools[spec.name] = pool = PipelinePool(spec, inputs, workers)
                    pool.prepare([j.request.query for j in todo if j.pipeline == spec.name])
            bar = Progress(len(jobs)) if progress else None
            with open(run_dir / TRACES, "a", encoding="utf-8") as sink:
                outcomes = run_jobs(todo, lambda job: pools[job.pipeline].run(job.request), workers=workers,
                                    stopper=stopper, skip=lambda job: job.pipeline in cuts)
                for job, trace in outcomes:
                    if isinstance(trace, BaseException):
                        raise trace
                    if stopper.stopped and trace.error is not None:
                        continue  # most likely cut short by the stop itself: --resume runs it again
                    sink.write(dump_trace(trace) + "\n")
                    sink.flush()
                    executed += 1
                    if bar:
                        bar.update(len(done) + executed)
                    failure = parity_failure(trace, ctx)
                    if failure and (job.pipeline not in cuts or order[job.key] < cuts[job.pipeline][0]):
                        cuts[job.pipeline] = (order[job.key], failure)
            if bar:
                bar.finish()
        finally:
            for name, pool in pools.items():
                warnings += pool.close()
    seconds = time.monotonic() - started
    if stopper.stopped:
        name = signal.Signals(stopper.signum).name
        raise Interrupted(stopper.signum, f"interrupted by {name}: {len(done) + executed} finished runs kept in "
                                          f"{run_dir}; finish with: ragaudit run {config.path} --resume {run_dir}")
    finish_traces(run_dir / TRACES, cuts, order)
    index = dict(manifest.get("index") or {})  # pipelines with nothing left to run keep their identity
    index.update({name: _index_dict(pool) for name, pool in pools.items()})
    aborted = {name: message for name, (_, message) in sorted(cuts.items())}
    rundir.write_manifest(run_dir, {**manifest, "finished": _now(), "aborted": aborted,
                                    "index": dict(sorted(index.items())),
                                    "traces_sha256": sha256_file(run_dir / TRACES)})
    return RunResult(run_dir, len(jobs), executed, len(done), seconds, aborted, warnings)


def _index_dict(pool: PipelinePool) -> dict | None:
    info = pool.instances[0].index_info()
    return None if info is None else {"index_hash": info.index_hash, "analyzer": info.analyzer,
                                      "embed_model": info.embed_model, "store": info.store}
