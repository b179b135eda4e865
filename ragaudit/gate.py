"""The gate (docs/reference.md §4): thresholds from `[gate]`, drift rules against a baseline report.

Each check names its threshold, the value found, pass or fail, and the questions that failed it.
`[gate] pipelines` chooses which pipelines are gated (default: all of them).
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field

DRIFT = 0.05
NOT_GATED = "not gated"


@dataclass(frozen=True)
class Check:
    pipeline: str
    name: str
    threshold: object
    value: object
    passed: bool
    questions: list[str] = field(default_factory=list)
    detail: str = ""
    source: str = "default"  # where the threshold came from: default, config, or calibration
    reasons: dict[str, str] = field(default_factory=dict)  # qid -> why that question fails it, where known

    def to_dict(self) -> dict:
        return asdict(self)


def evaluate_gate(
    evaluation,
    thresholds: dict,
    *,
    error_counts: dict[str, int],
    aborted: dict[str, str],
    baseline: dict | None = None,
    error_questions: dict[str, list[str]] | None = None,
    sources: dict[str, str] | None = None,
) -> dict:
    """The gate section of a report: `{"verdict", "pipelines", "checks"}`. `error_counts` are the
    error-severity issues per pipeline and `error_questions` the questions they concern; `sources`
    says where each threshold came from (default, config, calibration)."""
    gated = thresholds.get("pipelines") or list(evaluation.pipelines)
    checks: list[Check] = []
    for pipeline in gated:
        summary = evaluation.pipelines.get(pipeline)
        if summary is None:
            checks.append(Check(pipeline, "pipeline_ran", "runs > 0", 0, False, detail="no runs for this pipeline"))
            continue
        checks += _pipeline_checks(
            evaluation,
            pipeline,
            summary,
            thresholds,
            error_counts.get(pipeline, 0),
            (error_questions or {}).get(pipeline, []),
            aborted.get(pipeline),
        )
        if baseline is not None:
            checks += _drift_checks(evaluation, pipeline, summary, baseline)
    where = sources or {}
    checks = [
        c
        if c.name.startswith(("drift_", "baseline_", "pipeline_", "analyzer_")) or c.name == "regressions"
        else dataclasses.replace(c, source=where.get(c.name, "default"))
        for c in checks
    ]
    return {
        "verdict": "pass" if all(c.passed for c in checks) else "fail",
        "pipelines": list(gated),
        "checks": [c.to_dict() for c in checks],
    }


def flagged_questions(gate: dict) -> dict[str, set[str]]:
    """Per pipeline, every question that a failing gate check names: what a reader of a failed
    gate is pointed at. A passing check's list (a few questions below a per-run bar while the
    rate still passes) is shown in the report but flags nothing."""
    out: dict[str, set[str]] = {p: set() for p in gate.get("pipelines", [])}
    for check in gate["checks"]:
        if not check["passed"]:
            out.setdefault(check["pipeline"], set()).update(check.get("questions") or [])
    return out


def _named(questions: list[dict], failing) -> list[str]:
    return sorted(q["qid"] for q in questions if failing(q["stats"]))


def _not_gated(pipeline: str, name: str, why: str) -> Check:
    return Check(pipeline, name, None, None, True, detail=f"{NOT_GATED}: {why}")


def _pipeline_checks(evaluation, pipeline, summary, t, errors, error_qids, aborted) -> list[Check]:
    """The checks of one pipeline, from its questions' running statistics (the worst ΔS, the lowest
    coverage, how many runs missed, hallucinated or were not grounded) and its share of runs
    meeting coverage_min. A threshold of None (a calibration found the check cannot separate good
    runs from bad on this gold set) keeps the check in the report as not gated."""
    questions = [q for q in evaluation.questions if q["pipeline"] == pipeline]
    m = summary["metrics"]
    errored = summary.get("errored", 0)
    note = f"{errored} errored run{'s' if errored != 1 else ''} count as ΔS 1.0 and 0 on every rate" if errored else ""
    why = t.get("not_gated") or {}
    out = []
    limit = t.get("delta_s_excess_max")
    worst = max(
        (q["stats"].get("max_delta_s_excess") for q in questions if q["stats"].get("max_delta_s_excess") is not None),
        default=None,
    )
    if limit is None:
        out.append(_not_gated(pipeline, "delta_s_excess_max", why.get("delta_s_excess_max", "no threshold set")))
    elif worst is not None:
        out.append(
            Check(
                pipeline,
                "delta_s_excess_max",
                limit,
                worst,
                worst <= limit,
                _named(
                    questions,
                    lambda s: s.get("max_delta_s_excess") is not None and s["max_delta_s_excess"] > limit,
                ),
                note or "each run's ΔS excess over the gold text's: max(0, delta_s_qr − delta_s_gold)",
            )
        )
    if t.get("delta_s_max") is not None:
        ds_max = max(
            (q["stats"]["max_delta_s"] for q in questions if q["stats"]["max_delta_s"] is not None), default=None
        )
        out.append(
            Check(
                pipeline,
                "delta_s_max",
                t["delta_s_max"],
                ds_max,
                ds_max is not None and ds_max <= t["delta_s_max"],
                _named(questions, lambda s: s["max_delta_s"] is None or s["max_delta_s"] > t["delta_s_max"]),
                note,
            )
        )
    if t.get("delta_s_mean_max") is not None:
        out.append(
            Check(
                pipeline,
                "delta_s_mean_max",
                t["delta_s_mean_max"],
                m["delta_s_qr"],
                m["delta_s_qr"] is not None and m["delta_s_qr"] <= t["delta_s_mean_max"],
                sorted(
                    q["qid"]
                    for q in questions
                    if q["metrics"]["delta_s_qr"] is None or q["metrics"]["delta_s_qr"] > t["delta_s_mean_max"]
                ),
                note,
            )
        )
    share = evaluation.share_covered(pipeline, t["coverage_min"])
    out.append(
        Check(
            pipeline,
            "coverage_pass_rate",
            {"coverage_min": t["coverage_min"], "pass_rate": t["coverage_pass_rate"]},
            share,
            share >= t["coverage_pass_rate"],
            _named(
                questions,
                lambda s: (
                    s["coverage_missing"] > 0 or s["min_coverage"] is None or s["min_coverage"] < t["coverage_min"]
                ),
            ),
        )
    )
    rate = summary["citation_match_rate"] or 0.0
    out.append(
        Check(
            pipeline,
            "citation_match_min",
            t["citation_match_min"],
            rate,
            rate >= t["citation_match_min"],
            _named(questions, lambda s: s["unmatched"] > 0),
            note,
        )
    )
    convergent = sum(q["lambda"]["state"] == "convergent" for q in questions) / len(questions) if questions else 0.0
    out.append(
        Check(
            pipeline,
            "lambda_convergent_min",
            t["lambda_convergent_min"],
            convergent,
            convergent >= t["lambda_convergent_min"],
            sorted(q["qid"] for q in questions if q["lambda"]["state"] != "convergent"),
        )
    )
    forbidden = sorted(q["qid"] for q in questions if q["lambda"]["state"] in t["lambda_forbid"])
    out.append(Check(pipeline, "lambda_forbid", list(t["lambda_forbid"]), len(forbidden), not forbidden, forbidden))
    hallucinating = sum(q["stats"]["hallucinating"] for q in questions)
    out.append(
        Check(
            pipeline,
            "hallucination_max",
            t["hallucination_max"],
            hallucinating,
            hallucinating <= t["hallucination_max"],
            _named(questions, lambda s: s["hallucinating"] > 0),
            "runs whose answer states a quantity or identifier that no cited text contains",
        )
    )
    grounded = m.get("fully_grounded")
    if t.get("grounded_pass_rate") is None:
        out.append(_not_gated(pipeline, "grounded_pass_rate", why.get("grounded_pass_rate", "no threshold set")))
    elif grounded is not None:
        out.append(
            Check(
                pipeline,
                "grounded_pass_rate",
                t["grounded_pass_rate"],
                grounded,
                grounded >= t["grounded_pass_rate"],
                _named(questions, lambda s: s.get("ungrounded", 0) > 0),
                "share of answered runs whose every claim its cited texts support",
            )
        )
    out.append(
        Check(
            pipeline,
            "max_errors",
            t["max_errors"],
            errors,
            errors <= t["max_errors"],
            sorted(error_qids),
            "validator issues of severity error",
        )
    )
    if aborted:
        qid = aborted.split(" ", 1)[0]
        out.append(Check(pipeline, "analyzer_parity", "no analyzer_mismatch", "aborted", False, [qid], detail=aborted))
    return out


def _moved(evaluation, pipeline, baseline: dict, key: str, sign: int) -> list[str]:
    """Questions whose mean `key` moved the wrong way by more than the drift allowance."""
    before = {
        q["qid"]: (q.get("metrics") or {}).get(key)
        for q in baseline.get("questions", [])
        if q.get("pipeline") == pipeline
    }
    out = []
    for q in evaluation.questions:
        old, now = before.get(q["qid"]), (q.get("metrics") or {}).get(key)
        if q["pipeline"] == pipeline and old is not None and now is not None and sign * (now - old) > DRIFT:
            out.append(q["qid"])
    return sorted(out)


def _drift_checks(evaluation, pipeline, summary, baseline: dict) -> list[Check]:
    before = baseline.get("summary", {}).get("pipelines", {}).get(pipeline)
    if before is None:
        return [
            Check(
                pipeline,
                "baseline_missing",
                "pipeline in the baseline",
                None,
                True,
                detail="not in the baseline: no drift checks for this pipeline",
            )
        ]
    now_m, old_m = summary["metrics"], before["metrics"]
    out = []
    ds_key = (
        "delta_s_excess"
        if now_m.get("delta_s_excess") is not None and old_m.get("delta_s_excess") is not None
        else "delta_s_qr"
    )
    for name, key, sign in (("drift_delta_s_mean", ds_key, +1), ("drift_coverage", "coverage", -1)):
        if now_m.get(key) is None or old_m.get(key) is None:
            continue
        change = now_m[key] - old_m[key]
        out.append(
            Check(
                pipeline,
                name,
                f"{'rise' if sign > 0 else 'fall'} <= {DRIFT}",
                change,
                sign * change <= DRIFT,
                _moved(evaluation, pipeline, baseline, key, sign),
                detail=f"baseline {old_m[key]:.4f}, now {now_m[key]:.4f}",
            )
        )
    if summary.get("citation_match_rate") is not None and before.get("citation_match_rate") is not None:
        change = summary["citation_match_rate"] - before["citation_match_rate"]
        out.append(
            Check(
                pipeline,
                "drift_citation_match",
                f"fall <= {DRIFT}",
                change,
                -change <= DRIFT,
                _moved(evaluation, pipeline, baseline, "citation_match", -1),
                detail=f"baseline {before['citation_match_rate']:.4f}, now {summary['citation_match_rate']:.4f}",
            )
        )
    out.append(_regressions(evaluation, pipeline, baseline))
    return out


def holds(stats: dict) -> bool:
    """A question holds when every run of it is correct, grounded and free of hallucinations."""
    return (
        stats.get("runs", 0) > 0
        and stats.get("correct") == stats.get("runs")
        and not stats.get("ungrounded")
        and not stats.get("hallucinating")
    )


def _lost(before: dict, now: dict) -> str:
    """What a question lost since the baseline, in words; empty when it lost nothing."""
    runs = now.get("runs", 0)
    reasons = []
    if now.get("correct", 0) < before.get("correct", 0):
        reasons.append(f"{now.get('correct', 0)} of {runs} runs correct, {before.get('correct', 0)} before")
    if now.get("ungrounded", 0) > before.get("ungrounded", 0):
        reasons.append(
            f"{now['ungrounded']} runs with unsupported or uncited claims, {before.get('ungrounded', 0)} before"
        )
    if now.get("hallucinating", 0) > before.get("hallucinating", 0):
        reasons.append(
            f"{now['hallucinating']} runs stating a quantity no cited text holds, {before.get('hallucinating', 0)} before"
        )
    return ", ".join(reasons)


def _regressions(evaluation, pipeline: str, baseline: dict) -> Check:
    """Questions that lost since the baseline: fewer correct runs, more runs with an unsupported
    claim or a hallucinated quantity. A fault on a few questions shows here long before any
    aggregate moves, and a question that already failed some runs can still be seen to get worse."""
    before = {
        q["qid"]: q["stats"]
        for q in baseline.get("questions", [])
        if q.get("pipeline") == pipeline and isinstance(q.get("stats"), dict)
    }
    lost = {
        q["qid"]: why
        for q in evaluation.questions
        if q["pipeline"] == pipeline and q["qid"] in before and (why := _lost(before[q["qid"]], q["stats"]))
    }
    held = sum(1 for stats in before.values() if holds(stats))
    detail = "; ".join(f"{qid}: {why}" for qid, why in sorted(lost.items())[:20])
    return Check(
        pipeline,
        "regressions",
        "no question loses correct or grounded runs",
        len(lost),
        not lost,
        sorted(lost),
        detail or f"no question lost a correct or grounded run ({held} held in every run)",
        reasons=dict(sorted(lost.items())),
    )


def foreign_baseline(inputs: dict | None, baseline: dict) -> str | None:
    """Why a baseline cannot be compared with a run on these inputs (another gold set or corpus),
    or None when it can. `inputs` are sha256 by name, as a manifest records them."""
    theirs = (baseline.get("meta") or {}).get("inputs") or {}
    differ = [name for name in ("gold", "corpus") if (inputs or {}).get(name) != theirs.get(name)]
    if not differ:
        return None
    return f"expected a baseline built on the same {' and '.join(differ)}, found one built on " + ", ".join(
        f"{name} {str(theirs.get(name))[:12]}… (now {str((inputs or {}).get(name))[:12]}…)" for name in differ
    )


def missing_from_baseline(gate: dict) -> list[str]:
    return [c["pipeline"] for c in gate["checks"] if c["name"] == "baseline_missing"]


def evaluation_of(report: dict, coverage_share=None):
    """The parts of an Evaluation the gate reads, taken back from a report.json; `coverage_share`
    reads the per-run coverage kept beside the report (runs.parquet)."""
    from ragaudit.metrics.evaluate import Evaluation

    return Evaluation(
        questions=report["questions"],
        sections=report["summary"].get("sections", []),
        pipelines=report["summary"]["pipelines"],
        coverage_share=coverage_share,
    )
