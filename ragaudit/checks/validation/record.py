"""Rules on the trace as a whole: field types, pipeline errors, empty citations."""

from __future__ import annotations

from ragaudit.checks.validation.registry import rule
from ragaudit.core.codes import issue, where


@rule("wrong_type")
def field_types(trace, ctx):
    if not trace.field_errors:
        return ()
    return [
        issue("wrong_type", f"expected {err.expected}, found {err.found}", **where(trace, err.path))
        for err in trace.field_errors
    ]


@rule("pipeline_error", aborts=True)
def pipeline_error(trace, ctx):
    if trace.error:
        return [
            issue("pipeline_error", f"expected a finished run, found error: {trace.error}", **where(trace, "$.error"))
        ]
    return ()


@rule("empty_citations", aborts=True)
def empty_citations(trace, ctx):
    if not trace.retrieved and not (trace.answer and trace.answer.citations):
        return [
            issue(
                "empty_citations",
                "expected retrieved payloads or answer citations, found neither",
                **where(trace, "$.retrieved"),
            )
        ]
    return ()
