"""Compute every metric of every run (`score_runs`, a batch at a time), then aggregate: run →
question → section → pipeline (`ragaudit.checks.metrics.aggregate`).

Every aggregate keeps the keys of what it was computed from, so each figure in a report can be
traced down to its runs. Embedding and support work is batched over the runs of a batch: each
distinct text once; runs whose traces differ only in where and when they ran (the seeds of a
deterministic pipeline) are scored once. An errored run (a pipeline error, a timeout, a run
missing from a recording, or no citations at all) scores 0 on every rate and 1.0 on ΔS and stays
in every denominator, so no average can rise because runs failed.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections import defaultdict
from dataclasses import dataclass, field
from statistics import fmean
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import orjson

from ragaudit.checks.metrics.aggregate import Aggregates
from ragaudit.checks.metrics.citation import RunView
from ragaudit.checks.metrics.computes import ScoredRun, errored
from ragaudit.checks.metrics.correct import Verdict, judge
from ragaudit.checks.metrics.decide import Thresholds
from ragaudit.checks.metrics.delta_s import (
    DEFAULT_READING,
    JOIN,
    SCORED_CHARS,
    delta_s_runs,
    payload_text,
    scored_text,
    zone,
)
from ragaudit.checks.metrics.embed import delta_s_pairs
from ragaudit.checks.metrics.grounding import judge_claims
from ragaudit.checks.metrics.lam import chain_states
from ragaudit.checks.metrics.registry import AVERAGED, DISTANCES, RUN_METRICS
from ragaudit.checks.metrics.steps import step_attribution
from ragaudit.core.codes import issue, where
from ragaudit.core.model import PipelineSummary, Question
from ragaudit.core.types import Corpus, GoldItem, Issue, Payload, Trace

if TYPE_CHECKING:
    from ragaudit.checks.metrics.embed import Encoder
    from ragaudit.checks.metrics.support import Scorer
    from ragaudit.io.config import Config


@dataclass(frozen=True)
class Settings:
    k: int = 5
    match_tolerance: int = 0
    ndcg_k: int | None = None
    delta_s_reading: str = DEFAULT_READING
    css_min: float = 0.50
    thresholds: Thresholds = Thresholds()

    @classmethod
    def from_config(cls, config: Config) -> "Settings":
        return cls(
            k=config.metrics.k,
            match_tolerance=config.metrics.match_tolerance,
            ndcg_k=config.metrics.ndcg_k,
            delta_s_reading=config.metrics.delta_s,
            css_min=config.lambda_.css_min,
            thresholds=Thresholds(
                config.support.threshold,
                config.lambda_.anchor_support_min,
                config.lambda_.key_recall_min,
                config.lambda_.key_precision_min,
            ),
        )


@dataclass
class Scored:
    runs: list[dict[str, Any]] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)  # runs whose qid is not in the gold set
    notes: list[Issue] = field(default_factory=list)  # metric notes, such as unit_mismatch


@dataclass
class Evaluation:
    runs: list[dict[str, Any]] = field(default_factory=list)  # kept only when the caller holds every run
    questions: list[Question] = field(default_factory=list)
    sections: list[dict[str, Any]] = field(default_factory=list)
    pipelines: dict[str, PipelineSummary] = field(default_factory=dict)
    unmatched: list[str] = field(default_factory=list)
    notes: list[Issue] = field(default_factory=list)
    coverage_share: Callable[[str, float], float] | None = None  # share of a pipeline's runs with coverage >= t

    def share_covered(self, pipeline: str, minimum: float) -> float:
        if self.coverage_share is not None:
            return self.coverage_share(pipeline, minimum)
        runs = [r for r in self.runs if r["pipeline"] == pipeline]
        ok = sum(1 for r in runs if r["metrics"]["coverage"] is not None and r["metrics"]["coverage"] >= minimum)
        return ok / len(runs) if runs else 0.0


def mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return fmean(kept) if kept else None


def score_runs(
    traces: list[Trace],
    gold: dict[str, GoldItem],
    corpus: Corpus | None,
    encoder: Encoder,
    settings: Settings = Settings(),
    support: Scorer | None = None,
    *,
    remembered: dict[tuple[Any, ...], tuple[dict[str, Any], str | None]] | None = None,
) -> Scored:
    """Every per-run metric of a batch of runs. `support`, when given, scores many (segment, texts)
    pairs at once (a support scorer); it gives segment support and the anchor agreement that
    decides whether a run is correct. `remembered`, when given, holds the record of each run
    scored before with these gold items, corpus, encoder, settings and support (`same_scores` key
    -> (record, the gold unit of its unit_mismatch note or None)): such a run is not scored again,
    and each run scored now is added."""
    result = Scored()
    views: list[RunView] = []  # one per distinct scored content (`same_scores`) not remembered
    matched: list[Trace] = []  # the runs of a gold question
    alike: list[int | tuple[Any, ...]] = []  # and the view each is scored by, or its key in `remembered`
    firsts: dict[tuple[Any, ...], int] = {}
    for trace in traces:
        if trace.qid not in gold:
            result.unmatched.append(f"{trace.config} {trace.qid} v{trace.variant} s{trace.seed}")
            continue
        key = same_scores(trace)
        matched.append(trace)
        if remembered is not None and key is not None and key in remembered:
            alike.append(key)
            continue
        at = len(views) if key is None else firsts.setdefault(key, len(views))
        if at == len(views):
            views.append(RunView(trace, gold[trace.qid], corpus, settings.k, settings.match_tolerance, settings.ndcg_k))
        alike.append(at)
    texts = [{p.snippet_id: scored_text(p, corpus) for p in v.trace.retrieved} for v in views]
    queries = [v.trace.query or v.item.variants[min(v.trace.variant, len(v.item.variants) - 1)] for v in views]
    distances = delta_s_runs(
        encoder,
        queries,
        [[scored_text(p, corpus) for p in v.cited] for v in views],
        [JOIN.join(scored_text(p, corpus) for p in v.trace.retrieved[: settings.k]) for v in views],
        [v.item.anchor.text for v in views],
        [gold_texts(v) for v in views],
        reading=settings.delta_s_reading,
    )
    claims = judge_claims(
        views,
        texts,
        support,
        encoder,
        thresholds=settings.thresholds,
    )
    chains = _chains(views, corpus, encoder)
    records = []
    for i, view in enumerate(views):
        verdict = judge(view, claims[i], scored=support is not None)
        run = ScoredRun(view, {name: distances[name][i] for name in DISTANCES}, tuple(claims[i]), verdict)
        records.append(_run_record(run, chains[i]))
    # the gold unit a run's cited spans could not be read in (a unit_mismatch note), per view
    mismatched = [view.gold[0].span.unit if view.unreconciled else None for view in views]
    if remembered is not None:
        remembered.update((key, (records[at], mismatched[at])) for key, at in firsts.items())
    for trace, by in zip(matched, alike):
        if isinstance(by, tuple):  # scored before
            record, unit = remembered[by]  # type: ignore[index]  # a key only when remembered
            result.runs.append(record if record["seed"] == trace.seed else {**record, "seed": trace.seed})
        else:
            record, unit = records[by], mismatched[by]
            result.runs.append(record if views[by].trace is trace else {**record, "seed": trace.seed})
        if unit is not None and not errored(trace):
            result.notes.append(
                issue(
                    "unit_mismatch",
                    "expected cited spans in the gold unit "
                    f"({unit}) or convertible to it, found a span that is not "
                    "(token offsets need the corpus and an analyzer ragaudit reproduces)",
                    **where(trace, "$.retrieved"),
                )
            )
    result.notes += truncated(matched, corpus)
    return result


# Where and when a run ran: nothing a score is read from. Runs whose traces differ in these alone
# (the seeds of a deterministic pipeline) are scored once; each keeps its own seed in its row.
WHERE_AND_WHEN = ("seed", "file", "line", "retrieved_at")
_SCORED = operator.attrgetter(
    *(f.name for f in dataclasses.fields(Trace) if f.name not in (*WHERE_AND_WHEN, "retrieved"))
)
_PAYLOAD = operator.attrgetter(*(f.name for f in dataclasses.fields(Payload) if f.name not in ("span", "window")))


def same_scores(trace: Trace) -> tuple[Any, ...] | None:
    """A key equal for two traces exactly when every field but WHERE_AND_WHEN is (a payload's
    `span` is its offsets'); None when a value cannot be compared, and the run is scored alone."""
    try:
        payloads = tuple(
            _PAYLOAD(p) if p.window is None else (_PAYLOAD(p), orjson.dumps(p.window, option=orjson.OPT_SORT_KEYS))
            for p in trace.retrieved
        )
        key = (_SCORED(trace), payloads)
        hash(key)
    except (TypeError, orjson.JSONEncodeError):
        return None
    return key


def truncated(traces: list[Trace], corpus: Corpus | None) -> list[Issue]:
    """A `text_truncated` note for each payload whose text the metrics read only in part."""
    notes = []
    for trace in traces:
        for i, p in enumerate(trace.retrieved):
            if p.text is not None:
                size = len(p.text)
            elif p.span is None or (p.span.unit == "char" and len(p.span) <= SCORED_CHARS):
                continue  # a short char span needs no slice of its document to tell
            else:
                size = len(payload_text(p, corpus))
            if size > SCORED_CHARS:
                notes.append(
                    issue(
                        "text_truncated",
                        f"expected at most {SCORED_CHARS:,} characters of text to score, found {size:,}: "
                        f"scored on its first {len(scored_text(p, corpus)):,}",
                        citation=p.snippet_id,
                        **where(trace, f"$.retrieved[{i}].text"),
                    )
                )
    return notes


def evaluate(
    traces: list[Trace],
    items: list[GoldItem],
    corpus: Corpus | None,
    encoder: Encoder,
    settings: Settings = Settings(),
    support: Scorer | None = None,
) -> Evaluation:
    """Score and aggregate a list of runs held in memory (the streaming audit does the same a
    batch at a time)."""
    gold = {i.qid: i for i in items}
    scored = score_runs(traces, gold, corpus, encoder, settings, support)
    book = Aggregates(AVERAGED, settings.css_min)
    for run in scored.runs:
        book.add(run)
    questions, sections, pipelines = book.finish(gold)
    return Evaluation(scored.runs, questions, sections, pipelines, scored.unmatched, scored.notes)


def gold_texts(view: RunView) -> list[str]:
    """The texts the gold set says to cite: each gold span's text, or its slice of the corpus; for an
    accept = "any" item the run matched, the alternatives it matched (citing one of them exactly
    lies no farther from the question than the gold)."""
    indices: Sequence[int] = range(len(view.gold))
    if view.any_of and view.matched:
        indices = sorted({i for _, i in view.matched})
    return [text for i in indices if (text := view.gold_text(i))]


def _run_record(run: ScoredRun, chain: dict[str, Any] | None) -> dict[str, Any]:
    view, claims, verdict = run.view, run.claims, run.verdict or Verdict(False, "")
    t = view.trace
    failed = run.failed
    metrics: dict[str, float | None] = {m.name: m.compute(run=run) for m in RUN_METRICS}
    by_id = {p.snippet_id: p for p in view.cited}
    stating = [c for c in claims if c.claim.n in verdict.stating]
    stated_sections = sorted(
        {(p.doc_id or "", p.section_id or "") for c in stating for s in c.claim.citations if (p := by_id.get(s))}
    )
    record = {
        "pipeline": t.config,
        "qid": t.qid,
        "variant": t.variant,
        "seed": t.seed,
        "query": t.query,
        "error": t.error,
        "errored": failed,
        "zone": zone(metrics["delta_s_qr"]),
        "metrics": metrics,
        "correct": verdict.correct,
        "why": verdict.why,
        "citations": [p.snippet_id for p in view.cited],
        "sections": sorted({(p.doc_id or "", p.section_id or "") for p in view.cited}),
        "stated_sections": stated_sections,
        "claims": [c.to_dict() for c in claims],
    }
    if chain is not None:
        record["chain"] = chain
    if t.steps:
        record["attribution"] = step_attribution(t)
    return record


def _chains(views: list[RunView], corpus: Corpus | None, encoder: Encoder) -> list[dict[str, Any] | None]:
    """λ per reasoning chain for runs with two or more steps: d_t = dS(step question, its cited texts)."""
    lefts: list[str] = []
    rights: list[str] = []
    owners: list[int] = []
    for i, view in enumerate(views):
        steps = view.trace.steps
        if len(steps) < 2:
            continue
        by_id = {p.snippet_id: p for p in view.trace.retrieved}
        for step in steps:
            lefts.append(step.question)
            rights.append(JOIN.join(scored_text(by_id[c], corpus) for c in step.citations if c in by_id))
            owners.append(i)
    out: list[dict[str, Any] | None] = [None] * len(views)
    if not owners:
        return out
    distances = delta_s_pairs(encoder, lefts, rights)
    per_run: dict[int, list[float]] = defaultdict(list)
    for owner, d in zip(owners, distances):
        per_run[owner].append(float(d))
    for i, ds in per_run.items():
        states = chain_states(ds)
        out[i] = {"delta_s": ds, "states": states, "state": states[-1]}
    return out
