"""What every pipeline is to the runner: given a request, return one trace. Never raise for a
failed run: a failure becomes a trace with `error` set (a `pipeline_error`)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from ragaudit.errors import describe
from ragaudit.io.jsonl import BadLine
from ragaudit.io.traces import parse_trace, trace_to_dict
from ragaudit.types import LiveIndex, Trace


@dataclass(frozen=True, slots=True)
class Request:
    qid: str
    variant: int
    seed: int
    query: str
    k: int

    def to_dict(self) -> dict:
        return {"qid": self.qid, "variant": self.variant, "seed": self.seed, "query": self.query, "k": self.k}


class Pipeline(Protocol):
    name: str

    def index_info(self) -> LiveIndex | None: ...

    def run(self, request: Request) -> Trace: ...

    def close(self) -> None: ...


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def error_trace(name: str, request: Request, message: str, index: LiveIndex | None = None) -> Trace:
    return Trace(qid=request.qid, variant=request.variant, seed=request.seed, query=request.query,
                 config=name, retrieved_at=now(), index=index, error=message)


def trace_from_output(name: str, request: Request, output: Any, *, offset_unit: str = "char",
                      index: LiveIndex | None = None) -> Trace:
    """A user pipeline's output (a trace dict) as a canonical Trace keyed by the request.

    The request decides qid, variant, seed, query and config; output that is not a trace becomes
    a pipeline error naming what was wrong.
    """
    if isinstance(output, Trace):
        output = trace_to_dict(output)
    if not isinstance(output, dict):
        return error_trace(name, request, f"expected a trace object, found {describe(output)}", index)
    merged = {**output, **request.to_dict(), "config": name}
    merged.pop("k", None)
    merged.setdefault("retrieved_at", now())
    if index is not None and "index" not in output:
        merged["index"] = {"index_hash": index.index_hash, "analyzer": index.analyzer,
                           "embed_model": index.embed_model, "store": index.store}
    parsed = parse_trace(merged, offset_unit=offset_unit)
    if isinstance(parsed, BadLine):
        return error_trace(name, request, f"pipeline output is not a trace: {parsed.path}: {parsed.message}", index)
    return parsed
