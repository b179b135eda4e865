"""Every metric ragaudit reports, registered by name with its level, direction and definition.

`ragaudit metrics` prints this table; the tests check every registered run metric for the shared
properties (bounded, order-invariant, perfect input gives its best value).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ragaudit.metrics import citation


@dataclass(frozen=True)
class Metric:
    name: str
    level: str  # "run", "segment" or "question"
    description: str
    compute: Callable | None = None  # RunView -> value, for the metrics computed from one run alone
    higher_is_better: bool = True
    bounds: tuple[float, float] = (0.0, 1.0)

    def __str__(self) -> str:
        return self.name


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("coverage", "run", "|(∪ cited spans) ∩ (∪ gold spans)| / |∪ gold spans|, per document, in the gold "
           "unit; null when units cannot be reconciled", citation.coverage),
    Metric("citation_match", "run", "1 when a cited payload is in the gold doc and section and names an expected "
           "snippet or overlaps a gold span widened by match_tolerance, and every citation was retrieved",
           citation.citation_match),
    Metric("citation_precision", "run", "cited payloads overlapping a gold span / cited payloads",
           citation.citation_precision),
    Metric("citation_recall", "run", "gold spans overlapped by a cited payload / gold spans", citation.citation_recall),
    Metric("hit@k", "run", "1 when a relevant payload is in the top k retrieved", citation.hit_at_k),
    Metric("recall@k", "run", "relevant payloads in the top k / size of the relevant set", citation.recall_at_k),
    Metric("mrr", "run", "1 / rank of the first relevant payload", citation.mrr),
    Metric("ndcg@10", "run", "nDCG over the top 10, binary gain, log2 discount", citation.ndcg_at_10),
    Metric("delta_s_qr", "run", "dS(query, join(top-k texts)) = clip(1 − cos, 0, 1); zones stable < 0.40 ≤ "
           "transit < 0.60 ≤ risk < 0.85 ≤ danger", higher_is_better=False),
    Metric("delta_s_ra", "run", "dS(join(top-k texts), anchor text)", higher_is_better=False),
    Metric("support", "segment", "how well a segment's cited texts support it (calibrated scorer); mean per run"),
    Metric("grounded_rate", "run", "share of answer segments with support >= support.threshold"),
    Metric("hallucinations", "run", "numbers in answer segments that none of their cited texts contains",
           higher_is_better=False, bounds=(0.0, float("inf"))),
    Metric("css", "question", "|∩ C_r| / |∪ C_r| over the question's runs (citation set stability)"),
    Metric("delta_s_spread", "question", "max − min delta_s_qr over the question's runs", higher_is_better=False),
    Metric("lambda", "question", "convergent → / recursive <> / chaotic × / divergent ←, by the SPEC decision "
           "table", bounds=(0.0, 0.0)),
)}

RUN_METRICS = tuple(m for m in METRICS.values() if m.compute is not None)
