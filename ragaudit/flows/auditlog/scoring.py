"""Gold-free scores of production traces (docs/reference.md §3 without a gold set), a batch at a time.

Per trace: ΔS of the cited text against the query (`delta_s_qr`, the audit's own function and
reading). Per answer segment: its support by the texts it cites, and the quantities and
identifiers it states that none of them contains (hallucinations). A segment is grounded when its
support reaches the threshold and it states nothing its sources lack. An errored trace (a pipeline
error, or nothing retrieved and nothing cited) has ΔS 1.0 and no grounded segment, as in the audit.
Each distinct text of a batch is encoded once, and each distinct (segment, cited texts) pair
scored once.

An answer's citation markers are its citations (`ragaudit.core.citing`, applied as traces are read).
An answer that records no citations at all (no segments, no cite-first JSON and no marker, as with
many answers read from production spans) is held to the context it was given: one segment, the whole answer,
citing the top-k retrieved payloads, which are also its cited text for ΔS. An answer whose segments
cite nothing keeps citing nothing (support 0, as in the audit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragaudit.checks.metrics.citation import cited_payloads
from ragaudit.checks.metrics.claims import answer_segments
from ragaudit.checks.metrics.computes import ERRORED_DELTA_S, errored
from ragaudit.checks.metrics.delta_s import DEFAULT_READING, delta_s_runs, scored_text, zone
from ragaudit.checks.metrics.embed import Encoder
from ragaudit.checks.metrics.quantities import hallucinated
from ragaudit.core.types import Answer, Corpus, Payload, Segment, Trace


@dataclass(frozen=True)
class Scoring:
    """How traces are scored: the encoder, the support scorer and their settings."""

    encoder: Encoder
    support: Any  # a support scorer: `score_many(pairs)` (`ragaudit.checks.metrics.support`)
    k: int = 5
    reading: str = DEFAULT_READING
    threshold: float = 0.5


@dataclass(frozen=True, slots=True)
class SegmentScore:
    seg: int
    text: str
    citations: tuple[str, ...]
    cited: tuple[Payload, ...]  # the retrieved payloads it cites
    support: float | None  # None for a segment of an errored trace
    hallucinated: tuple[str, ...]
    grounded: bool


@dataclass(frozen=True, slots=True)
class TraceScore:
    errored: bool
    delta_s: float | None  # None when the trace has no query
    zone: str | None
    cited: tuple[Payload, ...]
    segments: tuple[SegmentScore, ...]
    held_to_context: bool = False  # the answer records no citations: it is held to the top-k retrieved

    @property
    def hallucinations(self) -> int:
        return sum(len(s.hallucinated) for s in self.segments)

    @property
    def units(self) -> int:
        """Segments counted in the grounded rate: an errored trace counts at least one (ungrounded),
        so failures never raise the rate."""
        return max(1, len(self.segments)) if self.errored else len(self.segments)

    @property
    def grounded(self) -> int:
        return sum(1 for s in self.segments if s.grounded)


def records_no_citations(answer: Answer | None) -> bool:
    """An answer with text that records no citations at all."""
    return answer is not None and bool(answer.text) and not answer.segments and not answer.citations


def cited_and_segments(trace: Trace, k: int) -> tuple[tuple[Payload, ...], tuple[Segment, ...]]:
    """The payloads a trace cites (docs/reference.md §3) and its answer segments; an answer that `records_no_citations` cites its
    top-k retrieved payloads, as one segment."""
    if records_no_citations(trace.answer):
        top = trace.retrieved[:k]
        text = trace.answer.text if trace.answer is not None and trace.answer.text else ""
        return top, (Segment(1, text, tuple(dict.fromkeys(p.snippet_id for p in top if p.snippet_id))),)
    return cited_payloads(trace, k), answer_segments(trace.answer)


def score_traces(traces: list[Trace], corpus: Corpus | None, scoring: Scoring) -> list[TraceScore]:
    """The scores of a batch of traces, in order."""
    failed = [errored(t) for t in traces]
    texts = [{p.snippet_id: scored_text(p, corpus) for p in t.retrieved} for t in traces]
    held = [cited_and_segments(t, scoring.k) for t in traces]
    cited = [payloads for payloads, _ in held]
    measured = [i for i, t in enumerate(traces) if not failed[i] and t.query]
    delta_s: list[float | None] = [ERRORED_DELTA_S if f else None for f in failed]
    if measured:
        distances = delta_s_runs(
            scoring.encoder,
            [traces[i].query or "" for i in measured],
            [[texts[i][p.snippet_id] for p in cited[i]] for i in measured],
            [""] * len(measured),
            [None] * len(measured),
            reading=scoring.reading,
        )["delta_s_qr"]
        for i, d in zip(measured, distances):
            delta_s[i] = float(d)

    pairs: dict[tuple[str, tuple[str, ...]], int] = {}
    plan = []
    for i, trace in enumerate(traces):
        by_id = {p.snippet_id: p for p in trace.retrieved}
        rows = []
        for segment in held[i][1]:
            payloads = tuple(by_id[c] for c in dict.fromkeys(segment.citations) if c in by_id)
            sources = tuple(texts[i][p.snippet_id] for p in payloads)
            at = None if failed[i] else pairs.setdefault((segment.text, sources), len(pairs))
            rows.append((segment, payloads, sources, at))
        plan.append(rows)
    support = [float(v) for v in scoring.support.score_many([(s, list(t)) for s, t in pairs])] if pairs else []

    out = []
    for i, rows in enumerate(plan):
        segments = []
        for segment, payloads, sources, at in rows:
            value = None if at is None else support[at]
            missing = tuple(hallucinated(segment.text, list(sources)))
            segments.append(
                SegmentScore(
                    segment.seg,
                    segment.text,
                    segment.citations,
                    payloads,
                    value,
                    missing,
                    value is not None and value >= scoring.threshold and not missing,
                )
            )
        out.append(
            TraceScore(
                failed[i],
                delta_s[i],
                zone(delta_s[i]),
                cited[i],
                tuple(segments),
                records_no_citations(traces[i].answer),
            )
        )
    return out
