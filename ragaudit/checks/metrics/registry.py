"""Every metric ragaudit reports, registered by name with its level, direction and definition.

`ragaudit metrics` prints this table; the evaluation computes every metric with its `compute`
(keyword-only: `run=` a scored run for the run and claim metrics, `question=` a question's runs for
the question metrics); the tests check every registered metric for the shared properties (its
value lies in its range, its direction holds, it is documented).

The ranking metrics are computed at the configured cutoff: `[metrics] k` for hit@k and recall@k,
`[metrics] ndcg_k` (k when unset) for ndcg@k. Their keys in report.json and runs.parquet keep the
letter k (`hit@k`, `ndcg@k`); every view labels them with the cutoff (`hit@5`). A report written
before ndcg followed k stored `ndcg@10`; it loads as `ndcg@k` (`ragaudit.core.shape.RENAMED_METRICS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal

from ragaudit.checks.metrics import aggregate, computes, faithful
from ragaudit.checks.metrics.lam import STATES
from ragaudit.core.gatechecks.registry import CHECKS


@dataclass(frozen=True)
class Metric:
    name: str
    level: str  # "run", "claim", "question", or "probe" (measured by `ragaudit probe`, not by a run)
    description: str
    compute: Callable[
        ..., Any
    ]  # keyword-only: run= a ScoredRun (run, claim), question= a QuestionRuns, probe= outcomes
    higher_is_better: bool = True
    bounds: tuple[float, float] = (0.0, 1.0)
    compared: bool = True  # `compare` tests it between configurations (False: a diagnostic)
    outcome: bool = False  # a per-run 0/1 outcome, whose question mean is a share: `compare` sign-tests it
    states: tuple[str, ...] = ()  # a categorical metric's values, worst first (bounds then do not apply)
    # a run metric's kind: a "rate" (an errored run scores 0), a ΔS "distance" the embedding step measures
    # (`ScoredRun.distances`; an errored run scores 1.0 where it reads the run), or a "mean" over the runs
    # that have it
    scale: Literal["rate", "distance", "mean"] = "rate"

    @property
    def gated_by(self) -> tuple[str, ...]:
        """The [gate] checks that read it by default (each check names the metric it gates)."""
        return tuple(check.name for check in CHECKS if check.metric == self.name)

    def label(self, k: int = 5, ndcg_k: int | None = None) -> str:
        """The name a view shows: a ranking metric with its cutoff (`hit@5`)."""
        if not self.name.endswith("@k"):
            return self.name
        cutoff = (ndcg_k or k) if self.name == "ndcg@k" else k
        return f"{self.name[:-1]}{cutoff}"

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
            computes.coverage,
        ),
        Metric(
            "citation_match",
            "run",
            "1 when a cited payload is in a gold span's doc and section and names its "
            "expected snippet or overlaps it (widened by match_tolerance, 0 by default), and every citation was retrieved; an "
            'accept = "any" item matches when any alternative does',
            computes.citation_match,
            outcome=True,
        ),
        Metric(
            "citation_precision",
            "run",
            "cited payloads overlapping a gold span / cited payloads",
            computes.citation_precision,
        ),
        Metric(
            "citation_recall", "run", "gold spans overlapped by a cited payload / gold spans", computes.citation_recall
        ),
        Metric(
            "hit@k", "run", "1 when a relevant payload is in the top k retrieved", computes.hit_at_k, compared=False
        ),
        Metric("recall@k", "run", "relevant payloads in the top k / size of the relevant set", computes.recall_at_k),
        Metric("mrr", "run", "1 / rank of the first relevant payload", computes.mrr),
        Metric(
            "ndcg@k",
            "run",
            "nDCG over the top ndcg_k retrieved (k unless [metrics] ndcg_k is set), binary gain, log2 discount",
            computes.ndcg_at_k,
        ),
        Metric(
            "support",
            "claim",
            "how well a claim's cited texts support it (calibrated scorer, or the "
            "CrossEncoder of [support] model); mean over the run's cited claims",
            computes.support,
        ),
        Metric(
            "grounded",
            "run",
            "supported claims / claims: a claim is supported when its cited texts support it (support >= "
            "support.threshold) and hold every quantity and identifier it states; uncited claims count as not",
            computes.grounded,
        ),
        Metric(
            "fully_grounded",
            "run",
            "1 when every claim of the answer is supported, else 0; null without an answer; its mean is what "
            "grounded_pass_rate gates",
            computes.fully_grounded,
            outcome=True,
        ),
        Metric(
            "correct",
            "run",
            "1 when citation match holds and, with an answer, a claim citing a matching payload states the gold "
            "anchor (key content recall >= lambda.key_recall_min, precision >= lambda.key_precision_min, anchor "
            "support >= lambda.anchor_support_min) and no claim "
            "conflicts with it (a rival quantity or identifier, or a negation); every run's reason is in the report",
            computes.correct,
            outcome=True,
        ),
        Metric(
            "delta_s_qr",
            "run",
            "dS(query, cited text) = clip(1 − cos, 0, 1), cited text = the answer's cited "
            "payloads (the top-k retrieved without an answer), reading `nearest`: the closest single cited text "
            '(`[metrics] delta_s = "join"` compares with the joined cited texts instead); 1.0 for a run that '
            "errored or cites nothing; zones stable < 0.40 ≤ transit < 0.60 ≤ risk < 0.85 ≤ danger",
            computes.delta_s_qr,
            higher_is_better=False,
            scale="distance",
        ),
        Metric(
            "delta_s_gold",
            "run",
            "dS(query, gold statement): the question against the closest sentence of the texts the gold set says "
            'to cite (its expected citations, or the anchor; for an accept = "any" item the run matched, the '
            "alternatives it matched)",
            computes.delta_s_gold,
            higher_is_better=False,
            compared=False,
            scale="distance",
        ),
        Metric(
            "delta_s_excess",
            "run",
            "max(0, dS(query, closest cited statement) − delta_s_gold): how much farther from the question the "
            "closest sentence the run cites lies than the gold's (0 when it cites the gold sentence, whatever the "
            "chunk); the gated ΔS when a gold set is given (absolute ΔS depends on the corpus); 1.0 for a run "
            "that errored or cites nothing",
            computes.delta_s_excess,
            higher_is_better=False,
            scale="distance",
        ),
        Metric(
            "delta_s_topk",
            "run",
            "dS(query, join(top-k retrieved texts)); a diagnostic, never gated",
            computes.delta_s_topk,
            higher_is_better=False,
            compared=False,
            scale="distance",
        ),
        Metric(
            "delta_s_ra",
            "run",
            "dS(join(cited texts), gold anchor text); a diagnostic, never gated",
            computes.delta_s_ra,
            higher_is_better=False,
            compared=False,
            scale="distance",
        ),
        Metric(
            "anchor_support",
            "run",
            "support the gold anchor gives the claim (citing a matching payload) that states it best",
            computes.anchor_support,
            compared=False,
            scale="mean",
        ),
        Metric(
            "key_content",
            "run",
            "share of the gold anchor's key content (quantities, identifiers, names, content words not in the "
            "question; the reference answer's part of them when there is one) stated by the best such claim",
            computes.key_content,
            compared=False,
            scale="mean",
        ),
        Metric(
            "hallucinations",
            "run",
            "quantities and identifiers in the answer's claims that none of their cited texts (nor the question) "
            "contains: numbers after normalising, numbers with their unit (written in digits or in words with their "
            "unit: `seventeen seconds`, `two weeks`, `a dozen`, `the third business day`), durations by length "
            "(`two weeks` = `14 days`, `1 year` = `12 months`), periods written in words (`annual`, `once a year` = "
            "`every 12 months`; `quarterly`, `every quarter` = `3 months`; in a cited text also `an hour`, `a day`), "
            "dates, versions, codes with digits, and acronyms of "
            'three to eight capitals that the cited texts neither write nor spell out (`MFA` for "multi-factor '
            'authentication"; one the claim defines, `Security Engineering Board (SEB)`, needs its long form cited)',
            computes.hallucinations,
            higher_is_better=False,
            bounds=(0.0, float("inf")),
            compared=False,
            scale="mean",
        ),
        Metric(
            "faithful",
            "probe",
            "share of probe runs whose answer follows its source: asked again on a copy of the corpus with the "
            "gold anchor's key fact edited (a quantity, a name, a negation), it states the edited fact and cites "
            "the edited passage; an answer keeping the old fact, or neither, counts 0; over the runs whose answer "
            "on the real corpus stated the fact (ragaudit probe)",
            faithful.faithful,
            outcome=True,
        ),
        Metric(
            "css",
            "question",
            "|∩ S_r| / |∪ S_r| over the question's runs, S_r = the (doc_id, section_id) pairs "
            "cited by run r's claims that state the gold anchor (all it cites when none does)",
            aggregate.css,
        ),
        Metric(
            "delta_s_spread",
            "question",
            "max − min delta_s_qr over the question's runs; reported, not part of λ",
            aggregate.delta_s_spread,
            higher_is_better=False,
        ),
        Metric(
            "lambda",
            "question",
            "divergent ← (a run errored or cites nothing) / chaotic × (no run correct) / "
            "recursive <> (some runs correct, or css < lambda.css_min) / convergent → (every run correct, css >= "
            "css_min)",
            aggregate.lambda_,
            states=tuple(reversed(STATES)),
        ),
    )
}

RUN_METRICS = tuple(m for m in METRICS.values() if m.level in ("run", "claim"))  # computed per run
QUESTION_METRICS = tuple(m for m in METRICS.values() if m.level == "question")


def labels(settings: Any) -> dict[str, str]:
    """Each metric's name as views show it (`hit@k` → `hit@5`), from the settings a report was computed
    with (its meta.metrics). A report written before ndcg followed k lacks ndcg_k: it computed ndcg at 10."""
    settings = settings if isinstance(settings, dict) else {}
    k = settings.get("k") or 5
    ndcg_k = settings["ndcg_k"] if "ndcg_k" in settings else 10
    return {m.name: m.label(k, ndcg_k) for m in METRICS.values()}


# The run metrics by kind, and all of them averaged per question, section and pipeline in the
# registry's order, which is runs.parquet's column order.
RATES = tuple(m.name for m in RUN_METRICS if m.scale == "rate")
DISTANCES = tuple(m.name for m in RUN_METRICS if m.scale == "distance")
AVERAGED = tuple(m.name for m in RUN_METRICS)
# Which metrics each view shows, in its column order: summary.md's table, report.html's run drill-down.
VIEWS = {
    "summary": ("citation_match", "coverage", "delta_s_qr", "correct", "hit@k", "mrr", "support"),
    "drill": (
        "citation_match",
        "coverage",
        "delta_s_qr",
        "delta_s_gold",
        "delta_s_excess",
        "delta_s_topk",
        "delta_s_ra",
        "citation_precision",
        "hit@k",
        "recall@k",
        "mrr",
        "ndcg@k",
        "support",
        "grounded",
        "anchor_support",
        "key_content",
        "hallucinations",
    ),
}
# What `ragaudit history` and report.html's trend panel follow across runs, by the name the history
# stores: a pipeline's mean of a run metric, or for λ the share of its questions that converge.
TRENDED = {
    "citation_match": "citation_match",
    "coverage": "coverage",
    "delta_s_qr": "delta_s_qr",
    "lambda": "convergent_share",
}
# every name the views and the trends hold is a metric of the registry (tests/test_registries.py)

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
