"""`ragaudit.load_run`: a run directory as DataFrames whose rows and values are those of the files
it reads (read here directly, with json and pyarrow), and docs/notebook.md's examples run as they are."""

import contextlib
import io
import json
import re
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import BM25, ROOT, TFIDF, invoke, run_dir_of, write_config

import ragaudit
from ragaudit.errors import InputError

NOTEBOOK = ROOT / "docs" / "notebook.md"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("load-run")
    result = invoke("run", write_config(tmp, BM25 + TFIDF, items=5, seeds="[1, 2]"), "--no-gate")
    assert result.exit_code in (0, 1), result.output
    return run_dir_of(result)


def test_runs_are_every_stored_run_with_metric_columns(run_dir):
    run = ragaudit.load_run(run_dir)
    traces = [json.loads(line) for line in (run_dir / "traces.jsonl").read_text().splitlines()]
    assert len(run.runs) == len(traces) == 2 * 5 * 3 * 2
    assert Counter(zip(run.runs["pipeline"], run.runs["qid"])) == Counter((t["config"], t["qid"]) for t in traces)
    raw = pq.read_table(run_dir / "runs.parquet").to_pylist()
    by_key = {(r["pipeline"], r["qid"], r["variant"], r["seed"]): r for r in raw}
    for row in run.runs.itertuples(index=False):
        stored = by_key[(row.pipeline, row.qid, row.variant, row.seed)]
        assert row.citation_match == stored["m.citation_match"] and bool(row.correct) == stored["correct"]
    assert "m.correct" in run.runs.columns and "citation_match" in run.runs.columns


def test_questions_sections_and_issues_mirror_their_files(run_dir):
    run = ragaudit.load_run(run_dir)
    report = json.loads((run_dir / "report.json").read_text())
    assert len(run.questions) == len(report["questions"]) == 2 * 5
    first = report["questions"][0]
    row = run.questions[(run.questions.pipeline == first["pipeline"]) & (run.questions.qid == first["qid"])].iloc[0]
    assert row.lambda_state == first["lambda"]["state"]
    assert row.citation_match == pytest.approx(first["metrics"]["citation_match"])
    assert len(run.sections) == len(report["summary"]["sections"])
    issue_lines = (run_dir / "issues.jsonl").read_text().splitlines()
    assert len(run.issues) == len(issue_lines)
    assert run.manifest["config_path"] and run.report["summary"]["verdict"] in ("pass", "fail")


def test_not_a_run_directory_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="runs.parquet, report.json, manifest.json"):
        ragaudit.load_run(tmp_path)


def test_the_notebook_examples_run(run_dir):
    blocks = re.findall(r"```python\n(.*?)```", NOTEBOOK.read_text(), re.S)
    assert len(blocks) >= 5
    namespace = {"run_dir": run_dir}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for block in blocks:
            exec(compile(block, str(NOTEBOOK), "exec"), namespace)
    runs = pq.read_table(run_dir / "runs.parquet").to_pandas()
    expected = runs.groupby("pipeline")["m.citation_match"].mean()
    assert namespace["means"]["citation_match"].to_dict() == pytest.approx(expected.to_dict())
    wrong = runs[~runs["correct"]]
    assert int(namespace["wrong"].shape[0]) == len(wrong)
    report = json.loads((run_dir / "report.json").read_text())
    states = Counter((q["pipeline"], q["lambda"]["state"]) for q in report["questions"])
    table = namespace["states"]
    assert {(p, s): int(table.loc[p, s]) for p in table.index for s in table.columns if table.loc[p, s]} == states
    assert len(namespace["worst"]) == 5
    assert printed.getvalue().startswith(f"{report['summary']['verdict']} {len(runs)} runs")
