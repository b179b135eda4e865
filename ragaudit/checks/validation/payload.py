"""Rules on each payload's own fields: presence, offsets, scores and ranks."""

from __future__ import annotations

from typing import Iterable, Iterator, cast

from ragaudit.checks.validation.registry import Context, rule
from ragaudit.core.codes import issue, where
from ragaudit.core.errors import describe
from ragaudit.core.types import REQUIRED_PAYLOAD_FIELDS, UNITS, Issue, Offsets, Trace


@rule(*(f"missing_{name}" for name in REQUIRED_PAYLOAD_FIELDS))
def required_fields(trace: Trace, ctx: Context) -> Iterable[Issue]:
    for p in trace.retrieved:
        if p.missing:
            return _missing_fields(trace)
    return ()


def _missing_fields(trace: Trace) -> Iterator[Issue]:
    for i, p in enumerate(trace.retrieved):
        for name in sorted(p.missing):
            yield issue(
                f"missing_{name}",
                f"expected a payload field `{name}`, found none",
                **where(trace, f"$.retrieved[{i}].{name}", citation=p.snippet_id),
            )


def offsets_problem(offsets: Offsets) -> str | None:
    """Why these offsets are not `0 <= start < end` integers in a known unit, or None."""
    s, e, unit = offsets.start, offsets.end, offsets.unit
    if unit not in UNITS:
        return f"expected unit 'char' or 'token', found {describe(unit)}"
    if type(s) is not int or type(e) is not int:
        return f"expected integer start and end, found {describe(s)} and {describe(e)}"
    if s < 0:
        return f"expected 0 <= start, found start {s}"
    if s >= e:
        return f"expected start < end, found [{s}, {e})"
    return None


@rule("bad_offsets", "mixed_offset_units")
def offsets(trace: Trace, ctx: Context) -> Iterable[Issue]:
    # Every span valid (so no bad offsets and none missing) and all in one unit: nothing to say.
    unit = None
    for p in trace.retrieved:
        span = p.span
        if span is None or span.unit != unit and unit is not None:
            return _offset_issues(trace)
        unit = span.unit
    return ()


def _offset_issues(trace: Trace) -> Iterator[Issue]:
    units: dict[str, int] = {}
    for i, p in enumerate(trace.retrieved):
        if p.offsets is None:
            continue
        if p.span is None:
            yield issue(
                "bad_offsets",
                cast(str, offsets_problem(p.offsets)),  # offsets without a span are not valid: there is a problem
                **where(trace, f"$.retrieved[{i}].offsets", citation=p.snippet_id),
            )
        elif p.offsets.unit not in units:
            units[p.offsets.unit] = i
    if len(units) > 1:
        yield issue(
            "mixed_offset_units",
            f"expected one offset unit per run, found char (payload {units['char']}) "
            f"and token (payload {units['token']})",
            **where(trace, "$.retrieved"),
        )


@rule("missing_score", "score_out_of_range", "missing_k_pos", "missing_k_final")
def scores_and_ranks(trace: Trace, ctx: Context) -> Iterable[Issue]:
    for p in trace.retrieved:
        norm = p.score_norm
        if (
            norm is None
            and p.score_raw is None
            or norm is not None
            and not 0.0 <= norm <= 1.0
            or p.k_pos is None
            or p.rerank_score is not None
            and p.k_final is None
        ):
            return _score_issues(trace)
    return ()


def _score_issues(trace: Trace) -> Iterator[Issue]:
    for i, p in enumerate(trace.retrieved):
        at = f"$.retrieved[{i}]"
        if p.score_raw is None and p.score_norm is None:
            yield issue(
                "missing_score",
                "expected score_raw or score_norm, found neither",
                **where(trace, at, citation=p.snippet_id),
            )
        if p.score_norm is not None and not 0.0 <= p.score_norm <= 1.0:
            yield issue(
                "score_out_of_range",
                f"expected score_norm in [0, 1], found {p.score_norm!r}",
                **where(trace, f"{at}.score_norm", citation=p.snippet_id),
            )
        if p.k_pos is None and "k_pos" not in _typed_wrong(trace, at):
            yield issue(
                "missing_k_pos",
                "expected k_pos (1-based rank before rerank), found none",
                **where(trace, f"{at}.k_pos", citation=p.snippet_id),
            )
        if p.rerank_score is not None and p.k_final is None:
            yield issue(
                "missing_k_final",
                "expected k_final with rerank_score, found none",
                **where(trace, f"{at}.k_final", citation=p.snippet_id),
            )


def _typed_wrong(trace: Trace, at: str) -> set[str]:
    """Names of the fields under `at` already reported as `wrong_type`."""
    if not trace.field_errors:
        return set()
    prefix = at + "."
    return {e.path[len(prefix) :] for e in trace.field_errors if e.path.startswith(prefix)}
