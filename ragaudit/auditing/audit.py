"""The audit: traces → validation → metrics → gate → the report model, one batch at a time.

Traces arrive one by one (from a run as it goes, or read once from `traces.jsonl`); every
`batch` of them is validated and scored together (each distinct text encoded once per batch),
its runs appended to `runs.parquet` and folded into the per-question aggregates. Memory grows
with the questions and the batch, not with the runs. `ragaudit run` and `ragaudit report` audit
this way; `ragaudit faults` audits mutated copies of the same traces through the same path, so a
fault is judged exactly as a real run would be.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from ragaudit.checks import runstore
from ragaudit.checks.metrics import memo
from ragaudit.checks.metrics.aggregate import Aggregates
from ragaudit.checks.metrics.evaluate import Evaluation, Settings, score_runs
from ragaudit.checks.metrics.registry import AVERAGED
from ragaudit.checks.validation import validate_traces
from ragaudit.checks.validation.snippets import SnippetSpans
from ragaudit.core import progress
from ragaudit.core.model import Aborted, Baseline, Gate, PipelineResult, Report
from ragaudit.core.plan import PlanIndex
from ragaudit.core.types import GoldItem, Issue, Trace
from ragaudit.decisions.agreement import LabelSummary, RunLabels
from ragaudit.decisions.gating import evaluate_gate, fitted_to
from ragaudit.io.config_schema import kind_keys
from ragaudit.pipelines.inputs import Inputs

if TYPE_CHECKING:
    from ragaudit.auditing.executors import RemoteScoring

MISSING_RUN = "no run recorded: the run was interrupted or its pipeline was stopped"
UNNAMED = "(no config)"
BATCH = 2_000
ISSUES_SHOWN = 200  # occurrences per code kept in report.json; issues.jsonl keeps every one
# the runs scored before (`score_runs`): `same_scores` key -> (run record, gold unit of its unit_mismatch note)
Remembered = dict[tuple[Any, ...], tuple[dict[str, Any], str | None]]


@dataclass
class Audit:
    evaluation: Evaluation
    gate: Gate
    aborted: dict[str, Aborted]
    issue_counts: Counter[str]  # by code
    issue_sample: list[Issue]  # the first ISSUES_SHOWN of each code
    codes_by_pipeline: dict[str, Counter[str]]
    snippets: runstore.SnippetStore
    runs_path: Path | None  # None once the audit answers from memory (`audit`)
    issues_path: Path | None = None
    traces: list[Trace] = field(default_factory=list)  # kept only when asked (fault injection)
    errors: dict[str, int] = field(default_factory=dict)  # error-severity issues per pipeline
    error_questions: dict[str, list[str]] = field(default_factory=dict)  # the questions they concern
    warnings: list[str] = field(default_factory=list)  # what went wrong without changing a figure (a cache)
    labels: LabelSummary | None = None  # the agreement with [labels], and the corrected good-run rates


@dataclass
class Scoring:
    """What one batch of runs contributes to an audit; batches fold together in order."""

    issues: list[Issue]
    rows: Any  # every run with what a reader needs to see it: a batch of runs.parquet (pyarrow)
    book: Aggregates  # the batch's per-question accumulators
    snippets: dict[str, runstore.Snippet]
    unmatched: list[str]
    runs: list[dict[str, Any]] = field(default_factory=list)  # the scored runs, when kept
    traces: list[Trace] = field(default_factory=list)  # and their traces
    warnings: list[str] = field(default_factory=list)  # what went wrong with a cache where it was scored


def score_batch(
    subject: Inputs,
    settings: Settings,
    gold: dict[str, GoldItem],
    batch: list[Trace],
    *,
    keep: bool = False,
    remembered: Remembered | None = None,
) -> Scoring:
    """Validate and score one batch of runs: a pure function of its inputs, so a batch can be
    scored anywhere (this process, another one, another machine) and folded in later.
    `remembered`: the runs scored before with these inputs (`score_runs`), scored once."""
    ctx = subject.context
    issues = validate_traces(batch, ctx)
    scored = score_runs(batch, gold, subject.corpus, subject.encoder, settings, subject.support, remembered=remembered)
    issues += scored.notes
    by_key = {(t.config, t.qid, t.variant, t.seed): t for t in batch}
    snippets: dict[str, runstore.Snippet] = {}
    rows = runstore.record_batch(
        [
            runstore.detail(r, by_key[(r["pipeline"], r["qid"], r["variant"], r["seed"])], subject.corpus, snippets)
            for r in scored.runs
        ],
        AVERAGED,
    )
    book = Aggregates(AVERAGED, settings.css_min)
    for record in scored.runs:
        book.add(record)
    return Scoring(
        issues,
        rows,
        book,
        snippets,
        scored.unmatched,
        scored.runs if keep else [],
        list(batch) if keep else [],
        subject.cache_warnings(),
    )


class StreamingAudit:
    """`add` traces, then `finish`. Runs go to `runs.parquet` in `out`; issues to `issues.jsonl`
    there when `issues` is true. With `keep`, every scored run and trace is kept in memory too
    (for fault injection on demo-sized runs)."""

    def __init__(
        self,
        subject: Inputs,
        out: Path,
        *,
        baseline: Baseline | None = None,
        batch: int = BATCH,
        issues: bool = True,
        keep: bool = False,
        remote: RemoteScoring | None = None,
        remembered: Remembered | None = None,
    ):
        """`remote`, when given, scores batches elsewhere (`ragaudit.auditing.executors.RemoteScoring`);
        `remembered`, runs scored before with the same inputs, which are not scored again here
        (`score_runs`: the faulty copies of one run that calibration audits)."""
        self.remote, self.remembered = remote, remembered
        self.subject, self.out, self.baseline, self.batch, self.keep = subject, Path(out), baseline, batch, keep
        self.gold: dict[str, GoldItem] = {}
        for item in subject.items:
            self.gold.setdefault(item.qid, item)
        self.ctx = subject.context
        self.settings = Settings.from_config(subject.config)
        self.runs = runstore.RunWriter(self.out / runstore.RUNS, AVERAGED)
        self.plan = PlanIndex(subject.config, subject.items)
        # a question leaves memory once its planned runs are all in: runs come in plan order from a run
        self.book = Aggregates(
            AVERAGED,
            self.settings.css_min,
            planned=self.plan.runs_of,
            order=self.plan.order_of,
            spill=self.out / "questions.spill",
        )
        # every distinct snippet, whole on disk beside runs.parquet (in memory when every run is kept too)
        self.snippets = runstore.SnippetStore(None if keep else self.out / "snippets.sqlite")
        self.counts: Counter[str] = Counter()
        self.by_pipeline: dict[str, Counter[str]] = defaultdict(Counter)
        self.sample: list[Issue] = []
        self.errors: Counter[str] = Counter()
        self.error_questions: dict[str, set[str]] = defaultdict(set)
        self.aborted: dict[str, Aborted] = {}
        self.unmatched: list[str] = []
        self.warnings: dict[str, None] = {}  # in the order they were first said, each once
        self.notes: list[Issue] = []
        self.kept_runs: list[dict[str, Any]] = []
        self.kept_traces: list[Trace] = []
        self.seen_pipelines: list[str] = []
        self.snippet_spans = SnippetSpans()
        self._pending: list[Trace] = []
        self._scoring: progress.Phase | None = None  # shown from the first batch until `finish`
        gc.freeze()  # the gold set, corpus and model loaded so far are never garbage: skip them in collections
        self._issues = open(self.out / "issues.jsonl.tmp", "w", encoding="utf-8") if issues else None
        self.labels = RunLabels(subject.config.labels.path) if subject.config.labels.path is not None else None

    def add(self, trace: Trace) -> None:
        if not trace.config:
            trace = dataclasses.replace(trace, config=UNNAMED)
        if not self.plan.mark(trace):
            return  # a run recorded twice counts once: the first
        if trace.config not in self.seen_pipelines:
            self.seen_pipelines.append(trace.config or UNNAMED)
        self.snippet_spans.add(trace)
        if self.labels is not None:
            self.labels.see(trace)
        self._pending.append(trace)
        if len(self._pending) >= self.batch:
            self._flush()

    def extend(self, traces: Iterable[Trace]) -> "StreamingAudit":
        for trace in traces:
            self.add(trace)
        return self

    def _record(self, found: Issue) -> None:
        pipeline = found.pipeline or UNNAMED  # every trace audited here names its pipeline
        self.counts[found.code] += 1
        self.by_pipeline[pipeline][found.code] += 1
        if self.counts[found.code] <= ISSUES_SHOWN:
            self.sample.append(found)
        if self._issues is not None:
            from ragaudit.io.jsonl import dump_line

            self._issues.write(dump_line(found.to_dict()) + "\n")
        if found.severity == "error":
            self.errors[pipeline] += 1
            self.error_questions[pipeline].add(found.qid if found.qid is not None else f"line {found.line}")
        if found.code == "analyzer_mismatch" and pipeline not in self.aborted:
            self.aborted[pipeline] = Aborted(found.qid, found.variant, found.seed, found.message)

    def _flush(self) -> None:
        # A batch allocates hundreds of thousands of short-lived objects and makes no cycles worth
        # collecting: the cyclic collector stays out of it (it took a fifth of the time).
        enabled = gc.isenabled()
        gc.disable()
        try:
            with self._scored().timed() as scoring:
                self._score(self._pending)
                scoring.advance(len(self._pending))
        finally:
            self._pending = []
            if enabled:
                gc.enable()

    def _scored(self) -> progress.Phase:
        if self._scoring is None:
            self._scoring = progress.start("scoring", self.plan.size or None, unit="runs", counts_as="scoring")
        return self._scoring

    def _score(self, batch: list[Trace]) -> None:
        if self.remote is not None:
            for part in self.remote.submit(batch):
                self._merge(part)
        else:
            self._merge(
                score_batch(self.subject, self.settings, self.gold, batch, keep=self.keep, remembered=self.remembered)
            )

    def _merge(self, part: "Scoring") -> None:
        for found in part.issues:
            self._record(found)
        self.unmatched += part.unmatched
        self.warnings.update(dict.fromkeys(part.warnings))
        self.snippets.add(part.snippets)
        self.runs.write(part.rows)
        self.book.merge(part.book)
        if self.keep:
            self.kept_runs += part.runs
            self.kept_traces += part.traces

    def finish(self) -> Audit:
        scoring = self._scored()
        try:
            with scoring.timed():
                return self._finish()
        finally:
            scoring.end()

    def _finish(self) -> Audit:
        # a planned run of a pipeline that left no trace counts as failed, not as absent
        for run in self.plan.missing(self.seen_pipelines):
            self.add(
                Trace(
                    qid=run.qid,
                    variant=run.variant,
                    seed=run.seed,
                    query=run.query,
                    config=run.pipeline,
                    error=MISSING_RUN,
                )
            )
        if self._pending:
            self._flush()
        if self.remote is not None:
            for part in self.remote.drain():
                self._merge(part)
        self.runs.close()
        for found in self.snippet_spans.issues():
            self._record(found)
        # checked: its entry per snippet leaves memory before the outputs
        self.snippet_spans = SnippetSpans()
        # An audit of its own (not one held in memory for fault injection): what scoring remembered
        # per text leaves memory now, and the question rows below take its place.
        if not self.keep:
            memo.forget()
        issues_path = None
        if self._issues is not None:
            self._issues.close()
            issues_path = self.out / "issues.jsonl.tmp"
        questions, sections, pipelines = self.book.finish(self.gold)
        order = [p.name for p in self.subject.config.pipelines]
        pipelines = dict(
            sorted(pipelines.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0]))
        )
        evaluation = Evaluation(
            self.kept_runs,
            questions,
            sections,
            pipelines,
            self.unmatched,
            self.notes,
            coverage_share=runstore.coverage_share(self.out / runstore.RUNS),
        )
        errors = dict(self.errors)
        error_questions = {p: sorted(q) for p, q in self.error_questions.items()}
        labelled = self.labels.summary(self.out / runstore.RUNS) if self.labels is not None else None
        gate = evaluate_gate(
            evaluation,
            self.subject.config.gate,
            error_counts=errors,
            aborted=self.aborted,
            baseline=self.baseline,
            error_questions=error_questions,
            fitted=fitted_to(self.subject.config),
            labelled=labelled.estimates if labelled is not None else None,
        )
        return Audit(
            evaluation,
            gate,
            self.aborted,
            self.counts,
            self.sample,
            dict(self.by_pipeline),
            self.snippets,
            self.out / runstore.RUNS,
            issues_path,
            self.kept_traces,
            errors,
            error_questions,
            list(self.warnings),
            labelled,
        )


def regate(result: Audit, subject: Inputs, *, baseline: Baseline | None) -> Gate:
    """The gate of a finished audit again, against another baseline: nothing is scored twice."""
    return evaluate_gate(
        result.evaluation,
        subject.config.gate,
        error_counts=result.errors,
        aborted=result.aborted,
        baseline=baseline,
        error_questions=result.error_questions,
        fitted=fitted_to(subject.config),
        labelled=result.labels.estimates if result.labels is not None else None,
    )


def as_baseline(result: Audit) -> Baseline:
    """What the drift checks read of a baseline report, from an audit held in memory."""
    return Baseline(result.evaluation.pipelines, result.evaluation.questions)


def audit(
    traces: Iterable[Trace],
    subject: Inputs,
    *,
    baseline: Baseline | None = None,
    remembered: Remembered | None = None,
) -> Audit:
    """Audit traces held in memory (fault injection, tests), keeping every run and trace in the
    result; its runs file is gone when this returns, so the result answers from memory.
    `remembered` as for `StreamingAudit`."""
    with tempfile.TemporaryDirectory(prefix="ragaudit-audit-") as out:
        streaming = StreamingAudit(
            subject, Path(out), baseline=baseline, issues=False, keep=True, remembered=remembered
        )
        result = streaming.extend(traces).finish()
    result.evaluation.coverage_share = None
    result.runs_path = None
    return result


def report_of(result: Audit, subject: Inputs, manifest: dict[str, Any]) -> Report:
    """The report model of an audit."""
    from ragaudit.auditing.reporting import build_report

    config = subject.config
    index = manifest.get("index") or {}
    pipelines = {
        p.name: PipelineResult(
            kind=p.kind,
            options=json.loads(
                json.dumps(
                    {k: v for k, v in sorted(p.options.items()) if v is not None and k in kind_keys(p.kind)},
                    default=str,
                    allow_nan=False,
                )
            ),
            index=index.get(p.name),
            aborted=result.aborted.get(p.name),
        )
        for p in config.pipelines
    }
    report = build_report(
        audit=result,
        items=subject.items,
        corpus=subject.corpus,
        manifest=manifest,
        pipelines=pipelines,
        gold_findings=subject.gold_findings,
    )
    report.meta["support_model"] = getattr(subject.support, "model_id", None)
    # the config's order of pipelines (report.json's objects are key-sorted) and its [compare]
    report.meta["pipeline_order"] = [p.name for p in config.pipelines]
    report.meta["compare"] = config.compare.model_dump()
    # the settings every metric was computed with: k, the citation match's tolerance, the ΔS reading
    report.meta["metrics"] = config.metrics.model_dump()
    # the thresholds every claim was judged with ([support] threshold, the [lambda] bars)
    report.meta["thresholds"] = {
        **dataclasses.asdict(Settings.from_config(config).thresholds),
        "fitted_to": fitted_to(config),  # the sha256 of the labels they were fitted to, when they were
    }
    if result.labels is not None:  # the agreement with a person's labels, and the corrected good-run rates
        report.meta["labels"] = result.labels.to_json()
    return report
