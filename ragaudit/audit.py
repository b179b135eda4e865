"""The audit: traces → validation → metrics → gate → the report model, with nothing written.

`ragaudit run` and `ragaudit report` audit the traces of a run directory and hand the report to
the writers in `ragaudit.report`; `ragaudit faults` audits mutated copies of the same traces in
memory. One path through the data, so a fault is judged exactly as a real run would be.
"""
from __future__ import annotations

import dataclasses
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from ragaudit.gate import evaluate_gate
from ragaudit.metrics.evaluate import Evaluation, Settings, evaluate
from ragaudit.plan import planned_runs, run_order
from ragaudit.report.model import build_report
from ragaudit.types import Corpus, GoldItem, Issue, Trace
from ragaudit.validate import Context, aborted_pipelines, validate_trace

MISSING_RUN = "no run recorded: the run was interrupted or its pipeline was stopped"


@dataclass
class Subject:
    """What every audit of one run directory shares: config, gold set, corpus, encoder, support
    scorer, and the gold set's findings against the corpus."""
    config: object
    items: list[GoldItem]
    corpus: Corpus | None
    encoder: object
    support: object = None
    gold_findings: list[Issue] = field(default_factory=list)

    @property
    def context(self) -> Context:
        return Context(corpus=self.corpus, allow_cross_section=self.config.allow_cross_section,
                       cross_section_whitelist=self.config.cross_section_whitelist)


@dataclass
class Audit:
    traces: list[Trace]
    issues: list[Issue]
    evaluation: Evaluation
    gate: dict
    aborted: dict[str, str]


def with_missing_runs(traces: list[Trace], subject: Subject) -> list[Trace]:
    """The traces plus an errored trace for every planned run of a configured pipeline that left
    none, so a run that never happened counts as failed instead of vanishing from the averages."""
    have = {run_order(t) for t in traces}
    present = {t.config for t in traces}
    missing = [Trace(qid=r.qid, variant=r.variant, seed=r.seed, query=r.query, config=r.pipeline, error=MISSING_RUN)
               for r in planned_runs(subject.config, subject.items)
               if r.pipeline in present and (r.pipeline, r.qid, r.variant, r.seed) not in have]
    return sorted([*traces, *missing], key=run_order) if missing else traces


UNNAMED = "(no config)"


def audit(traces: list[Trace], subject: Subject, *, baseline: dict | None = None) -> Audit:
    """Validate, measure and gate `traces` (in run order). A trace that names no pipeline (its
    `config`) is reported under UNNAMED rather than dropped."""
    traces = [t if t.config else dataclasses.replace(t, config=UNNAMED) for t in traces]
    traces = with_missing_runs(sorted(traces, key=run_order), subject)
    ctx = subject.context
    issues = [i for t in traces for i in validate_trace(t, ctx)]
    aborted = aborted_pipelines(traces, ctx)
    evaluation = evaluate(traces, subject.items, subject.corpus, subject.encoder,
                          Settings.from_config(subject.config), support=subject.support)
    issues += evaluation.notes
    errors = Counter(i.pipeline for i in issues if i.severity == "error")
    error_questions: dict[str, set[str]] = defaultdict(set)
    for i in issues:
        if i.severity == "error":
            error_questions[i.pipeline].add(i.qid if i.qid is not None else f"line {i.line}")
    order = [p.name for p in subject.config.pipelines]
    evaluation.pipelines = dict(sorted(evaluation.pipelines.items(),
                                       key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0])))
    gate = evaluate_gate(evaluation, subject.config.gate, error_counts=dict(errors), aborted=aborted,
                         baseline=baseline, error_questions={p: sorted(q) for p, q in error_questions.items()})
    return Audit(traces, issues, evaluation, gate, aborted)


def report_of(result: Audit, subject: Subject, manifest: dict) -> dict:
    """The report model (SPEC §6) of an audit."""
    config = subject.config
    index = manifest.get("index") or {}
    pipelines = {p.name: {"kind": p.kind, "options": {k: v for k, v in sorted(p.options.items()) if v is not None},
                          "index": index.get(p.name), "aborted": result.aborted.get(p.name)}
                 for p in config.pipelines}
    report = build_report(traces=result.traces, items=subject.items, corpus=subject.corpus,
                          evaluation=result.evaluation, gate=result.gate, issues=result.issues, manifest=manifest,
                          pipelines=json.loads(json.dumps(pipelines, default=str, allow_nan=False)),
                          gold_findings=subject.gold_findings)
    report["meta"]["support_model"] = getattr(subject.support, "model_id", None)
    return report
