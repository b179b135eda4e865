"""Rules on the retrieved list as a ranking: tie-break order, final ranks, duplicates."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence

from ragaudit.checks.validation.registry import Context, rule
from ragaudit.core.codes import issue, where
from ragaudit.core.types import Issue, Payload, Trace

SCORE_ORDER = ("rerank_score", "score_norm", "score_raw")


def field(payload: Payload | dict[str, Any], name: str) -> Any:
    """A field of a parsed Payload or of a payload dict as written (the pipelines build dicts)."""
    return payload.get(name) if isinstance(payload, dict) else getattr(payload, name)


def tiebreak_key(payload: Payload | dict[str, Any]) -> tuple[str, str]:
    """The documented tie-break: equal primary scores are ordered by section_id, then snippet_id."""
    return (field(payload, "section_id") or "", field(payload, "snippet_id") or "")


def _primary_of_payloads(payloads: Sequence[Payload]) -> str | None:
    """The score a ranking is ordered by: the first of SCORE_ORDER that every payload carries
    (written out, with attribute reads the interpreter can specialise)."""
    for p in payloads:
        if p.rerank_score is None:
            break
    else:
        return "rerank_score"
    for p in payloads:
        if p.score_norm is None:
            break
    else:
        return "score_norm"
    for p in payloads:
        if p.score_raw is None:
            return None
    return "score_raw"


@rule("tiebreak_violation")
def tiebreak(trace: Trace, ctx: Context) -> Iterable[Issue]:
    payloads = trace.retrieved
    if len(payloads) < 2:
        return ()
    name = _primary_of_payloads(payloads)
    if name is None:
        return ()
    previous = getattr(payloads[0], name)
    for p in payloads[1:]:
        score = getattr(p, name)
        if score == previous:
            return _tiebreak_issues(trace, name)  # a tie: the tie-break decides the order
        previous = score
    return ()


def _tiebreak_issues(trace: Trace, name: str) -> Iterator[Issue]:
    payloads = trace.retrieved
    for i in range(1, len(payloads)):
        a, b = payloads[i - 1], payloads[i]
        if getattr(a, name) == getattr(b, name) and tiebreak_key(a) > tiebreak_key(b):
            yield issue(
                "tiebreak_violation",
                f"expected payloads {i - 1} and {i} (equal {name} {getattr(a, name)!r}) ordered by "
                f"(section_id, snippet_id) ascending, found {tiebreak_key(a)} before {tiebreak_key(b)}",
                **where(trace, f"$.retrieved[{i}]", citation=b.snippet_id),
            )


@rule("rank_mismatch")
def final_ranks(trace: Trace, ctx: Context) -> Iterable[Issue]:
    rank = 1
    for p in trace.retrieved:
        if p.k_final != rank:
            break
        rank += 1
    else:
        return ()  # k_final is 1..n in list order
    ranks = [p.k_final for p in trace.retrieved]
    if all(r is None for r in ranks):
        return ()
    expected = list(range(1, len(ranks) + 1))
    first = next(i for i, (r, e) in enumerate(zip(ranks, expected)) if r != e)
    return [
        issue(
            "rank_mismatch",
            f"expected k_final {expected} in list order, found {ranks}",
            **where(trace, f"$.retrieved[{first}].k_final"),
        )
    ]


@rule("duplicate_snippet")
def duplicates(trace: Trace, ctx: Context) -> Iterable[Issue]:
    payloads = trace.retrieved
    if len({p.snippet_id for p in payloads}) == len(payloads):
        return ()  # all distinct (at most one absent id, which is never a duplicate)
    return _duplicate_issues(trace)


def _duplicate_issues(trace: Trace) -> Iterator[Issue]:
    first: dict[str, int] = {}
    for i, p in enumerate(trace.retrieved):
        if p.snippet_id is None:
            continue
        if p.snippet_id in first:
            yield issue(
                "duplicate_snippet",
                f"expected each snippet_id once, found {p.snippet_id!r} at payloads {first[p.snippet_id]} and {i}",
                **where(trace, f"$.retrieved[{i}].snippet_id", citation=p.snippet_id),
            )
        else:
            first[p.snippet_id] = i
