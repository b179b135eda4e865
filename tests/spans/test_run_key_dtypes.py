"""Run keys as pandas and pyarrow store them: in a Phoenix span dataframe the `ragaudit.variant`
and `ragaudit.seed` columns are float64 with NaN on the spans that lack them. `ingest`,
`validate --from`, `audit-log --from` and a replay read one export through one reader and agree;
a value that is not a key, and two traces under one key, are located errors."""

from __future__ import annotations

import json
import math
import sqlite3

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import DEMO, invoke, run_dir_of, write_config

from ragaudit.core.types import Trace
from ragaudit.io.jsonl import BadLine
from ragaudit.io.spans import read_traces
from ragaudit.io.spans.record import run_key_of
from ragaudit.io.stream import read_trace_file

QID, SEED, VARIANTS = "PWD-REQ-1", 7, (0, 1, 2)  # the first handbook question, its three wordings
QUESTION = "How many characters long must workforce passwords be at minimum?"
SENTENCE = "Workforce passwords must be at least 14 characters long."
UNKEYED = f"{4:032x}"  # the fourth trace has no ragaudit attributes: keyed by its trace id, variant 0, seed 0
REPLAY = '[[pipelines]]\nname = "prod"\nkind = "replay"\ntraces = "{}"\nformat = "phoenix"\n'


def span_rows(trace: int, key: dict | None) -> list[dict]:
    """One request's three spans as rows of `px.Client().get_spans_dataframe()`: context, kind,
    times, status, and one `attributes.<name>` column per attribute; the run key on the root."""
    trace_id, base = f"{trace + 1:032x}", pd.Timestamp("2026-11-20T10:00:00Z") + pd.Timedelta(minutes=trace)
    root, retriever, llm = (f"{trace + 1:08x}{n:08x}" for n in range(3))

    def row(span_id, parent, name, kind, offset_ms, **attributes):
        return {
            "name": name,
            "span_kind": kind,
            "parent_id": parent,
            "start_time": base + pd.Timedelta(milliseconds=offset_ms),
            "end_time": base + pd.Timedelta(milliseconds=offset_ms + 5),
            "status_code": "OK",
            "status_message": "",
            "events": [],
            "context.span_id": span_id,
            "context.trace_id": trace_id,
            "attributes.openinference.span.kind": kind,
            **{f"attributes.{k}": v for k, v in attributes.items()},
        }

    documents = [{"document.id": "d1", "document.content": SENTENCE, "document.score": 0.8}]
    answer = f"At least 14 characters ({trace})."
    keyed = {f"ragaudit.{k}": v for k, v in (key or {}).items()}
    return [
        row(root, None, "rag", "CHAIN", 0, **{"input.value": QUESTION, "output.value": answer, **keyed}),
        row(retriever, root, "retrieve", "RETRIEVER", 1, **{"input.value": QUESTION, "retrieval.documents": documents}),
        row(llm, root, "llm", "LLM", 2, **{"output.value": answer}),
    ]


def spans_frame(keys: list[dict | None]) -> pd.DataFrame:
    rows = [r for i, key in enumerate(keys) for r in span_rows(i, key)]
    return pd.DataFrame(rows).set_index("context.span_id", drop=False)  # indexed by span id, as Phoenix does


def keyed_frame() -> pd.DataFrame:
    frame = spans_frame([{"qid": QID, "variant": v, "seed": SEED} for v in VARIANTS] + [None])
    # what pandas makes of an integer attribute that some rows lack
    assert frame["attributes.ragaudit.variant"].dtype == "float64"
    assert frame["attributes.ragaudit.seed"].dtype == "float64"
    assert frame["attributes.ragaudit.variant"].isna().sum() == 3 * len(VARIANTS) + 3 - len(VARIANTS)
    return frame


def write(frame: pd.DataFrame, path):
    if path.suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True, date_format="iso")
    else:
        frame.to_parquet(path)
    return path


EXPECTED = {(QID, v, SEED) for v in VARIANTS} | {(UNKEYED, 0, 0)}


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_ingest_validate_audit_log_and_replay_agree_on_a_pandas_export(tmp_path, suffix):
    export = write(keyed_frame(), tmp_path / f"spans{suffix}")

    out = tmp_path / "traces.jsonl"
    ingested = invoke("ingest", "phoenix", export, "--out", out)
    assert ingested.exit_code == 0, ingested.output
    assert ingested.output == f"12 spans, 4 traces written to {out}, 0 traces without a RETRIEVER span skipped\n"
    traces = read_trace_file(out)
    assert {(t.qid, t.variant, t.seed) for t in traces} == EXPECTED and len(traces) == 4
    assert {t.answer.text for t in traces if t.qid == QID} == {f"At least 14 characters ({v})." for v in VARIANTS}

    # spans, read as spans or as the traces ingest wrote, are asked for the live index alike
    from_spans = invoke("validate", "--from", "phoenix", export, "--format", "json")
    from_traces = invoke("validate", out, "--format", "json")
    assert from_spans.exit_code == from_traces.exit_code == 1  # documents without payload metadata
    spans_report, traces_report = json.loads(from_spans.output), json.loads(from_traces.output)
    assert spans_report["records"] == 4 and "wrong_type" not in spans_report["counts"]
    assert spans_report["counts"] == traces_report["counts"]

    config = write_config(tmp_path, REPLAY.format(export.name), items=1, seeds=f"[{SEED}]")
    log = tmp_path / "log"
    logged = invoke(
        "audit-log", "--from", "phoenix", export, "--corpus", DEMO / "corpus", "--config", config, "--out", log
    )
    assert logged.exit_code in (0, 1), logged.output
    assert "error:" not in logged.output
    rows = sqlite3.connect(log / "rag_traces.sqlite").execute("SELECT DISTINCT qid, variant, seed FROM rag_traces")
    assert set(rows) == EXPECTED

    replayed = invoke("run", config, "--no-gate")
    assert replayed.exit_code == 0, replayed.output
    runs = [json.loads(line) for line in (run_dir_of(replayed) / "traces.jsonl").read_text().splitlines()]
    assert sorted((r["qid"], r["variant"], r["seed"], r["error"]) for r in runs) == [
        (QID, v, SEED, None) for v in VARIANTS
    ]
    assert {r["answer"]["text"] for r in runs} == {f"At least 14 characters ({v})." for v in VARIANTS}


def test_nan_cells_written_as_nan_are_absent(tmp_path):
    """pyarrow keeps NaN when told to, and Python's json writes it: either way a missing value."""
    frame = keyed_frame()
    table = pa.Table.from_pandas(frame, preserve_index=False)
    for name in ("attributes.ragaudit.variant", "attributes.ragaudit.seed"):  # as polars or pyarrow itself write
        at = table.schema.get_field_index(name)
        table = table.set_column(at, name, pa.array(frame[name].to_numpy()))
        assert table.column(name).null_count == 0
    pq.write_table(table, tmp_path / "nan.parquet")
    lines = tmp_path / "nan.jsonl"
    records = frame.reset_index(drop=True).astype({"start_time": str, "end_time": str}).to_dict("records")
    lines.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert "NaN" in lines.read_text()
    for path in (tmp_path / "nan.parquet", lines):
        items = list(read_traces("phoenix", [path]))
        assert [i for i in items if isinstance(i, BadLine)] == []
        assert {(t.qid, t.variant, t.seed) for t in items if isinstance(t, Trace)} == EXPECTED


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_a_fractional_variant_is_a_located_error_everywhere(tmp_path, suffix):
    frame = keyed_frame()
    row = 3 + 1  # the second trace's root span (rows numbered from 1)
    frame.iloc[row - 1, frame.columns.get_loc("attributes.ragaudit.variant")] = 1.5
    export = write(frame, tmp_path / f"spans{suffix}")
    message = (
        f"error: {export}:{row}: row {row}, column attributes.ragaudit.variant: expected the run's variant as an "
        f"integer, found number 1.5; trace {2:032x} left out (its run key is unknown)"
    )
    out = tmp_path / "traces.jsonl"
    ingested = invoke("ingest", "phoenix", export, "--out", out)
    assert ingested.exit_code == 3 and message in ingested.stderr
    assert "3 traces written" in ingested.stdout and "1 defective lines or spans" in ingested.stdout
    assert {(t.qid, t.variant, t.seed) for t in read_trace_file(out)} == EXPECTED - {(QID, 1, SEED)}

    validated = invoke("validate", "--from", "phoenix", export)
    assert validated.exit_code == 3 and message in validated.stderr

    config = write_config(tmp_path, REPLAY.format(export.name), items=1, seeds=f"[{SEED}]")
    log = tmp_path / "log"
    logged = invoke(
        "audit-log", "--from", "phoenix", export, "--corpus", DEMO / "corpus", "--config", config, "--out", log
    )
    assert logged.exit_code == 3 and message in logged.stderr

    replayed = invoke("run", config, "--no-gate")
    assert replayed.exit_code == 3 and message in replayed.stderr


def test_a_column_of_text_where_integers_belong_exits_3_naming_file_row_and_column(tmp_path):
    frame = spans_frame([{"qid": QID, "variant": str(v), "seed": SEED} for v in VARIANTS])
    assert frame["attributes.ragaudit.variant"].map(type).eq(str).sum() == len(VARIANTS)
    export = write(frame, tmp_path / "spans.parquet")
    result = invoke("ingest", "phoenix", export, "--out", tmp_path / "traces.jsonl")
    assert result.exit_code == 3
    for i, variant in enumerate(VARIANTS):
        row = 3 * i + 1
        assert (
            f"error: {export}:{row}: row {row}, column attributes.ragaudit.variant: expected the run's variant as an "
            f"integer, found string '{variant}'; trace {i + 1:032x} left out (its run key is unknown)"
        ) in result.stderr
    assert result.stdout.startswith("9 spans, 0 traces written")


def test_a_nested_ragaudit_column_names_its_key(tmp_path):
    rows = [r for i, v in enumerate(VARIANTS) for r in span_rows(i, None)]
    for i, row in enumerate(rows):
        if row["parent_id"] is None:
            row["attributes.ragaudit"] = {"qid": QID, "variant": i // 3 + 0.25, "seed": SEED}
    export = write(pd.DataFrame(rows), tmp_path / "spans.jsonl")
    items = list(read_traces("phoenix", [export]))
    assert [(b.line, b.message.split(";")[0]) for b in items if isinstance(b, BadLine)] == [
        (
            3 * i + 1,
            f"row {3 * i + 1}, column attributes.ragaudit (key variant): expected the run's variant "
            f"as an integer, found number {v + 0.25}",
        )
        for i, v in enumerate(VARIANTS)
    ]


def test_two_traces_under_one_run_key_are_a_located_error(tmp_path):
    """Without a variant column every trace is variant 0: the old silent outcome, now an error."""
    export = write(spans_frame([{"qid": QID, "seed": SEED}] * 3), tmp_path / "spans.parquet")
    out = tmp_path / "traces.jsonl"
    result = invoke("ingest", "phoenix", export, "--out", out)
    assert result.exit_code == 3
    for row in (5, 8):  # the retriever spans of the second and third traces
        assert (
            f"error: {export}:{row}: expected one trace per run key (pipeline, qid, variant, seed), found pipeline "
            f"(unnamed) qid '{QID}' variant 0 seed {SEED} again (first at {export}:2); this trace is left out"
        ) in result.stderr
    assert [(t.qid, t.variant, t.seed) for t in read_trace_file(out)] == [(QID, 0, SEED)]
    assert "1 traces written" in result.stdout and "2 defective lines or spans" in result.stdout


def test_langfuse_metadata_as_pandas_writes_it(tmp_path):
    def observation(trace: int, variant) -> dict:
        return {
            "id": f"o{trace}",
            "traceId": f"t{trace}",
            "type": "RETRIEVER",
            "name": "retrieve",
            "input": QUESTION,
            "output": [{"id": "d1", "content": SENTENCE, "score": 0.8}],
            "metadata": {"ragaudit.qid": QID, "ragaudit.variant": variant, "ragaudit.seed": float(SEED)},
        }

    path = tmp_path / "observations.jsonl"
    lines = [json.dumps(observation(i, float(i))) for i in range(2)]
    lines.append(json.dumps(observation(2, math.nan)))  # NaN: absent, variant 0 -> collides with trace t0
    lines.append(json.dumps(observation(3, None)).replace(f'"ragaudit.seed": {float(SEED)}', '"ragaudit.seed": 2.5'))
    path.write_text("\n".join(lines) + "\n")
    items = list(read_traces("langfuse", [path]))
    assert [(t.qid, t.variant, t.seed) for t in items if isinstance(t, Trace)] == [(QID, 0, SEED), (QID, 1, SEED)]
    assert [(b.line, b.message) for b in items if isinstance(b, BadLine)] == [
        (
            3,
            f"expected one trace per run key (pipeline, qid, variant, seed), found pipeline (unnamed) qid '{QID}' "
            f"variant 0 seed {SEED} again (first at {path}:1); this trace is left out",
        ),
        (
            4,
            '$.metadata["ragaudit.seed"]: expected the run\'s seed as an integer, found number 2.5; trace t3 left out '
            "(its run key is unknown)",
        ),
    ]


@pytest.mark.parametrize(
    ("values", "key", "problems"),
    [
        ({"ragaudit.variant": 2.0, "ragaudit.seed": math.nan}, {"ragaudit.variant": 2}, ()),
        ({"ragaudit.qid": "q", "ragaudit.seed": 3, "other": 1.5}, {"ragaudit.qid": "q", "ragaudit.seed": 3}, ()),
        ({"ragaudit.variant": None}, None, ()),
        (
            {"ragaudit.variant": True},
            None,
            (("ragaudit.variant", "expected the run's variant as an integer, found boolean true"),),
        ),
        (
            {"ragaudit.seed": math.inf},
            None,
            (("ragaudit.seed", "expected the run's seed as an integer, found number inf"),),
        ),
        ({"ragaudit.qid": 17.0}, None, (("ragaudit.qid", "expected the run's qid as text, found number 17.0"),)),
    ],
)
def test_run_key_of(values, key, problems):
    assert run_key_of(values) == (key, problems)
