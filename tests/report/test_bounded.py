"""A large run's report stays bounded: report.json carries only the flagged questions' runs (a few
each, failing first) and at most QUESTION_ROWS question rows, report.html at most QUESTION_ROWS
rows, questions.parquet every question's row and runs.parquet every run; the commands that read
the report read every row back. The limits are lowered here so that a small run is a "large" one."""

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import BM25, invoke, run_dir_of, write_config

from ragaudit.auditing import reporting as model
from ragaudit.core.errors import InputError
from ragaudit.flows import api
from ragaudit.flows.baselines import read_report
from ragaudit.outputs.render import html


def test_a_large_run_keeps_every_run_in_parquet_and_a_few_in_the_report(tmp_path, monkeypatch):
    monkeypatch.setattr(model, "ALL_RUNS_UP_TO", 10)
    monkeypatch.setattr(model, "RUNS_SHOWN", 3)
    monkeypatch.setattr(html, "QUESTION_ROWS", 5)
    monkeypatch.setattr(model, "QUESTION_ROWS", 8)
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
    failing = {qid for c in report["gate"]["checks"] if not c["passed"] for qid in c.get("questions") or []}
    assert failing, "the bm25 reference pipeline fails some checks on this gold subset"
    assert len(failing) < 8, "the test wants questions without runs among the rows report.json holds"
    # the questions with runs, then the others with the fewest correct runs, eight in all
    correct_of = Counter(r["qid"] for r in table if r["correct"])
    others = sorted((correct_of[q] / n, q) for q, n in per_question.items() if q not in failing)
    assert {q["qid"] for q in report["questions"]} == failing | {q for _, q in others[: 8 - len(failing)]}
    assert report["summary"]["question_rows"] == 12
    rows = pq.read_table(run_dir / "questions.parquet").to_pylist()
    assert sorted(r["qid"] for r in rows) == sorted(per_question)  # every question keeps its row there
    assert all(json.loads(r["gold"])["doc_id"] == r["doc_id"] for r in rows)
    assert {r["qid"]: r["stats.runs"] for r in rows} == dict(per_question)
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
    assert "questions.parquet lists all 12" in page

    # read back, the report has every row again: the report.json's (with their runs) and the table's
    found = read_report(run_dir / "report.json")
    assert sorted(q.qid for q in found.questions) == sorted(per_question)
    assert {q.qid for q in found.questions if q.runs is not None} == failing
    assert {q.qid: q.stats.runs for q in found.questions} == dict(per_question)
    loaded = api.load_run(run_dir)
    assert sorted(loaded.questions["qid"]) == sorted(per_question)
    assert dict(zip(loaded.questions["qid"], loaded.questions["runs"])) == dict(per_question)
    gated = invoke("gate", run_dir / "report.json", "--config", config)
    assert gated.exit_code == 1, gated.output  # the same failing checks, over every question
    again = api.gate(run_dir / "report.json", config).gate
    assert [c.to_json() for c in again.checks] == report["gate"]["checks"]
    compared = invoke("compare", run_dir, run_dir, "--out", tmp_path / "compared")
    assert compared.exit_code == 0, compared.output
    pair = json.loads((tmp_path / "compared" / "compare.json").read_text())["pairs"][0]
    assert pair["questions"] == 12  # every question is paired, not only the report.json's rows


def test_a_bounded_report_without_its_question_table_is_an_input_error(tmp_path, monkeypatch):
    monkeypatch.setattr(model, "ALL_RUNS_UP_TO", 10)
    monkeypatch.setattr(model, "QUESTION_ROWS", 5)
    config = write_config(tmp_path, BM25, items=12, seeds="[1]")
    run_dir = run_dir_of(invoke("run", config, "--no-gate"))
    (run_dir / "questions.parquet").unlink()
    result = invoke("gate", run_dir / "report.json", "--config", config)
    assert result.exit_code == 3, result.output
    assert "questions.parquet" in result.output and "found none" in result.output
    assert "Traceback" not in result.output


@pytest.fixture(scope="module")
def bounded(tmp_path_factory):
    """Two bounded runs of one config (two pipelines, 16 questions, report.json holding 8 of the 32
    question rows), the second under other seeds: its questions.parquet is another run's."""
    folder = tmp_path_factory.mktemp("bounded")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(model, "ALL_RUNS_UP_TO", 10)
        patch.setattr(model, "QUESTION_ROWS", 8)
        config = write_config(folder, BM25 + BM25.replace('"bm25"\nkind', '"bm25-b"\nkind'), items=16, seeds="[1]")
        first = run_dir_of(invoke("run", config, "--no-gate"))
        config.write_text(config.read_text().replace("seeds = [1]", "seeds = [1, 2]"))
        other = run_dir_of(invoke("run", config, "--no-gate"))
        config.write_text(config.read_text().replace("seeds = [1, 2]", "seeds = [1]"))
    assert json.loads((first / "report.json").read_text())["summary"]["question_rows"] == 32
    return config, first, other


def with_table(bounded, tmp_path, change) -> Path:
    """A copy of the first run whose questions.parquet (or report.json) `change` rewrites."""
    _, first, other = bounded
    run_dir = tmp_path / "run"
    shutil.copytree(first, run_dir)
    table = pq.read_table(run_dir / "questions.parquet")
    changed = change(table, run_dir, other)
    if changed is not None:
        pq.write_table(changed, run_dir / "questions.parquet")
    return run_dir


def column(name, values, kind=None):
    def change(table, run_dir, other):
        found = pa.array(values(table.column(name).to_pylist()), type=kind)
        return table.set_column(table.schema.get_field_index(name), pa.field(name, found.type), found)

    return change


def question_rows(value):
    def change(table, run_dir, other):
        report = json.loads((run_dir / "report.json").read_text())
        report["summary"]["question_rows"] = value
        (run_dir / "report.json").write_text(json.dumps(report))

    return change


def one_more_run(table, run_dir, other):
    """A run added to the first of bm25's rows that report.json does not hold."""
    held = {(q["pipeline"], q["qid"]) for q in json.loads((run_dir / "report.json").read_text())["questions"]}
    keys = list(zip(table.column("pipeline").to_pylist(), table.column("qid").to_pylist()))
    at = next(i for i, key in enumerate(keys) if key not in held and key[0] == "bm25")
    runs = table.column("stats.runs").to_pylist()
    runs[at] += 1
    return column("stats.runs", lambda v: runs, pa.int64())(table, run_dir, other)


def refused_everywhere(bounded, run_dir, expected: str) -> None:
    """gate, compare and load_run stop with the located problem: exit 3, never a traceback, nothing written."""
    config = bounded[0]
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    for args in (("gate", run_dir / "report.json", "--config", config), ("compare", run_dir, "--out", run_dir.parent)):
        result = invoke(*args)
        assert result.exit_code == 3, (args, result.output)
        assert expected in result.stderr and "Traceback" not in result.output, (args, result.stderr)
    with pytest.raises(InputError, match=re.escape(expected)):
        api.load_run(run_dir).questions
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before


@pytest.mark.parametrize(
    "change,expected",
    [
        (
            lambda t, d, o: t.slice(0, 10),
            "questions.parquet: expected 32 question rows (summary.question_rows of the report), found 10",
        ),  # fmt: skip
        (
            lambda t, d, o: pa.concat_tables([t, t.slice(0, 3)]),
            "expected 32 question rows (summary.question_rows of the report), found 35",
        ),  # fmt: skip
        (
            lambda t, d, o: pa.concat_tables([t.slice(0, 5), t.slice(6, 1), t.slice(6)]),
            "questions.parquet: row 7: expected rows in (pipeline, qid) order, each once, found ('bm25', 'KEYS-HW-4') after ('bm25', 'KEYS-HW-4') (a table of another run, or an edited one?)",  # fmt: skip
        ),
        (
            column("pipeline", lambda v: ["ghost"] * len(v)),
            "questions.parquet: row 1: expected a pipeline of the report (bm25, bm25-b), found 'ghost'",
        ),  # fmt: skip
        (
            lambda t, d, o: pq.read_table(o / "questions.parquet"),
            "as the report holds it (runs, correct, errored, λ (3, ",
        ),
        (
            one_more_run,
            "questions.parquet: expected pipeline bm25's rows to add up to the report's summary (questions, runs, "
            "errored, λ states (16, 48, ",
        ),
        (
            question_rows(-1),
            "report.json: $.summary.question_rows: expected summary.question_rows above the 10 question rows the report holds (the rest are in questions.parquet), found -1",
        ),  # fmt: skip
        (question_rows(0), "found 0"),
        (
            question_rows(10**12),
            "expected 1,000,000,000,000 question rows (summary.question_rows of the report), found 32",
        ),  # fmt: skip
    ],
    ids=[
        "cut",
        "doubled",
        "dropped-and-doubled",
        "ghost-pipeline",
        "another-run",
        "edited-counts",
        "rows-1",
        "rows-0",
        "rows-huge",
    ],
)
def test_a_question_table_that_is_not_the_reports_is_an_input_error(bounded, tmp_path, change, expected):
    refused_everywhere(bounded, with_table(bounded, tmp_path, change), expected)


@pytest.mark.parametrize(
    "change,expected",
    [
        (column("pipeline", lambda v: [None, *v[1:]], pa.string()), "row 1: $.pipeline: expected text, found none"),
        (column("qid", lambda v: [*v[:4], None, *v[5:]], pa.string()), "row 5: $.qid: expected text, found none"),
        (
            column("lambda.state", lambda v: ["weird"] * len(v)),
            "row 1: $.lambda.state: expected a λ state (convergent, recursive, chaotic, divergent), found text 'weird'",
        ),
        (
            column("m.coverage", lambda v: ["high"] * len(v)),
            "row 1: $.metrics.coverage: expected a number or null, found text",
        ),  # fmt: skip
        (
            column("stats.runs", lambda v: [*v[:2], -5, *v[3:]], pa.int64()),
            "row 3: $.stats.runs: expected a count (an integer >= 0), found a number -5",
        ),  # fmt: skip
    ],
    ids=["null-pipeline", "null-qid", "unknown-state", "text-coverage", "negative-runs"],
)
def test_hostile_question_table_values_are_located_input_errors(bounded, tmp_path, change, expected):
    run_dir = with_table(bounded, tmp_path, change)
    refused_everywhere(bounded, run_dir, f"questions.parquet: expected a question row of a ragaudit run: {expected}")
