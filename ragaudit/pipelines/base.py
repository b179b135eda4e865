"""What every pipeline is to the runner: given a request, return one trace. Never raise for a
failed run: a failure becomes a trace with `error` set (a `pipeline_error`)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from ragaudit.core.errors import UsageError, describe
from ragaudit.core.markers import ALL_FORMS
from ragaudit.core.types import LiveIndex, Trace
from ragaudit.io.jsonl import BadLine
from ragaudit.io.traces import parse_trace, trace_to_dict

# the sections left out of what a pipeline retrieves: (doc_id, section_id), None for the whole document
Excluded = tuple[tuple[str, str | None], ...]

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


@dataclass(frozen=True, slots=True)
class Request:
    """One run to answer. `corpus` and `exclude` are set by a probe only (docs/guide.md §3.6): the
    corpus to answer from (a copy with one fact edited) and the sections to leave out of retrieval,
    each `(doc_id, section_id)`, a section_id of None leaving out the whole document."""

    qid: str
    variant: int
    seed: int
    query: str
    k: int
    corpus: str | None = None
    exclude: tuple[tuple[str, str | None], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "qid": self.qid,
            "variant": self.variant,
            "seed": self.seed,
            "query": self.query,
            "k": self.k,
        }
        if self.corpus is not None:  # a probe's request: a command pipeline reads where to answer from
            out |= {"corpus": self.corpus, "exclude": exclusions(self.exclude)}
        return out


def exclusions(exclude: Excluded) -> list[dict[str, str | None]]:
    """Excluded sections as a pipeline is given them: `[{"doc_id", "section_id"}]`, a section_id of
    null meaning the whole document."""
    return [{"doc_id": doc_id, "section_id": section_id} for doc_id, section_id in exclude]


class Pipeline(Protocol):
    name: str

    def index_info(self) -> LiveIndex | None: ...

    def run(self, request: Request) -> Trace: ...

    def close(self) -> str | None:
        """Release the pipeline; never raises. Returns a warning to show when closing went wrong."""


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_timeout(name: str, timeout_s: Any) -> float:
    """`timeout_s` as a float, or a UsageError naming the pipeline."""
    if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or not 0 < timeout_s < float("inf"):
        raise UsageError(
            f"pipeline {name!r}: the 'timeout_s' parameter must be a number > 0. Got {timeout_s!r} instead."
        )
    return float(timeout_s)


def without_surrogates(value: Any) -> Any:
    """`value` with every surrogate code point in its strings replaced by U+FFFD.

    JSON allows `"\\ud800"`, and Python's json turns it into a str that cannot be written as UTF-8:
    one such string would make the trace, and every later write of the traces file, fail. The
    replacement is one code point for one, so offsets into the text stay where they were. Walks
    strings, lists, tuples, dicts and dataclass instances (a Trace and its parts); returns the
    very same object when nothing needed replacing.
    """
    if isinstance(value, str):
        if value.isascii() or not _SURROGATE.search(value):
            return value
        return _SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, (list, tuple)):
        items = [without_surrogates(item) for item in value]
        if all(new is old for new, old in zip(items, value)):
            return value
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        pairs = [(without_surrogates(k), without_surrogates(v)) for k, v in value.items()]
        if all(k2 is k and v2 is v for (k2, v2), (k, v) in zip(pairs, value.items())):
            return value
        return dict(pairs)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            if f.init:
                old = getattr(value, f.name)
                new = without_surrogates(old)
                if new is not old:
                    changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value


def error_trace(name: str, request: Request, message: str, index: LiveIndex | None = None) -> Trace:
    # A message may quote user text (an exception, a line of output): keep it writable.
    return Trace(
        qid=request.qid,
        variant=request.variant,
        seed=request.seed,
        query=without_surrogates(request.query),
        config=name,
        retrieved_at=now(),
        index=without_surrogates(index),
        error=without_surrogates(message),
    )


def trace_from_output(
    name: str,
    request: Request,
    output: Any,
    *,
    offset_unit: str = "char",
    markers: frozenset[str] = ALL_FORMS,
    index: LiveIndex | None = None,
) -> Trace:
    """A user pipeline's output (a trace dict) as a canonical Trace keyed by the request.

    The request decides qid, variant, seed, query and config; output that is not a trace becomes
    a pipeline error naming what was wrong. Surrogates in its strings become U+FFFD (see
    `without_surrogates`); a trace without `retrieved_at` gets the time it was received.
    """
    if isinstance(output, Trace):
        output = trace_to_dict(output)
    if not isinstance(output, dict):
        return error_trace(name, request, f"expected a trace object, found {describe(output)}", index)
    asked = {"qid": request.qid, "variant": request.variant, "seed": request.seed, "query": request.query}
    merged = without_surrogates({**output, **asked, "config": name})
    merged.pop("k", None)
    if merged.get("retrieved_at") is None:
        merged["retrieved_at"] = now()
    if index is not None and "index" not in output:
        merged["index"] = without_surrogates(
            {
                "index_hash": index.index_hash,
                "analyzer": index.analyzer,
                "embed_model": index.embed_model,
                "store": index.store,
            }
        )
    parsed = parse_trace(merged, offset_unit=offset_unit, markers=markers)
    if isinstance(parsed, BadLine):
        return error_trace(name, request, f"pipeline output is not a trace: {parsed.path}: {parsed.message}", index)
    return parsed
