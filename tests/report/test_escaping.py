"""Text from traces and gold sets cannot forge a log line or a key, break junit.xml, or become
markup in summary.md and `ragaudit cite` output."""

import json
import re
import sqlite3
from xml.etree import ElementTree as ET

import pytest
from helpers import BM25, invoke, run_dir_of, write_config

from ragaudit.outputs.render.logs import COLUMNS, LOG_NAMES, LOG_ORDER

EVIL = 'EVIL-1\nts=forged qid=x <script>alert(1)</script> [x](javascript:alert(1)) "q"\x01\x1b'
LOGFMT = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^\s"]*)(?: |$)')


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    config = write_config(tmp, BM25, items=3, seeds="[1]")
    config.write_text(config.read_text().replace("[embedder]", "[gate]\ndelta_s_max = 0.0\n\n[embedder]"))
    gold = tmp / "gold.jsonl"
    lines = gold.read_text().splitlines()
    first = json.loads(lines[0])
    first["qid"] = EVIL
    gold.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    result = invoke("run", config)
    assert result.exit_code == 1, result.output
    return run_dir_of(result)


def test_traces_log_cannot_be_forged(hostile):
    lines = (hostile / "traces.log").read_text().split("\n")[:-1]
    rows = sqlite3.connect(hostile / "rag_traces.sqlite").execute("SELECT COUNT(*) FROM rag_traces").fetchone()[0]
    assert len(lines) == rows
    for line in lines:
        pairs = LOGFMT.findall(line)
        assert "".join(f"{k}={v} " for k, v in pairs).rstrip() == line  # the whole line is key=value pairs
        assert [k for k, _ in pairs] == [LOG_NAMES.get(c, c) for c in LOG_ORDER]
    evil = [dict(LOGFMT.findall(line))["qid"] for line in lines if "EVIL" in line]
    assert evil and all(json.loads(q) == EVIL for q in evil)


def test_rag_traces_has_the_spec_columns(hostile):
    with sqlite3.connect(hostile / "rag_traces.sqlite") as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(rag_traces)")]
        rows = db.execute("SELECT pipeline, qid, variant, seed FROM rag_traces").fetchall()
    assert (
        tuple(columns)
        == COLUMNS
        == (
            "ts",
            "pipeline",
            "qid",
            "variant",
            "seed",
            "seg",
            "deltaS",
            "lambda_state",
            "store",
            "index_hash",
            "embed_model",
            "analyzer",
            "section_id",
            "rev",
            "citations",
            "scores",
            "kpos",
            "kfinal",
        )
    )
    assert (("bm25", EVIL, 0, 1) in rows) and all(isinstance(r[2], int) and isinstance(r[3], int) for r in rows)


def test_junit_stays_valid_xml(hostile):
    root = ET.parse(hostile / "junit.xml").getroot()
    names = [case.get("name") for case in root.iter("testcase")]
    assert any(name.startswith("EVIL-1") and "\x01" not in name for name in names)


def test_summary_markdown_is_inert(hostile):
    summary = (hostile / "summary.md").read_text()
    assert "EVIL" in summary
    assert "<script>" not in summary and "](javascript:" not in summary and "\x01" not in summary
    assert "&lt;script&gt;" in summary and r"\[x\]\(javascript:alert\(1\)\)" in summary


def test_cite_output_is_inert(tmp_path, valid_trace):
    valid_trace["answer"]["segments"][0]["text"] = "See [here](javascript:alert(1)) <img src=x onerror=alert(1)>."
    valid_trace["retrieved"][0]["source_url"] = "https://example.com/a) [b](javascript:alert(2)"
    valid_trace["qid"] = "Q <b>1</b>"
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(valid_trace) + "\n")
    result = invoke("cite", path)
    assert result.exit_code == 0, result.output
    assert "](javascript:" not in result.output and "<img" not in result.output and "<b>" not in result.output
    assert "https://example.com/a%29%20%5Bb%5D%28javascript:alert%282%29" in result.output


def test_log_line_writes_each_value_as_log_value_does(monkeypatch):
    from ragaudit.outputs.render import logs

    values = [EVIL, "plain", "has space", "", "x=y", 'q"', "é", None, 0, -3, 2**70, True, False, 0.5, -0.0]
    values += [float("nan"), float("inf"), [], ["a", "b c"], ["a", 1, 0.25, None], [True], [["n"]], ("t",), {"k": 1}]
    rows = [{c: values[(i + j) % len(values)] for j, c in enumerate(LOG_ORDER)} for i in range(3 * len(values))]

    def expected(row):  # the plain definition: every value through log_value
        return " ".join(f"{LOG_NAMES.get(c, c)}={logs.log_value(row[c])}" for c in LOG_ORDER)

    memo: dict[str, str] = {}
    assert [logs.log_line(r, memo) for r in rows] == [expected(r) for r in rows]  # cold, then warm
    monkeypatch.setattr(logs, "_MEMO_MAX", 3)  # a memo that keeps emptying itself
    memo = {}
    assert [logs.log_line(r, memo) for r in rows] == [expected(r) for r in rows]
    assert len(memo) <= 3
