"""The compute of every registered run and claim metric, a function of one typed scored run
(`ScoredRun`), keyword-only: `coverage(run=scored)`. The evaluation calls these and nothing else, so
each figure has one definition.

A failed run (errored, or it retrieved and cited nothing) scores 0 on every rate, 1.0 on every ΔS
but the gold's (a property of the question) and null on the anchor's agreement, so no mean rises
because runs failed. The ΔS of a run are computed a batch at a time (each distinct text embedded
once) and arrive in `ScoredRun.distances`; their computes read them there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from statistics import fmean
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from ragaudit.checks.metrics import citation
from ragaudit.checks.metrics.citation import RunView
from ragaudit.core.types import Trace

if TYPE_CHECKING:
    from ragaudit.checks.metrics.correct import Verdict
    from ragaudit.checks.metrics.grounding import Judged

ERRORED_DELTA_S = 1.0

RunCompute = Callable[..., float | None]


def errored(trace: Trace) -> bool:
    """A failed run: the pipeline errored, or it retrieved and cited nothing at all."""
    return trace.error is not None or (not trace.retrieved and not (trace.answer and trace.answer.citations))


@dataclass(frozen=True)
class ScoredRun:
    """One run as its metrics read it: the run bound to its gold item, its ΔS distances (by metric
    name), its judged claims and the verdict on whether it is correct."""

    view: RunView
    distances: Mapping[str, float | None] = field(default_factory=dict)
    claims: tuple[Judged, ...] = ()
    verdict: Verdict | None = None

    @cached_property  # asked by every metric of the run; its trace never changes
    def failed(self) -> bool:
        return errored(self.view.trace)


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return fmean(kept) if kept else None


def _on_failure(value: float | None) -> Callable[[RunCompute], RunCompute]:
    """The value a metric takes for a failed run, whatever the run holds."""

    def wrap(compute: RunCompute) -> RunCompute:
        def scored(*, run: ScoredRun) -> float | None:
            return value if run.failed else compute(run=run)

        scored.__name__, scored.__doc__ = compute.__name__, compute.__doc__
        return scored

    return wrap


def _view(metric: Callable[[RunView], float | None]) -> RunCompute:
    """A rate of the run bound to its gold item (ragaudit.checks.metrics.citation)."""

    @_on_failure(0.0)
    def compute(*, run: ScoredRun) -> float | None:
        return metric(run.view)

    compute.__name__, compute.__doc__ = metric.__name__, metric.__doc__
    return compute


coverage = _view(citation.coverage)
citation_match = _view(citation.citation_match)
citation_precision = _view(citation.citation_precision)
citation_recall = _view(citation.citation_recall)
hit_at_k = _view(citation.hit_at_k)
recall_at_k = _view(citation.recall_at_k)
mrr = _view(citation.mrr)
ndcg_at_k = _view(citation.ndcg_at_k)


def _distance(name: str, *, scored_on_failure: bool = False) -> RunCompute:
    def compute(*, run: ScoredRun) -> float | None:
        if run.failed and not scored_on_failure:
            return ERRORED_DELTA_S
        value = run.distances.get(name)
        return None if value is None or math.isnan(value) else float(value)

    compute.__name__ = name
    return compute


delta_s_qr = _distance("delta_s_qr")
delta_s_gold = _distance("delta_s_gold", scored_on_failure=True)
delta_s_excess = _distance("delta_s_excess")
delta_s_topk = _distance("delta_s_topk")
delta_s_ra = _distance("delta_s_ra")


@_on_failure(0.0)
def support(*, run: ScoredRun) -> float | None:
    """Mean support of the run's scored claims; null when none was scored."""
    return _mean(c.support for c in run.claims)


@_on_failure(0.0)
def grounded(*, run: ScoredRun) -> float | None:
    """Supported claims / claims; null without claims."""
    return _mean(float(c.grounding == "supported") for c in run.claims)


@_on_failure(0.0)
def fully_grounded(*, run: ScoredRun) -> float | None:
    """1 when every claim is supported, 0 when one is not, null without claims."""
    if not run.claims:
        return None
    return 1.0 if all(c.grounding == "supported" for c in run.claims) else 0.0


@_on_failure(0.0)
def hallucinations(*, run: ScoredRun) -> float | None:
    """Quantities and identifiers of the claims that no cited text holds."""
    return float(sum(len(c.hallucinated) for c in run.claims))


@_on_failure(None)
def anchor_support(*, run: ScoredRun) -> float | None:
    return run.verdict.anchor_support if run.verdict else None


@_on_failure(None)
def key_content(*, run: ScoredRun) -> float | None:
    return run.verdict.key_share if run.verdict else None


@_on_failure(0.0)
def correct(*, run: ScoredRun) -> float | None:
    return 1.0 if run.verdict is not None and run.verdict.correct else 0.0
