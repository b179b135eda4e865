"""A large run's report stays bounded: report.json carries every question's row but only the
flagged questions' runs (a few each, failing first), report.html at most QUESTION_ROWS rows, and
runs.parquet every run. The limits are lowered here so that a small run is a "large" one."""

import json
from collections import Counter

import pyarrow.parquet as pq
from helpers import BM25, invoke, run_dir_of, write_config

from ragaudit import reporting as model
from ragaudit.render import html


def test_a_large_run_keeps_every_run_in_parquet_and_a_few_in_the_report(tmp_path, monkeypatch):
    monkeypatch.setattr(model, "ALL_RUNS_UP_TO", 10)
    monkeypatch.setattr(model, "RUNS_SHOWN", 3)
    monkeypatch.setattr(html, "QUESTION_ROWS", 5)
    config = write_config(tmp_path, BM25, items=12, seeds="[1, 2]")
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    run_dir = run_dir_of(result)
    traces = [json.loads(line) for line in (run_dir / "traces.jsonl").read_text().splitlines()]
    per_question = Counter(t["qid"] for t in traces)
    assert len(traces) == 12 * 3 * 2

    table = pq.read_table(run_dir / "runs.parquet").to_pylist()
    assert Counter(r["qid"] for r in table) == per_question
    correct = {(r["qid"], r["variant"], r["seed"]): r["correct"] for r in table}

    report = json.loads((run_dir / "report.json").read_text())
    assert report["summary"]["runs"] == len(traces)
    assert len(report["questions"]) == 12  # every question keeps its row
    failing = {qid for c in report["gate"]["checks"] if not c["passed"] for qid in c.get("questions") or []}
    assert failing, "the bm25 reference pipeline fails some checks on this gold subset"
    detailed = {q["qid"]: q for q in report["questions"] if "runs" in q}
    assert set(detailed) == failing
    for qid, q in detailed.items():
        runs = q["runs"]
        assert len(runs) == min(3, per_question[qid])
        assert q.get("runs_omitted", 0) == per_question[qid] - len(runs)
        wrong = sum(not correct[(qid, v, s)] for (qq, v, s) in correct if qq == qid)
        assert sum(not r["correct"] for r in runs) == min(wrong, 3)  # failing runs come first
        keys = [(r["variant"], r["seed"]) for r in runs]
        assert keys == sorted(keys)  # shown in plan order

    page = (run_dir / "report.html").read_text()
    assert page.count('<tr data-i="') == 5
    assert "report.json lists all 12" in page
