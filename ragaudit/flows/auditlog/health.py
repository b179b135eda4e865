"""What a window of production traffic looks like without a gold set, per pipeline: the health
metrics that window-over-window comparison tests (`regression.py`).

Per trace, each metric of `HEALTH` takes a value (or none, when it does not apply): the rates are
0/1 per trace, the distributions a number per trace. A window's `Tally` (one per pipeline) holds the
rates as counts and each distribution as {value: count}, values rounded to 4 decimals (4
significant digits for retrieval scores): memory grows with the distinct values, never with the
traces. Per query (its text, case and spacing folded) it also keeps the sums and the worst
`RUNS_KEPT` runs of each metric, for the first `QUERIES_KEPT` distinct queries of the window.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ragaudit.core.types import Issue, Trace
from ragaudit.flows.auditlog.scoring import TraceScore, records_no_citations


@dataclass(frozen=True)
class HealthMetric:
    name: str
    kind: str  # "rate" (a share of traces, 0/1 each) or "distribution" (a number per trace)
    better: str | None  # "higher", "lower", or None: a change is named, never a regression
    relative: bool  # its size is read as a share of the earlier window's mean (unbounded units)
    what: str


HEALTH: dict[str, HealthMetric] = {
    m.name: m
    for m in (
        HealthMetric("grounded", "rate", "higher", False, "traces whose every answer segment is grounded"),
        HealthMetric("hallucinating", "rate", "lower", False, "traces stating a quantity or id no cited text holds"),
        HealthMetric("uncited", "rate", "lower", False, "answers with a segment citing nothing, or no citation at all"),
        HealthMetric("errors", "rate", "lower", False, "traces with an error-severity issue, or that errored"),
        HealthMetric("warnings", "rate", "lower", False, "traces with a warning-severity issue"),
        HealthMetric("refusals", "rate", "lower", False, "answers that decline to answer"),
        HealthMetric("support", "distribution", "higher", False, "mean support of a trace's answer segments"),
        HealthMetric("delta_s", "distribution", "lower", False, "ΔS(query, cited text)"),
        HealthMetric("retrieval_score", "distribution", "higher", True, "score of the first retrieved document"),
        HealthMetric("retrieved", "distribution", "higher", True, "documents retrieved: fewer is less context"),
        HealthMetric("answer_length", "distribution", None, True, "words in the answer"),
    )
}
QUERIES_KEPT = 2_000  # distinct queries followed per window and pipeline; the rest are counted
RUNS_KEPT = 3  # worst runs kept per query and metric
QUERY_SHOWN = 300  # characters of a query kept

_REFUSAL = re.compile(
    r"\b(?:i\s+(?:do\s+not|don'?t|cannot|can'?t|could\s+not|couldn'?t)\s+(?:know|answer|find|help|say|tell)"
    r"|(?:unable|not\s+able)\s+to\s+(?:answer|find|help)"
    r"|no\s+(?:relevant\s+)?information\s+(?:about|on|in|is\s+available)"
    r"|(?:the\s+)?(?:context|documents?|sources?)\s+(?:do(?:es)?\s+not|don'?t)\s+(?:say|mention|contain|provide))",
    re.IGNORECASE,
)


def is_refusal(text: str) -> bool:
    """An answer that declines: "I don't know", "I cannot answer", "unable to find", "no information
    about ...", "the context does not mention ..." (in its first 300 characters)."""
    return bool(_REFUSAL.search(text[:300]))


def observe(trace: Trace, issues: list[Issue], score: TraceScore) -> dict[str, float]:
    """The health metrics of one trace (a metric that does not apply is absent)."""
    text = trace.answer.text if trace.answer is not None and trace.answer.text else None
    errors = any(i.severity == "error" for i in issues)
    out: dict[str, float] = {
        "grounded": float(not score.errored and bool(score.segments) and all(s.grounded for s in score.segments)),
        "hallucinating": float(score.hallucinations > 0),
        "errors": float(score.errored or errors),
        "warnings": float(any(i.severity != "error" for i in issues)),
    }
    if text is not None:
        uncited = records_no_citations(trace.answer) or any(not s.citations for s in score.segments)
        out["uncited"] = float(uncited)
        out["refusals"] = float(is_refusal(text))
        out["answer_length"] = float(len(text.split()))
    supports = [s.support for s in score.segments if s.support is not None]
    if supports:
        out["support"] = round(sum(supports) / len(supports), 4)
    if score.delta_s is not None:
        out["delta_s"] = round(score.delta_s, 4)
    out["retrieved"] = float(len(trace.retrieved))
    first = min(trace.retrieved, key=lambda p: p.k_pos or 0, default=None)
    if first is not None and isinstance(first.score_raw, (int, float)) and not isinstance(first.score_raw, bool):
        out["retrieval_score"] = float(f"{float(first.score_raw):.4g}")
    return out


def query_key(query: str | None) -> str:
    return " ".join((query or "").lower().split())


@dataclass
class QueryTally:
    """One query's runs in a window: count, per metric sum and count, and its worst runs."""

    text: str
    runs: int = 0
    sums: dict[str, list[float]] = field(default_factory=dict)  # metric -> [sum, count]
    worst: dict[str, list[tuple[float, dict[str, Any]]]] = field(default_factory=dict)  # metric -> [(badness, run)]

    def add(self, values: dict[str, float], run: dict[str, Any]) -> None:
        self.runs += 1
        for name, value in values.items():
            total = self.sums.setdefault(name, [0.0, 0])
            total[0] += value
            total[1] += 1
            better = HEALTH[name].better
            if better is None:
                continue
            badness = -value if better == "higher" else value
            if HEALTH[name].kind == "rate" and badness <= 0:
                continue  # a run on the good side of a rate is none of its worst
            kept = self.worst.setdefault(name, [])
            kept.append((badness, {**run, "value": value}))
            kept.sort(key=lambda item: -item[0])  # stable: of equal badness, the earlier run first
            del kept[RUNS_KEPT:]

    def mean(self, name: str) -> float | None:
        total = self.sums.get(name)
        return total[0] / total[1] if total and total[1] else None


@dataclass
class Tally:
    """The health of one pipeline's traffic in one window."""

    traces: int = 0
    hits: Counter[str] = field(default_factory=Counter)  # rate -> traces at 1
    trials: Counter[str] = field(default_factory=Counter)  # rate -> traces it applies to
    values: dict[str, Counter[float]] = field(default_factory=dict)  # distribution -> {value: count}
    queries: dict[str, QueryTally] = field(default_factory=dict)
    queries_dropped: int = 0

    def add(self, trace: Trace, values: dict[str, float], run: dict[str, Any]) -> None:
        self.traces += 1
        for name, value in values.items():
            if HEALTH[name].kind == "rate":
                self.trials[name] += 1
                self.hits[name] += int(value)
            else:
                self.values.setdefault(name, Counter())[value] += 1
        key = query_key(trace.query)
        if not key:
            return
        kept = self.queries.get(key)
        if kept is None:
            if len(self.queries) >= QUERIES_KEPT:
                self.queries_dropped += 1
                return
            kept = self.queries[key] = QueryTally((trace.query or "")[:QUERY_SHOWN])
        kept.add(values, run)

    def merge(self, other: Tally) -> None:
        """Add another window's counts (pooling an earlier run's windows into one baseline)."""
        self.traces += other.traces
        self.hits.update(other.hits)
        self.trials.update(other.trials)
        for name, counts in other.values.items():
            self.values.setdefault(name, Counter()).update(counts)

    def n(self, name: str) -> int:
        return self.trials[name] if HEALTH[name].kind == "rate" else sum(self.values.get(name, {}).values())

    def mean(self, name: str) -> float | None:
        if HEALTH[name].kind == "rate":
            return self.hits[name] / self.trials[name] if self.trials[name] else None
        counts = self.values.get(name)
        total = sum(counts.values()) if counts else 0
        return sum(v * c for v, c in counts.items()) / total if counts and total else None

    def to_dict(self) -> dict[str, Any]:
        """The counts, as audit_log.json keeps them: enough to compare a later run with this window."""
        return {
            "traces": self.traces,
            "rates": {name: [self.hits[name], self.trials[name]] for name in HEALTH if self.trials[name]},
            "distributions": {
                name: [[value, count] for value, count in sorted(counts.items())]
                for name, counts in sorted(self.values.items())
            },
            "queries": len(self.queries) + self.queries_dropped,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Tally:
        """A window's counts read back from an earlier audit_log.json (ValueError when malformed)."""
        if not isinstance(data, dict) or not isinstance(data.get("traces"), int):
            raise ValueError("expected {traces, rates, distributions}")
        tally = cls(traces=data["traces"])
        for name, pair in (data.get("rates") or {}).items():
            if name not in HEALTH or not (isinstance(pair, list) and len(pair) == 2):
                raise ValueError(f"rate {name!r}: expected a known rate as [hits, traces]")
            tally.hits[name], tally.trials[name] = int(pair[0]), int(pair[1])
        for name, pairs in (data.get("distributions") or {}).items():
            if name not in HEALTH or not isinstance(pairs, list):
                raise ValueError(f"distribution {name!r}: expected a known distribution as [[value, count], ...]")
            tally.values[name] = Counter({float(v): int(c) for v, c in pairs})
        return tally
