"""The runner: gold × variants × seeds × pipelines → traces, on parallel workers.

Each finished run is appended to `traces.jsonl` as one line and flushed, so a killed run loses at
most the runs in flight; `--resume` finishes it without losing or repeating a run. What the
runner writes in the end is sorted by run, so it does not depend on the worker count.
"""
from __future__ import annotations

import hashlib
import json
import os
import queue
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from ragaudit import __version__
from ragaudit.errors import InputError, PipelineStartError, Problem, UsageError
from ragaudit.io.config import Config, PipelineConfig
from ragaudit.io.corpus import load_corpus
from ragaudit.io.gold import read_gold
from ragaudit.io.jsonl import BadLine
from ragaudit.io.traces import dump_trace, read_trace_file, read_traces
from ragaudit.pipelines.base import Pipeline, Request, error_trace
from ragaudit.plan import planned_runs, run_order
from ragaudit.types import Corpus, GoldItem, Issue, Trace
from ragaudit.validate import Context, aborted_pipelines, parity_failure

TRACES = "traces.jsonl"
MANIFEST = "manifest.json"


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


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    paths = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for p in paths:
        if path.is_dir():
            digest.update(p.relative_to(path).as_posix().encode() + b"\0")
        with open(p, "rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


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
        return PythonPipeline(spec.name, o["factory"], o["options"], offset_unit=unit)
    if spec.kind == "command":
        from ragaudit.pipelines.command import CommandPipeline
        if not o["command"]:
            raise UsageError(f"pipeline {spec.name!r}: a command pipeline needs `command = [...]`")
        cwd = str(inputs.config.path.parent) if inputs.config.path else None
        return CommandPipeline(spec.name, o["command"], timeout_s=o["timeout_s"], cwd=cwd, offset_unit=unit)
    raise UsageError(f"pipeline {spec.name!r}: unknown kind {spec.kind!r}")


SHARED_KINDS = ("reference", "replay")  # one instance serves every worker; others get one per worker


class PipelinePool:
    """Instances of one pipeline handed to workers one at a time."""

    def __init__(self, spec: PipelineConfig, inputs: Inputs, workers: int):
        self.spec = spec
        size = 1 if spec.kind in SHARED_KINDS else workers
        self.shared = spec.kind in SHARED_KINDS
        self.instances = [build_pipeline(spec, inputs) for _ in range(size)]
        self.free: queue.Queue = queue.Queue()
        for instance in self.instances:
            self.free.put(instance)

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
        except Exception as exc:  # a run that crashes becomes a pipeline_error trace; the rest goes on
            return error_trace(self.spec.name, request, f"{type(exc).__name__}: {exc}", None)

    def close(self) -> None:
        for instance in self.instances:
            instance.close()


# ---- the run -------------------------------------------------------------------------------

@dataclass
class RunResult:
    run_dir: Path
    total: int
    executed: int
    resumed: int
    seconds: float
    aborted: dict[str, str] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.executed / self.seconds if self.seconds > 0 else 0.0


def new_run_dir(config: Config, out: Path | None) -> Path:
    root = Path(out) if out else config.out
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = root / f"{stamp}-{sha256_file(config.path)[:6]}"
    run_dir, n = base, 1
    while run_dir.exists():
        n += 1
        run_dir = Path(f"{base}-{n}")
    run_dir.mkdir(parents=True)
    return run_dir


def recover_traces(path: Path) -> list[Trace]:
    """The finished runs of an interrupted traces file; a torn last line (a kill mid-write) is cut off."""
    if not path.exists() or path.stat().st_size == 0:
        return []
    with open(path, "rb+") as handle:
        data = handle.read()
        if not data.endswith(b"\n"):
            handle.truncate(data.rfind(b"\n") + 1)
    if path.stat().st_size == 0:
        return []
    traces = []
    for item in read_traces(path):
        if isinstance(item, BadLine):
            raise InputError(item.problem)
        traces.append(item)
    return traces


def sort_traces(path: Path) -> None:
    """Rewrite a finished run's traces in run order (atomically), so the file does not depend on
    the number of workers. Only the runner does this, at the end of its own run."""
    if not path.exists():
        return
    traces = sorted(read_trace_file(path), key=run_order)
    tmp = path.with_suffix(".jsonl.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        for trace in traces:
            out.write(dump_trace(trace) + "\n")
    os.replace(tmp, path)


def write_manifest(run_dir: Path, config: Config, **extra) -> None:
    path = run_dir / MANIFEST
    manifest = json.loads(path.read_text()) if path.exists() else {}
    manifest.update({
        "ragaudit_version": __version__,
        "config_path": str(config.path.resolve()),
        "inputs": {"config": sha256_file(config.path), "gold": sha256_file(config.gold),
                   "corpus": sha256_file(config.corpus)},
        "paths": {"config": str(config.path.resolve()), "gold": str(config.gold.resolve()),
                  "corpus": str(config.corpus.resolve())},
        "seeds": list(config.seeds), "paraphrases": config.paraphrases, "embed_model": config.model,
        **extra,
    })
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


class Progress:
    """done/total, rate and ETA on a terminal; silent in CI and when output is not a terminal."""

    def __init__(self, total: int, stream=sys.stderr):
        self.total, self.stream, self.start, self.last = total, stream, time.monotonic(), 0.0
        self.enabled = stream.isatty() and not os.environ.get("CI")

    def update(self, done: int) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.2 and done < self.total):
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        eta = (self.total - done) / rate if rate > 0 else 0
        self.stream.write(f"\r{done}/{self.total} runs  {rate:.1f} runs/s  ETA {eta:.0f}s ")
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.stream.write("\n")


def run(config: Config, *, inputs: Inputs | None = None, out: Path | None = None, resume: Path | None = None,
        workers: int | None = None, progress: bool = True) -> RunResult:
    workers = max(1, workers or config.workers)
    inputs = inputs or Inputs(config)
    ctx = Context(corpus=inputs.corpus, allow_cross_section=config.allow_cross_section,
                  cross_section_whitelist=config.cross_section_whitelist)
    if resume is not None:
        run_dir = Path(resume)
        if not (run_dir / MANIFEST).exists():
            raise InputError(Problem(str(run_dir), "expected a run directory with manifest.json, found none"))
        recorded = json.loads((run_dir / MANIFEST).read_text())["inputs"]["config"]
        if recorded != sha256_file(config.path):
            raise UsageError(f"{config.path} changed since the run in {run_dir}; resume needs the same config")
    else:
        run_dir = new_run_dir(config, out)
        write_manifest(run_dir, config, started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    finished = recover_traces(run_dir / TRACES)
    done = {run_order(t) for t in finished}
    aborted = aborted_pipelines(finished, ctx)
    jobs = [j for j in plan(config, inputs.items) if j.key not in done]
    total = len(jobs) + len(done)

    pools: dict[str, PipelinePool] = {}
    try:
        for spec in config.pipelines:
            if spec.name not in aborted and any(j.pipeline == spec.name for j in jobs):
                pools[spec.name] = pool = PipelinePool(spec, inputs, workers)
                prepare = getattr(pool.instances[0], "prepare", None)
                if prepare is not None:
                    prepare([j.request.query for j in jobs if j.pipeline == spec.name])
        bar = Progress(total) if progress else None
        started = time.monotonic()
        executed = _execute(jobs, pools, run_dir / TRACES, ctx, aborted, workers,
                            lambda n: bar and bar.update(len(done) + n))
        seconds = time.monotonic() - started
        if bar:
            bar.finish()
        index = {name: _index_dict(pool) for name, pool in sorted(pools.items())}
    finally:
        for pool in pools.values():
            pool.close()
    sort_traces(run_dir / TRACES)
    write_manifest(run_dir, config, finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   aborted=aborted, index=index)
    return RunResult(run_dir, total, executed, len(done), seconds, aborted)


def _index_dict(pool: PipelinePool) -> dict | None:
    info = pool.instances[0].index_info()
    return None if info is None else {"index_hash": info.index_hash, "analyzer": info.analyzer,
                                      "embed_model": info.embed_model, "store": info.store}


def _execute(jobs: list[Job], pools: dict[str, PipelinePool], path: Path, ctx: Context,
             aborted: dict[str, str], workers: int, on_progress) -> int:
    """Run the jobs; append each finished trace as one flushed line. Returns how many ran."""
    executed = 0
    pending = iter(jobs)
    with open(path, "a", encoding="utf-8") as sink, ThreadPoolExecutor(max_workers=workers) as pool:
        running = {}

        def submit_next() -> bool:
            for job in pending:
                if job.pipeline in aborted:
                    continue  # analyzer parity failed: the rest of this pipeline is not run
                running[pool.submit(pools[job.pipeline].run, job.request)] = job
                return True
            return False

        for _ in range(workers * 2):
            if not submit_next():
                break
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                job = running.pop(future)
                trace = future.result()
                sink.write(dump_trace(trace) + "\n")
                sink.flush()
                executed += 1
                on_progress(executed)
                if job.pipeline not in aborted and (failure := parity_failure(trace, ctx)):
                    aborted[job.pipeline] = failure
                submit_next()
    return executed
