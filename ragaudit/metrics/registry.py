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
    level: str  # "run", "claim" or "question"
    description: str
    compute: Callable | None = None  # RunView -> value, for the metrics computed from one run alone
    higher_is_better: bool = True
    bounds: tuple[float, float] = (0.0, 1.0)
    compared: bool = True  # `compare` tests it between configurations (False: a diagnostic)
    outcome: bool = False  # a per-run 0/1 outcome, whose question mean is a share: `compare` sign-tests it
    gated_by: tuple[str, ...] = ()  # the [gate] checks that read it by default

    def __str__(self) -> str:
        return self.name


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "coverage",
            "run",
            "|(∪ cited spans) ∩ (∪ gold spans)| / |∪ gold spans|, per document, in the gold "
            "unit; null when units cannot be reconciled",
            citation.coverage,
            gated_by=("coverage_pass_rate",),
        ),
        Metric(
            "citation_match",
            "run",
            "1 when a cited payload is in a gold span's doc and section and names its "
            "expected snippet or overlaps it widened by match_tolerance, and every citation was retrieved; an "
            'accept = "any" item matches when any alternative does',
            citation.citation_match,
            outcome=True,
            gated_by=("citation_match_min",),
        ),
        Metric(
            "citation_precision",
            "run",
            "cited payloads overlapping a gold span / cited payloads",
            citation.citation_precision,
        ),
        Metric(
            "citation_recall", "run", "gold spans overlapped by a cited payload / gold spans", citation.citation_recall
        ),
        Metric(
            "hit@k", "run", "1 when a relevant payload is in the top k retrieved", citation.hit_at_k, compared=False
        ),
        Metric("recall@k", "run", "relevant payloads in the top k / size of the relevant set", citation.recall_at_k),
        Metric("mrr", "run", "1 / rank of the first relevant payload", citation.mrr),
        Metric("ndcg@10", "run", "nDCG over the top 10, binary gain, log2 discount", citation.ndcg_at_10),
        Metric(
            "delta_s_qr",
            "run",
            "dS(query, cited text) = clip(1 − cos, 0, 1), cited text = the answer's cited "
            "payloads (the top-k retrieved without an answer), reading `nearest`: the closest single cited text "
            '(`[metrics] delta_s = "join"` compares with the joined cited texts instead); 1.0 for a run that '
            "errored or cites nothing; zones stable < 0.40 ≤ transit < 0.60 ≤ risk < 0.85 ≤ danger",
            higher_is_better=False,
        ),
        Metric(
            "delta_s_gold",
            "run",
            "dS(query, gold statement): the question against the closest sentence of the texts the gold set says "
            "to cite (its expected citations, or the anchor)",
            higher_is_better=False,
            compared=False,
        ),
        Metric(
            "delta_s_excess",
            "run",
            "max(0, dS(query, closest cited statement) − delta_s_gold): how much farther from the question the "
            "closest sentence the run cites lies than the gold's (0 when it cites the gold sentence, whatever the "
            "chunk); the gated ΔS when a gold set is given (absolute ΔS depends on the corpus); 1.0 for a run "
            "that errored or cites nothing",
            higher_is_better=False,
            gated_by=("delta_s_excess_max",),
        ),
        Metric(
            "delta_s_topk",
            "run",
            "dS(query, join(top-k retrieved texts)); a diagnostic, never gated",
            higher_is_better=False,
            compared=False,
        ),
        Metric(
            "delta_s_ra",
            "run",
            "dS(join(cited texts), gold anchor text); a diagnostic, never gated",
            higher_is_better=False,
            compared=False,
        ),
        Metric(
            "support",
            "claim",
            "how well a claim's cited texts support it (calibrated scorer, or the "
            "CrossEncoder of [support] model); mean over the run's cited claims",
        ),
        Metric(
            "grounded",
            "run",
            "supported claims / claims: a claim is supported when its cited texts support it (support >= "
            "support.threshold) and hold every quantity and identifier it states; uncited claims count as not",
        ),
        Metric(
            "fully_grounded",
            "run",
            "1 when every claim of the answer is supported, else 0; null without an answer; its mean is what "
            "grounded_pass_rate gates",
            outcome=True,
            gated_by=("grounded_pass_rate",),
        ),
        Metric(
            "anchor_support",
            "run",
            "support the gold anchor gives the claim (citing a matching payload) that states it best",
            compared=False,
        ),
        Metric(
            "key_content",
            "run",
            "share of the gold anchor's key content (quantities, identifiers, names, content words not in the "
            "question; the reference answer's part of them when there is one) stated by the best such claim",
            compared=False,
        ),
        Metric(
            "correct",
            "run",
            "1 when citation match holds and, with an answer, a claim citing a matching payload states the gold "
            "anchor (key content recall >= lambda.key_recall_min, precision >= lambda.key_precision_min, anchor "
            "support >= lambda.anchor_support_min) and no claim "
            "conflicts with it (a rival quantity or identifier, or a negation); every run's reason is in the report",
            outcome=True,
            gated_by=("lambda_convergent_min", "lambda_forbid"),
        ),
        Metric(
            "hallucinations",
            "run",
            "quantities and identifiers in the answer's claims that none of their cited texts (nor the question) "
            "contains: numbers after normalising, numbers with their unit, dates, versions and codes with digits",
            higher_is_better=False,
            bounds=(0.0, float("inf")),
            compared=False,
            gated_by=("hallucination_max",),
        ),
        Metric(
            "css",
            "question",
            "|∩ S_r| / |∪ S_r| over the question's runs, S_r = the (doc_id, section_id) pairs "
            "cited by run r's claims that state the gold anchor (all it cites when none does)",
        ),
        Metric(
            "delta_s_spread",
            "question",
            "max − min delta_s_qr over the question's runs; reported, not part of λ",
            higher_is_better=False,
        ),
        Metric(
            "lambda",
            "question",
            "divergent ← (a run errored or cites nothing) / chaotic × (no run correct) / "
            "recursive <> (some runs correct, or css < lambda.css_min) / convergent → (every run correct, css >= "
            "css_min)",
            bounds=(0.0, 0.0),
        ),
    )
}

RUN_METRICS = tuple(m for m in METRICS.values() if m.compute is not None)

# Every list of metrics the package uses, here beside the registry and checked against it at import.
# The rates (an errored run scores 0 on each) and the distances (1.0), averaged per question, section
# and pipeline in this order, which is runs.parquet's column order.
RATES = (
    "coverage",
    "citation_match",
    "citation_precision",
    "citation_recall",
    "hit@k",
    "recall@k",
    "mrr",
    "ndcg@10",
    "support",
    "grounded",
    "fully_grounded",
    "correct",
)
DISTANCES = ("delta_s_qr", "delta_s_gold", "delta_s_excess", "delta_s_topk", "delta_s_ra")
AVERAGED = (*RATES, *DISTANCES, "anchor_support", "key_content", "hallucinations")
# Which metrics each view shows, in its column order: summary.md's table, report.html's run drill-down.
VIEWS = {
    "summary": ("citation_match", "coverage", "delta_s_qr", "correct", "mrr", "support"),
    "drill": (
        "citation_match",
        "coverage",
        "delta_s_qr",
        "delta_s_gold",
        "delta_s_excess",
        "delta_s_topk",
        "delta_s_ra",
        "citation_precision",
        "mrr",
        "support",
        "grounded",
        "anchor_support",
        "key_content",
        "hallucinations",
    ),
}
_LISTED = {*AVERAGED, *(name for view in VIEWS.values() for name in view)}
if not _LISTED <= set(METRICS) or set(AVERAGED) != {m.name for m in METRICS.values() if m.level != "question"}:
    raise ImportError(f"metric lists out of step with the registry: {sorted(_LISTED ^ set(METRICS))}")

# Which ΔS the gate reads, and why: the figures `bench/faults.py` prints (AUROC for runs citing a wrong
# text against runs citing the gold, over clean runs and the faults that change what a run cites).
GATED_DELTA_S = (
    "The gate reads delta_s_excess (delta_s_excess_max), not absolute ΔS: how far a relevant text lies "
    "from its question depends on the corpus. AUROC, wrong vs right citations, absolute → excess: handbook "
    "0.95 → 1.00, SQuAD 0.67 → 0.91, ExpertQA web evidence 0.34 → 0.68. Where the excess separates nothing "
    "(ExpertQA: other passages on the topic lie as close to the question as the gold), ragaudit calibrate "
    "proposes not to gate it and says why. Absolute ΔS (delta_s_qr) and its zones stay in every report, are "
    "what gold-free audits (audit-log) use, and are gated when a config sets delta_s_max or delta_s_mean_max."
)
