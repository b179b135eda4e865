"""OTLP JSON spans: one `ExportTraceServiceRequest` per line, as the OpenTelemetry Collector's
file exporter writes them (gzip too), or one request as a whole JSON document.

`resourceSpans[] → scopeSpans[] → spans[]`; attributes are `{key, value}` with typed values
(`stringValue`, `intValue` (a string or a number), `doubleValue`, `boolValue`, `bytesValue`,
`arrayValue {values}`, `kvlistValue {values}`); trace and span ids are hex (the OTLP JSON
encoding) or base64 (protobuf's JSON mapping, as `MessageToJson` writes them); field names are
camelCase or the proto's snake_case. A defective span or attribute is reported as a BadLine at
its line and JSON path, and the rest of the line is still read (a defective attribute is left
out of its span; a span without a valid trace id is left out).
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import Any, Iterator

from ragaudit.core.errors import describe
from ragaudit.io.jsonl import BadLine
from ragaudit.io.spans.lines import json_values
from ragaudit.io.spans.record import MAX_NS, SpanRecord, from_attributes

_STATUS_ERROR = (2, "STATUS_CODE_ERROR")
_HEX = "0123456789abcdef"
_KINDS = {  # what each typed value holds, for messages
    "stringValue": "a string",
    "intValue": "an integer (or a string of digits)",
    "doubleValue": "a number",
    "boolValue": "true or false",
    "bytesValue": "base64 text",
    "arrayValue": "an object {values: [...]}",
    "kvlistValue": "an object {values: [{key, value}, ...]}",
}


class _Defect(ValueError):
    """A located defect: `path` in the line's JSON, `message` saying what was expected and found."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path


def _expected(path: str, expected: str, value: Any) -> _Defect:
    return _Defect(path, f"expected {expected}, found {describe(value)}")


def read_otlp(path: str | os.PathLike[str]) -> Iterator[SpanRecord | BadLine]:
    name = os.fspath(path)
    for line, value, notes in json_values(name):
        if isinstance(value, BadLine):
            yield value
            continue
        for note in notes:
            yield BadLine(name, line, f"expected {note.expected}, found {note.found}", note.path)
        yield from _request(value, name, line)


def _request(value: Any, name: str, line: int) -> list[SpanRecord | BadLine]:
    """The spans of one request (a line), in order, with a BadLine for each defect among them."""
    if not isinstance(value, dict):
        return [BadLine(name, line, f"expected an ExportTraceServiceRequest object, found {describe(value)}")]
    resources = _field(value, "resourceSpans", "resource_spans")
    if not isinstance(resources, list):
        found = "none" if resources is None else describe(resources)
        return [BadLine(name, line, f"expected a resourceSpans array, found {found}", "$.resourceSpans")]
    out: list[SpanRecord | BadLine] = []
    for r, resource_spans in enumerate(resources):
        at = f"$.resourceSpans[{r}]"
        if not isinstance(resource_spans, dict):
            out.append(BadLine(name, line, f"expected a ResourceSpans object, found {describe(resource_spans)}", at))
            continue
        resource = resource_spans.get("resource") or {}
        service, problems = _service(resource, f"{at}.resource")
        out.extend(BadLine(name, line, str(problem), problem.path) for problem in problems)
        scopes = _field(resource_spans, "scopeSpans", "scope_spans") or []
        if not isinstance(scopes, list):
            out.append(
                BadLine(name, line, f"expected a scopeSpans array, found {describe(scopes)}", f"{at}.scopeSpans")
            )
            continue
        for s, scope_spans in enumerate(scopes):
            spans = scope_spans.get("spans") if isinstance(scope_spans, dict) else scope_spans
            where = f"{at}.scopeSpans[{s}]"
            if not isinstance(spans, list):
                out.append(
                    BadLine(
                        name, line, f"expected a ScopeSpans object with a spans array, found {describe(spans)}", where
                    )
                )
                continue
            for k, span in enumerate(spans):
                record, problems = _span(span, service, name, line)
                for problem in problems:  # paths relative to the span: completed only here
                    out.append(BadLine(name, line, str(problem), f"{where}.spans[{k}]{problem.path}"))
                if record is not None:
                    out.append(record)
    return out


def _span(span: Any, service: str | None, name: str, line: int) -> tuple[SpanRecord | None, list[_Defect]]:
    """The span and the defects found in it (paths relative to it); no span without valid ids."""
    if type(span) is not dict:
        return None, [_expected("", "a Span object", span)]
    get = span.get
    problems: list[_Defect] = []
    try:
        trace_id = _id(get("traceId") or get("trace_id"), 32, ".traceId")
        span_id = _id(get("spanId") or get("span_id"), 16, ".spanId")
        parent = get("parentSpanId") or get("parent_span_id")
        parent_id = _id(parent, 16, ".parentSpanId") if parent else None
    except _Defect as defect:
        return None, [defect]
    start_ns = None
    started = get("startTimeUnixNano") or get("start_time_unix_nano")
    if started is not None:
        if type(started) is str and started.isdigit() and len(started) <= 21 and int(started) <= MAX_NS:
            start_ns = int(started)
        elif type(started) is int and 0 <= started <= MAX_NS:
            start_ns = started
        else:
            problems.append(
                _expected(
                    ".startTimeUnixNano",
                    "nanoseconds since the epoch up to the year 9999 (an integer or a string of digits)",
                    started,
                )
            )
    attributes = get("attributes")
    if attributes:
        attributes, found = _attributes(attributes)
        problems.extend(_Defect(".attributes" + p.path, str(p)) for p in found)
    else:
        attributes = {}
    span_name = get("name")
    status = get("status")
    record = from_attributes(
        attributes,
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=span_name if type(span_name) is str else None,
        start_ns=start_ns,
        service=service,
        error=_error(status, span_name) if status else None,
        file=name,
        line=line,
    )
    return record, problems


def _field(obj: dict[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _id(value: Any, digits: int, path: str) -> str:
    """An id as lowercase hex: given as `digits` hex digits or as base64 of digits / 2 bytes."""
    if type(value) is str:
        if len(value) == digits:
            lower = value.lower()
            if not lower.strip(_HEX):
                return lower
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) * 2 == digits:
            return raw.hex()
    if value is None or value == "":
        found = "none" if value is None else "an empty string"
        raise _Defect(path, f"expected an id of {digits} hex digits, found {found}")
    raise _expected(path, f"an id of {digits} hex digits or {digits // 2} bytes in base64", value)


def _attributes(raw: Any) -> tuple[dict[str, Any], list[_Defect]]:
    """A KeyValue list as a flat dict; each defective entry a problem (its path relative to the
    list), left out."""
    if type(raw) is not list:
        return {}, [_expected("", "an array of attributes", raw)]
    out: dict[str, Any] = {}
    problems: list[_Defect] = []
    for i, entry in enumerate(raw):
        try:  # most attributes are strings: the short way
            key, value = entry["key"], entry["value"]
            text = value["stringValue"]
        except (KeyError, TypeError):
            pass
        else:
            if type(text) is str and type(key) is str and len(value) == 1:
                out[key] = text
                continue
        key = entry.get("key") if type(entry) is dict else None
        if type(key) is not str:
            problems.append(_expected(f"[{i}]", "an attribute {key, value}", entry))
            continue
        try:
            out[key] = _any_value(entry.get("value"))
        except _Defect as defect:
            problems.append(_Defect(f"[{i}].value{defect.path}", f"attribute {key!r}: {defect}"))
    return out, problems


def _any_value(value: Any) -> Any:
    """The Python value of an AnyValue; a defect's path is relative to the value."""
    if not isinstance(value, dict):
        if value is None:
            return None
        raise _expected("", "a typed value object (stringValue, intValue, ...)", value)
    if not value:
        return None  # an empty AnyValue: no value
    if len(value) != 1:
        raise _Defect("", f"expected one typed value, found {len(value)} ({', '.join(sorted(value))})")
    ((kind, inner),) = value.items()
    if kind in ("stringValue", "string_value"):
        if isinstance(inner, str):
            return inner
    elif kind in ("intValue", "int_value"):
        if type(inner) is int:
            return inner
        if isinstance(inner, str) and inner.lstrip("-").isdigit():
            return int(inner)
    elif kind in ("doubleValue", "double_value"):
        if type(inner) in (int, float):
            return float(inner)
    elif kind in ("boolValue", "bool_value"):
        if type(inner) is bool:
            return inner
    elif kind in ("bytesValue", "bytes_value"):
        if isinstance(inner, str):
            try:
                return base64.b64decode(inner, validate=True).hex()
            except (binascii.Error, ValueError):
                pass
    elif kind in ("arrayValue", "array_value"):
        values = inner.get("values", []) if isinstance(inner, dict) else None
        if isinstance(values, list):
            out = []
            for i, item in enumerate(values):
                try:
                    out.append(_any_value(item))
                except _Defect as defect:
                    raise _Defect(f".{kind}.values[{i}]{defect.path}", str(defect)) from None
            return out
    elif kind in ("kvlistValue", "kvlist_value"):
        values = inner.get("values", []) if isinstance(inner, dict) else None
        if isinstance(values, list):
            nested, problems = _attributes(values)
            if problems:
                raise _Defect(f".{kind}.values{problems[0].path}", str(problems[0]))
            return nested
    else:
        raise _Defect(
            "",
            f"expected stringValue, intValue, doubleValue, boolValue, bytesValue, arrayValue or kvlistValue, found {kind!r}",
        )
    raise _expected(f".{kind}", _KINDS[kind.replace("_v", "V")], inner)


def _service(resource: Any, at: str) -> tuple[str | None, list[_Defect]]:
    if not isinstance(resource, dict):
        return None, [_Defect(at, f"expected a Resource object, found {describe(resource)}")]
    raw = resource.get("attributes")
    if raw is None:
        return None, []
    attributes, problems = _attributes(raw)
    service = attributes.get("service.name")
    problems = [_Defect(f"{at}.attributes{p.path}", str(p)) for p in problems]
    return (service if isinstance(service, str) else None), problems


def _error(status: Any, span_name: Any) -> str | None:
    if not isinstance(status, dict) or status.get("code") not in _STATUS_ERROR:
        return None
    message = status.get("message")
    return message if isinstance(message, str) and message else f"span {span_name!r} ended with status ERROR"
