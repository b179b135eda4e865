"""The gate's checks, one entry each, and everything about a check in its entry (`GateCheck`): its
`[gate]` key (kind, range, default, its row in docs/reference.md §1.5) and the other keys it reads,
which way it compares, its value and the questions failing it, why one question fails it, how
`ragaudit calibrate` tunes it, the history's name for its figure, the metric it gates, its card on
report.html and its row in docs/reference.md §4. The `[gate]` model, the gate, calibration, the
history, attestations, `Metric.gated_by` and the report's cards are made from these entries.
A structural check (`pipeline_ran`, `analyzer_parity`, drift, `regressions`, `baseline_missing`)
reads no `[gate]` key: the gate computes it, and its entry holds its bar, why and documentation.
"""

from __future__ import annotations

from ragaudit.core.gatechecks.entry import (
    ABOVE,
    AT_LEAST,
    AT_MOST,
    DRIFT,
    NOT_GATED,
    Card,
    GateCheck,
    Key,
    Tune,
    beyond,
    by_stats,
    convergent,
    covered,
    labelled_detail,
    number,
    run_share,
    runs_that,
    share_in,
    worst,
)

COVERAGE_MIN = Key("coverage_min", "rate", 0.70, "the coverage a run must reach ...", nullable=False, calibrated=True)

# Defaults from the fault benchmark over three corpora and two answer styles (bench/faults.py):
# clean pipelines, extractive or LLM-written, pass on every corpus; every fault class fails.
# Absolute ΔS depends on the corpus: it is reported always and gated only when a config sets it.
# A check's threshold is None when not gated: TOML cannot say so, a calibration can (`from`).
CHECKS: tuple[GateCheck, ...] = (
    GateCheck(
        "delta_s_excess_max",
        AT_MOST,
        "a run's ΔS excess exceeds `delta_s_excess_max`; the value is the worst run's (not gated when the "
        "threshold is null: a calibration found it separates nothing here, and the check's `detail` says so)",
        "those with such a run",
        Key(
            "delta_s_excess_max",
            "rate",
            0.25,
            "the largest ΔS excess any run may have: how much farther from the question its closest cited "
            "statement lies than the gold's (§3)",
            calibrated=True,
        ),
        value=lambda s: worst(s, "max_delta_s_excess"),
        failing=by_stats(lambda st, t: st.max_delta_s_excess is not None and st.max_delta_s_excess > t),
        why=lambda c, q: f"its worst run's ΔS excess {beyond(q.stats.max_delta_s_excess, '>', c.threshold)}",
        detail="each run's ΔS excess over the gold text's: max(0, delta_s_qr − delta_s_gold)",
        unset=NOT_GATED,
        missing="omit",
        errored_note=True,
        tune=Tune("max", lambda q: q.stats.max_delta_s_excess),
        history="delta_s_excess",
        metric="delta_s_excess",
        card=Card(
            3,
            "ΔS excess",
            lambda p, check, t: (check or {}).get("value"),
            form="num",
            hint="how much farther from the question the cited text lies than the gold text (worst run)",
            mean="delta_s_excess",
        ),
    ),
    GateCheck(
        "delta_s_max",
        AT_MOST,
        "when set: a run's absolute ΔS exceeds it; the value is the worst run's",
        "those with such a run",
        Key(
            "delta_s_max",
            "rate",
            None,
            "the largest absolute ΔS any run may have; reported always, gated only when set (absolute ΔS "
            "depends on the corpus)",
        ),
        value=lambda s: worst(s, "max_delta_s"),
        failing=by_stats(lambda st, t: st.max_delta_s is None or st.max_delta_s > t),
        why=lambda c, q: f"its worst run's ΔS {beyond(q.stats.max_delta_s, '>', c.threshold)}",
        errored_note=True,
        history="delta_s_qr",
    ),
    GateCheck(
        "delta_s_mean_max",
        AT_MOST,
        "when set: the mean absolute ΔS over runs exceeds it",
        "those whose mean exceeds it",
        Key("delta_s_mean_max", "rate", None, "the largest mean absolute ΔS over runs; gated only when set"),
        value=lambda s: s.summary.metrics.get("delta_s_qr"),
        failing=lambda s, t: sorted(q.qid for q in s.questions if (v := q.metrics.get("delta_s_qr")) is None or v > t),
        why=lambda c, q: f"its mean ΔS {beyond(q.metrics.get('delta_s_qr'), '>', c.threshold)}",
        errored_note=True,
        history="delta_s_qr",
    ),
    GateCheck(
        "coverage_pass_rate",
        AT_LEAST,
        "fewer than `coverage_pass_rate` of the runs reach `coverage_min`",
        "those with a run below `coverage_min`",
        Key("coverage_pass_rate", "rate", 0.90, "... in at least this share of runs", calibrated=True),
        (COVERAGE_MIN,),
        value=lambda s: s.covered(s.t.threshold("coverage_min")),
        failing=lambda s, t: by_stats(
            lambda st, _: (
                st.coverage_missing > 0 or st.min_coverage is None or st.min_coverage < s.t.threshold("coverage_min")
            )
        )(s, t),
        why=lambda c, q: (
            f"its lowest coverage {beyond(q.stats.min_coverage, '< coverage_min', c.settings.get('coverage_min'))}"
            + (f", {runs_that(q.stats.coverage_missing, q, 'without a coverage')}" if q.stats.coverage_missing else "")
        ),
        bound_of=lambda limit, t: f"{limit:g} of runs at coverage ≥ {t.threshold('coverage_min'):g}",
        tune=Tune("rate", lambda q: 1.0 - (q.stats.min_coverage or 0.0)),
        history="coverage",
        metric="coverage",
        card=Card(
            2,
            "Coverage ≥ {coverage_min:g}",
            lambda p, check, t: covered(p, check, t.threshold("coverage_min")),
            hint="share of runs whose coverage of the gold span is at least {coverage_min:g}",
            mean="coverage",
        ),
    ),
    GateCheck(
        "citation_match_min",
        AT_LEAST,
        "the citation match rate is below `citation_match_min`",
        "those with an unmatched run",
        Key(
            "citation_match_min", "rate", 0.95, "the lowest citation match rate (errored runs count 0)", calibrated=True
        ),
        value=lambda s: s.summary.citation_match_rate or 0.0,
        failing=by_stats(lambda st, _: st.unmatched > 0),
        why=lambda c, q: runs_that(q.stats.unmatched, q, "cite no span that matches the gold"),
        errored_note=True,
        tune=Tune("rate", run_share("unmatched")),
        history="citation_match",
        metric="citation_match",
        card=Card(1, "Citation match", lambda p, check, t: p.get("citation_match_rate")),
    ),
    GateCheck(
        "lambda_convergent_min",
        AT_LEAST,
        "the share of convergent questions is below `lambda_convergent_min`",
        "those not convergent",
        Key("lambda_convergent_min", "rate", 0.85, "the lowest share of convergent questions", calibrated=True),
        value=lambda s: share_in(s, "convergent"),
        failing=lambda s, _: sorted(q.qid for q in s.questions if q.lam.state != "convergent"),
        why=lambda c, q: (
            f"its λ is {q.lam.state} (css {number(q.lam.css)}, spread {number(q.lam.spread)}), not convergent"
        ),
        reads_claims=True,
        tune=Tune("rate", lambda q: 0.0 if q.lam.state == "convergent" else 1.0),
        history="convergent_share",
        metric="correct",
        card=Card(5, "λ convergent", convergent),
    ),
    # a question some run of which errored or cited nothing; a question every run gets wrong is counted
    # by lambda_convergent_min and, against a baseline, by regressions, not failed outright
    GateCheck(
        "lambda_forbid",
        AT_MOST,
        "some question ends in a state of `lambda_forbid`; the value is how many",
        "those questions",
        Key(
            "lambda_forbid",
            "states",
            ("divergent",),
            "states no question may end in (a question every run gets wrong is `chaotic`: counted by "
            "`lambda_convergent_min`, and named by `regressions` against a baseline)",
            nullable=False,
        ),
        value=lambda s: sum(q.lam.state in s.t.threshold("lambda_forbid") for q in s.questions),
        failing=lambda s, _: sorted(q.qid for q in s.questions if q.lam.state in s.t.threshold("lambda_forbid")),
        why=lambda c, q: f"its λ is {q.lam.state}, a forbidden state ({c.bound})",
        limit=lambda t: 0,  # its key holds the states; the count allowed is 0
        bound_of=lambda limit, t: (
            "none " + ", ".join(t.threshold("lambda_forbid")) if t.threshold("lambda_forbid") else "none forbidden"
        ),
        reads_claims=True,
        history="convergent_share",
        metric="correct",
    ),
    GateCheck(
        "hallucination_max",
        AT_MOST,
        "more runs than `hallucination_max` state a quantity or identifier no cited text contains",
        "those with such a run",
        Key(
            "hallucination_max",
            "count",
            0,
            "runs that may state a quantity or identifier no cited text contains",
            calibrated=True,
        ),
        value=lambda s: sum(q.stats.hallucinating for q in s.questions),
        failing=by_stats(lambda st, _: st.hallucinating > 0),
        why=lambda c, q: runs_that(q.stats.hallucinating, q, "state a quantity or identifier no cited text holds"),
        detail="runs whose answer states a quantity or identifier that no cited text contains",
        tune=Tune("count", run_share("hallucinating")),
        history="hallucinating_runs",
        metric="hallucinations",
    ),
    GateCheck(
        "grounded_pass_rate",
        AT_LEAST,
        "fewer than `grounded_pass_rate` of the answered runs have every claim supported by its cited texts",
        "those with a run holding an unsupported or uncited claim",
        Key(
            "grounded_pass_rate",
            "rate",
            0.90,
            "the lowest share of answered runs whose every claim its cited texts support (errored runs count 0)",
            calibrated=True,
        ),
        value=lambda s: s.summary.metrics.get("fully_grounded"),
        failing=by_stats(lambda st, _: st.ungrounded > 0),
        why=lambda c, q: runs_that(q.stats.ungrounded, q, "have a claim their cited texts do not support"),
        detail="share of answered runs whose every claim its cited texts support",
        unset=NOT_GATED,
        missing="omit",
        reads_claims=True,
        tune=Tune("rate", run_share("ungrounded")),
        history="fully_grounded",
        metric="fully_grounded",
        card=Card(
            4,
            "Grounded",
            lambda p, check, t: (p.get("metrics") or {}).get("fully_grounded"),
            hint="share of answered runs whose every claim its cited texts support",
        ),
    ),
    GateCheck(
        "labelled_good_min",
        AT_LEAST,
        "when set: the lower end of the 95% interval of the good-run rate corrected by labels on a random "
        "sample is below it, or there is no such rate (the `detail` says why: too few labels at random)",
        "none",
        # the lower end of the good-run rate's 95% interval corrected by labels on a random sample ([labels])
        Key(
            "labelled_good_min",
            "rate",
            None,
            "the lowest good-run rate at the lower end of its 95% interval, corrected by the labels of "
            "`[labels] path` on a random sample (§12); gated only when set",
        ),
        value=lambda s: s.labelled.ci[0] if s.labelled is not None and s.labelled.ci is not None else None,
        failing=lambda s, _: [],
        explain=lambda s: labelled_detail(s.labelled),
    ),
    GateCheck(
        "faithful_min",
        AT_LEAST,
        "when set, in a probe's report (§13): the share of the pipeline's probe runs that follow their edited "
        "source (`faithful`) is below it, or the probe could not re-point the pipeline (the `detail` says why); "
        "a run's report has no `faithful`, and no such check",
        "those whose faithful rate is below it",
        # the share of probe runs whose answer follows its edited source (`ragaudit probe`)
        Key(
            "faithful_min",
            "rate",
            None,
            "the lowest share of probe runs whose answer follows its edited source (`ragaudit probe`, §13); "
            "gated only when set, and only in a probe's report",
        ),
        value=lambda s: s.summary.metrics.get("faithful"),
        failing=lambda s, t: sorted(
            q.qid for q in s.questions if (v := q.metrics.get("faithful")) is not None and v < t
        ),
        why=lambda c, q: (
            f"its probe runs follow their edited source at a rate of {number(q.metrics.get('faithful'))} < {number(c.threshold)}"
        ),
        detail="share of probe runs whose answer follows its edited source (ragaudit probe)",
        missing="omit",  # a run measures no faithfulness: only a probe's report has it
        metric="faithful",
    ),
    GateCheck(
        "max_errors",
        AT_MOST,
        "there are more validator issues of severity error than `max_errors`",
        "those with such an issue",
        Key("max_errors", "count", 0, "validator issues of severity error", calibrated=True),
        value=lambda s: s.errors,
        failing=lambda s, _: sorted(s.error_questions),
        why=lambda c, q: "its runs have validator issues of severity error (issues.jsonl lists them)",
        detail="validator issues of severity error",
    ),
    # ---- structural: no [gate] key ----
    GateCheck(
        "analyzer_parity",
        AT_MOST,
        "the pipeline was stopped at its first `analyzer_mismatch`",
        "the question it stopped at",
        why=lambda c, q: c.detail,
        bar=lambda threshold: threshold,  # analyzer_mismatch count <= 0
    ),
    GateCheck(
        "pipeline_ran", ABOVE, "a gated pipeline has no runs at all", "none", bar=lambda threshold: 0.0
    ),  # runs > 0
    GateCheck(
        "drift_delta_s_mean",
        AT_MOST,
        f"with `--baseline`: mean ΔS (the gated reading, the excess) rose by more than {DRIFT}",
        f"those whose mean rose by more than {DRIFT}",
        why=lambda c, q: f"its mean ΔS rose by more than {number(c.threshold)} since the baseline",
        bar=lambda threshold: threshold,  # rise <= DRIFT
    ),
    GateCheck(
        "drift_coverage",
        AT_LEAST,
        f"with `--baseline`: mean coverage fell by more than {DRIFT}",
        "those whose coverage fell by more",
        why=lambda c, q: f"its mean coverage fell by more than {number(c.threshold)} since the baseline",
        bar=lambda threshold: -threshold,  # fall <= DRIFT: change >= -DRIFT
    ),
    GateCheck(
        "drift_citation_match",
        AT_LEAST,
        f"with `--baseline`: the citation match rate fell by more than {DRIFT}",
        "those whose rate fell by more",
        why=lambda c, q: f"its citation match fell by more than {number(c.threshold)} since the baseline",
        bar=lambda threshold: -threshold,
    ),
    GateCheck(
        "regressions",
        AT_MOST,
        "with `--baseline`: a question lost since the baseline: fewer correct runs, or more runs with an "
        "unsupported claim or a hallucinated quantity",
        "those questions, each with what it lost in `detail`",
        bar=lambda threshold: threshold,  # questions that lost <= 0
        reads_claims=True,
    ),
    GateCheck(
        "baseline_missing",
        AT_MOST,
        "never (a note): the pipeline is not in the baseline, so it has no drift checks",
        "none",
    ),
)

BY_NAME = {check.name: check for check in CHECKS}
THRESHOLDED = tuple(check for check in CHECKS if check.key is not None)  # the checks of the [gate] table
STRUCTURAL = tuple(check.name for check in CHECKS if check.key is None)
# every [gate] key a check reads, in the order of the [gate] table: each check's settings, then its own
KEYS: dict[str, Key] = {key.name: key for check in THRESHOLDED for key in (*check.settings, check.key) if key}
