"""The gold-free audit of production traces, streaming: `add` records as they are read, then `finish`.

Every `batch` traces are validated (the rules of `ragaudit codes`, against the corpus snapshot)
and scored together (`scoring.py`), then folded into their time windows, offered to the bounded
worst-example lists and written to the trace table. Memory depends on the number of windows and
the batch, not on the number of traces.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from ragaudit.checks.validation import Context, validate_trace
from ragaudit.checks.validation.engine import malformed
from ragaudit.core.errors import clip
from ragaudit.core.progress import phase
from ragaudit.core.types import Corpus, Issue, Payload, Trace
from ragaudit.flows.auditlog.health import Tally, observe
from ragaudit.flows.auditlog.regression import UNNAMED, Thresholds, regressions
from ragaudit.flows.auditlog.scoring import Scoring, SegmentScore, TraceScore, score_traces
from ragaudit.flows.auditlog.windows import (
    INDEX_FIELDS,
    UNDATED,
    ZONE_NAMES,
    Window,
    drift,
    parse_time,
    window_start,
)
from ragaudit.flows.auditlog.worst import LIMIT, WorstExamples
from ragaudit.io.jsonl import BadLine

BATCH = 1_000
TEXT_SHOWN = 1_000  # characters of a query, answer segment or cited text kept in an example
ISSUES_SHOWN = 20  # issues kept per example


def index_values(trace: Trace, name: str) -> list[str]:
    """The values of index field `name` a trace was served with: its live index's, else (no live
    index, or none for this field, as in many production spans) its payloads', distinct, in order."""
    live = getattr(trace.index, name) if trace.index is not None else None
    if live:
        return [live]
    return list(dict.fromkeys(v for p in trace.retrieved if (v := getattr(p, name))))


class LogAudit:
    """Windows, drift, worst examples and trace-table rows of a stream of production traces.

    `table`, when given, takes each batch's rows (`ragaudit.outputs.render.trace_table.TraceTable.add`)."""

    def __init__(
        self,
        corpus: Corpus | None,
        scoring: Scoring,
        *,
        window: int,
        context: Context | None = None,
        table: Callable[[list[dict[str, Any]]], None] | None = None,
        limit: int = LIMIT,
        batch: int = BATCH,
    ):
        self.corpus, self.scoring, self.length, self.batch = corpus, scoring, window, batch
        self.context = context if context is not None else Context(corpus=corpus)
        self.table = table
        self.windows: dict[int | None, Window] = {}
        self.worst = WorstExamples(limit)
        self.records = 0
        self._pending: list[tuple[int, Trace]] = []

    def add(self, item: Trace | BadLine) -> None:
        self.records += 1
        if isinstance(item, BadLine):
            self._malformed(self.records, item)
            return
        self._pending.append((self.records, item))
        if len(self._pending) >= self.batch:
            self._flush()

    def _window(self, at: float | None) -> Window:
        start = None if at is None else window_start(at, self.length)
        if start not in self.windows:
            self.windows[start] = Window(start, self.length)
        return self.windows[start]

    def _malformed(self, record: int, bad: BadLine) -> None:
        found = malformed(bad)
        window = self._window(None)
        window.malformed += 1
        window.issues[found.code] += 1
        window.errors += 1
        self.worst.offer(
            [("errors", (1, -record, 0), {"errors": 1, "codes": [found.code]})],
            lambda: {
                "id": f"r{record}",
                "record": record,
                "file": bad.file,
                "line": bad.line,
                "window": UNDATED,
                "issues": [_issue(found)],
            },
        )

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        with phase("scoring", unit="traces") as scoring:
            traces = [t for _, t in batch]
            found = [validate_trace(t, self.context) for t in traces]
            scores = score_traces(traces, self.corpus, self.scoring)
            rows: list[dict[str, Any]] = []
            for (record, trace), issues, score in zip(batch, found, scores):
                rows += self._fold(record, trace, issues, score)
            if self.table is not None:
                self.table(rows)
            scoring.advance(len(batch))

    def _fold(self, record: int, trace: Trace, issues: list[Issue], score: TraceScore) -> list[dict[str, Any]]:
        at = parse_time(trace.retrieved_at, self.length)
        window = self._window(at)
        window.traces += 1
        window.timed(at)
        window.errored += score.errored
        errors = [i for i in issues if i.severity == "error"]
        for found in issues:
            window.issues[found.code] += 1
        window.errors += len(errors)
        window.warnings += len(issues) - len(errors)
        values = {name: index_values(trace, name) for name in INDEX_FIELDS}
        for name, seen in values.items():
            for value in seen:
                window.seen(name, value, at)
        window.segments += score.units
        window.grounded += score.grounded
        if score.delta_s is None:
            window.unscored += 1
        else:
            window.zones[score.zone] += 1
            window.delta_s_total += score.delta_s
            window.delta_s_count += 1
        window.hallucinations += score.hallucinations
        window.hallucinating_traces += score.hallucinations > 0
        run = {"file": trace.file, "line": trace.line, "trace": trace.qid, "retrieved_at": trace.retrieved_at}
        window.health.setdefault(trace.config or UNNAMED, Tally()).add(trace, observe(trace, issues, score), run)
        self._offer(record, trace, issues, errors, score, window.key)
        return _rows(record, trace, issues, score, window.key, values)

    def _offer(
        self, record: int, trace: Trace, issues: list[Issue], errors: list[Issue], score: TraceScore, window: str
    ) -> None:
        candidates: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        if not score.errored and score.delta_s is not None:
            candidates.append(("delta_s", (score.delta_s, -record), {"delta_s": score.delta_s, "zone": score.zone}))
        for s in score.segments:
            if s.support is not None:
                candidates.append(("support", (-s.support, -record, -s.seg), {"seg": s.seg, "support": s.support}))
        if score.hallucinations:
            found = [m for s in score.segments for m in s.hallucinated]
            candidates.append(("hallucinations", (len(found), -record), {"hallucinations": len(found), "found": found}))
        if errors:
            codes = sorted({i.code for i in errors})
            candidates.append(("errors", (len(errors), -record, 0), {"errors": len(errors), "codes": codes}))
        self.worst.offer(candidates, lambda: _example(record, trace, issues, score, window, self.corpus))

    def finish(
        self, thresholds: Thresholds = Thresholds(), baseline: str | tuple[str, dict[str, Tally]] | None = None
    ) -> dict[str, Any]:
        """The audit's model: summary, windows (in time order, undated last), drift, health (window
        over window, and against `baseline`: a window's name, or (what, per pipeline its tally) of
        an earlier audit), worst lists and their examples."""
        if self._pending:
            self._flush()
        windows = sorted(self.windows.values(), key=lambda w: (w.start is None, w.start or 0))
        changes = drift(windows)
        lists, examples = self.worst.to_dict()
        dated = [w for w in windows if w.start is not None]
        series: dict[str, list[tuple[str, Tally]]] = {}
        for w in dated:
            for pipeline, tally in w.health.items():
                series.setdefault(pipeline, []).append((w.key, tally))
        if isinstance(baseline, str):
            baseline = baseline_window(dated, baseline)
        health = regressions(series, thresholds, baseline)
        return {
            "summary": _summary(windows, changes, self.records, health["regressions"]),
            "windows": [w.to_dict() for w in windows],
            "drift": changes,
            "health": health,
            "worst": lists,
            "examples": examples,
        }


COUNTS = (
    "traces",
    "malformed",
    "errored",
    "errors",
    "warnings",
    "segments",
    "grounded",
    "unscored",
    "hallucinations",
    "hallucinating_traces",
)


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" + ("" if n == 1 else "s")


def baseline_window(dated: list[Window], name: str) -> tuple[str, dict[str, Tally]]:
    """The dated window `name` names (its start, or a prefix of it such as 2026-11-20), as a baseline."""
    from ragaudit.core.errors import UsageError

    found = [w for w in dated if w.key == name or w.key.startswith(name)]
    if len(found) != 1:
        known = ", ".join(w.key for w in dated) or "none"
        raise UsageError(
            f"--baseline: expected one window of this log or an earlier audit_log.json, found "
            f"{len(found)} windows named {name!r} (windows: {known})"
        )
    return found[0].key, found[0].health


def _summary(
    windows: list[Window], changes: list[dict[str, Any]], records: int, regressed: list[dict[str, Any]]
) -> dict[str, Any]:
    total = {key: sum(getattr(w, key) for w in windows) for key in COUNTS}
    issues: Counter[str] = sum((w.issues for w in windows), Counter())
    zones: Counter[str | None] = sum((w.zones for w in windows), Counter())
    measured = sum(w.delta_s_count for w in windows)
    why = []
    if total["errors"]:
        where = ", ".join(f"{w.key} {w.errors}" for w in windows if w.errors)
        why.append(f"{_count(total['errors'], 'error-severity issue')} (by window: {where})")
    if changes:
        fields = ", ".join(sorted({c["field"] for c in changes}))
        inside = sum(c["within_window"] for c in changes)
        why.append(
            f"{_count(len(changes), 'index change')} ({fields}"
            + (f"; {inside} within a window" if inside else "")
            + ")"
        )
    if regressed:
        named = "; ".join(
            f"{r['metric']} of {r['pipeline']} in {r['window']} against "
            + ("the window before" if r["against"] == "previous" else f"the baseline {r['reference']}")
            for r in regressed
        )
        why.append(f"{_count(len(regressed), 'regression')} ({named})")
    return {
        "verdict": "fail" if why else "pass",
        "why": why,
        "regressions": len(regressed),
        "records": records,
        **total,
        "issues": dict(sorted(issues.items())),
        "grounded_rate": total["grounded"] / total["segments"] if total["segments"] else None,
        "zones": {name: zones.get(name, 0) for name in ZONE_NAMES},
        "delta_s_mean": sum(w.delta_s_total for w in windows) / measured if measured else None,
        "windows": len(windows),
        "drift": len(changes),
    }


def _issue(found: Issue) -> dict[str, Any]:
    return {
        "code": found.code,
        "severity": found.severity,
        "path": found.path,
        "message": found.message,
        "seg": found.seg,
        "citation": found.citation,
    }


def _cited(payload: Payload, corpus: Corpus | None) -> dict[str, Any]:
    from ragaudit.checks.metrics.delta_s import payload_text

    return {
        "snippet_id": payload.snippet_id,
        "doc_id": payload.doc_id,
        "section_id": payload.section_id,
        "rev": payload.rev,
        "source_url": payload.source_url,
        "text": clip(payload_text(payload, corpus), TEXT_SHOWN),
    }


def _segment(s: SegmentScore) -> dict[str, Any]:
    return {
        "seg": s.seg,
        "text": clip(s.text, TEXT_SHOWN),
        "citations": list(s.citations),
        "support": s.support,
        "grounded": s.grounded,
        "hallucinated": list(s.hallucinated),
    }


def _example(
    record: int, trace: Trace, issues: list[Issue], score: TraceScore, window: str, corpus: Corpus | None
) -> dict[str, Any]:
    """What a reader needs to see why a trace is among the worst, with every text clipped."""
    cited = {id(p): p for p in score.cited}
    for s in score.segments:
        cited.update((id(p), p) for p in s.cited)
    return {
        "id": f"r{record}",
        "record": record,
        "file": trace.file,
        "line": trace.line,
        "qid": trace.qid,
        "variant": trace.variant,
        "seed": trace.seed,
        "config": trace.config,
        "retrieved_at": trace.retrieved_at,
        "window": window,
        "query": None if trace.query is None else clip(trace.query, TEXT_SHOWN),
        "error": None if trace.error is None else clip(trace.error, TEXT_SHOWN),
        "delta_s": score.delta_s,
        "zone": score.zone,
        "held_to_context": score.held_to_context,
        "segments": [_segment(s) for s in score.segments],
        "cited": [_cited(p, corpus) for p in cited.values()],
        "issues": [_issue(i) for i in issues[:ISSUES_SHOWN]],
        "issues_total": len(issues),
    }


def _payload_columns(cited: tuple[Payload, ...]) -> dict[str, Any]:
    first = cited[0] if cited else None
    return {
        "section_id": first and first.section_id,
        "rev": first and first.rev,
        "citations": [p.snippet_id for p in cited],
        "scores": [p.score_norm for p in cited],
        "kpos": [p.k_pos for p in cited],
        "kfinal": [p.k_final for p in cited],
    }


def _rows(
    record: int, trace: Trace, issues: list[Issue], score: TraceScore, window: str, values: dict[str, list[str]]
) -> list[dict[str, Any]]:
    store = trace.index.store if trace.index is not None else None
    base = {
        "ts": trace.retrieved_at,
        "pipeline": trace.config,
        "qid": trace.qid,
        "variant": trace.variant,
        "seed": trace.seed,
        "deltaS": score.delta_s,
        "lambda_state": None,  # λ compares runs of one gold question: there is no gold set here
        "store": store,
        **{name: (seen[0] if seen else None) for name, seen in values.items()},
        "window": window,
        "file": trace.file,
        "line": trace.line,
        "zone": score.zone,
        "issues": [i.code for i in issues],
    }
    if not score.segments:
        return [
            {
                **base,
                "seg": None,
                **_payload_columns(score.cited),
                "support": None,
                "grounded": None,
                "hallucinated": [],
                "segment": None,
            }
        ]
    return [
        {
            **base,
            "seg": s.seg,
            **_payload_columns(s.cited),
            "support": s.support,
            "grounded": s.grounded,
            "hallucinated": list(s.hallucinated),
            "segment": s.text,
        }
        for s in score.segments
    ]
