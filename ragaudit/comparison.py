"""Decisions between retriever configurations (systems) over the same questions, pair by pair.

A system is one pipeline of one run; a pair (a, b) asks whether b is better than a, worse, or no
worse by more than a margin. Per metric of the registry that `compare` tests, over the questions
both systems scored: the means, the paired difference b − a with a seeded 95% CI, a two-sided
p-value, Holm-adjusted across the metrics of the pair, a one-sided non-inferiority test against
the margin, win/tie/loss by question within a tolerance, the noise floor of the pair (`noise.py`)
and the λ state transitions; per pair, the smallest change in a rate it could detect (`power.py`).

The tests, each on its own metric's differences:
* A per-run 0/1 outcome (`Metric.outcome`: correct, citation match) averaged per question: the
  exact two-sided sign test on the per-question differences (scipy's `binomtest`), which is the
  exact McNemar test when each question has one run.
* Any other metric: a paired permutation test that flips the signs of the differences. A difference
  of 0 flips to itself, so only the m non-zero ones are flipped. With m <= EXACT_MAX,
  `scipy.stats.permutation_test` enumerates all 2^m sign patterns: the p-value is exact. Up to
  MONTE_CARLO_MAX, RESAMPLES random sign patterns from a generator seeded with SEED, through
  `scipy.stats.monte_carlo_test` (vectorized: permutation_test's paired form loops in Python over
  every difference). Above, the normal approximation of the sign-flip distribution: it is symmetric
  with variance Σd², so the approximation's error falls as 1/m and is below the Monte Carlo's own.
* Non-inferiority (TOST's one side): H0 "b is worse than a by the margin or more". The differences
  in the better direction, shifted by the margin, are sign-flipped as above and tested one-sided.
* The CI: `scipy.stats.bootstrap` (BCa, RESAMPLES resamples) up to BCA_MAX paired questions, where
  its jackknife (O(questions²) time) stays under a second a metric; above, the Student t interval
  of the mean (the studentized mean), which the bootstrap distribution of a mean of that many
  questions matches to within its own Monte Carlo error. Each metric says which it used.

Memory is O(questions): resamples are drawn and reduced in batches of BATCH_BYTES (scipy's `batch=`),
and the results are those of one unbatched call, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ragaudit.metrics.lam import STATES
from ragaudit.metrics.registry import METRICS
from ragaudit.model import Question
from ragaudit.noise import NoiseFloor
from ragaudit.power import Assumptions, Design, mde

COMPARED = tuple(m.name for m in METRICS.values() if m.compared and m.level != "question")
SEED = 20261122
RESAMPLES = 9_999  # bootstrap resamples, and random sign patterns of a randomized test (p in steps of 1/10,000)
EXACT_MAX = 16  # up to 2^16 = 65,536 sign patterns, enumerated in about 0.2 s
MONTE_CARLO_MAX = 10_000  # non-zero differences up to which a randomized test draws sign patterns
BCA_MAX = 10_000  # paired questions up to which the CI is BCa (its jackknife: about 0.4 s a metric here)
MARGIN = 0.02
ALPHA = 0.05
# Working set of one batch of resamples: its draws, the resampled values and, for the jackknife, its
# mask. Memory only needs it to be O(questions); a few MiB also stays in cache.
BATCH_BYTES = 4 << 20


@dataclass(frozen=True, eq=False)  # one system is one object: pairs are told apart by identity
class System:
    name: str
    questions: dict[str, Question]  # qid -> question of the report
    noise: NoiseFloor = field(default_factory=NoiseFloor.unknown)


def batch_size(pairs: int) -> int:
    """Resamples per batch, at 17 bytes a pair: a jackknife row holds a 1-byte mask, an 8-byte index
    and an 8-byte value per pair (a bootstrap resample 16 bytes, a sign-flipped one 9)."""
    return max(1, BATCH_BYTES // (17 * max(pairs, 1)))


def ci_method(questions: int) -> str:
    return "BCa" if questions <= BCA_MAX else "t"


def bootstrap_ci(diffs: np.ndarray) -> tuple[float, float]:
    """The 95% CI of the mean of `diffs`: BCa from RESAMPLES resamples drawn by a generator seeded with
    SEED up to BCA_MAX values, the Student t interval above. A constant sample's CI is its value:
    every resample has that mean (and BCa is undefined)."""
    from scipy import stats

    if np.ptp(diffs) == 0:
        return float(diffs[0]), float(diffs[0])
    if ci_method(diffs.size) == "t":
        half = stats.t.ppf(0.975, diffs.size - 1) * diffs.std(ddof=1) / np.sqrt(diffs.size)
        return float(diffs.mean() - half), float(diffs.mean() + half)
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


def _sign_flip_p(values: np.ndarray, alternative: str) -> float:
    """The sign-flip permutation p-value of the mean of `values` (none of them 0): exact, randomized
    or normal by their number (module docstring)."""
    from scipy import stats

    if values.size <= EXACT_MAX:
        result = stats.permutation_test(
            (values,),
            np.mean,
            permutation_type="samples",
            n_resamples=np.inf,
            vectorized=True,
            alternative=alternative,
        )
        return float(result.pvalue)
    if values.size > MONTE_CARLO_MAX:
        z = values.sum() / np.sqrt(np.square(values).sum())
        return float(2 * stats.norm.sf(abs(z)) if alternative == "two-sided" else stats.norm.sf(z))
    rng = np.random.default_rng(SEED)

    def flipped(size: tuple[int, int]) -> np.ndarray:
        # The sign patterns numpy draws one resample at a time as random booleans (each from the bits
        # of fresh 32-bit words, lowest bit first, the rest of a resample's last word dropped), drawn
        # for the whole batch at once as those words: the same patterns whatever the batch, without
        # a Python loop over the resamples.
        rows, n = size
        words = rng.integers(0, 1 << 32, size=(rows, (n + 31) // 32), dtype=np.uint32)
        flips = np.unpackbits(words.astype("<u4", copy=False).view(np.uint8), axis=1, count=n, bitorder="little")
        return np.where(flips.view(bool), -values, values)

    result = stats.monte_carlo_test(
        values,
        flipped,
        np.mean,
        n_resamples=RESAMPLES,
        batch=batch_size(values.size),
        vectorized=True,
        alternative=alternative,
    )
    return float(result.pvalue)


def permutation_method(moving: int) -> str:
    if moving <= EXACT_MAX:
        return "permutation, exact"
    return "permutation, normal approximation" if moving > MONTE_CARLO_MAX else f"permutation, {RESAMPLES:,} sign flips"


def permutation_p(diffs: np.ndarray) -> float:
    """Two-sided paired permutation p-value of the mean difference (1 when it is 0 or at most one
    difference is not 0)."""
    moving = diffs[diffs != 0]
    if moving.size < 2 or abs(moving.sum()) <= 1e-9 * np.abs(moving).sum():
        # None, one (its two signs are the two tails), or gains and losses that cancel: a mean of 0 is
        # the middle of the null distribution, p = 1. scipy's tolerance for ties is relative to the
        # observed mean, so a mean that rounding left at 1e-17 would let rounding decide the ties.
        return 1.0
    return _sign_flip_p(moving, "two-sided")


def sign_test_p(diffs: np.ndarray) -> float:
    """Exact two-sided sign test of the per-question differences: of the questions that moved, did as
    many move up as down? (1 when none moved.)"""
    from scipy import stats

    up, down = int(np.sum(diffs > 0)), int(np.sum(diffs < 0))
    return 1.0 if up + down == 0 else float(stats.binomtest(up, up + down, 0.5).pvalue)


def noninferiority_p(better: np.ndarray, margin: float) -> float:
    """One-sided p-value of H0 "the mean of `better` (the differences in the better direction) is at
    most −margin", from the sign flips of better + margin."""
    shifted = better + margin
    moving = shifted[shifted != 0]
    if moving.size == 0:
        return 1.0
    if moving.size == 1:  # its two signs are the whole null distribution: at or above it, one or both
        return 0.5 if moving[0] > 0 else 1.0
    return _sign_flip_p(moving, "greater")


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


def paired_values(a: System, b: System, shared: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per compared metric, a's and b's values over the shared questions both scored."""
    paired: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in COMPARED:
        pairs = [(a.questions[q].metrics.get(name), b.questions[q].metrics.get(name)) for q in shared]
        pairs = [(x, y) for x, y in pairs if x is not None and y is not None]
        if pairs:
            paired[name] = (_values(name, [p[0] for p in pairs]), _values(name, [p[1] for p in pairs]))
    return paired


def _metric(name: str, a: np.ndarray, b: np.ndarray, *, margin: float, tolerance: float, floor: float | None) -> dict:
    diffs = b - a
    hib = METRICS[name].higher_is_better
    better = diffs if hib else -diffs
    low, high = bootstrap_ci(diffs)
    outcome = METRICS[name].outcome
    ni_p = noninferiority_p(better, margin)
    return {
        "mean_a": float(a.mean()),
        "mean_b": float(b.mean()),
        "difference": float(diffs.mean()),
        "ci95": [low, high],
        "ci_method": ci_method(diffs.size),
        "p_value": sign_test_p(diffs) if outcome else permutation_p(diffs),
        "test": "sign test, exact" if outcome else permutation_method(int(np.count_nonzero(diffs))),
        "questions": len(diffs),
        "higher_is_better": hib,
        "wins": int(np.sum(better > tolerance)),
        "ties": int(np.sum(np.abs(better) <= tolerance)),
        "losses": int(np.sum(better < -tolerance)),
        "noise_floor": floor,
        "noninferior": {"margin": margin, "p_value": ni_p, "holds": bool(ni_p < ALPHA)},
    }


def _floor(a: System, b: System, name: str) -> float | None:
    """The pair's noise floor on a metric: the larger of the two systems' seed-to-seed spreads."""
    floors = (a.noise.floor_of(name), b.noise.floor_of(name))
    return None if None in floors else max(f for f in floors if f is not None)


def verdict(m: dict) -> str:
    """better / worse when Holm's p is below ALPHA and the difference is outside the noise floor;
    noise when a difference is inside a floor above 0; else tie (a difference of 0 among them)."""
    floor = m["noise_floor"]
    if floor and 0 < abs(m["difference"]) <= floor:
        return "noise"
    if m["p_holm"] >= ALPHA:
        return "tie"
    direction = m["difference"] if m["higher_is_better"] else -m["difference"]
    return "better" if direction > 0 else "worse"


def compare_pair(
    a: System,
    b: System,
    *,
    margin: float = MARGIN,
    tolerance: float = 0.01,
    assumptions: Assumptions = Assumptions(),
) -> dict:
    shared = sorted(set(a.questions) & set(b.questions))
    metrics = {
        name: _metric(name, x, y, margin=margin, tolerance=tolerance, floor=_floor(a, b, name))
        for name, (x, y) in paired_values(a, b, shared).items()
    }
    for name, p in holm({name: m["p_value"] for name, m in metrics.items()}).items():
        metrics[name]["p_holm"] = p
        metrics[name]["verdict"] = verdict(metrics[name])
    transitions = {s: {t: 0 for t in STATES} for s in STATES}
    for q in shared:
        transitions[a.questions[q].lam.state][b.questions[q].lam.state] += 1
    return {
        "a": a.name,
        "b": b.name,
        "questions": len(shared),
        "tolerance": tolerance,
        "margin": margin,
        "metrics": metrics,
        "mde": detectable(a, b, shared, assumptions),
        "lambda_transitions": transitions,
    }


def detectable(a: System, b: System, shared: list[str], assumptions: Assumptions) -> dict:
    """The smallest change in a rate this pair's questions and runs detect with the planned power
    (`power.py`), under the planning assumptions."""

    def runs(system: System, qid: str) -> int:
        count = system.questions[qid].stats.runs or 1
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise TypeError(f"question {qid}: expected stats.runs, a count of runs, found {count!r}")
        return count

    design = Design(tuple(min(runs(a, q), runs(b, q)) for q in shared))
    found = mde(design, assumptions) if shared else None
    return {
        "rate": None if found is None else round(found, 4),
        "questions": design.questions,
        "runs_per_question": round(float(np.mean(design.runs)), 4) if shared else 0.0,
        "test": "exact two-sided sign test on per-question differences",
        "discordance": assumptions.discordance,
        "icc": assumptions.icc,
        "alpha": assumptions.alpha,
        "power": assumptions.power,
    }


def compare(
    pairs: list[tuple[System, System]],
    *,
    margin: float = MARGIN,
    tolerance: float = 0.01,
    assumptions: Assumptions = Assumptions(),
) -> dict:
    if not pairs:
        from ragaudit.errors import UsageError

        raise UsageError("compare needs at least one pair of systems, found none")
    systems = list(dict.fromkeys(s for pair in pairs for s in pair))
    return {
        "schema_version": "ragaudit.compare/2",
        "systems": [s.name for s in systems],
        "margin": margin,
        "means": {
            s.name: {name: _mean([q.metrics.get(name) for q in s.questions.values()]) for name in COMPARED}
            for s in systems
        },
        "noise": {s.name: s.noise.to_dict() for s in systems},
        "pairs": [compare_pair(a, b, margin=margin, tolerance=tolerance, assumptions=assumptions) for a, b in pairs],
    }


def _mean(values) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None
