"""Damaged span inputs read alike by `ingest`, `validate --from` and `audit-log --from`: the readable
lines are read and the damage is one located error (exit 3); a line longer than the cap is a
located error, skipped without ever being held in memory; a Phoenix export whose span_kind column
is not text is a located error, not zero traces."""

import gzip
import json
import tracemalloc
import zlib

import pytest
from helpers import BM25, DEMO, invoke, otlp_line, phoenix_rows, rag_spans, span_recorder, write_config, write_phoenix

from ragaudit.core.types import Trace
from ragaudit.io.jsonl import BadLine
from ragaudit.io.spans import read_traces
from ragaudit.io.stream import read_trace_file


def request_lines(count: int) -> list[str]:
    """`count` OTLP lines, each a whole trace (question q<i>)."""
    provider, exporter = span_recorder("kb-bot")
    tracer = provider.get_tracer("app")
    for i in range(count):
        rag_spans(tracer, f"q{i}", [{"id": f"d{i}", "content": "Hardware keys."}], f"a{i}")
    spans = exporter.get_finished_spans()
    return [otlp_line(spans[i : i + 3]) + "\n" for i in range(0, len(spans), 3)]


def gz(text: str) -> bytes:
    return gzip.compress(text.encode(), mtime=0)


def bad_crc(lines: list[str]) -> bytes:
    data = bytearray(gz("".join(lines)))
    data[-8] ^= 0xFF  # the CRC-32 of the member
    return bytes(data)


def trailing_garbage(lines: list[str]) -> bytes:
    return gz("".join(lines)) + b"this is not gzip"


def cut(lines: list[str]) -> tuple[bytes, int]:
    """A gzip stream of the lines cut in the middle, and how many whole lines it still holds."""
    data = gz("".join(lines))
    data = data[: len(data) // 2]
    return data, zlib.decompressobj(31).decompress(data).count(b"\n")


DAMAGE = {
    "bad CRC": lambda lines: (bad_crc(lines), len(lines)),
    "trailing garbage": lambda lines: (trailing_garbage(lines), len(lines)),
    "cut short": cut,
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_gzip_reads_alike_in_ingest_validate_and_audit_log(tmp_path, damage):
    lines = request_lines(6)
    data, readable = DAMAGE[damage](lines)
    path = tmp_path / "spans.jsonl.gz"
    path.write_bytes(data)
    assert 0 < readable <= len(lines)
    expected = [f"q{i}" for i in range(readable)]

    out = tmp_path / "traces.jsonl"
    ingested = invoke("ingest", "otlp", path, "--out", out)
    assert ingested.exit_code == 3, ingested.output
    assert sorted(t.query for t in read_trace_file(out)) == expected  # what was readable is written
    (error,) = [line for line in ingested.stderr.splitlines() if line.startswith("error: ")]
    assert error.startswith(f"error: {path}:{readable + 1}: expected the rest of a compressed file, found damage")
    assert f"the {readable:,} lines before it were read" in error

    validated = invoke("validate", "--from", "otlp", path, "--format", "json")
    assert validated.exit_code == 3
    report = json.loads(validated.stdout)
    assert report["records"] == readable + 1 and report["counts"]["malformed_record"] == 1
    assert {i["qid"] for i in report["issues"] if i["qid"]} == {t.qid for t in read_trace_file(out)}
    assert error in validated.stderr.splitlines()

    config = write_config(tmp_path, BM25)  # the hashing encoder: no model to load
    logged = invoke(
        "audit-log", path, "--from", "otlp", "--corpus", DEMO / "corpus", "--config", config, "--out", tmp_path / "log"
    )
    assert logged.exit_code == 3
    model = json.loads((tmp_path / "log" / "audit_log.json").read_text())
    assert sum(w["traces"] for w in model["windows"]) == readable
    assert sum(w["malformed"] for w in model["windows"]) == 1
    assert error in logged.stderr.splitlines()


def test_a_line_over_the_cap_is_located_and_the_others_are_read(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGAUDIT_MAX_LINE_BYTES", "4096")
    first, second = request_lines(2)
    long = json.dumps({"resourceSpans": [], "padding": "x" * 10_000}) + "\n"
    path = tmp_path / "spans.jsonl"
    path.write_text(first + long + second)
    out = tmp_path / "traces.jsonl"
    result = invoke("ingest", "otlp", path, "--out", out)
    assert result.exit_code == 3
    assert (
        f"error: {path}:2: expected a line of at most 4,096 bytes ($RAGAUDIT_MAX_LINE_BYTES sets the limit), found "
        f"one of {len(long.encode()):,} bytes (skipped unread)"
    ) in result.stderr
    assert sorted(t.query for t in read_trace_file(out)) == ["q0", "q1"]
    monkeypatch.setenv("RAGAUDIT_MAX_LINE_BYTES", str(len(long)))  # the newline is not counted
    assert invoke("ingest", "otlp", path, "--out", out).exit_code == 0


def test_a_trace_file_line_over_the_cap_is_a_malformed_record(tmp_path, monkeypatch, valid_trace):
    monkeypatch.setenv("RAGAUDIT_MAX_LINE_BYTES", "100000")
    line = json.dumps(valid_trace)
    huge = dict(valid_trace, query="q" * 200_000)
    path = tmp_path / "traces.jsonl"
    path.write_text(line + "\n" + json.dumps(huge) + "\n" + json.dumps(dict(valid_trace, qid="other")) + "\n")
    result = invoke("validate", path, "--workers", "1", "--format", "json")
    assert result.exit_code == 3
    report = json.loads(result.stdout)
    assert report["records"] == 3 and report["counts"] == {"malformed_record": 1}
    (malformed,) = report["issues"]
    assert malformed["line"] == 2 and "expected a line of at most 100,000 bytes" in malformed["message"]


def test_a_huge_compressed_line_is_never_held_in_memory(tmp_path, monkeypatch):
    """A 64 MiB line inside a gzip of a few hundred KB: read in blocks and skipped, with the lines
    around it read, in far less memory than the line."""
    monkeypatch.setenv("RAGAUDIT_MAX_LINE_BYTES", str(1 << 20))
    first, second = request_lines(2)
    path = tmp_path / "spans.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(first.encode())
        out.write(b'{"padding": "')
        block = b"x" * (1 << 20)
        for _ in range(64):
            out.write(block)
        out.write(b'"}\n')
        out.write(second.encode())
    assert path.stat().st_size < 2 << 20
    tracemalloc.start()
    try:
        reader = read_traces("otlp", [path])
        items = list(reader)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sorted(t.query for t in items if isinstance(t, Trace)) == ["q0", "q1"]
    (bad,) = [b for b in items if isinstance(b, BadLine)]
    assert bad.line == 2 and f"found one of {(64 << 20) + 16:,} bytes" in bad.message
    assert peak < 16 << 20, peak


def test_a_numeric_span_kind_column_is_a_located_error(tmp_path):
    import pandas as pd

    provider, exporter = span_recorder()
    rag_spans(provider.get_tracer("app"), "q", [{"id": "d", "content": "x"}], "a")
    spans = exporter.get_finished_spans()

    frame = pd.DataFrame(phoenix_rows(spans))
    frame["span_kind"] = [3, 1, 2]  # an enum's numbers, not its names
    path = tmp_path / "spans.parquet"
    frame.to_parquet(path)
    result = invoke("ingest", "phoenix", path, "--out", tmp_path / "traces.jsonl")
    assert result.exit_code == 3
    for row, kind in ((1, 3), (2, 1), (3, 2)):
        assert (
            f"error: {path}:{row}: $.span_kind: expected text in column span_kind (RETRIEVER, LLM, CHAIN, ...), "
            f"found number {kind}"
        ) in result.stderr
    good = write_phoenix(spans, tmp_path / "good.parquet")
    assert invoke("ingest", "phoenix", good, "--out", tmp_path / "good.jsonl").exit_code == 0
    assert len(read_trace_file(tmp_path / "good.jsonl")) == 1
