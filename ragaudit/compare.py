"""Comparison of retriever configurations (systems) over the same questions.

A system is one pipeline of one run. Every system is compared with the first (the reference),
question by question: per metric the means, the paired difference with a seeded BCa bootstrap 95%
CI, a paired permutation p-value, Holm-adjusted across the metrics of that pair, win/tie/loss by
question within a tolerance, and the λ state transitions.

The statistics are scipy's. The CI is `scipy.stats.bootstrap` (BCa) of the mean paired difference.
The permutation test flips the signs of the paired differences; a difference of 0 flips to itself,
so only the m non-zero ones are flipped, which leaves the p-value as it is. With m <= EXACT_MAX,
`scipy.stats.permutation_test` enumerates all 2^m sign patterns: the p-value is exact. Above, the
test is randomized: RESAMPLES random sign patterns from a generator seeded with SEED, through
`scipy.stats.monte_carlo_test` with the differences under random signs as the null draws. That is
the randomized test `permutation_test` runs, but vectorized: permutation_test's paired form loops in
Python over every difference of every batch of resamples (`bench/compare.py` measures it).

Memory is O(questions): resamples are drawn and reduced in batches of BATCH_BYTES (scipy's
`batch=`), and the results are those of one unbatched call, bit for bit. BCa's jackknife takes
O(questions²) time, which `bench/compare.py` measures at 100,000 questions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ragaudit.metrics.registry import METRICS

COMPARED = (
    "citation_match",
    "coverage",
    "correct",
    "citation_precision",
    "citation_recall",
    "recall@k",
    "mrr",
    "ndcg@10",
    "delta_s_qr",
    "support",
)
STATES = ("convergent", "recursive", "chaotic", "divergent")
SEED = 20261122
RESAMPLES = 9_999  # bootstrap resamples, and random sign patterns of a randomized test (p in steps of 1/10,000)
EXACT_MAX = 16  # up to 2^16 = 65,536 sign patterns, enumerated in about 0.2 s
# Working set of one batch of resamples: its draws, the resampled values and, for the jackknife, its
# mask. Memory only needs it to be O(questions); a few MiB also stays in cache.
BATCH_BYTES = 4 << 20


@dataclass(frozen=True)
class System:
    name: str
    questions: dict[str, dict]  # qid -> question record of the report


def systems_of(report: dict, label: str | None = None) -> list[System]:
    out = []
    for pipeline in report["summary"]["pipelines"]:  # in the config's order: the first is the reference
        questions = {q["qid"]: q for q in report["questions"] if q["pipeline"] == pipeline}
        out.append(System(f"{label}/{pipeline}" if label else pipeline, questions))
    return out


def batch_size(pairs: int) -> int:
    """Resamples per batch, at 17 bytes a pair: a jackknife row holds a 1-byte mask, an 8-byte index
    and an 8-byte value per pair (a bootstrap resample 16 bytes, a sign-flipped one 9)."""
    return max(1, BATCH_BYTES // (17 * max(pairs, 1)))


def bootstrap_ci(diffs: np.ndarray) -> tuple[float, float]:
    """The BCa 95% CI of the mean of `diffs`, from RESAMPLES resamples drawn by a generator seeded with
    SEED. A constant sample's CI is its value: every resample has that mean (and BCa is undefined)."""
    from scipy import stats

    if np.ptp(diffs) == 0:
        return float(diffs[0]), float(diffs[0])
    ci = stats.bootstrap(
        (diffs,),
        np.mean,
        n_resamples=RESAMPLES,
        batch=batch_size(diffs.size),
        vectorized=True,
        method="BCa",
        rng=np.random.default_rng(SEED),
    ).confidence_interval
    return float(ci.low), float(ci.high)


def permutation_p(diffs: np.ndarray) -> float:
    """Two-sided paired permutation p-value of the mean difference (1 when it is 0 or at most one
    difference is not 0): exact over every sign pattern of the non-zero differences up to EXACT_MAX
    of them, else from RESAMPLES random sign patterns (with scipy's +1 correction)."""
    from scipy import stats

    moving = diffs[diffs != 0]
    if moving.size < 2 or abs(moving.sum()) <= 1e-9 * np.abs(moving).sum():
        # None, one (its two signs are the two tails), or gains and losses that cancel: a mean of 0 is
        # the middle of the null distribution, p = 1. scipy's tolerance for ties is relative to the
        # observed mean, so a mean that rounding left at 1e-17 would let rounding decide the ties.
        return 1.0
    if moving.size <= EXACT_MAX:
        result = stats.permutation_test(
            (moving,), np.mean, permutation_type="samples", n_resamples=np.inf, vectorized=True
        )
        return float(result.pvalue)
    rng = np.random.default_rng(SEED)

    def flipped(size: tuple[int, int]) -> np.ndarray:
        # One draw per resample: numpy packs random booleans into words and drops the rest of the last
        # word of a draw, so drawing a whole batch at once would make the result depend on the batch.
        flips = np.empty(size, dtype=bool)
        for row in flips:
            row[:] = rng.integers(0, 2, size=size[1], dtype=bool)
        return np.where(flips, -moving, moving)

    result = stats.monte_carlo_test(
        moving,
        flipped,
        np.mean,
        n_resamples=RESAMPLES,
        batch=batch_size(moving.size),
        vectorized=True,
    )
    return float(result.pvalue)


def paired_tests(diffs: dict[str, np.ndarray]) -> dict[str, tuple[float, float, float]]:
    """Per metric: the BCa bootstrap 95% CI of the mean paired difference and the permutation p-value,
    each from its own differences alone."""
    return {name: (*bootstrap_ci(d), permutation_p(d)) for name, d in diffs.items()}


def holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm–Bonferroni adjusted p-values (monotone, capped at 1)."""
    order = sorted(p_values, key=lambda k: p_values[k])
    adjusted, running = {}, 0.0
    for i, name in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * p_values[name]))
        adjusted[name] = running
    return adjusted


def _values(name: str, values: list) -> np.ndarray:
    try:
        out = np.array(values, dtype=float)
    except ValueError:
        out = None
    if out is None or out.ndim != 1:  # TypeError: a damaged report, which the CLI reports as such
        raise TypeError(f"metric {name}: expected one number per question")
    return out


def compare_pair(reference: System, other: System, *, tolerance: float = 0.01) -> dict:
    shared = sorted(set(reference.questions) & set(other.questions))
    paired: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in COMPARED:
        pairs = [(reference.questions[q]["metrics"].get(name), other.questions[q]["metrics"].get(name)) for q in shared]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        if pairs:
            paired[name] = (_values(name, [p[0] for p in pairs]), _values(name, [p[1] for p in pairs]))
    tests = paired_tests({name: b - a for name, (a, b) in paired.items()})
    metrics: dict[str, dict] = {}
    raw_p: dict[str, float] = {}
    for name, (a, b) in paired.items():
        diffs = b - a
        better = diffs if METRICS[name].higher_is_better else -diffs
        low, high, raw_p[name] = tests[name]
        metrics[name] = {
            "mean_reference": float(a.mean()),
            "mean_other": float(b.mean()),
            "difference": float(diffs.mean()),
            "ci95": [low, high],
            "p_value": raw_p[name],
            "questions": len(diffs),
            "higher_is_better": METRICS[name].higher_is_better,
            "wins": int(np.sum(better > tolerance)),
            "ties": int(np.sum(np.abs(better) <= tolerance)),
            "losses": int(np.sum(better < -tolerance)),
        }
    for name, p in holm(raw_p).items():
        metrics[name]["p_holm"] = p
        m = metrics[name]
        direction = m["difference"] if m["higher_is_better"] else -m["difference"]
        m["verdict"] = "tie" if p >= 0.05 else ("better" if direction > 0 else "worse")
    transitions = {s: {t: 0 for t in STATES} for s in STATES}
    for q in shared:
        transitions[reference.questions[q]["lambda"]["state"]][other.questions[q]["lambda"]["state"]] += 1
    return {
        "reference": reference.name,
        "other": other.name,
        "questions": len(shared),
        "tolerance": tolerance,
        "metrics": metrics,
        "lambda_transitions": transitions,
    }


def compare(systems: list[System], *, tolerance: float = 0.01) -> dict:
    if len(systems) < 2:
        from ragaudit.errors import UsageError

        raise UsageError(f"compare needs at least two systems, found {len(systems)}")
    reference = systems[0]
    return {
        "schema_version": "ragaudit.compare/1",
        "systems": [s.name for s in systems],
        "means": {
            s.name: {name: _mean([q["metrics"].get(name) for q in s.questions.values()]) for name in COMPARED}
            for s in systems
        },
        "comparisons": [compare_pair(reference, other, tolerance=tolerance) for other in systems[1:]],
    }


def _mean(values) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None
