"""The gate (SPEC §4): thresholds from `[gate]`, drift rules against a baseline report.

Each check names its threshold, the value found, pass or fail, and the questions that failed it.
`[gate] pipelines` chooses which pipelines are gated (default: all of them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

DRIFT = 0.05


@dataclass(frozen=True)
class Check:
    pipeline: str
    name: str
    threshold: object
    value: object
    passed: bool
    questions: list[str] = field(default_factory=list)
    detail: str = ""

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
) -> dict:
    """The gate section of a report: `{"verdict", "pipelines", "checks"}`. `error_counts` are the
    error-severity issues per pipeline and `error_questions` the questions they concern."""
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


def _pipeline_checks(evaluation, pipeline, summary, t, errors, error_qids, aborted) -> list[Check]:
    """The checks of one pipeline, from its questions' running statistics (the worst ΔS, the lowest
    coverage, how many runs missed or hallucinated) and its share of runs meeting coverage_min."""
    questions = [q for q in evaluation.questions if q["pipeline"] == pipeline]
    m = summary["metrics"]
    errored = summary.get("errored", 0)
    note = f"{errored} errored run{'s' if errored != 1 else ''} count as ΔS 1.0 and 0 on every rate" if errored else ""
    out = []
    worst = max((q["stats"]["max_delta_s"] for q in questions if q["stats"]["max_delta_s"] is not None), default=None)
    out.append(
        Check(
            pipeline,
            "delta_s_max",
            t["delta_s_max"],
            worst,
            worst is not None and worst <= t["delta_s_max"],
            _named(questions, lambda s: s["max_delta_s"] is None or s["max_delta_s"] > t["delta_s_max"]),
            note,
        )
    )
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
    for name, key, sign in (("drift_delta_s_mean", "delta_s_qr", +1), ("drift_coverage", "coverage", -1)):
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
    was = {
        q["qid"]
        for q in baseline.get("questions", [])
        if q.get("pipeline") == pipeline and q["lambda"]["state"] == "convergent"
    }
    now = {q["qid"]: q["lambda"]["state"] for q in evaluation.questions if q["pipeline"] == pipeline}
    lost = sorted(qid for qid in was if qid in now and now[qid] != "convergent")
    out.append(Check(pipeline, "drift_lambda", "convergent questions stay convergent", len(lost), not lost, lost))
    return out


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
