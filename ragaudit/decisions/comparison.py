"""Decisions between retriever configurations (systems) over the same questions, pair by pair.

A system is one pipeline of one run; a pair (a, b) asks whether b is better than a, worse, or no
worse by more than a margin. Per metric of the registry that `compare` tests, over the questions
both systems scored: the means, the paired difference b − a with a seeded 95% CI, a two-sided
p-value, Holm-adjusted across the metrics of the pair, a one-sided non-inferiority test against
the margin, win/tie/loss by question within a tolerance, the noise floor of the pair (`noise.py`)
and the λ state transitions; per pair, the smallest change in a rate it could detect (`power.py`).

The tests, each on its own metric's differences:
* A per-run 0/1 outcome (`Metric.outcome`: correct, citation match) averaged per question: the
  exact two-sided sign test on the per-question differences, which is the exact McNemar test when
  each question has one run.
* Any other metric: a paired permutation test that flips the signs of the differences (statistic:
  their sum). A difference of 0 flips to itself. With m <= EXACT_MAX differences not 0, all 2^m sign
  patterns of those: the p-value is exact (count / 2^m). Up to MONTE_CARLO_MAX, RESAMPLES random
  sign patterns over all the differences, seeded with SEED (`resampling.py` says how they are
  drawn): p = (count + 1) / (RESAMPLES + 1), on the 1/10,000 grid. Above, the normal approximation
  of the sign-flip distribution: it is symmetric with variance Σd², so the approximation's error
  falls as 1/m and is below the Monte Carlo's own. A null sum within a billionth of Σ|d| of the
  observed one is a tie (rounding alone moves sums less), and counts as at least as extreme.
* Non-inferiority (TOST's one side): H0 "b is worse than a by the margin or more". The differences
  in the better direction, shifted by the margin, are sign-flipped as above and tested one-sided.
* The CI: Efron's BCa interval from RESAMPLES bootstrap resamples seeded with SEED up to BCA_MAX
  paired questions (`resampling.bca_interval`); above, the Student t interval of the mean (the
  studentized mean), which the bootstrap distribution of a mean of that many questions matches to
  within its own Monte Carlo error. Each metric says which it used.

The resamples depend on the number of values alone: every sample of one size in a comparison (all
metrics, all pairs) is reduced against one set of draws, made once, in batches of BATCH_BYTES
(memory O(questions)). A metric's result does not depend on what is compared beside it: the same
differences give the same CI and p-values, to the last bit, alone or among others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from ragaudit.checks.metrics.lam import STATES
from ragaudit.checks.metrics.registry import METRICS
from ragaudit.core.model import Question
from ragaudit.decisions import resampling
from ragaudit.decisions.noise import NoiseFloor
from ragaudit.decisions.power import Assumptions, Binomial, Design, mde

COMPARED = tuple(m.name for m in METRICS.values() if m.compared and m.level != "question")
SEED = 20261122
RESAMPLES = 9_999  # bootstrap resamples, and random sign patterns of a randomized test (p in steps of 1/10,000)
EXACT_MAX = 16  # up to 2^16 = 65,536 sign patterns, enumerated in milliseconds
MONTE_CARLO_MAX = 10_000  # non-zero differences up to which a randomized test draws sign patterns
BCA_MAX = 10_000  # paired questions up to which the CI is BCa (its resamples: RESAMPLES × questions draws)
EXACT_SIGNS = 20_000  # moves up to which the sign test's binomial tail is summed in integers (tens of ms)
MARGIN = 0.02
ALPHA = 0.05
# Working set of one batch of resamples (their draws and counts). Memory only needs it to be
# O(questions); a few MiB also stays in cache.
BATCH_BYTES = 4 << 20


@dataclass(frozen=True, eq=False)  # one system is one object: pairs are told apart by identity
class System:
    name: str
    questions: dict[str, Question]  # qid -> question of the report
    noise: NoiseFloor = field(default_factory=NoiseFloor.unknown)


def batch_size(pairs: int) -> int:
    """Resamples per batch of `pairs` paired values."""
    return resampling.rows_per_batch(pairs, BATCH_BYTES)


def ci_method(questions: int) -> str:
    return "BCa" if questions <= BCA_MAX else "t"


def t_interval(diffs: np.ndarray) -> tuple[float, float]:
    """The Student t 95% interval of the mean."""
    from scipy import special

    half = special.stdtrit(diffs.size - 1, 0.975) * diffs.std(ddof=1) / np.sqrt(diffs.size)
    return float(diffs.mean() - half), float(diffs.mean() + half)


def bootstrap_cis(samples: list[np.ndarray]) -> list[tuple[float, float]]:
    """The 95% CI of the mean of each sample: BCa from RESAMPLES resamples seeded with SEED up to
    BCA_MAX values (one set of draws for all the samples of a size), the Student t interval above. A
    constant sample's CI is its value: every resample has that mean (and BCa is undefined)."""
    cis: dict[int, tuple[float, float]] = {}
    bca: dict[int, list[int]] = {}
    for i, diffs in enumerate(samples):
        if np.ptp(diffs) == 0:
            cis[i] = float(diffs[0]), float(diffs[0])
        elif ci_method(diffs.size) == "t":
            cis[i] = t_interval(diffs)
        else:
            bca.setdefault(diffs.size, []).append(i)
    for members in bca.values():
        means = resampling.bootstrap_means(np.stack([samples[i] for i in members]), RESAMPLES, SEED, BATCH_BYTES)
        for i, row in zip(members, means, strict=True):
            cis[i] = resampling.bca_interval(samples[i], row)
    return [cis[i] for i in range(len(samples))]


def bootstrap_ci(diffs: np.ndarray) -> tuple[float, float]:
    """The 95% CI of the mean of `diffs` (`bootstrap_cis`)."""
    return bootstrap_cis([diffs])[0]


@dataclass(frozen=True, eq=False)
class FlipTest:
    """A sign-flip test of the sum of `sign · base + shift`: the differences (sign 1, shift 0), or the
    differences in the better direction plus the margin. Tests of one base share its flipped sums:
    Σ s_j (sign · d_j + shift) = sign · Σ s_j d_j + shift · Σ s_j."""

    base: np.ndarray
    alternative: str  # "two-sided" or "greater"
    sign: float = 1.0
    shift: float = 0.0

    def values(self) -> np.ndarray:
        return self.base if (self.sign, self.shift) == (1.0, 0.0) else self.sign * self.base + self.shift


def sign_flip_ps(tests: list[FlipTest]) -> list[float]:
    """The sign-flip p-value of each test: exact, randomized or normal by the number of its values not
    0 (module docstring); the randomized ones of one size from one set of draws. Two-sided, a sum of 0
    (within the tolerance of ties) is the middle of the null distribution: p = 1."""
    ps: dict[int, float] = {}
    drawn: dict[int, list[int]] = {}
    for i, test in enumerate(tests):
        values = test.values()
        moving = values[values != 0]
        tol = resampling.tolerance(values)
        if test.alternative == "two-sided" and abs(float(moving.sum())) <= tol:
            ps[i] = 1.0
        elif moving.size <= EXACT_MAX:
            null = resampling.every_flip(moving)
            ps[i] = resampling.flip_p(float(moving.sum()), null, test.alternative, tol, drawn=False)
        elif moving.size > MONTE_CARLO_MAX:
            ps[i] = resampling.normal_p(moving, test.alternative)
        else:
            drawn.setdefault(values.size, []).append(i)
    for members in drawn.values():
        rows = {id(tests[i].base): tests[i].base for i in members}  # row 0: the flipped sums of 1s
        order = {key: row for row, key in enumerate(rows, start=1)}
        stacked = np.stack([np.ones_like(tests[members[0]].base), *rows.values()])
        sums = resampling.flipped_sums(stacked, RESAMPLES, SEED, BATCH_BYTES)
        for i in members:
            test, values = tests[i], tests[i].values()
            null = sums[order[id(test.base)]]
            if (test.sign, test.shift) != (1.0, 0.0):
                null = test.sign * null + test.shift * sums[0]
            ps[i] = resampling.flip_p(
                float(values.sum()), null, test.alternative, resampling.tolerance(values), drawn=True
            )
    return [ps[i] for i in range(len(tests))]


def permutation_method(moving: int) -> str:
    if moving <= EXACT_MAX:
        return "permutation, exact"
    return "permutation, normal approximation" if moving > MONTE_CARLO_MAX else f"permutation, {RESAMPLES:,} sign flips"


def permutation_p(diffs: np.ndarray) -> float:
    """Two-sided paired permutation p-value of the mean difference (1 when it is 0 or at most one
    difference is not 0: its two signs are the two tails)."""
    return sign_flip_ps([FlipTest(diffs, "two-sided")])[0]


def sign_test_p(diffs: np.ndarray) -> float:
    """Exact two-sided sign test of the per-question differences: of the questions that moved, did as
    many move up as down? Twice the binomial tail of the rarer sign at 1/2, at most 1 (1 when none moved):
    counted in integers, exact to the last bit, up to EXACT_SIGNS moves."""
    up, down = int(np.sum(diffs > 0)), int(np.sum(diffs < 0))
    n, k = up + down, min(up, down)
    if up == down:
        return 1.0
    if n > EXACT_SIGNS:
        return min(1.0, 2 * float(Binomial.cdf(np.array(k), n, 0.5)))
    term = total = 1
    for i in range(k):
        term = term * (n - i) // (i + 1)
        total += term
    return min(1.0, float(2 * total / 2**n))


def noninferiority_p(better: np.ndarray, margin: float) -> float:
    """One-sided p-value of H0 "the mean of `better` (the differences in the better direction) is at
    most −margin", from the sign flips of better + margin."""
    return sign_flip_ps([FlipTest(better, "greater", shift=margin)])[0]


def holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm–Bonferroni adjusted p-values (monotone, capped at 1)."""
    order = sorted(p_values, key=lambda k: p_values[k])
    adjusted, running = {}, 0.0
    for i, name in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * p_values[name]))
        adjusted[name] = running
    return adjusted


def _values(name: str, values: list[Any]) -> np.ndarray:
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


@dataclass(frozen=True)
class Tested:
    """What the resamples give one metric of one pair: its CI, two-sided and non-inferiority p."""

    ci: tuple[float, float]
    p_value: float
    noninferior_p: float


def tested(samples: list[tuple[str, np.ndarray]], margin: float) -> list[Tested]:
    """The tests of each (metric, differences b − a): every CI from one bootstrap pass and every
    sign-flip test, two-sided and non-inferiority, from one pass of sign patterns, per number of values."""
    permuted = [i for i, (name, _) in enumerate(samples) if not METRICS[name].outcome]
    noninferior = [
        FlipTest(d, "greater", 1.0 if METRICS[name].higher_is_better else -1.0, margin) for name, d in samples
    ]
    ps = sign_flip_ps(noninferior + [FlipTest(samples[i][1], "two-sided") for i in permuted])
    two_sided = dict(zip(permuted, ps[len(samples) :], strict=True))
    cis = bootstrap_cis([d for _, d in samples])
    return [
        Tested(cis[i], two_sided[i] if i in two_sided else sign_test_p(d), ps[i]) for i, (_, d) in enumerate(samples)
    ]


def _metric(
    name: str, a: np.ndarray, b: np.ndarray, found: Tested, *, margin: float, tolerance: float, floor: float | None
) -> dict[str, Any]:
    diffs = b - a
    hib = METRICS[name].higher_is_better
    better = diffs if hib else -diffs
    outcome = METRICS[name].outcome
    return {
        "mean_a": float(a.mean()),
        "mean_b": float(b.mean()),
        "difference": float(diffs.mean()),
        "ci95": list(found.ci),
        "ci_method": ci_method(diffs.size),
        "p_value": found.p_value,
        "test": "sign test, exact" if outcome else permutation_method(int(np.count_nonzero(diffs))),
        "questions": len(diffs),
        "higher_is_better": hib,
        "wins": int(np.sum(better > tolerance)),
        "ties": int(np.sum(np.abs(better) <= tolerance)),
        "losses": int(np.sum(better < -tolerance)),
        "noise_floor": floor,
        "noninferior": {"margin": margin, "p_value": found.noninferior_p, "holds": bool(found.noninferior_p < ALPHA)},
    }


def _floor(a: System, b: System, name: str) -> float | None:
    """The pair's noise floor on a metric: the larger of the two systems' seed-to-seed spreads."""
    floors = (a.noise.floor_of(name), b.noise.floor_of(name))
    return None if None in floors else max(f for f in floors if f is not None)


def verdict(m: dict[str, Any]) -> str:
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
) -> dict[str, Any]:
    return compare_pairs([(a, b)], margin=margin, tolerance=tolerance, assumptions=assumptions)[0]


def compare_pairs(
    pairs: list[tuple[System, System]],
    *,
    margin: float = MARGIN,
    tolerance: float = 0.01,
    assumptions: Assumptions = Assumptions(),
) -> list[dict[str, Any]]:
    """Each pair's comparison, the resamples of all of them drawn together (module docstring)."""
    found = []
    for a, b in pairs:
        shared = sorted(set(a.questions) & set(b.questions))
        found.append((a, b, shared, paired_values(a, b, shared)))
    results = iter(tested([(name, y - x) for *_, paired in found for name, (x, y) in paired.items()], margin))
    out = []
    for a, b, shared, paired in found:
        metrics = {
            name: _metric(name, x, y, next(results), margin=margin, tolerance=tolerance, floor=_floor(a, b, name))
            for name, (x, y) in paired.items()
        }
        out.append(_pair(a, b, shared, metrics, margin, tolerance, assumptions))
    return out


def _pair(
    a: System,
    b: System,
    shared: list[str],
    metrics: dict[str, Any],
    margin: float,
    tolerance: float,
    assumptions: Assumptions,
) -> dict[str, Any]:
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


def detectable(a: System, b: System, shared: list[str], assumptions: Assumptions) -> dict[str, Any]:
    """The smallest change in a rate this pair's questions and runs detect with the planned power
    (`power.py`), under the planning assumptions."""

    def runs(system: System, qid: str) -> int:
        count = system.questions[qid].stats.runs or 1
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise TypeError(f"question {qid}: expected stats.runs, a count of runs, found {count!r}")
        return count

    design = Design.of(min(runs(a, q), runs(b, q)) for q in shared)
    found = mde(design, assumptions) if shared else None
    return {
        "rate": None if found is None else round(found, 4),
        "questions": design.questions,
        "runs_per_question": round(design.mean_runs, 4),
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
) -> dict[str, Any]:
    if not pairs:
        from ragaudit.core.errors import UsageError

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
        "pairs": compare_pairs(pairs, margin=margin, tolerance=tolerance, assumptions=assumptions),
    }


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None
