"""The gate's checks and drift rules, on hand-made evaluations."""

from types import SimpleNamespace

import pytest

from ragaudit.checks.metrics.aggregate import Aggregates
from ragaudit.checks.metrics.evaluate import Evaluation
from ragaudit.core.model import Aborted, Baseline, Lambda, PipelineSummary, Question
from ragaudit.decisions.gating import CHECK_NAMES, CHECKS, evaluate_gate
from ragaudit.io.config_schema import GateSection

T = GateSection()  # the defaults


def run(qid, *, ds=0.3, excess=0.0, cov=1.0, match=1.0, hallucinations=0.0, grounded=1.0, pipeline="p"):
    return {
        "pipeline": pipeline,
        "qid": qid,
        "variant": 0,
        "seed": 1,
        "error": None,
        "errored": False,
        "correct": match == 1.0,
        "sections": [["d", "s"]],
        "zone": "stable",
        "metrics": {
            "delta_s_qr": ds,
            "delta_s_excess": excess,
            "coverage": cov,
            "citation_match": match,
            "hallucinations": hallucinations,
            "fully_grounded": grounded,
        },
    }


METRICS = ("delta_s_qr", "delta_s_excess", "coverage", "citation_match", "hallucinations", "fully_grounded")


def evaluation(runs, states):
    """An evaluation of these runs through the real aggregation, with each question's λ state set."""
    gold = {r["qid"]: SimpleNamespace(doc_id="d", section_id="s", question=r["qid"]) for r in runs}
    book = Aggregates(METRICS, css_min=0.5)
    for r in runs:
        book.add(r)
    questions, sections, pipelines = book.finish(gold)
    for q in questions:
        q.lam = Lambda(states[q.qid], "", q.lam.css, q.lam.spread)
    return Evaluation(runs=runs, questions=questions, sections=sections, pipelines=pipelines)


def checks(result):
    return {c.name: c.to_json() for c in result.checks}


def test_all_pass():
    result = evaluate_gate(
        evaluation([run("a"), run("b")], {"a": "convergent", "b": "convergent"}), T, error_counts={}, aborted={}
    )
    assert result.verdict == "pass"
    # absolute ΔS is reported, gated only when a config sets delta_s_max / delta_s_mean_max
    assert set(checks(result)) == {
        "delta_s_excess_max",
        "coverage_pass_rate",
        "citation_match_min",
        "lambda_convergent_min",
        "lambda_forbid",
        "hallucination_max",
        "grounded_pass_rate",
        "max_errors",
    }
    assert result.flagged_questions() == {"p": set()}
    assert {c.source for c in result.checks} == {"default"}


def test_absolute_delta_s_is_gated_when_the_config_sets_it():
    ev = evaluation([run("a", ds=0.7), run("b", ds=0.1)], {"a": "convergent", "b": "convergent"})
    c = checks(evaluate_gate(ev, GateSection(delta_s_max=0.6, delta_s_mean_max=0.45), error_counts={}, aborted={}))
    assert (c["delta_s_max"]["passed"], c["delta_s_max"]["questions"], c["delta_s_max"]["value"]) == (False, ["a"], 0.7)
    # a passing check names "a" (above the mean bar) but flags nothing
    assert c["delta_s_mean_max"]["passed"] and c["delta_s_mean_max"]["questions"] == ["a"]


def test_each_failure_names_its_questions():
    runs = [
        run("a", excess=0.4),
        run("b", cov=0.2),
        run("c", match=0.0),
        run("d", hallucinations=2.0),
        run("e", grounded=0.0),
    ]
    result = evaluate_gate(
        evaluation(runs, {"a": "convergent", "b": "chaotic", "c": "recursive", "d": "convergent", "e": "convergent"}),
        GateSection(
            lambda_convergent_min=0.6,
            lambda_forbid=["divergent", "chaotic"],
            sources={"lambda_convergent_min": "config", "lambda_forbid": "config"},
        ),
        error_counts={"p": 2},
        aborted={"p": Aborted("q 1", 0, 1, "analyzer")},
        error_questions={"p": ["b", "c"]},
    )
    c = checks(result)
    assert result.verdict == "fail"
    excess = c["delta_s_excess_max"]
    assert (excess["passed"], excess["questions"], excess["value"]) == (False, ["a"], 0.4)
    assert (c["grounded_pass_rate"]["passed"], c["grounded_pass_rate"]["value"]) == (False, 0.8)
    assert c["grounded_pass_rate"]["questions"] == ["e"]
    assert c["lambda_convergent_min"]["source"] == "config" and c["max_errors"]["source"] == "default"
    assert (c["hallucination_max"]["passed"], c["hallucination_max"]["value"]) == (False, 1)
    assert c["hallucination_max"]["questions"] == ["d"]
    assert c["max_errors"]["questions"] == ["b", "c"]
    # the qid is carried whole, spaces and all, never recovered from the message
    assert c["analyzer_parity"]["questions"] == ["q 1"] and c["analyzer_parity"]["detail"] == "q 1 v0 s1: analyzer"
    # a failing check's questions are flagged; the passing lambda_convergent_min names "b", "c" but flags nothing
    assert c["lambda_convergent_min"]["passed"] and c["lambda_convergent_min"]["questions"] == ["b", "c"]
    assert result.flagged_questions() == {"p": {"a", "b", "c", "d", "e", "q 1"}}
    assert c["coverage_pass_rate"]["questions"] == ["b"] and c["coverage_pass_rate"]["value"] == 0.8
    assert c["citation_match_min"]["questions"] == ["c"]
    assert c["lambda_forbid"]["questions"] == ["b"]
    assert c["lambda_convergent_min"]["value"] == 0.6
    assert (c["max_errors"]["value"], c["max_errors"]["passed"]) == (2, False)
    assert c["analyzer_parity"]["passed"] is False


def test_only_the_chosen_pipelines_are_gated():
    ev = evaluation([run("a", ds=0.9)], {"a": "convergent"})
    assert evaluate_gate(ev, T, error_counts={}, aborted={}).pipelines == ["p"]
    assert (
        evaluate_gate(ev, GateSection(pipelines=["other"]), error_counts={}, aborted={}).checks[0].name
        == "pipeline_ran"
    )


def _held(runs=1, correct=1, ungrounded=0, hallucinating=0):
    return {"runs": runs, "correct": correct, "ungrounded": ungrounded, "hallucinating": hallucinating}


def test_drift_against_a_baseline():
    now = evaluation(
        [
            run("a", excess=0.08, cov=0.7, match=0.0),
            run("b", excess=0.02),
            run("c", grounded=0.0),
            run("d", hallucinations=1.0),
            run("e", match=0.0),
        ],
        dict.fromkeys("abcde", "convergent"),
    )
    held = {"pipeline": "p", "lambda": {"state": "convergent"}, "stats": _held()}
    before = {"runs": 5, "metrics": {"delta_s_excess": 0.0, "coverage": 1.0}, "citation_match_rate": 1.0}
    questions = [
        {**held, "qid": "a", "metrics": {"delta_s_excess": 0.0, "coverage": 1.0}},
        {**held, "qid": "b", "metrics": {"delta_s_excess": 0.0}},
        {**held, "qid": "c", "metrics": {}},
        {**held, "qid": "d", "metrics": {}},
        {**held, "qid": "e", "metrics": {}, "stats": _held(correct=0)},  # did not hold: no regression
    ]
    baseline = Baseline(
        {"p": PipelineSummary.from_json(before, "$")},
        [Question.from_json(q, f"$[{i}]") for i, q in enumerate(questions)],
    )
    gate = GateSection(lambda_convergent_min=0.0, citation_match_min=0.0, grounded_pass_rate=0.0, hallucination_max=9)
    c = checks(evaluate_gate(now, gate, error_counts={}, aborted={}, baseline=baseline))
    assert c["drift_delta_s_mean"]["passed"] is True  # the gated reading, excess, rose 0.02 on average
    assert c["drift_delta_s_mean"]["questions"] == ["a"]  # a rose by 0.08
    assert c["drift_coverage"]["passed"] is False and c["drift_coverage"]["questions"] == ["a"]  # 1.0 → 0.94
    assert c["drift_citation_match"]["passed"] is False  # fell from 1.0 to 0.6
    regressions = c["regressions"]
    assert (regressions["passed"], regressions["value"], regressions["questions"]) == (False, 3, ["a", "c", "d"])
    assert "a: 0 of 1 runs correct, 1 before" in regressions["detail"]
    assert "c: 1 runs with unsupported or uncited claims, 0 before" in regressions["detail"]


def test_a_foreign_baseline_is_refused_and_a_missing_pipeline_reported(tmp_path):
    import json

    from helpers import BM25, TFIDF, invoke, run_dir_of, write_config

    config = write_config(tmp_path, BM25 + TFIDF, items=3, seeds="[1]")
    run_dir = run_dir_of(invoke("run", config, "--no-gate"))
    report = json.loads((run_dir / "report.json").read_text())
    foreign = json.loads(json.dumps(report))
    foreign["meta"]["inputs"]["gold"] = "0" * 64
    (tmp_path / "foreign.json").write_text(json.dumps(foreign))
    result = invoke("gate", run_dir / "report.json", "--config", config, "--baseline", tmp_path / "foreign.json")
    assert result.exit_code == 3 and "same gold" in result.stderr and "--allow-foreign-baseline" in result.stderr
    allowed = invoke(
        "gate",
        run_dir / "report.json",
        "--config",
        config,
        "--baseline",
        tmp_path / "foreign.json",
        "--allow-foreign-baseline",
        "--format",
        "json",
    )
    assert allowed.exit_code in (0, 1) and "warning:" in allowed.stderr
    partial = json.loads(json.dumps(report))
    del partial["summary"]["pipelines"]["tfidf"]
    (tmp_path / "partial.json").write_text(json.dumps(partial))
    result = invoke(
        "gate", run_dir / "report.json", "--config", config, "--baseline", tmp_path / "partial.json", "--format", "json"
    )
    assert "pipeline tfidf is not in the baseline" in result.stderr
    assert [c["pipeline"] for c in json.loads(result.stdout)["checks"] if c["name"] == "baseline_missing"] == ["tfidf"]
    result = invoke("run", config, "--baseline", tmp_path / "foreign.json")
    assert result.exit_code == 3 and "same gold" in result.stderr


def test_every_check_of_the_table_has_one_threshold_shape():
    """Every check's threshold is a number or None, and its bound says it in words: the one shape
    that every renderer reads (coverage_pass_rate's coverage_min is a setting, not part of it)."""
    runs = [run("a", cov=0.2), run("b")]
    result = evaluate_gate(
        evaluation(runs, {"a": "divergent", "b": "convergent"}),
        GateSection(delta_s_max=0.6),
        error_counts={},
        aborted={"p": Aborted("a", 0, 1, "analyzer")},
    )
    assert {rule.name for rule in CHECKS} <= {c.name for c in result.checks} | {
        "delta_s_mean_max",
        "labelled_good_min",
        "faithful_min",  # a probe's: a run measures no faithfulness
    }
    for check in result.checks:
        assert check.threshold is None or isinstance(check.threshold, (int, float)), check.name
        assert isinstance(check.bound, str) and check.bound, check.name
    c = checks(result)
    assert c["coverage_pass_rate"]["threshold"] == T.coverage_pass_rate
    assert c["coverage_pass_rate"]["settings"] == {"coverage_min": T.coverage_min}
    assert c["coverage_pass_rate"]["bound"] == f"{T.coverage_pass_rate:g} of runs at coverage ≥ {T.coverage_min:g}"
    assert (c["lambda_forbid"]["threshold"], c["lambda_forbid"]["value"], c["lambda_forbid"]["bound"]) == (
        0,
        1,
        "none divergent",
    )


def test_the_gate_section_has_a_field_for_every_check_and_nothing_else():
    """The thresholds in force are read by attribute: one field per check of the table, the
    settings the checks read, the gated pipelines, the calibration file and what it brings."""
    thresholds = {
        "delta_s_excess_max",
        "delta_s_max",
        "delta_s_mean_max",
        "coverage_pass_rate",
        "citation_match_min",
        "lambda_convergent_min",
        "lambda_forbid",
        "hallucination_max",
        "grounded_pass_rate",
        "labelled_good_min",
        "faithful_min",
        "max_errors",
    }
    assert set(CHECK_NAMES) == thresholds
    assert set(GateSection.model_fields) == thresholds | {"coverage_min", "pipelines", "from_", "sources", "not_gated"}
    assert all(T.source(name) == "default" for name in thresholds)


def test_a_check_a_calibration_leaves_ungated_says_why():
    ev = evaluation([run("a", excess=0.9)], {"a": "convergent"})
    gate = GateSection(
        delta_s_excess_max=None,
        sources={"delta_s_excess_max": "calibration"},
        not_gated={"delta_s_excess_max": "does not separate here"},
    )
    c = checks(evaluate_gate(ev, gate, error_counts={}, aborted={}))["delta_s_excess_max"]
    assert (c["threshold"], c["passed"], c["source"]) == (None, True, "calibration")
    assert c["detail"] == "not gated: does not separate here"
    plain = checks(evaluate_gate(ev, GateSection(delta_s_excess_max=None), error_counts={}, aborted={}))
    assert plain["delta_s_excess_max"]["detail"] == "not gated: no threshold set"


@pytest.mark.parametrize(
    ("worst", "threshold", "said"),
    [
        (0.38627, 0.3856, "its worst run's ΔS excess 0.3863 > 0.3856"),
        (0.386, 0.25, "its worst run's ΔS excess 0.386 > 0.25"),
        (0.25000001, 0.25, "its worst run's ΔS excess 0.25000001 > 0.25"),
    ],
)
def test_a_question_s_figure_and_the_bar_it_crossed_read_apart(worst, threshold, said):
    """Rounded alike, a figure and its bar never read as equal (0.386 > 0.386)."""
    from ragaudit.core.model import Check, Lambda, Question, QuestionStats
    from ragaudit.decisions.gating import question_why

    check = Check("p", "delta_s_excess_max", threshold, worst, False, f"<= {threshold}", ["q"])
    question = Question(
        pipeline="p",
        qid="q",
        doc_id=None,
        section_id=None,
        question=None,
        errored=0,
        correct=0,
        lam=Lambda("convergent", "→", 0.9, 0.0),
        metrics={},
        stats=QuestionStats(runs=1, max_delta_s_excess=worst),
    )
    assert question_why(check, question) == said
