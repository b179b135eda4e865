"""Phoenix span exports: the rows of `get_spans_dataframe()` saved as parquet or as JSON lines
(`to_json(orient="records", lines=True)`).

A row has `context.trace_id`, `context.span_id`, `parent_id`, `name`, `span_kind`, `start_time`,
`status_code`, `status_message` and one `attributes.<name>` column per attribute, semantic
conventions kept whole (`attributes.input.value`, `attributes.retrieval.documents` as a list of
`{document.id, document.content, document.score, document.metadata}` dicts) and other attributes
nested one column per first name part (`attributes.ragaudit` = `{"qid": ...}`), as Phoenix
flattens them. Both `attributes.<a>.<b>` columns and nested dicts are read.

Parquet is read a row group batch at a time, JSON lines a line at a time. A row that is not an
object, or lacks a trace id, is a located BadLine (parquet rows are numbered from 1).

Cells hold what pandas and pyarrow make of a column: a cell that is null or NaN (a float column's
missing value, even in JSON) is absent, and a column of integers with gaps is float64, so the run
key columns (`attributes.ragaudit.variant` and `.seed`) read an integral float as the integer it
is (`record.run_key_of`). A run key value that is not one is a located error naming the row and
the column, and its trace is left out rather than filed under another run's key.
"""

from __future__ import annotations

import math
import os
from datetime import datetime
from typing import Any, Iterator

from ragaudit.core.errors import InputError, Problem, describe
from ragaudit.io.jsonfiles import open_input
from ragaudit.io.jsonl import BadLine, member_path, scrub
from ragaudit.io.spans.lines import json_values
from ragaudit.io.spans.record import MAX_NS, SpanRecord, from_attributes, ns_of_datetime, ns_of_iso

_PREFIX = "attributes."
_PARQUET_MAGIC = b"PAR1"
_BATCH_ROWS = 1024


def read_phoenix(path: str | os.PathLike[str]) -> Iterator[SpanRecord | BadLine]:
    name = os.fspath(path)
    rows = _parquet_rows(name) if _is_parquet(name) else _json_rows(name)
    number = 0
    for line, row in rows:
        if isinstance(row, BadLine):
            yield row
        else:
            number += 1
            yield from _span(row, name, line, number)


def _is_parquet(name: str) -> bool:
    with open_input(name) as handle:
        return handle.read(4) == _PARQUET_MAGIC


def _json_rows(name: str) -> Iterator[tuple[int, Any]]:
    for line, value, notes in json_values(name):
        if notes and isinstance(value, dict):  # a NaN cell is a missing value, as pandas reads it
            notes = tuple(n for n in notes if not (n.found == "NaN" and _is_cell(n.path, value)))
        for note in notes:
            yield line, BadLine(name, line, f"expected {note.expected}, found {note.found}", note.path)
        if isinstance(value, list):  # `to_json(orient="records")`: one array of rows
            for i, row in enumerate(value):
                yield line, (row if isinstance(row, dict) else _not_a_row(name, line, row, f"$[{i}]"))
        else:
            yield line, value if isinstance(value, (dict, BadLine)) else _not_a_row(name, line, value)


def _is_cell(path: str, row: dict[str, Any]) -> bool:
    """Whether `path` names a cell of `row` (a top-level member), not a value inside one."""
    return any(row[key] is None and path == member_path(key) for key in row)


def _not_a_row(name: str, line: int, value: Any, path: str = "$") -> BadLine:
    return BadLine(name, line, f"expected a span row object, found {describe(value)}", path)


def _parquet_rows(name: str) -> Iterator[tuple[int, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(name)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(
            Problem(name, f"expected a Phoenix spans parquet file, found an unreadable one ({exc})")
        ) from None
    number = 0
    try:
        for batch in table.iter_batches(batch_size=_BATCH_ROWS):
            for row in batch.to_pylist():
                number += 1
                # a NaN cell is a missing value; NaN inside a cell and lone surrogates cannot reach
                # a trace: replaced, each one reported
                row, notes = scrub({k: None if _absent(v) else v for k, v in row.items()})
                for note in notes:
                    yield number, BadLine(name, number, f"expected {note.expected}, found {note.found}", note.path)
                yield number, row
    except (OSError, pa.ArrowException) as exc:
        raise InputError(Problem(name, f"cannot read row {number + 1}: {exc}")) from None
    if number == 0:
        raise InputError(Problem(name, "expected span rows, found none"))


def _span(row: dict[str, Any], name: str, line: int, number: int) -> Iterator[SpanRecord | BadLine]:
    trace_id, span_id = _text(row.get("context.trace_id")), _text(row.get("context.span_id"))
    if trace_id is None:
        yield BadLine(name, line, f"expected a context.trace_id, found {describe(row.get('context.trace_id'))}")
        return
    attributes: dict[str, Any] = {}
    columns: dict[str, str] = {}  # attribute -> the column it came from
    for key, value in row.items():
        if key.startswith(_PREFIX) and not _absent(value):
            _flatten(key[len(_PREFIX) :], value, attributes, columns, key)
    kind = row.get("span_kind")
    if isinstance(kind, str) and "openinference.span.kind" not in attributes:
        attributes["openinference.span.kind"] = kind
    elif not _absent(kind) and not isinstance(kind, str):  # the span is read, of no kind
        yield BadLine(
            name,
            line,
            f"expected text in column span_kind (RETRIEVER, LLM, CHAIN, ...), found {describe(kind)}",
            "$.span_kind",
        )
    start_ns, problem = _start(row.get("start_time"))
    if problem:
        yield BadLine(name, line, problem, "$.start_time")
    status = row.get("status_code")
    message = row.get("status_message")
    span_name = row.get("name")
    record = from_attributes(
        attributes,
        trace_id=trace_id,
        span_id=span_id,
        parent_id=_text(row.get("parent_id")),
        name=span_name if isinstance(span_name, str) else None,
        start_ns=start_ns,
        error=(message or f"span {span_name!r} ended with status ERROR") if status == "ERROR" else None,
        file=name,
        line=line,
        locate=lambda attribute: f"row {number}, {_column(columns, attribute)}",
    )
    yield record


def _column(columns: dict[str, str], attribute: str) -> str:
    column = columns.get(attribute, _PREFIX + attribute)
    if column == _PREFIX + attribute:
        return f"column {column}"
    return f"column {column} (key {attribute[len(column) - len(_PREFIX) + 1 :]})"


def _flatten(key: str, value: Any, out: dict[str, Any], columns: dict[str, str], column: str) -> None:
    """Nested attribute dicts as dotted keys; document metadata (a dict by design) and lists stay."""
    if isinstance(value, dict) and not key.endswith("metadata"):
        for inner, item in value.items():
            if not _absent(item):
                _flatten(f"{key}.{inner}", item, out, columns, column)
    else:
        out[key] = value
        columns[key] = column


def _absent(value: Any) -> bool:
    # pandas writes a missing cell as null (JSON) or NaN (a float column)
    return value is None or (type(value) is float and math.isnan(value))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _start(value: Any) -> tuple[int | None, str | None]:
    """A start time (datetime, ISO text, or epoch milliseconds as pandas writes JSON) in ns."""
    if _absent(value):
        return None, None
    if isinstance(value, datetime):
        return ns_of_datetime(value), None
    if isinstance(value, str):
        ns = ns_of_iso(value)
        if ns is not None:
            return ns, None
    elif type(value) is int and 0 <= value * 1_000_000 <= MAX_NS:
        return value * 1_000_000, None
    return None, f"expected a start_time (a timestamp, ISO 8601 text or epoch milliseconds), found {describe(value)}"
