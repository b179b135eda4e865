"""The gate: thresholds from `[gate]`, drift rules against a baseline report.

Each check names its threshold (a number, or None when not gated), the value found, pass or fail,
and the questions that failed it. The checks of one pipeline are the table `CHECKS`: per check,
the `[gate]` key of its threshold, which way it compares, the pipeline's figure and which of its
questions fail it. `[gate] pipelines` chooses which pipelines are gated (default: all of them).
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field, replace
from typing import Callable

from ragaudit.agreement import Estimate
from ragaudit.io.config_schema import GateSection
from ragaudit.model import Aborted, Baseline, Check, Gate, PipelineSummary, Question, QuestionStats

DRIFT = 0.05
NOT_GATED = "not gated"
AT_MOST, AT_LEAST = "<=", ">="
_COMPARE = {AT_MOST: operator.le, AT_LEAST: operator.ge}


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


def _worst(scope: Scope, stat: str) -> float | None:
    found = [getattr(q.stats, stat) for q in scope.questions if getattr(q.stats, stat) is not None]
    return max(found, default=None)


def _share(scope: Scope, state: str) -> float:
    return sum(q.lam.state == state for q in scope.questions) / len(scope.questions) if scope.questions else 0.0


def _above(value: float | None, limit: float) -> bool:
    """A value unknown or above the limit."""
    return value is None or value > limit


def _by_stats(failing: Callable[[QuestionStats, float], bool]) -> Callable[[Scope, float], list[str]]:
    return lambda scope, limit: sorted(q.qid for q in scope.questions if failing(q.stats, limit))


@dataclass(frozen=True)
class Rule:
    """One row of the gate's table. `value` is the pipeline's figure (None: not measured);
    `failing` names the questions that fail it at a threshold. Without a threshold the check is
    left out (`unset="omit"`) or kept as not gated (`unset="not gated"`); without a value it is
    left out (`missing="omit"`) or fails (`missing="fail"`)."""

    name: str
    op: str
    value: Callable[[Scope], float | None]
    failing: Callable[[Scope, float], list[str]]
    detail: str = ""
    unset: str = "omit"
    missing: str = "fail"
    errored_note: bool = False  # the detail says how errored runs count
    settings: tuple[str, ...] = ()  # other [gate] keys the check reads
    explain: Callable[[Scope], str] | None = None  # its detail, from what the pipeline found

    def threshold(self, t: GateSection) -> float | None:
        return t.threshold(self.name)

    def bound(self, limit: float, t: GateSection) -> str:
        return f"{limit:g}"


@dataclass(frozen=True)
class CoverageRule(Rule):
    """coverage_pass_rate: the share of runs whose coverage reaches coverage_min."""

    def bound(self, limit: float, t: GateSection) -> str:
        return f"{limit:g} of runs at coverage ≥ {t.coverage_min:g}"


@dataclass(frozen=True)
class ForbidRule(Rule):
    """lambda_forbid: no question in a forbidden λ state; its threshold is the count allowed, 0."""

    def threshold(self, t: GateSection) -> float | None:
        return 0

    def bound(self, limit: float, t: GateSection) -> str:
        return "none " + ", ".join(t.lambda_forbid) if t.lambda_forbid else "none forbidden"


def _labelled_detail(found: Estimate | None) -> str:
    if found is None:
        return "no labels of this pipeline's runs ([labels] path names none)"
    if found.ci is None:
        return f"no corrected good-run rate: {found.why_not}"
    return (
        f"good-run rate {found.rate:.3f} over {found.runs} runs, corrected by {found.labelled} labels on a random "
        f"sample to {found.corrected:.3f}, 95% interval [{found.ci[0]:.3f}, {found.ci[1]:.3f}]"
    )


ERRORED_NOTE = "{n} errored run{s} count as ΔS 1.0 and 0 on every rate"

CHECKS: tuple[Rule, ...] = (
    Rule(
        "delta_s_excess_max",
        AT_MOST,
        lambda s: _worst(s, "max_delta_s_excess"),
        _by_stats(lambda st, t: st.max_delta_s_excess is not None and st.max_delta_s_excess > t),
        "each run's ΔS excess over the gold text's: max(0, delta_s_qr − delta_s_gold)",
        unset=NOT_GATED,
        missing="omit",
        errored_note=True,
    ),
    Rule(
        "delta_s_max",
        AT_MOST,
        lambda s: _worst(s, "max_delta_s"),
        _by_stats(lambda st, t: st.max_delta_s is None or st.max_delta_s > t),
        errored_note=True,
    ),
    Rule(
        "delta_s_mean_max",
        AT_MOST,
        lambda s: s.summary.metrics.get("delta_s_qr"),
        lambda s, t: sorted(q.qid for q in s.questions if _above(q.metrics.get("delta_s_qr"), t)),
        errored_note=True,
    ),
    CoverageRule(
        "coverage_pass_rate",
        AT_LEAST,
        lambda s: s.covered(s.t.coverage_min),
        lambda s, t: _by_stats(
            lambda st, _: st.coverage_missing > 0 or st.min_coverage is None or st.min_coverage < s.t.coverage_min
        )(s, t),
        settings=("coverage_min",),
    ),
    Rule(
        "citation_match_min",
        AT_LEAST,
        lambda s: s.summary.citation_match_rate or 0.0,
        _by_stats(lambda st, _: st.unmatched > 0),
        errored_note=True,
    ),
    Rule(
        "lambda_convergent_min",
        AT_LEAST,
        lambda s: _share(s, "convergent"),
        lambda s, _: sorted(q.qid for q in s.questions if q.lam.state != "convergent"),
    ),
    ForbidRule(
        "lambda_forbid",
        AT_MOST,
        lambda s: sum(q.lam.state in s.t.lambda_forbid for q in s.questions),
        lambda s, _: sorted(q.qid for q in s.questions if q.lam.state in s.t.lambda_forbid),
    ),
    Rule(
        "hallucination_max",
        AT_MOST,
        lambda s: sum(q.stats.hallucinating for q in s.questions),
        _by_stats(lambda st, _: st.hallucinating > 0),
        "runs whose answer states a quantity or identifier that no cited text contains",
    ),
    Rule(
        "grounded_pass_rate",
        AT_LEAST,
        lambda s: s.summary.metrics.get("fully_grounded"),
        _by_stats(lambda st, _: st.ungrounded > 0),
        "share of answered runs whose every claim its cited texts support",
        unset=NOT_GATED,
        missing="omit",
    ),
    Rule(
        "labelled_good_min",
        AT_LEAST,
        lambda s: s.labelled.ci[0] if s.labelled is not None and s.labelled.ci is not None else None,
        lambda s, _: [],
        explain=lambda s: _labelled_detail(s.labelled),
    ),
    Rule(
        "faithful_min",
        AT_LEAST,
        lambda s: s.summary.metrics.get("faithful"),
        lambda s, t: sorted(q.qid for q in s.questions if (v := q.metrics.get("faithful")) is not None and v < t),
        "share of probe runs whose answer follows its edited source (ragaudit probe)",
        missing="omit",  # a run measures no faithfulness: only a probe's report has it
    ),
    Rule(
        "max_errors",
        AT_MOST,
        lambda s: s.errors,
        lambda s, _: sorted(s.error_questions),
        "validator issues of severity error",
    ),
)
CHECK_NAMES = tuple(rule.name for rule in CHECKS)
# [gate]'s fields are this table's thresholds and the settings its checks read, and nothing else
# (tests/test_registries.py holds the two in step)
READ = {*CHECK_NAMES, *(key for rule in CHECKS for key in rule.settings), "pipelines"}
# the checks that read no [gate] threshold: their source is always "default"
STRUCTURAL: tuple[str, ...] = ("pipeline_ran", "analyzer_parity", "baseline_missing", "drift_delta_s_mean")
STRUCTURAL += ("drift_coverage", "drift_citation_match", "regressions")


_RULES = {rule.name: rule for rule in CHECKS}
# the bar of each check that reads no [gate] threshold, as `bar` states it
_STRUCTURAL_BARS = {
    "pipeline_ran": (">", lambda threshold: 0.0),  # runs > 0
    "analyzer_parity": (AT_MOST, lambda threshold: threshold),  # analyzer_mismatch count <= 0
    "drift_delta_s_mean": (AT_MOST, lambda threshold: threshold),  # rise <= DRIFT
    "drift_coverage": (AT_LEAST, lambda threshold: -threshold),  # fall <= DRIFT: change >= -DRIFT
    "drift_citation_match": (AT_LEAST, lambda threshold: -threshold),
    "regressions": (AT_MOST, lambda threshold: threshold),  # questions that lost <= 0
}


def bar(name: str, threshold: float | None) -> tuple[str, float] | None:
    """The bar a check held its value to, as `value comparator threshold` (`>=`, `<=`, `>`): a
    drift check's fall of at most 0.05 is a change >= -0.05. None for a check not gated, which
    holds the value to no bar (`baseline_missing`, a threshold left unset)."""
    if name in _RULES:
        return (_RULES[name].op, threshold) if threshold is not None else None
    if name not in _STRUCTURAL_BARS or (threshold is None and name != "pipeline_ran"):
        return None
    comparator, limit = _STRUCTURAL_BARS[name]
    return comparator, limit(threshold)


# the checks that count what a claim's judgement decides (correct, grounded): a fit to labels moves them
READS_CLAIMS = ("lambda_convergent_min", "lambda_forbid", "grounded_pass_rate", "regressions")


def fitted_to(config) -> str | None:
    """The sha256 of the labels the config's claim thresholds were fitted to, when it reads such a calibration."""
    calibration = getattr(config, "calibration", None)
    return calibration.labels if calibration is not None and calibration.claims else None


def evaluate_gate(
    evaluation,
    thresholds: GateSection,
    *,
    error_counts: dict[str, int],
    aborted: dict[str, Aborted],
    baseline: Baseline | None = None,
    error_questions: dict[str, list[str]] | None = None,
    fitted: str | None = None,
    labelled: dict[str, Estimate] | None = None,
) -> Gate:
    """The gate of an evaluation (`ragaudit.metrics.evaluate.Evaluation`) at the thresholds in force
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


def _check(rule: Rule, scope: Scope) -> Check | None:
    """One check of the table for one pipeline; None when it is left out."""
    limit = rule.threshold(scope.t)
    if limit is None:
        if rule.unset == "omit":
            return None
        why = scope.t.not_gated.get(rule.name, "no threshold set")
        return Check(scope.pipeline, rule.name, None, None, True, NOT_GATED, detail=f"{NOT_GATED}: {why}")
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
        found is not None and _COMPARE[rule.op](found, limit),
        rule.bound(limit, scope.t),
        rule.failing(scope, limit),
        note or (rule.explain(scope) if rule.explain else rule.detail),
        settings={key: scope.t.threshold(key) for key in rule.settings},
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


def _n(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.3g}"


def _beyond(value: float | None, sign: str, bar: float | None) -> str:
    """`0.3862 > 0.3856`: a question's figure against the bar it crossed, each with as many digits
    beyond three as it takes to tell them apart (rounded alike, never `0.386 > 0.386`)."""
    if value is None or bar is None or value == bar:
        return f"{_n(value)} {sign} {_n(bar)}"
    digits = next((d for d in range(3, 17) if f"{value:.{d}g}" != f"{bar:.{d}g}"), 17)
    return f"{value:.{digits}g} {sign} {bar:.{digits}g}"


def _runs(count: int, q: Question, what: str) -> str:
    return f"{count} of {q.stats.runs} runs {what}"


# Per check, why one question it names fails it, from the question's own figures and the check's
# threshold and settings: a pipeline-wide value says how the pipeline did, this says what to look at.
_WHY: dict[str, Callable[[Check, Question], str]] = {
    "delta_s_excess_max": lambda c, q: (
        f"its worst run's ΔS excess {_beyond(q.stats.max_delta_s_excess, '>', c.threshold)}"
    ),
    "delta_s_max": lambda c, q: f"its worst run's ΔS {_beyond(q.stats.max_delta_s, '>', c.threshold)}",
    "delta_s_mean_max": lambda c, q: f"its mean ΔS {_beyond(q.metrics.get('delta_s_qr'), '>', c.threshold)}",
    "coverage_pass_rate": lambda c, q: (
        f"its lowest coverage {_beyond(q.stats.min_coverage, '< coverage_min', c.settings.get('coverage_min'))}"
        + (f", {_runs(q.stats.coverage_missing, q, 'without a coverage')}" if q.stats.coverage_missing else "")
    ),
    "citation_match_min": lambda c, q: _runs(q.stats.unmatched, q, "cite no span that matches the gold"),
    "lambda_convergent_min": lambda c, q: (
        f"its λ is {q.lam.state} (css {_n(q.lam.css)}, spread {_n(q.lam.spread)}), not convergent"
    ),
    "lambda_forbid": lambda c, q: f"its λ is {q.lam.state}, a forbidden state ({c.bound})",
    "hallucination_max": lambda c, q: _runs(
        q.stats.hallucinating, q, "state a quantity or identifier no cited text holds"
    ),
    "grounded_pass_rate": lambda c, q: _runs(q.stats.ungrounded, q, "have a claim their cited texts do not support"),
    "faithful_min": lambda c, q: (
        f"its probe runs follow their edited source at a rate of {_n(q.metrics.get('faithful'))} < {_n(c.threshold)}"
    ),
    "max_errors": lambda c, q: "its runs have validator issues of severity error (issues.jsonl lists them)",
    "analyzer_parity": lambda c, q: c.detail,
    "drift_delta_s_mean": lambda c, q: f"its mean ΔS rose by more than {_n(c.threshold)} since the baseline",
    "drift_coverage": lambda c, q: f"its mean coverage fell by more than {_n(c.threshold)} since the baseline",
    "drift_citation_match": lambda c, q: f"its citation match fell by more than {_n(c.threshold)} since the baseline",
}


def question_why(check: Check, question: Question) -> str:
    """Why `question` is among the questions `check` names, in words: the question's own figure
    against the check's bar (its λ state and css for lambda_convergent_min, its worst ΔS for
    delta_s_max), never the pipeline's value."""
    if question.qid in check.reasons:
        return check.reasons[question.qid]
    why = _WHY.get(check.name)
    return why(check, question) if why else ""
