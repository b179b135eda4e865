"""ragaudit as a library, continued: the commands whose flows live in modules of their own (labels,
probes, the production audit-log, plans, gold reanchoring, citations, attestations). Each function
imports its module when called, so `import ragaudit` stays as light as `ragaudit --help`; its
options are those of the function it names, which holds their defaults."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the types of results only
    from ragaudit.checks.goldtools.reanchor import ReanchorReport
    from ragaudit.decisions.agreement import Agreement
    from ragaudit.decisions.attest import Attestation
    from ragaudit.decisions.labelfit import Calibrated as FittedToLabels
    from ragaudit.decisions.labelling import Session
    from ragaudit.decisions.power import Plan
    from ragaudit.flows.api import ConfigLike
    from ragaudit.flows.auditlog import AuditLogResult
    from ragaudit.flows.probing import Probed

__all__ = (
    """agree attest_run audit_log calibrate_labels cite open_labels plan_gold probe reanchor serve_labels""".split()
)


def agree(run_dir: str | Path, labels: str | Path) -> Agreement:
    """`ragaudit agree`: how often the verdict on `run_dir`'s runs agrees with the labels of `labels`."""
    from ragaudit.decisions.agreement import agree as agreed

    return agreed(run_dir, labels)


def calibrate_labels(
    config: ConfigLike, labels: str | Path | None, run: str | Path | None, **options: Any
) -> FittedToLabels:
    """`ragaudit calibrate --labels`: the claim thresholds fitted to a person's labels of `run`
    (options: `out`, `seed`, `rate`; `ragaudit.decisions.labelfit.calibrate_labels`)."""
    from ragaudit.decisions.labelfit import calibrate_labels as fit

    return fit(config, labels, run, **options)


def open_labels(run_dir: str | Path, **options: Any) -> Session:
    """`ragaudit label`: the runs of `run_dir` to label (options: `labels`, `sample`, `by`, `seed`,
    `labeller`; `ragaudit.decisions.labelling.open_session`)."""
    from ragaudit.decisions.labelling import open_session

    return open_session(run_dir, **options)


def serve_labels(session: Session, **options: Any) -> Session:
    """Serve `session`'s labelling page until the person is done (options: `port`, `browser`,
    `opened`; `ragaudit.decisions.labelserver.serve`)."""
    from ragaudit.decisions.labelserver import serve

    return serve(session, **options)


def probe(config: ConfigLike, **options: Any) -> Probed:
    """`ragaudit probe`: does each answer follow its edited source? (options: `only`, `sample`,
    `edits`, `resume`, `out`; `ragaudit.flows.probing.probe`)."""
    from ragaudit.flows.probing import probe as probed

    return probed(config, **options)


def audit_log(paths: Sequence[str | Path], **options: Any) -> AuditLogResult:
    """`ragaudit audit-log`: production traces audited by window (`ragaudit.flows.auditlog.run_audit_log`)."""
    from ragaudit.flows.auditlog import run_audit_log

    return run_audit_log(paths, **options)


def plan_gold(gold_path: str | Path, **options: Any) -> Plan:
    """`ragaudit plan`: the questions a gold set needs to detect a change (`ragaudit.decisions.power.plan_gold`)."""
    from ragaudit.decisions.power import plan_gold as planned

    return planned(gold_path, **options)


def reanchor(gold_path: str | Path, corpus_path: str | Path, out: str | Path, **options: Any) -> ReanchorReport:
    """`ragaudit gold reanchor` (`ragaudit.checks.goldtools.reanchor.reanchor_file`)."""
    from ragaudit.checks.goldtools.reanchor import reanchor_file

    return reanchor_file(gold_path, corpus_path, out, **options)


def cite(paths: Sequence[str | Path], **options: Any) -> Iterator[str]:
    """`ragaudit cite`: each run of the trace files as markdown (`ragaudit.outputs.citations.render_traces`)."""
    from ragaudit.outputs.citations import render_traces

    return iter(render_traces(paths, **options))


def attest_run(run_dir: Path, **options: Any) -> Attestation:
    """`ragaudit attest` (options: `key`, `out`; `ragaudit.decisions.attest.attest`)."""
    from ragaudit.decisions.attest import attest

    return attest(run_dir, **options)
