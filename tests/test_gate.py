"""The gate's checks and drift rules, on hand-made evaluations."""

from types import SimpleNamespace

from ragaudit.gate import evaluate_gate, flagged_questions
from ragaudit.io.config import default_config
from ragaudit.metrics.aggregate import Aggregates
from ragaudit.metrics.evaluate import Evaluation

T = default_config().gate


def run(qid, *, ds=0.3, cov=1.0, match=1.0, hallucinations=0.0, pipeline="p"):
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
        "metrics": {"delta_s_qr": ds, "coverage": cov, "citation_match": match, "hallucinations": hallucinations},
    }


def evaluation(runs, states):
    """An evaluation of these runs through the real aggregation, with each question's λ state set."""
    gold = {r["qid"]: SimpleNamespace(doc_id="d", section_id="s", question=r["qid"]) for r in runs}
    book = Aggregates(("delta_s_qr", "coverage", "citation_match", "hallucinations"), css_min=0.5)
    for r in runs:
        book.add(r)
    questions, sections, pipelines = book.finish(gold)
    for q in questions:
        q["lambda"]["state"] = states[q["qid"]]
    return Evaluation(runs=runs, questions=questions, sections=sections, pipelines=pipelines)


def checks(result):
    return {c["name"]: c for c in result["checks"]}


def test_all_pass():
    result = evaluate_gate(
        evaluation([run("a"), run("b")], {"a": "convergent", "b": "convergent"}), T, error_counts={}, aborted={}
    )
    assert result["verdict"] == "pass"
    assert set(checks(result)) == {
        "delta_s_max",
        "delta_s_mean_max",
        "coverage_pass_rate",
        "citation_match_min",
        "lambda_convergent_min",
        "lambda_forbid",
        "hallucination_max",
        "max_errors",
    }
    assert flagged_questions(result) == {"p": set()}


def test_each_failure_names_its_questions():
    runs = [run("a", ds=0.7), run("b", cov=0.2), run("c", match=0.0), run("d", hallucinations=2.0)]
    result = evaluate_gate(
        evaluation(runs, {"a": "convergent", "b": "chaotic", "c": "recursive", "d": "convergent"}),
        T,
        error_counts={"p": 2},
        aborted={"p": "q v0 s1: analyzer"},
        error_questions={"p": ["b", "c"]},
    )
    c = checks(result)
    assert result["verdict"] == "fail"
    assert (c["delta_s_max"]["passed"], c["delta_s_max"]["questions"], c["delta_s_max"]["value"]) == (False, ["a"], 0.7)
    assert (c["hallucination_max"]["passed"], c["hallucination_max"]["value"]) == (False, 1)
    assert c["hallucination_max"]["questions"] == ["d"]
    assert c["max_errors"]["questions"] == ["b", "c"]
    assert c["analyzer_parity"]["questions"] == ["q"]
    # a failing check's questions are flagged; the passing delta_s_mean_max (mean 0.40) names "a" but flags nothing
    assert c["delta_s_mean_max"]["passed"] and c["delta_s_mean_max"]["questions"] == ["a"]
    assert flagged_questions(result) == {"p": {"a", "b", "c", "d", "q"}}
    assert c["coverage_pass_rate"]["questions"] == ["b"] and c["coverage_pass_rate"]["value"] == 0.75
    assert c["citation_match_min"]["questions"] == ["c"]
    assert c["lambda_forbid"]["questions"] == ["b"]
    assert c["lambda_convergent_min"]["value"] == 0.5
    assert (c["max_errors"]["value"], c["max_errors"]["passed"]) == (2, False)
    assert c["analyzer_parity"]["passed"] is False


def test_only_the_chosen_pipelines_are_gated():
    ev = evaluation([run("a", ds=0.9)], {"a": "convergent"})
    assert evaluate_gate(ev, T, error_counts={}, aborted={})["pipelines"] == ["p"]
    assert (
        evaluate_gate(ev, {**T, "pipelines": ["other"]}, error_counts={}, aborted={})["checks"][0]["name"]
        == "pipeline_ran"
    )


def test_drift_against_a_baseline():
    now = evaluation([run("a", ds=0.38, cov=0.7, match=1.0), run("b", ds=0.38)], {"a": "recursive", "b": "convergent"})
    baseline = {
        "summary": {
            "pipelines": {"p": {"metrics": {"delta_s_qr": 0.30, "coverage": 0.95}, "citation_match_rate": 1.0}}
        },
        "questions": [
            {"pipeline": "p", "qid": "a", "lambda": {"state": "convergent"}, "metrics": {"delta_s_qr": 0.30}},
            {"pipeline": "p", "qid": "b", "lambda": {"state": "convergent"}, "metrics": {"delta_s_qr": 0.36}},
        ],
    }
    c = checks(evaluate_gate(now, {**T, "lambda_convergent_min": 0.0}, error_counts={}, aborted={}, baseline=baseline))
    assert c["drift_delta_s_mean"]["passed"] is False  # rose 0.08 > 0.05
    assert c["drift_delta_s_mean"]["questions"] == ["a"]  # b rose by 0.02 only
    assert c["drift_coverage"]["passed"] is False  # fell from 0.95 to 0.85
    assert c["drift_citation_match"]["passed"] is True
    assert c["drift_lambda"]["questions"] == ["a"]


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
