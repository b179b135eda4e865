"""Every output of a run directory, the CLI exit codes for pass, fail, drift and changed inputs,
and the golden report of the built-in demo."""

import json
import math
import os
import sqlite3
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from click.testing import CliRunner
from helpers import BM25, LENIENT, ROOT, run_dir_of, write_config

from ragaudit.cli.commands import main
from ragaudit.flows.injection import FAULTS
from ragaudit.outputs.render.logs import COLUMNS

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "demo_report.json"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("run")
    config = write_config(tmp, BM25, items=6, seeds="[1]")
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    run_dir = run_dir_of(result)
    return config, run_dir, json.loads((run_dir / "report.json").read_text())


def test_traces_log_lines(run):
    _, run_dir, report = run
    lines = (run_dir / "traces.log").read_text().splitlines()
    assert len(lines) == sum(len(r["segments"]) or 1 for q in report["questions"] for r in q["runs"])
    first = lines[0].split(" ")
    assert [f.split("=")[0] for f in first] == [
        "ts",
        "pipeline",
        "qid",
        "variant",
        "seed",
        "seg",
        "deltaS",
        "lambda",
        "k",
        "store",
        "index_hash",
        "embed",
        "analyzer",
        "section_id",
        "rev",
        "citations",
        "scores",
        "kpos",
        "kfinal",
    ]
    stored = json.loads((run_dir / "traces.jsonl").read_text().splitlines()[0])  # rows follow the stored runs
    assert first[2] == f"qid={stored['qid']}" and first[9] == "store=bm25"


def test_sqlite_table_is_the_spec_table(run):
    _, run_dir, _ = run
    with sqlite3.connect(run_dir / "rag_traces.sqlite") as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(rag_traces)")]
        rows = db.execute("SELECT qid, citations, deltaS FROM rag_traces").fetchall()
    assert tuple(columns) == COLUMNS
    assert rows and all(isinstance(json.loads(r[1]), list) and isinstance(r[2], float) for r in rows)


def test_junit_has_a_case_per_question_and_check(run):
    _, run_dir, report = run
    root = ET.parse(run_dir / "junit.xml").getroot()
    questions, gate = root.findall("testsuite")
    assert len(questions.findall("testcase")) == len(report["questions"])
    assert len(gate.findall("testcase")) == len(report["gate"]["checks"])
    failed = [c for c in gate.findall("testcase") if c.find("failure") is not None]
    assert len(failed) == sum(not c["passed"] for c in report["gate"]["checks"])
    assert gate.get("failures") == str(len(failed))


def test_summary_states_the_verdict(run):
    _, run_dir, report = run
    summary = (run_dir / "summary.md").read_text()
    assert summary.startswith("# ragaudit: gate " + ("passed" if report["gate"]["verdict"] == "pass" else "FAILED"))
    assert "| bm25 |" in summary


def test_gate_exit_codes(run, tmp_path):
    config, run_dir, _ = run
    loose = tmp_path / "loose.toml"
    loose.write_text(
        config.read_text()
        .replace(
            "[embedder]",
            "[gate]\ndelta_s_max = 1.0\ndelta_s_mean_max = 1.0\n"
            "coverage_min = 0.0\ncoverage_pass_rate = 0.0\ncitation_match_min = 0.0\nlambda_convergent_min = 0.0\n"
            "lambda_forbid = []\n\n[embedder]",
        )
        .replace('"gold.jsonl"', f'"{config.parent / "gold.jsonl"}"')
    )
    strict = tmp_path / "strict.toml"
    strict.write_text(loose.read_text().replace("delta_s_max = 1.0", "delta_s_max = 0.0"))
    assert invoke("gate", run_dir / "report.json", "--config", loose).exit_code == 0
    failed = invoke("gate", run_dir / "report.json", "--config", strict, "--format", "json")
    assert failed.exit_code == 1
    assert [c["name"] for c in json.loads(failed.output)["checks"] if not c["passed"]] == ["delta_s_max"]


def test_drift_fails_the_gate(run, tmp_path):
    config, run_dir, report = run
    worse = json.loads(json.dumps(report))
    for p in worse["summary"]["pipelines"].values():
        p["metrics"]["delta_s_excess"] -= 0.2  # the baseline was much better on the gated ΔS
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(worse))
    loose = tmp_path / "loose.toml"
    loose.write_text(config.read_text().replace("[embedder]", LENIENT + "\n[embedder]"))
    result = invoke("gate", run_dir / "report.json", "--config", loose, "--baseline", baseline, "--format", "json")
    assert result.exit_code == 1
    assert [c["name"] for c in json.loads(result.output)["checks"] if not c["passed"]] == ["drift_delta_s_mean"]


def test_run_exit_code_follows_the_gate(tmp_path):
    config = write_config(tmp_path, BM25, items=3, seeds="[1]", extra="")
    config.write_text(config.read_text().replace("[embedder]", "[gate]\ndelta_s_max = 0.0\n\n[embedder]"))
    assert invoke("run", config).exit_code == 1
    assert invoke("run", config, "--no-gate").exit_code == 0


def test_verify_detects_changed_inputs(tmp_path):
    config = write_config(tmp_path, BM25, items=3, seeds="[1]")
    run_dir = run_dir_of(invoke("run", config, "--no-gate"))
    assert invoke("verify", run_dir).exit_code == 0
    gold = tmp_path / "gold.jsonl"
    gold.write_text(gold.read_text() + "\n")
    result = invoke("verify", run_dir)
    assert result.exit_code == 5 and "gold" in result.stderr
    gold.write_text(gold.read_text()[:-1])
    assert invoke("verify", run_dir).exit_code == 0
    with open(run_dir / "traces.jsonl", "a") as handle:
        handle.write("\n")
    assert invoke("verify", run_dir).exit_code == 5


def _close(a, b, path="$"):
    """Parsed-JSON equality, with floats compared to 1e-6 (the model's last bits vary across CPUs)."""
    if isinstance(a, float) or isinstance(b, float):
        assert a is not None and b is not None and math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6), path
    elif isinstance(a, dict):
        assert sorted(a) == sorted(b), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


def golden_view(report: dict) -> dict:
    """What the golden file pins: summary, gate and every question's λ and metrics."""
    return {
        "summary": report["summary"],
        "gate": report["gate"],
        "questions": [{k: q[k] for k in ("pipeline", "qid", "lambda", "metrics")} for q in report["questions"]],
    }


@pytest.fixture
def demo(demo_run):
    """The session's run of the built-in demo with the real model, and its report."""
    return demo_run, json.loads((demo_run / "report.json").read_text())


@pytest.mark.model
def test_demo_report_matches_the_golden_file(demo):
    _, report = demo
    view = golden_view(report)
    if os.environ.get("RAGAUDIT_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(view, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    _close(view, json.loads(GOLDEN.read_text()))


@pytest.mark.model
def test_the_demo_gate_tells_good_from_bad(demo):
    _, report = demo
    failed = {}
    for check in report["gate"]["checks"]:
        if not check["passed"]:
            failed.setdefault(check["pipeline"], set()).add(check["name"])
    assert "dense-k5" not in failed  # a clean, stable configuration passes every check
    assert failed["hybrid-mmr-k5"] >= {"citation_match_min", "lambda_convergent_min"}
    assert "bm25-k5" in failed
    runs = {p: [r for q in report["questions"] if q["pipeline"] == p for r in q["runs"]] for p in failed}
    # every failing run says why, in terms of what it cited
    assert all(r["why"] and not r["correct"] for p in runs for r in runs[p] if r["metrics"]["citation_match"] == 0)


@pytest.mark.model
def test_the_demo_fault_matrix_is_clean(demo, tmp_path):
    """Gate sensitivity on the demo, gating the clean configuration: it passes, so does the LLM-style
    control, every fault class fails the gate alone and against the clean run, detection >= 0.8 and
    false flags <= 0.15 for every fault (bench/faults.py measures this on three corpora)."""
    run_dir, _ = demo
    config = tmp_path / "dense.toml"
    config.write_text(
        (ROOT / "configs" / "default.toml")
        .read_text()
        .replace("../", f"{ROOT}/")
        .replace("max_errors = 0", 'max_errors = 0\npipelines = ["dense-k5"]')
    )
    result = invoke("faults", run_dir, "--config", config, "--out", tmp_path)
    assert result.exit_code == 0, result.output
    matrix = json.loads((tmp_path / "faults.json").read_text())
    assert [row["fault"] for row in matrix["faults"]] == list(FAULTS)
    for row in matrix["faults"]:
        assert row["ok"], row
        if row["control"]:
            continue
        for p in (row["pipelines"]["dense-k5"], row["with_baseline"]["pipelines"]["dense-k5"]):
            assert p["detection_rate"] >= 0.8 and p["false_flag_rate"] <= 0.15, row
