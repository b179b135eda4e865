"""Across runs: within one index, a snippet id names one span (`inconsistent_snippet`).

A payload may carry no text, and then its offsets are the only record of what it cites; offsets
that move between runs for the same snippet of the same index point some runs at the wrong text.
The span most runs record is taken as the snippet's; the runs recording another are named. Memory
holds one entry per distinct snippet, and run references only for snippets seen at two spans.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ragaudit.codes import issue, where
from ragaudit.types import Issue, Trace

NAMED = 50  # runs named per disagreeing span


@dataclass
class _Seen:
    count: int = 0
    first: int = 0  # order of first sight, the tie-break
    runs: list[tuple[Trace, int]] = field(default_factory=list)  # (trace, payload index), kept once in conflict


class SnippetSpans:
    def __init__(self):
        self._spans: dict[tuple, dict[tuple, _Seen]] = {}
        self._order = 0

    def add(self, trace: Trace) -> None:
        live = trace.index.index_hash if trace.index is not None else None
        for at, p in enumerate(trace.retrieved):
            if p.snippet_id is None or p.span is None:
                continue
            key = (trace.config, p.index_hash or live, p.snippet_id)
            span = (p.doc_id, p.span.start, p.span.end, p.span.unit)
            spans = self._spans.setdefault(key, {})
            seen = spans.get(span)
            if seen is None:  # the first run at every span is named
                self._order += 1
                seen = spans[span] = _Seen(first=self._order)
                seen.runs.append((_light(trace), at))
            elif len(spans) > 1 and len(seen.runs) < NAMED:
                seen.runs.append((_light(trace), at))
            seen.count += 1

    def issues(self) -> list[Issue]:
        out = []
        for (_, index_hash, snippet_id), spans in self._spans.items():
            if len(spans) < 2:
                continue
            canonical = max(spans.items(), key=lambda kv: (kv[1].count, -kv[1].first))
            doc, start, end, unit = canonical[0]
            for span, seen in spans.items():
                if span == canonical[0]:
                    continue
                for trace, at in seen.runs:
                    out.append(
                        issue(
                            "inconsistent_snippet",
                            f"expected snippet {snippet_id} at {doc} {unit} {start}–{end}, as {canonical[1].count} "
                            f"runs record it, found {span[0]} {span[3]} {span[1]}–{span[2]} "
                            f"({seen.count} run{'s' if seen.count != 1 else ''})",
                            citation=snippet_id,
                            **where(trace, f"$.retrieved[{at}].offsets"),
                        )
                    )
        return out


def _light(trace: Trace) -> Trace:
    """What an issue needs of a run: its keys and location, not its payloads."""
    return Trace(
        qid=trace.qid,
        variant=trace.variant,
        seed=trace.seed,
        config=trace.config,
        file=trace.file,
        line=trace.line,
    )
