"""Rules on the trace as a whole: field types, pipeline errors, empty citations."""

from __future__ import annotations

from typing import Iterable

from ragaudit.checks.validation.registry import Context, rule
from ragaudit.core.codes import issue, where
from ragaudit.core.types import Issue, Trace


@rule("wrong_type")
def field_types(trace: Trace, ctx: Context) -> Iterable[Issue]:
    if not trace.field_errors:
        return ()
    return [
        issue("wrong_type", f"expected {err.expected}, found {err.found}", **where(trace, err.path))
        for err in trace.field_errors
    ]


@rule("pipeline_error", aborts=True)
def pipeline_error(trace: Trace, ctx: Context) -> Iterable[Issue]:
    if trace.error:
        return [
            issue("pipeline_error", f"expected a finished run, found error: {trace.error}", **where(trace, "$.error"))
        ]
    return ()


@rule("empty_citations", aborts=True)
def empty_citations(trace: Trace, ctx: Context) -> Iterable[Issue]:
    if not trace.retrieved and not (trace.answer and trace.answer.citations):
        return [
            issue(
                "empty_citations",
                "expected retrieved payloads or answer citations, found neither",
                **where(trace, "$.retrieved"),
            )
        ]
    return ()
