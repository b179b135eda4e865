"""The gate: thresholds from `[gate]`, drift rules against a baseline report.

Each check names its threshold (a number, or None when not gated), the value found, pass or fail,
and the questions that failed it. The checks of one pipeline are those of `ragaudit.core.gatechecks`
with a `[gate]` key (`CHECKS`): each entry says which way it compares, the pipeline's figure and
which of its questions fail it; the drift checks and the other structural checks are computed here.
`[gate] pipelines` chooses which pipelines are gated (default: all of them).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable

from ragaudit.core.gatechecks.entry import COMPARE, DRIFT, NOT_GATED, GateCheck
from ragaudit.core.gatechecks.registry import BY_NAME, KEYS, STRUCTURAL, THRESHOLDED
from ragaudit.core.gatechecks.registry import CHECKS as ALL
from ragaudit.core.model import Aborted, Baseline, Check, Gate, PipelineSummary, Question, QuestionStats
from ragaudit.decisions.agreement import Estimate
from ragaudit.io.config_schema import GateSection

if TYPE_CHECKING:  # types only
    from ragaudit.checks.metrics.evaluate import Evaluation
    from ragaudit.io.config import Config

ERRORED_NOTE = "{n} errored run{s} count as ΔS 1.0 and 0 on every rate"
CHECKS = THRESHOLDED  # the checks of the [gate] table, in the order a gate lists them
CHECK_NAMES = tuple(check.name for check in CHECKS)
# [gate]'s fields are these checks' keys and nothing else (tests/test_registries.py)
READ = {*KEYS, "pipelines"}
READS_CLAIMS = tuple(check.name for check in ALL if check.reads_claims)


@dataclass
class Scope:
    """What a check of one pipeline reads: its aggregates, its questions, the thresholds, and the
    share of its runs at a coverage (from runs.parquet, or the runs in memory)."""

    pipeline: str
    summary: PipelineSummary
    questions: list[Question]
    t: GateSection
    covered: Callable[[float], float]
    errors: int = 0
    error_questions: list[str] = field(default_factory=list)
    labelled: Estimate | None = None  # the good-run rate corrected by labels ([labels])


def bar(name: str, threshold: float | None) -> tuple[str, float] | None:
    """The bar a check held its value to, as `value comparator threshold` (`>=`, `<=`, `>`): a
    drift check's fall of at most 0.05 is a change >= -0.05. None for a check not gated, which
    holds the value to no bar (`baseline_missing`, a threshold left unset)."""
    check = BY_NAME.get(name)
    if check is None or (threshold is None and name != "pipeline_ran"):
        return None
    if check.key is not None and threshold is not None:
        return check.op, threshold
    return (check.op, check.bar(threshold if threshold is not None else 0.0)) if check.bar is not None else None


def fitted_to(config: Config) -> str | None:
    """The sha256 of the labels the config's claim thresholds were fitted to, when it reads such a calibration."""
    calibration = getattr(config, "calibration", None)
    return calibration.labels if calibration is not None and calibration.claims else None


def evaluate_gate(
    evaluation: Evaluation,
    thresholds: GateSection,
    *,
    error_counts: dict[str, int],
    aborted: dict[str, Aborted],
    baseline: Baseline | None = None,
    error_questions: dict[str, list[str]] | None = None,
    fitted: str | None = None,
    labelled: dict[str, Estimate] | None = None,
) -> Gate:
    """The gate of an evaluation (`ragaudit.checks.metrics.evaluate.Evaluation`) at the thresholds in force
    (each with where it came from: default, config, calibration). `error_counts` are the
    error-severity issues per pipeline and `error_questions` the questions they concern; `fitted`,
    the sha256 of the labels the claim thresholds were fitted to (the checks of READS_CLAIMS say so)."""
    gated = thresholds.pipelines or list(evaluation.pipelines)
    checks: list[Check] = []
    for pipeline in gated:
        summary = evaluation.pipelines.get(pipeline)
        if summary is None:
            checks.append(
                Check(pipeline, "pipeline_ran", None, 0, False, "runs > 0", detail="no runs for this pipeline")
            )
            continue
        scope = Scope(
            pipeline,
            summary,
            [q for q in evaluation.questions if q.pipeline == pipeline],
            thresholds,
            functools.partial(evaluation.share_covered, pipeline),
            error_counts.get(pipeline, 0),
            (error_questions or {}).get(pipeline, []),
            (labelled or {}).get(pipeline),
        )
        checks += [c for rule in CHECKS if (c := _check(rule, scope)) is not None]
        if pipeline in aborted:
            checks.append(_aborted(pipeline, aborted[pipeline]))
        if baseline is not None:
            checks += _drift_checks(scope, baseline)
    checks = [c if c.name in STRUCTURAL else replace(c, source=thresholds.source(c.name)) for c in checks]
    if fitted is not None:  # the claims these checks count were judged with thresholds fitted to labels
        said = f"claims judged with thresholds fitted to labels {fitted[:19]}…"
        checks = [
            replace(c, detail=f"{c.detail}; {said}" if c.detail else said) if c.name in READS_CLAIMS else c
            for c in checks
        ]
    return Gate("pass" if all(c.passed for c in checks) else "fail", list(gated), checks)


def _check(rule: GateCheck, scope: Scope) -> Check | None:
    """One check of the table for one pipeline; None when it is left out."""
    limit = rule.threshold(scope.t)
    if limit is None:
        if rule.unset == "omit":
            return None
        why = scope.t.not_gated.get(rule.name, "no threshold set")
        return Check(scope.pipeline, rule.name, None, None, True, NOT_GATED, detail=f"{NOT_GATED}: {why}")
    assert rule.value is not None and rule.failing is not None  # a check of the [gate] table
    found = rule.value(scope)
    if found is None and rule.missing == "omit":
        return None
    errored = scope.summary.errored
    note = ERRORED_NOTE.format(n=errored, s="s" if errored != 1 else "") if errored and rule.errored_note else ""
    return Check(
        scope.pipeline,
        rule.name,
        limit,
        found,
        found is not None and COMPARE[rule.op](found, limit),
        rule.bound(limit, scope.t),
        rule.failing(scope, limit),
        note or (rule.explain(scope) if rule.explain else rule.detail),
        settings={key.name: scope.t.threshold(key.name) for key in rule.settings},
    )


def _aborted(pipeline: str, run: Aborted) -> Check:
    """A pipeline stopped by an analyzer_mismatch fails analyzer parity, naming the run's question."""
    return Check(
        pipeline,
        "analyzer_parity",
        0,
        1,
        False,
        "no analyzer_mismatch",
        [run.qid] if run.qid is not None else [],
        detail=run.text,
    )


def _moved(scope: Scope, baseline: Baseline, key: str, sign: int) -> list[str]:
    """Questions whose mean `key` moved the wrong way by more than the drift allowance."""
    before = {q.qid: q.metrics.get(key) for q in baseline.questions if q.pipeline == scope.pipeline}
    out = []
    for q in scope.questions:
        old, now = before.get(q.qid), q.metrics.get(key)
        if old is not None and now is not None and sign * (now - old) > DRIFT:
            out.append(q.qid)
    return sorted(out)


def _drift_checks(scope: Scope, baseline: Baseline) -> list[Check]:
    pipeline, summary = scope.pipeline, scope.summary
    before = baseline.pipelines.get(pipeline)
    if before is None:
        return [
            Check(
                pipeline,
                "baseline_missing",
                None,
                None,
                True,
                "pipeline in the baseline",
                detail="not in the baseline: no drift checks for this pipeline",
            )
        ]
    now_m, old_m = summary.metrics, before.metrics
    out = []
    ds_key = (
        "delta_s_excess"
        if now_m.get("delta_s_excess") is not None and old_m.get("delta_s_excess") is not None
        else "delta_s_qr"
    )
    drifts = [("drift_delta_s_mean", ds_key, +1, now_m.get(ds_key), old_m.get(ds_key))]
    drifts.append(("drift_coverage", "coverage", -1, now_m.get("coverage"), old_m.get("coverage")))
    drifts.append(
        ("drift_citation_match", "citation_match", -1, summary.citation_match_rate, before.citation_match_rate)
    )
    for name, key, sign, now, old in drifts:
        if now is None or old is None:
            continue
        change = now - old
        out.append(
            Check(
                pipeline,
                name,
                DRIFT,
                change,
                sign * change <= DRIFT,
                f"{'rise' if sign > 0 else 'fall'} <= {DRIFT}",
                _moved(scope, baseline, key, sign),
                detail=f"baseline {old:.4f}, now {now:.4f}",
            )
        )
    out.append(_regressions(scope, baseline))
    return out


def _lost(before: QuestionStats, now: QuestionStats) -> str:
    """What a question lost since the baseline, in words; empty when it lost nothing."""
    reasons = []
    if now.correct < before.correct:
        reasons.append(f"{now.correct} of {now.runs} runs correct, {before.correct} before")
    if now.ungrounded > before.ungrounded:
        reasons.append(f"{now.ungrounded} runs with unsupported or uncited claims, {before.ungrounded} before")
    if now.hallucinating > before.hallucinating:
        reasons.append(
            f"{now.hallucinating} runs stating a quantity no cited text holds, {before.hallucinating} before"
        )
    return ", ".join(reasons)


def _regressions(scope: Scope, baseline: Baseline) -> Check:
    """Questions that lost since the baseline: fewer correct runs, more runs with an unsupported
    claim or a hallucinated quantity. A fault on a few questions shows here long before any
    aggregate moves, and a question that already failed some runs can still be seen to get worse."""
    before = {q.qid: q for q in baseline.questions if q.pipeline == scope.pipeline}
    lost = {q.qid: why for q in scope.questions if q.qid in before and (why := _lost(before[q.qid].stats, q.stats))}
    held = sum(1 for q in before.values() if q.holds())
    detail = "; ".join(f"{qid}: {why}" for qid, why in sorted(lost.items())[:20])
    return Check(
        scope.pipeline,
        "regressions",
        0,
        len(lost),
        not lost,
        "no question loses correct or grounded runs",
        sorted(lost),
        detail or f"no question lost a correct or grounded run ({held} held in every run)",
        reasons=dict(sorted(lost.items())),
    )


def question_why(check: Check, question: Question) -> str:
    """Why `question` is among the questions `check` names, in words: the question's own figure
    against the check's bar (its λ state and css for lambda_convergent_min, its worst ΔS for
    delta_s_max), never the pipeline's value."""
    if question.qid in check.reasons:
        return check.reasons[question.qid]
    entry = BY_NAME.get(check.name)
    return entry.why(check, question) if entry is not None and entry.why is not None else ""
