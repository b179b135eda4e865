"""The probe's report.json: the audit of its runs on the real corpus (as `ragaudit run` audits runs, one
variant under the config's seeds), with the probe's findings added: each question row's and each
pipeline's `faithful` metric, `meta.probe` (`summary.ProbeSummary`), and a gate of `faithful_min`
alone. `ragaudit compare` compares `faithful` like any rate; `ragaudit gate` gates it again."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ragaudit.checks import runstore
from ragaudit.checks.metrics.faithful import faithful
from ragaudit.core.means import Means
from ragaudit.core.model import Check, Gate, Report
from ragaudit.core.types import Trace
from ragaudit.decisions.gating import evaluate_gate
from ragaudit.flows.probing.ledger import Ledger
from ragaudit.flows.probing.summary import ProbeSummary
from ragaudit.io.config_schema import GateSection, LabelsSection
from ragaudit.io.traces import parse_trace
from ragaudit.pipelines.inputs import Inputs

GATED = ("faithful_min",)  # the checks a probe gates: its runs on the real corpus are a sample, not a run


def audited(ledger: Ledger, inputs: Inputs, folder: Path, manifest: dict[str, Any], names: list[str]) -> Report:
    """The report of the probe's runs on the real corpus; runs.parquet goes into `folder`."""
    from ragaudit.auditing.audit import StreamingAudit, report_of

    config = inputs.config
    specs = tuple(p for p in config.pipelines if p.name in names)
    qids = set(ledger.header["qids"])
    subject = Inputs(
        dataclasses.replace(
            config, audit=config.audit.model_copy(update={"paraphrases": 1}), pipelines=specs, labels=LabelsSection()
        ),
        [i for i in inputs.items if i.qid in qids],
        inputs.corpus,
        encoder=inputs.encoder,
        gold_findings=[f for f in inputs.gold_findings if f.qid is None or f.qid in qids],
    )
    traces = [
        parse_trace(t, offset_unit=config.audit.offset_unit, markers=config.audit.marker_forms)
        for record in ledger.of("before")
        if record["pipeline"] in names
        for t in record["traces"]
    ]
    work = Path(tempfile.mkdtemp(prefix=".audit-", dir=folder))
    try:
        result = StreamingAudit(subject, work, issues=False).extend(t for t in traces if isinstance(t, Trace)).finish()
        assert result.runs_path is not None  # an audit of its own writes its runs
        os.replace(result.runs_path, folder / runstore.RUNS)
        result.runs_path = folder / runstore.RUNS
        return report_of(result, subject, manifest)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def with_findings(report: Report, found: ProbeSummary, thresholds: GateSection) -> Report:
    """The report with the probe's faithful rates in its rows and summary, `meta.probe`, and the probe's gate."""
    probed = {name for name, p in found.pipelines.items() if p.skipped is None and p.faithful.value is not None}
    for q in report.questions:
        if q.pipeline in probed:
            q.metrics = Means({**q.metrics, "faithful": faithful(probe=found.by_question.get(q.key, []))})
    for name, summary in report.summary.pipelines.items():
        if name in probed:
            summary.metrics["faithful"] = found.pipelines[name].faithful.value
    report.meta["probe"] = found.to_json()
    report.gate = probe_gate(report, found, thresholds)
    report.summary.verdict = report.gate.verdict
    return report


def probe_gate(report: Report, found: ProbeSummary, thresholds: GateSection) -> Gate:
    """`faithful_min` for every probed pipeline (unset: no check); a pipeline the probe could not
    re-point fails it, saying why."""
    from ragaudit.checks.metrics.evaluate import Evaluation

    evaluation = Evaluation(questions=report.questions, pipelines=report.summary.pipelines)
    gate = evaluate_gate(evaluation, thresholds, error_counts={}, aborted={})
    checks = [c for c in gate.checks if c.name in GATED]
    limit = thresholds.faithful_min
    if limit is not None:
        wanted = thresholds.pipelines or list(found.pipelines)
        for name, p in found.pipelines.items():
            if name in wanted and (p.skipped is not None or p.faithful.value is None):
                why = p.skipped or "no edit could be made on its questions"
                checks.append(
                    Check(
                        name,
                        "faithful_min",
                        limit,
                        None,
                        False,
                        f"{limit:g}",
                        detail=f"not probed: {why}",
                        source=thresholds.source("faithful_min"),
                    )
                )
    return Gate("pass" if all(c.passed for c in checks) else "fail", list(found.pipelines), checks)
