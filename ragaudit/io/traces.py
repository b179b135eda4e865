"""Trace reader and writer (SPEC §1.3, §1.4).

Reading normalises payloads to the canonical form (`[start, end]` offsets become objects) and
records every field of the wrong JSON type as a FieldError, which the `wrong_type` rule reports.
A line that is not a trace object at all becomes a BadLine (`malformed_record`).
This is the hot path of `ragaudit validate`, so it reads dicts directly rather than via `Fields`.
"""
from __future__ import annotations

import json
import os
from typing import Any, Iterator

import orjson

from ragaudit.errors import describe
from ragaudit.io.jsonl import BadLine, dump_line, iter_json_lines
from ragaudit.types import (
    REQUIRED_PAYLOAD_FIELDS, TRACE_SCHEMA, Answer, FieldError, LiveIndex, Offsets, Payload,
    Segment, Step, Trace,
)

_STRING_FIELDS = ("doc_id", "section_id", "snippet_id", "source_url", "index_hash",
                  "embed_model", "analyzer", "rev", "text")
_NUMBER_FIELDS = ("score_raw", "score_norm", "rerank_score")
_INTEGER_FIELDS = ("tokens", "page", "k_pos", "k_final")


def _is_number(value: Any) -> bool:
    return type(value) is float or type(value) is int


def read_traces(path: str | os.PathLike, *, offset_unit: str = "char") -> Iterator[Trace | BadLine]:
    """Stream the traces of a JSONL file; a defective line yields a BadLine and reading goes on."""
    name = os.fspath(path)
    for number, obj in iter_json_lines(name):
        if isinstance(obj, BadLine):
            yield obj
        else:
            yield parse_trace(obj, file=name, line=number, offset_unit=offset_unit)


def read_trace_file(path: str | os.PathLike, *, offset_unit: str = "char") -> list[Trace]:
    """Every trace of a file that must be whole (a run directory's `traces.jsonl`); a line that is
    not a trace is an input error naming every such line."""
    from ragaudit.errors import InputError
    traces, bad = [], []
    for item in read_traces(path, offset_unit=offset_unit):
        (bad if isinstance(item, BadLine) else traces).append(item)
    if bad:
        raise InputError([b.problem for b in bad])
    return traces


def parse_trace(obj: Any, *, file: str | None = None, line: int | None = None,
                offset_unit: str = "char") -> Trace | BadLine:
    def bad(message: str, path: str = "$") -> BadLine:
        return BadLine(file or "<trace>", line or 0, message, path)

    if not isinstance(obj, dict):
        return bad(f"expected a trace object, found {describe(obj)}")
    schema = obj.get("schema")
    if schema is not None and schema != TRACE_SCHEMA:
        return bad(f"expected schema {TRACE_SCHEMA!r}, found {describe(schema)}", "$.schema")
    qid = obj.get("qid")
    if not isinstance(qid, str) or not qid:
        return bad(f"expected a trace object with a string qid, found {describe(qid) if 'qid' in obj else 'no qid'}", "$.qid")
    retrieved = obj.get("retrieved")
    if retrieved is None:
        retrieved = []
    elif not isinstance(retrieved, list):
        return bad(f"expected retrieved to be an array of payloads, found {describe(retrieved)}", "$.retrieved")

    errors: list[FieldError] = []

    def typed(value: Any, path: str, expected: str, ok: bool) -> Any:
        if value is None or ok:
            return value
        errors.append(FieldError(path, expected, describe(value)))
        return None

    variant = obj.get("variant", 0)
    variant = typed(variant, "$.variant", "integer", type(variant) is int)
    seed = obj.get("seed", 0)
    seed = typed(seed, "$.seed", "integer", type(seed) is int)
    unit = obj.get("offset_unit")
    unit = typed(unit, "$.offset_unit", "string", isinstance(unit, str)) or offset_unit

    payloads = []
    for i, raw in enumerate(retrieved):
        if isinstance(raw, dict):
            payloads.append(_payload(raw, f"$.retrieved[{i}]", unit, errors))
        else:
            errors.append(FieldError(f"$.retrieved[{i}]", "payload object", describe(raw)))

    strings = {}
    for key in ("query", "config", "retriever_name", "retrieved_at"):
        value = obj.get(key)
        strings[key] = typed(value, f"$.{key}", "string", isinstance(value, str))

    error = obj.get("error")
    if error is not None and not isinstance(error, str):
        error = json.dumps(error, sort_keys=True)

    return Trace(
        qid=qid, variant=variant or 0, seed=seed or 0, retrieved=tuple(payloads),
        index=_index(obj.get("index"), errors), answer=_answer(obj.get("answer"), errors),
        steps=_steps(obj.get("steps"), errors), error=error or None, offset_unit=unit,
        field_errors=tuple(errors), file=file, line=line, **strings,
    )


_PAYLOAD_FIELDS = (
    *((key, "string") for key in _STRING_FIELDS), *((key, "number") for key in _NUMBER_FIELDS),
    *((key, "integer") for key in _INTEGER_FIELDS),
)
_ACCEPTS = {"string": (str,), "number": (float, int), "integer": (int,)}


def _payload(raw: dict, path: str, unit: str, errors: list[FieldError]) -> Payload:
    get = raw.get
    values: dict[str, Any] = {}
    for key, kind in _PAYLOAD_FIELDS:
        value = get(key)
        if value is not None and type(value) not in _ACCEPTS[kind]:
            errors.append(FieldError(f"{path}.{key}", kind, describe(value)))
            value = None
        values[key] = value
    window = get("window")
    if window is not None and type(window) is not dict:
        errors.append(FieldError(f"{path}.window", "object {pre, post}", describe(window)))
        window = None
    offsets = get("offsets")
    if type(offsets) is dict:
        offsets = Offsets(offsets.get("start"), offsets.get("end"), offsets.get("unit", unit))
    elif type(offsets) is list and len(offsets) == 2:
        offsets = Offsets(offsets[0], offsets[1], unit)
    elif offsets is not None:
        errors.append(FieldError(f"{path}.offsets", "object {start, end, unit} or [start, end]", describe(offsets)))
        offsets = None
    missing = frozenset(f for f in REQUIRED_PAYLOAD_FIELDS if get(f) is None)
    return Payload(offsets=offsets, window=window, missing=missing, **values)


def _index(raw: Any, errors: list[FieldError]) -> LiveIndex | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        errors.append(FieldError("$.index", "object", describe(raw)))
        return None
    values = {}
    for key in ("index_hash", "analyzer", "embed_model", "store"):
        value = raw.get(key)
        if value is not None and not isinstance(value, str):
            errors.append(FieldError(f"$.index.{key}", "string", describe(value)))
            value = None
        values[key] = value
    return LiveIndex(**values)


def _citation_ids(raw: Any, path: str, errors: list[FieldError]) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        errors.append(FieldError(path, "array of snippet ids", describe(raw)))
        return ()
    out = []
    for i, item in enumerate(raw):
        if isinstance(item, dict):
            item = item.get("snippet_id", item.get("id"))
        if isinstance(item, str):
            out.append(item)
        else:
            errors.append(FieldError(f"{path}[{i}]", "snippet id string", describe(item)))
    return tuple(out)


def _answer(raw: Any, errors: list[FieldError]) -> Answer | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = {"text": raw}
    if not isinstance(raw, dict):
        errors.append(FieldError("$.answer", "object {raw, text, segments}", describe(raw)))
        return None
    text, answer_raw = raw.get("text"), raw.get("raw")
    if text is not None and not isinstance(text, str):
        errors.append(FieldError("$.answer.text", "string", describe(text)))
        text = None
    if answer_raw is not None and not isinstance(answer_raw, str):
        answer_raw = json.dumps(answer_raw)
    segments = []
    raw_segments = raw.get("segments") or []
    if not isinstance(raw_segments, list):
        errors.append(FieldError("$.answer.segments", "array", describe(raw_segments)))
        raw_segments = []
    for i, item in enumerate(raw_segments):
        path = f"$.answer.segments[{i}]"
        if not isinstance(item, dict):
            errors.append(FieldError(path, "segment object", describe(item)))
            continue
        seg = item.get("seg", i + 1)
        if type(seg) is not int:
            errors.append(FieldError(f"{path}.seg", "integer", describe(seg)))
            seg = i + 1
        seg_text = item.get("text")
        if not isinstance(seg_text, str):
            if seg_text is not None:
                errors.append(FieldError(f"{path}.text", "string", describe(seg_text)))
            seg_text = ""
        segments.append(Segment(seg, seg_text, _citation_ids(item.get("citations"), f"{path}.citations", errors)))
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
        steps.append(Step(number, question if isinstance(question, str) else "",
                          intermediate if isinstance(intermediate, str) else "", confidence,
                          _citation_ids(item.get("citations"), f"{path}.citations", errors)))
    return tuple(steps)


# ---- writing ------------------------------------------------------------------------------

def payload_to_dict(p: Payload) -> dict:
    out: dict[str, Any] = {
        "doc_id": p.doc_id, "section_id": p.section_id, "snippet_id": p.snippet_id,
        "source_url": p.source_url, "tokens": p.tokens, "index_hash": p.index_hash,
        "embed_model": p.embed_model, "analyzer": p.analyzer, "rev": p.rev,
        "offsets": None if p.offsets is None else
        {"start": p.offsets.start, "end": p.offsets.end, "unit": p.offsets.unit},
    }
    for key in ("window", "page", "score_raw", "score_norm", "rerank_score", "k_pos", "k_final", "text"):
        value = getattr(p, key)
        if value is not None:
            out[key] = value
    return out


def trace_to_dict(t: Trace) -> dict:
    out: dict[str, Any] = {
        "schema": TRACE_SCHEMA, "qid": t.qid, "variant": t.variant, "seed": t.seed,
        "query": t.query, "config": t.config, "retriever_name": t.retriever_name,
        "retrieved_at": t.retrieved_at,
        "retrieved": [payload_to_dict(p) for p in t.retrieved], "error": t.error,
    }
    if t.index is not None:
        out["index"] = {k: getattr(t.index, k) for k in ("index_hash", "analyzer", "embed_model", "store")}
    if t.answer is not None:
        out["answer"] = {"raw": t.answer.raw, "text": t.answer.text,
                         "segments": [{"seg": s.seg, "text": s.text, "citations": list(s.citations)}
                                      for s in t.answer.segments]}
    if t.steps:
        out["steps"] = [{"step_number": s.step_number, "question": s.question,
                         "intermediate_answer": s.intermediate_answer,
                         "confidence_score": s.confidence_score, "citations": list(s.citations)}
                        for s in t.steps]
    return out


def dump_trace(t: Trace) -> str:
    return dump_line(trace_to_dict(t))
