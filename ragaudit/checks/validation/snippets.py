"""Across runs: within one index, a snippet id names one span (`inconsistent_snippet`).

A payload may carry no text, and then its offsets are the only record of what it cites; offsets
that move between runs for the same snippet of the same index point some runs at the wrong text.
The span most runs record is taken as the snippet's; the runs recording another are named. Memory
holds one small entry per distinct snippet (its span, a count and where the first run recording
it is), and run references only for snippets seen at two spans.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ragaudit.core.codes import issue, where
from ragaudit.core.types import Issue, Trace

NAMED = 50  # runs named per disagreeing span

# where a run is, as an issue names it: (qid, variant, seed, pipeline, file, line)
Run = tuple[str, int, int, "str | None", "str | None", "int | None"]
# a snippet: (pipeline, index hash, snippet id); where it is: (document, start, end, unit)
Key = tuple["str | None", "str | None", str]
SpanAt = tuple["str | None", int, int, str]


@dataclass(slots=True)
class _Seen:
    span: SpanAt
    count: int = 0
    first: int = 0  # order of first sight, the tie-break
    runs: list[tuple[Run, int]] = field(default_factory=list)  # (run, payload index), kept once in conflict


class SnippetSpans:
    def __init__(self) -> None:
        self._spans: dict[Key, _Seen] = {}  # a snippet seen at one span so far
        self._conflicts: dict[Key, dict[SpanAt, _Seen]] = {}  # a snippet seen at two or more
        self._names: dict[str, str] = {}  # one copy of each repeated name (pipeline, index, document, qid, file)
        self._order = 0

    def __len__(self) -> int:
        """Snippets held: one entry each."""
        return len(self._spans) + len(self._conflicts)

    def _name(self, text: str | None) -> str | None:
        return text if text is None else self._names.setdefault(text, text)

    def add(self, trace: Trace) -> None:
        live = trace.index.index_hash if trace.index is not None else None
        for at, p in enumerate(trace.retrieved):
            if p.snippet_id is None or p.span is None:
                continue
            key = (trace.config, p.index_hash or live, p.snippet_id)
            span = (p.doc_id, p.span.start, p.span.end, p.span.unit)
            seen = self._spans.get(key)
            if seen is not None and seen.span == span:
                seen.count += 1
                continue
            spans = self._conflicts.get(key)
            if spans is None:
                if seen is None:  # the first run at every span is named
                    self._spans[(self._name(key[0]), self._name(key[1]), key[2])] = self._first(span, trace, at)
                    continue
                spans = self._conflicts[key] = {seen.span: self._spans.pop(key)}
            found = spans.get(span)
            if found is None:
                spans[span] = self._first(span, trace, at)
                continue
            if len(found.runs) < NAMED:
                found.runs.append((self._run(trace), at))
            found.count += 1

    def _first(self, span: SpanAt, trace: Trace, at: int) -> _Seen:
        self._order += 1
        doc, start, end, unit = span
        return _Seen((self._name(doc), start, end, unit), 1, self._order, [(self._run(trace), at)])

    def _run(self, trace: Trace) -> Run:
        """What an issue needs of a run: its keys and location, not its payloads."""
        name = self._name
        return (name(trace.qid) or "", trace.variant, trace.seed, name(trace.config), name(trace.file), trace.line)

    def issues(self) -> list[Issue]:
        out = []
        for (_, index_hash, snippet_id), spans in self._conflicts.items():
            canonical = max(spans.values(), key=lambda seen: (seen.count, -seen.first))
            doc, start, end, unit = canonical.span
            for seen in spans.values():
                if seen is canonical:
                    continue
                for run, at in seen.runs:
                    out.append(
                        issue(
                            "inconsistent_snippet",
                            f"expected snippet {snippet_id} at {doc} {unit} {start}–{end}, as {canonical.count} "
                            f"runs record it, found {seen.span[0]} {seen.span[3]} {seen.span[1]}–{seen.span[2]} "
                            f"({seen.count} run{'s' if seen.count != 1 else ''})",
                            citation=snippet_id,
                            **where(_light(run), f"$.retrieved[{at}].offsets"),
                        )
                    )
        return out


def _light(run: Run) -> Trace:
    qid, variant, seed, config, file, line = run
    return Trace(qid=qid, variant=variant, seed=seed, config=config, file=file, line=line)
