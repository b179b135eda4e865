"""`ragaudit ingest`, `ragaudit validate --from` and a replay pipeline's `format`, end to end."""

import json

import pytest
from helpers import invoke, otlp_line, rag_spans, span_recorder, write_config

from ragaudit.cli.commands import main
from ragaudit.core.errors import UsageError
from ragaudit.io import spans
from ragaudit.io.config import load_config
from ragaudit.io.spans.join import DEFAULT_WINDOW
from ragaudit.io.stream import read_trace_file
from ragaudit.io.traces import dump_trace


@pytest.fixture
def span_file(tmp_path):
    provider, exporter = span_recorder("kb-bot")
    tracer = provider.get_tracer("app")
    for i in range(3):
        rag_spans(tracer, f"q{i}", [{"id": f"d{i}", "content": "Hardware keys.", "score": 0.5}], f"a{i}")
    with tracer.start_as_current_span("health", attributes={"openinference.span.kind": "CHAIN"}):
        pass
    path = tmp_path / "spans.jsonl"
    path.write_text(otlp_line(exporter.get_finished_spans()) + "\n")
    return path


def test_ingest_writes_one_trace_per_trace_id_and_counts(span_file, tmp_path):
    out = tmp_path / "traces.jsonl"
    result = invoke("ingest", "otlp", span_file, "--out", out, "--config-name", "prod")
    assert result.exit_code == 0, result.output
    assert result.output == (f"10 spans, 3 traces written to {out}, 1 traces without a RETRIEVER span skipped\n")
    assert out.read_text().splitlines() == [
        dump_trace(t) for t in spans.read_traces("otlp", [span_file], config_name="prod")
    ]
    written = read_trace_file(out)
    assert {t.config for t in written} == {"prod"} and sorted(t.query for t in written) == ["q0", "q1", "q2"]


def test_ingest_reports_defective_lines_and_still_writes(span_file, tmp_path):
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text(span_file.read_text() + "{oops\n")
    out = tmp_path / "traces.jsonl"
    result = invoke("ingest", "otlp", damaged, "--out", out)
    assert result.exit_code == 3
    assert f"error: {damaged}:2: expected a JSON value" in result.output
    assert "3 traces written" in result.output and "1 defective lines or spans" in result.output
    assert len(read_trace_file(out)) == 3


def test_ingest_of_an_unreadable_input_exits_3_and_writes_nothing(tmp_path):
    out = tmp_path / "traces.jsonl"
    result = invoke("ingest", "langfuse", tmp_path / "missing.json", "--out", out)
    assert result.exit_code == 3
    assert f"error: {tmp_path / 'missing.json'}: no such file" in result.output
    assert not out.exists()
    assert invoke("ingest", "jaeger", tmp_path / "x", "--out", out).exit_code == 2


def test_validate_from_spans(span_file, corpus_dir):
    result = invoke("validate", "--from", "otlp", span_file, "--format", "json")
    assert result.exit_code == 1  # the documents carry no payload metadata: errors
    report = json.loads(result.output)
    assert report["records"] == 3
    assert report["counts"]["missing_doc_id"] == 3 and "missing_live_index" not in report["counts"]
    assert {i["file"] for i in report["issues"]} == {str(span_file)}
    # spans seldom carry the live index: asked for only with --live-index or [audit] live_index
    asked = json.loads(invoke("validate", "--from", "otlp", span_file, "--format", "json", "--live-index").output)
    assert asked["counts"]["missing_live_index"] == 3
    config = corpus_dir.parent / "live.toml"
    config.write_text("[audit]\nlive_index = true\n")
    configured = invoke("validate", "--from", "otlp", span_file, "--format", "json", "--config", config)
    assert json.loads(configured.output)["counts"]["missing_live_index"] == 3

    usage = invoke("validate", "--from", "otlp", "--workers", "2", span_file)
    assert usage.exit_code == 2 and "--from reads spans in this process" in usage.output
    missing = invoke("validate", "--from", "phoenix", span_file.with_name("none.parquet"))
    assert missing.exit_code == 3 and "no such file" in missing.output


def test_an_ingested_file_read_back_as_traces_is_asked_for_its_live_index_only_when_asked(span_file, tmp_path):
    out = tmp_path / "ingested.jsonl"
    assert invoke("ingest", "otlp", span_file, "--out", out).exit_code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 3 and {line["source"] for line in lines} == {"spans"}
    plain = json.loads(invoke("validate", out, "--format", "json").output)
    assert plain["records"] == 3 and "missing_live_index" not in plain["counts"]
    asked = json.loads(invoke("validate", out, "--format", "json", "--live-index").output)
    assert asked["counts"]["missing_live_index"] == 3
    # a trace of a ragaudit run (no source) is asked as always; a source that is not "spans" is an error
    for line in lines:
        del line["source"]
    out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert json.loads(invoke("validate", out, "--format", "json").output)["counts"]["missing_live_index"] == 3
    lines[0]["source"] = "otlp"
    out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    wrong = json.loads(invoke("validate", out, "--format", "json").output)
    assert [(i["path"], i["line"]) for i in wrong["issues"] if i["path"] == "$.source"] == [("$.source", 1)]


def test_replay_format_is_part_of_the_config_schema(tmp_path):
    pipeline = '[[pipelines]]\nname = "prod"\nkind = "replay"\ntraces = "spans.jsonl"\nformat = "{}"\n'
    config = load_config(write_config(tmp_path, pipeline.format("phoenix")))
    assert config.pipelines[0].options["format"] == "phoenix"
    bad = invoke("run", write_config(tmp_path, pipeline.format("jaeger")))
    assert bad.exit_code == 3
    assert "$.pipelines[0].format: expected" in bad.output and "'jaeger'" in bad.output


def test_one_list_of_span_formats_and_one_default_window():
    from typing import get_args

    from ragaudit.io import config_schema as schema

    replay_formats = get_args(schema._Replay.model_fields["format"].annotation)
    assert spans.FORMATS == ("traces", *spans.SPAN_FORMATS) == replay_formats
    (source,) = [p for p in main.commands["ingest"].params if p.name == "source"]
    assert tuple(source.type.choices) == spans.SPAN_FORMATS
    (window,) = [p for p in main.commands["ingest"].params if p.name == "window"]
    assert window.default == DEFAULT_WINDOW


def test_the_traces_format_reads_ragaudit_traces(span_file, tmp_path):
    out = tmp_path / "traces.jsonl"
    assert invoke("ingest", "otlp", span_file, "--out", out).exit_code == 0
    reader = spans.read_traces("traces", [out, out])
    assert list(reader) == read_trace_file(out) * 2
    assert (reader.traces, reader.spans, reader.skipped) == (6, 0, 0)
    with pytest.raises(UsageError, match="expected a span format"):
        spans.read_traces("jaeger", [out])


def test_a_late_span_is_a_warning_and_its_trace_is_written_once(tmp_path):
    provider, exporter = span_recorder("kb-bot")
    tracer = provider.get_tracer("app")
    for i in range(12):
        rag_spans(tracer, f"q{i}", [{"id": f"d{i}", "content": "Hardware keys."}], f"a{i}")
    spans = exporter.get_finished_spans()
    late = spans[1]  # the first trace's LLM span, after every other trace
    path = tmp_path / "spans.jsonl"
    order = [spans[0], spans[2], *spans[3:], late]
    path.write_text("".join(otlp_line([s]) + "\n" for s in order))
    out = tmp_path / "traces.jsonl"
    result = invoke("ingest", "otlp", path, "--out", out, "--window", "3")
    assert result.exit_code == 0, result.output
    trace_id = f"{late.context.trace_id:032x}"
    assert (
        f"warning: {path}:{len(order)}: late span: expected the spans of trace {trace_id} within 3 spans of each "
        "other, found span 'llm' after the trace was written (left out; a larger --window joins it)"
    ) in result.stderr
    assert (
        result.stdout
        == f"36 spans, 12 traces written to {out}, 0 traces without a RETRIEVER span skipped, 1 late spans left out\n"
    )
    qids = [t.qid for t in read_trace_file(out)]
    assert len(qids) == len(set(qids)) == 12
    whole = invoke("ingest", "otlp", path, "--out", out)  # the default window holds them all
    assert whole.exit_code == 0 and "late span" not in whole.output
    assert next(t for t in read_trace_file(out) if t.qid == trace_id).answer.text == "a0"


def test_a_span_recording_that_cannot_be_read_whole_stops_a_replay(tmp_path):
    pipeline = '[[pipelines]]\nname = "prod"\nkind = "replay"\ntraces = "spans.jsonl"\nformat = "otlp"\n'
    config = write_config(tmp_path, pipeline, items=1, seeds="[1]")
    (tmp_path / "spans.jsonl").write_text("\n\n")
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 3, result.output
    assert f"error: {tmp_path / 'spans.jsonl'}: expected JSON lines, found only blank lines" in result.stderr
