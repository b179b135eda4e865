import json

import pytest
from click.testing import CliRunner

from ragaudit.cli import main
from ragaudit.compare import System, compare, holm, permutation_p


def system(name, values, state="convergent"):
    return System(name, {f"q{i}": {"qid": f"q{i}", "metrics": {"citation_match": v, "coverage": v, "delta_s_qr": 0.3},
                                    "lambda": {"state": state if v else "chaotic"}} for i, v in enumerate(values)})


def test_clearly_worse_configuration_is_reported_worse():
    good = system("good", [1.0] * 30)
    bad = system("bad", [1.0] * 5 + [0.0] * 25)
    result = compare([good, bad])
    m = result["comparisons"][0]["metrics"]["citation_match"]
    assert m["p_holm"] < 0.05 and m["verdict"] == "worse"
    assert (m["wins"], m["ties"], m["losses"]) == (0, 5, 25)
    assert m["ci95"][1] < 0 and m["difference"] == pytest.approx(-25 / 30)
    assert result["comparisons"][0]["metrics"]["delta_s_qr"]["verdict"] == "tie"
    assert result["comparisons"][0]["lambda_transitions"]["convergent"]["chaotic"] == 25


def test_identical_systems_tie():
    a = system("a", [1.0, 0.0] * 10)
    m = compare([a, system("b", [1.0, 0.0] * 10)])["comparisons"][0]["metrics"]["coverage"]
    assert (m["p_value"], m["verdict"], m["ties"]) == (1.0, "tie", 20)


def test_comparison_is_seeded():
    a, b = system("a", [1.0, 0.0, 1.0] * 7), system("b", [0.0, 1.0, 0.0] * 7)
    assert compare([a, b]) == compare([a, b])


def test_holm_adjustment():
    assert holm({"x": 0.01, "y": 0.04, "z": 0.03}) == pytest.approx({"x": 0.03, "z": 0.06, "y": 0.06})


def test_permutation_p_detects_a_shift():
    import numpy as np
    rng = np.random.default_rng(0)
    assert permutation_p(np.array([0.2] * 20), rng) < 0.001


def test_compare_command_writes_json_and_html(tmp_path):
    def report(name, values):
        return {"summary": {"pipelines": {name: {}}},
                "questions": [{"pipeline": name, "qid": f"q{i}", "metrics": {"citation_match": v},
                               "lambda": {"state": "convergent"}} for i, v in enumerate(values)]}
    for run, values in (("a", [1.0] * 20), ("b", [0.0] * 20)):
        (tmp_path / run).mkdir()
        (tmp_path / run / "report.json").write_text(json.dumps(report("p", values)))
    result = CliRunner().invoke(main, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "compare.json").read_text())
    assert data["systems"] == ["a/p", "b/p"]
    assert data["comparisons"][0]["metrics"]["citation_match"]["verdict"] == "worse"
    assert "<script" not in (tmp_path / "compare.html").read_text()


def test_the_first_configured_pipeline_is_the_reference(tmp_path):
    from test_runner import BM25, TFIDF, run_dir_of, write_config
    config = write_config(tmp_path, TFIDF + BM25, items=3, seeds="[1]")  # tfidf first, though bm25 sorts first
    result = CliRunner().invoke(main, ["run", str(config), "--no-gate"])
    assert result.exit_code == 0, result.output
    compared = json.loads((run_dir_of(result) / "compare.json").read_text())
    assert compared["systems"] == ["tfidf", "bm25"] and compared["comparisons"][0]["reference"] == "tfidf"
