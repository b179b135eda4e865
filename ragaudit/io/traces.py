"""Trace reader and writer (docs/reference.md §1.3, §1.4).

Reading normalises payloads to the canonical form (`[start, end]` offsets become objects) and
records every field of the wrong JSON type as a FieldError, which the `wrong_type` rule reports.
A line that is not a trace object at all becomes a BadLine (`malformed_record`).
This is the hot path of `ragaudit validate`, so it reads dicts directly rather than via `Fields`.
"""

from __future__ import annotations

import json
import os
from dataclasses import fields
from sys import intern
from typing import Any, Iterator

import orjson

from ragaudit.core.citing import cite_markers
from ragaudit.core.errors import describe
from ragaudit.core.markers import ALL_FORMS
from ragaudit.core.types import (
    REQUIRED_PAYLOAD_FIELDS,
    TRACE_SCHEMA,
    Answer,
    FieldError,
    LiveIndex,
    Offsets,
    Payload,
    Segment,
    Step,
    Trace,
)
from ragaudit.io.jsonfiles import JsonLines
from ragaudit.io.jsonl import BadLine, dump_plain_line, scrub

_STRING_FIELDS = tuple("doc_id section_id snippet_id source_url index_hash embed_model analyzer rev text".split())
_NUMBER_FIELDS = ("score_raw", "score_norm", "rerank_score")
_INTEGER_FIELDS = ("tokens", "page", "k_pos", "k_final")


def _is_number(value: Any) -> bool:
    return type(value) is float or type(value) is int


def read_traces(
    path: str | os.PathLike[str],
    *,
    offset_unit: str = "char",
    markers: frozenset[str] = ALL_FORMS,
    replayed_as: str | None = None,
) -> Iterator[Trace | BadLine]:
    """Stream the traces of a JSONL file; a defective line yields a BadLine and reading goes on.
    Raises InputError when the file cannot be read or holds no record. With `replayed_as`, each
    trace is that pipeline's run (see `parse_trace`)."""
    lines = trace_lines(path)
    yield from traces_in(lines, offset_unit=offset_unit, markers=markers, replayed_as=replayed_as)
    lines.require_records()


def trace_lines(path: str | os.PathLike[str], start: int = 0, end: int | None = None) -> JsonLines:
    """The lines of a trace file, or of the byte range [start, end) of it, for `traces_in`."""
    # NaN and Infinity come through as None with a note each, so that they are reported field by
    # field (`wrong_type`) and the rest of the trace is still checked.
    return JsonLines(path, finite=False, start=start, end=end)


def traces_in(
    lines: JsonLines,
    *,
    offset_unit: str = "char",
    markers: frozenset[str] = ALL_FORMS,
    replayed_as: str | None = None,
) -> Iterator[Trace | BadLine]:
    """The traces of the lines `lines` reads; a defective line yields a BadLine and reading goes on.
    Line numbers are those of `lines` (relative to its range)."""
    name = lines.name
    for number, obj, notes in lines:
        if isinstance(obj, BadLine):
            yield obj
        else:
            yield parse_trace(
                obj,
                file=name,
                line=number,
                offset_unit=offset_unit,
                markers=markers,
                notes=notes,
                replayed_as=replayed_as,
            )


def parse_trace(
    obj: Any,
    *,
    file: str | None = None,
    line: int | None = None,
    offset_unit: str = "char",
    markers: frozenset[str] = ALL_FORMS,
    notes: tuple[FieldError, ...] | None = None,
    replayed_as: str | None = None,
) -> Trace | BadLine:
    """A trace object as a canonical Trace, or a BadLine when it is not a trace object at all.

    `notes` are the values the JSON reader replaced (NaN, Infinity, lone surrogates); they become
    field errors. Without them the object did not come through the reader (a pipeline's output,
    say), so it is scrubbed here: no NaN or lone surrogate may reach a Trace, which must always
    be writable as JSON and UTF-8.

    `markers`: the marker forms the answer's text may cite with (`ragaudit.core.markers.FORMS`).

    `replayed_as`, the name of a replay pipeline, makes the trace that pipeline's run: its config
    is the name, and it keeps no file or line (a line that is no trace still names both).
    """
    if notes is None:
        obj, notes = scrub(obj)
    if not isinstance(obj, dict):
        return _bad(file, line, f"expected a trace object, found {describe(obj)}")
    get = obj.get
    schema = get("schema")
    if schema is not None and schema != TRACE_SCHEMA:
        return _bad(file, line, f"expected schema {TRACE_SCHEMA!r}, found {describe(schema)}", "$.schema")
    qid = get("qid")
    if not isinstance(qid, str) or not qid:
        return _bad(
            file,
            line,
            "expected a trace object with a string qid, found " + (describe(qid) if "qid" in obj else "no qid"),
            "$.qid",
        )
    retrieved = get("retrieved")
    if retrieved is None:
        retrieved = []
    elif not isinstance(retrieved, list):
        return _bad(
            file, line, f"expected retrieved to be an array of payloads, found {describe(retrieved)}", "$.retrieved"
        )

    errors: list[FieldError] = list(notes)
    variant, seed, unit = get("variant", 0), get("seed", 0), get("offset_unit")
    if type(variant) is not int:
        variant = _wrong(errors, "$.variant", "integer", variant)
    if type(seed) is not int:
        seed = _wrong(errors, "$.seed", "integer", seed)
    if unit is not None and not isinstance(unit, str):
        unit = _wrong(errors, "$.offset_unit", "string", unit)
    unit = unit or offset_unit

    payloads = []
    for i, raw in enumerate(retrieved):
        if isinstance(raw, dict):
            payloads.append(_payload(raw, i, unit, errors))
        else:
            errors.append(FieldError(f"$.retrieved[{i}]", "payload object", describe(raw)))

    strings = list(map(get, _TRACE_STRINGS))
    for i, value in enumerate(strings):
        if value is not None and not isinstance(value, str):
            strings[i] = _wrong(errors, f"$.{_TRACE_STRINGS[i]}", "string", value)
    query, config, retriever_name, retrieved_at, source = strings
    qid, query = _shared(qid), _shared(query)
    if source not in (None, "spans"):
        source = _wrong(errors, "$.source", '"spans" or null', source)

    error = get("error")
    if error is not None and not isinstance(error, str):
        error = _as_text(error)
    attempts, retried = get("attempts"), get("retried")
    if attempts is not None and (type(attempts) is not int or attempts < 1):
        attempts = _wrong(errors, "$.attempts", "positive integer", attempts)
    if retried is None:
        retried = ()
    elif isinstance(retried, list) and all(isinstance(r, str) for r in retried):
        retried = tuple(retried)
    else:
        retried = _wrong(errors, "$.retried", "array of error strings", retried) or ()

    return Trace(
        qid=qid,
        variant=variant or 0,
        seed=seed or 0,
        retrieved=tuple(payloads),
        index=_index(obj.get("index"), errors),
        answer=cite_markers(_answer(obj.get("answer"), errors), tuple(payloads), markers),
        steps=_steps(obj.get("steps"), errors),
        error=error or None,
        offset_unit=unit,
        field_errors=tuple(errors),
        file=None if replayed_as is not None else file,
        line=None if replayed_as is not None else line,
        query=query,
        config=replayed_as if replayed_as is not None else config,
        retriever_name=retriever_name,
        retrieved_at=retrieved_at,
        attempts=attempts,
        retried=retried,
        source=source,
    )


_TRACE_STRINGS = ("query", "config", "retriever_name", "retrieved_at", "source")


def _bad(file: str | None, line: int | None, message: str, path: str = "$") -> BadLine:
    return BadLine(file or "<trace>", line or 0, message, path)


def _wrong(errors: list[FieldError], path: str, expected: str, value: Any) -> Any:
    """Record a field of the wrong JSON type; the field then reads as absent (None)."""
    if value is not None:
        errors.append(FieldError(path, expected, describe(value)))
    return None


_KIND_TYPES = {"string": frozenset({str}), "number": frozenset({float, int}), "integer": frozenset({int})}
_NONE = type(None)
# Payload's init fields in its positional order, each with the exact JSON types it accepts
# (None = absent). Building a Payload positionally from one C-level pass over the keys is what
# keeps the reader at hundreds of thousands of payloads per second.
_ORDER = tuple(f.name for f in fields(Payload) if f.init and f.name != "missing")
_KIND_OF = {
    **{k: "string" for k in _STRING_FIELDS},
    **{k: "number" for k in _NUMBER_FIELDS},
    **{k: "integer" for k in _INTEGER_FIELDS},
}
_ACCEPT = tuple(
    _KIND_TYPES[_KIND_OF[k]] | {_NONE}
    if k in _KIND_OF
    else frozenset({dict, list, _NONE})
    if k == "offsets"
    else frozenset({dict, _NONE})
    for k in _ORDER
)
_EXPECTED = {**_KIND_OF, "offsets": "object {start, end, unit} or [start, end]", "window": "object {pre, post}"}
_OFFSETS = _ORDER.index("offsets")
_STRINGS = tuple(i for i, k in enumerate(_ORDER) if k in _STRING_FIELDS)
_REQUIRED = len(REQUIRED_PAYLOAD_FIELDS)
# A payload's shape is the tuple of its fields' types. A file holds a few shapes, so each is
# judged once: (required fields absent, every field of an accepted type).
_SHAPES: dict[tuple[type, ...], tuple[frozenset[str], bool]] = {}
_SHAPES_MAX = 4096  # bounded against hostile input
# Payload is built by position from _ORDER, which is its fields' order (tests/test_registries.py)


def _shape(signature: tuple[type, ...]) -> tuple[frozenset[str], bool]:
    # Absent is not wrong: a required field of the wrong type is a wrong_type error, not missing.
    judged = (
        frozenset(k for k, t in zip(REQUIRED_PAYLOAD_FIELDS, signature) if t is _NONE),
        all(map(frozenset.__contains__, _ACCEPT, signature)),
    )
    if len(_SHAPES) < _SHAPES_MAX:
        _SHAPES[signature] = judged
    return judged


def _shared(value: Any) -> Any:
    """One object per distinct text read (qids, queries, answers, retrieved texts and their ids):
    held once in memory, pickled once in a batch for a worker process."""
    return intern(value) if type(value) is str else value


def _payload(raw: dict[str, Any], index: int, unit: str, errors: list[FieldError]) -> Payload:
    values = list(map(raw.get, _ORDER))
    signature = tuple(map(type, values))
    missing, well_typed = _SHAPES.get(signature) or _shape(signature)
    if not well_typed:
        for i, (key, value) in enumerate(zip(_ORDER, values)):
            if type(value) not in _ACCEPT[i]:
                errors.append(FieldError(f"$.retrieved[{index}].{key}", _EXPECTED[key], describe(value)))
                values[i] = None
    offsets = values[_OFFSETS]
    if offsets is not None:
        if type(offsets) is dict:
            values[_OFFSETS] = Offsets(offsets.get("start"), offsets.get("end"), offsets.get("unit", unit))
        elif len(offsets) == 2:
            values[_OFFSETS] = Offsets(offsets[0], offsets[1], unit)
        else:
            errors.append(FieldError(f"$.retrieved[{index}].offsets", _EXPECTED["offsets"], describe(offsets)))
            values[_OFFSETS] = None
    for i in _STRINGS:
        values[i] = _shared(values[i])
    values.append(missing)
    return Payload(*values)  # type: ignore[arg-type]  # positional by _ORDER, checked at import


def _index(raw: Any, errors: list[FieldError]) -> LiveIndex | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        errors.append(FieldError("$.index", "object", describe(raw)))
        return None
    values = list(map(raw.get, _INDEX_FIELDS))
    for i, value in enumerate(values):
        if value is not None and not isinstance(value, str):
            values[i] = _wrong(errors, f"$.index.{_INDEX_FIELDS[i]}", "string", value)
    return LiveIndex(*values)


_INDEX_FIELDS = ("index_hash", "analyzer", "embed_model", "store")


def _citation_ids(raw: Any, path: str, errors: list[FieldError], at: int = 0) -> tuple[str, ...]:
    """Snippet ids cited by a segment or step; `path` is completed with `% at` only for an error,
    since most lists have none."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        errors.append(FieldError(path % at, "array of snippet ids", describe(raw)))
        return ()
    for item in raw:
        if type(item) is not str:
            break
    else:
        return tuple(raw)  # the usual list of snippet id strings
    out = []
    for i, item in enumerate(raw):
        if isinstance(item, dict):
            item = item.get("snippet_id", item.get("id"))
        if isinstance(item, str):
            out.append(item)
        else:
            errors.append(FieldError(f"{path % at}[{i}]", "snippet id string", describe(item)))
    return tuple(out)


def _answer(raw: Any, errors: list[FieldError]) -> Answer | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = {"text": raw}
    if not isinstance(raw, dict):
        errors.append(FieldError("$.answer", "object {raw, text, segments}", describe(raw)))
        return None
    text, answer_raw = _shared(raw.get("text")), _shared(raw.get("raw"))
    if text is not None and not isinstance(text, str):
        errors.append(FieldError("$.answer.text", "string", describe(text)))
        text = None
    if answer_raw is not None and not isinstance(answer_raw, str):
        answer_raw = _as_text(answer_raw)
    segments = []
    raw_segments = raw.get("segments") or []
    if not isinstance(raw_segments, list):
        errors.append(FieldError("$.answer.segments", "array", describe(raw_segments)))
        raw_segments = []
    for i, item in enumerate(raw_segments):
        if not isinstance(item, dict):
            errors.append(FieldError(f"$.answer.segments[{i}]", "segment object", describe(item)))
            continue
        seg = item.get("seg", i + 1)
        if type(seg) is not int:
            errors.append(FieldError(f"$.answer.segments[{i}].seg", "integer", describe(seg)))
            seg = i + 1
        seg_text = _shared(item.get("text"))
        if not isinstance(seg_text, str):
            if seg_text is not None:
                errors.append(FieldError(f"$.answer.segments[{i}].text", "string", describe(seg_text)))
            seg_text = ""
        segments.append(
            Segment(seg, seg_text, _citation_ids(item.get("citations"), "$.answer.segments[%d].citations", errors, i))
        )
    raw_keys: tuple[str, ...] = ()
    raw_citations = None
    if answer_raw and answer_raw.lstrip().startswith("{"):
        try:
            parsed = orjson.loads(answer_raw)  # keeps key order, which cite_after_answer reads
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            raw_keys = tuple(parsed)
            if "citations" in parsed:
                raw_citations = _flatten_citations(parsed["citations"])
    return Answer(answer_raw, text, tuple(segments), raw_citations, raw_keys)


def _as_text(value: Any) -> str:
    """A non-string `error` or `answer.raw` as JSON text; a pipeline's own objects may not be JSON."""
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _flatten_citations(value: Any) -> tuple[str, ...]:
    """Snippet ids in the `citations` of a cite-first JSON answer: strings or {snippet_id | id} objects."""
    out = []
    for item in value if isinstance(value, list) else ():
        if isinstance(item, dict):
            item = item.get("snippet_id", item.get("id"))
        if isinstance(item, str):
            out.append(item)
    return tuple(out)


def _steps(raw: Any, errors: list[FieldError]) -> tuple[Step, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        errors.append(FieldError("$.steps", "array", describe(raw)))
        return ()
    steps = []
    for i, item in enumerate(raw):
        path = f"$.steps[{i}]"
        if not isinstance(item, dict):
            errors.append(FieldError(path, "step object", describe(item)))
            continue
        number = item.get("step_number", i + 1)
        if type(number) is not int:
            errors.append(FieldError(f"{path}.step_number", "integer", describe(number)))
            number = i + 1
        confidence = item.get("confidence_score")
        if confidence is not None and not _is_number(confidence):
            errors.append(FieldError(f"{path}.confidence_score", "number", describe(confidence)))
            confidence = None
        question = item.get("question")
        intermediate = item.get("intermediate_answer")
        steps.append(
            Step(
                number,
                question if isinstance(question, str) else "",
                intermediate if isinstance(intermediate, str) else "",
                confidence,
                _citation_ids(item.get("citations"), "$.steps[%d].citations", errors, i),
            )
        )
    return tuple(steps)


# ---- writing ------------------------------------------------------------------------------


def payload_to_dict(p: Payload) -> dict[str, Any]:
    out: dict[str, Any] = {
        "doc_id": p.doc_id,
        "section_id": p.section_id,
        "snippet_id": p.snippet_id,
        "source_url": p.source_url,
        "tokens": p.tokens,
        "index_hash": p.index_hash,
        "embed_model": p.embed_model,
        "analyzer": p.analyzer,
        "rev": p.rev,
        "offsets": None
        if p.offsets is None
        else {"start": p.offsets.start, "end": p.offsets.end, "unit": p.offsets.unit},
    }
    for key in ("window", "page", "score_raw", "score_norm", "rerank_score", "k_pos", "k_final", "text"):
        value = getattr(p, key)
        if value is not None:
            out[key] = value
    return out


def trace_to_dict(t: Trace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "schema": TRACE_SCHEMA,
        "qid": t.qid,
        "variant": t.variant,
        "seed": t.seed,
        "query": t.query,
        "config": t.config,
        "retriever_name": t.retriever_name,
        "retrieved_at": t.retrieved_at,
        "retrieved": [payload_to_dict(p) for p in t.retrieved],
        "error": t.error,
    }
    if t.index is not None:
        out["index"] = {k: getattr(t.index, k) for k in ("index_hash", "analyzer", "embed_model", "store")}
    if t.answer is not None:
        out["answer"] = {
            "raw": t.answer.raw,
            "text": t.answer.text,
            # segments read from the text's markers are read again from it, never recorded as given
            "segments": []
            if t.answer.marked
            else [{"seg": s.seg, "text": s.text, "citations": list(s.citations)} for s in t.answer.segments],
        }
    if t.source is not None:
        out["source"] = t.source
    if t.attempts is not None:
        out["attempts"] = t.attempts
        out["retried"] = list(t.retried)
    if t.steps:
        out["steps"] = [
            {
                "step_number": s.step_number,
                "question": s.question,
                "intermediate_answer": s.intermediate_answer,
                "confidence_score": s.confidence_score,
                "citations": list(s.citations),
            }
            for s in t.steps
        ]
    return out


def dump_trace(t: Trace) -> str:
    return dump_plain_line(trace_to_dict(t))
