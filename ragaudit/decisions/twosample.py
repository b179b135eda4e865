"""Tests of two independent samples: a window of production traffic against an earlier one.

`compare` pairs questions; two windows of traffic share no questions, so their samples are
independent. A rate (a share of traces) is tested with the two-proportion z-test (pooled; the
same p-value as Pearson's χ² on the 2×2 table without continuity correction) and its difference
given Newcombe's hybrid score interval (from Wilson's interval of each rate: good coverage where
the Wald interval fails, near 0 and 1). A distribution is tested with the Mann–Whitney U test
(normal approximation with the tie correction and a continuity correction, as
`scipy.stats.mannwhitneyu(method="asymptotic")`), and its difference of means given Welch's
interval. Samples come as `{value: count}`, so a window holds its distribution in memory that grows
with its distinct values, not its traces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Mapping

Z95 = NormalDist().inv_cdf(0.975)


@dataclass(frozen=True)
class TwoSample:
    """b − a with its 95% CI and the two-sided p-value of its test."""

    size: float
    low: float
    high: float
    p: float


def _two_sided(z: float) -> float:
    return min(1.0, 2.0 * NormalDist().cdf(-abs(z)))


def wilson(hits: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval of a proportion hits / n (n > 0)."""
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def two_proportions(hits_a: int, n_a: int, hits_b: int, n_b: int) -> TwoSample:
    """rate b − rate a, Newcombe's hybrid score 95% interval, and the pooled z-test's p-value."""
    if n_a <= 0 or n_b <= 0:
        raise ValueError(f"The 'n' parameters must be ints in [1, inf). Got {n_a!r} and {n_b!r} instead.")
    p_a, p_b = hits_a / n_a, hits_b / n_b
    pooled = (hits_a + hits_b) / (n_a + n_b)
    spread = math.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    p = 1.0 if spread == 0 else _two_sided((p_b - p_a) / spread)
    low_a, high_a = wilson(hits_a, n_a)
    low_b, high_b = wilson(hits_b, n_b)
    size = p_b - p_a
    low = size - math.sqrt((p_b - low_b) ** 2 + (high_a - p_a) ** 2)
    high = size + math.sqrt((high_b - p_b) ** 2 + (p_a - low_a) ** 2)
    return TwoSample(size, low, high, p)


def moments(counts: Mapping[float, int]) -> tuple[int, float, float]:
    """(n, mean, sample variance) of a sample given as {value: count}."""
    n = sum(counts.values())
    if n == 0:
        return 0, math.nan, math.nan
    mean = sum(v * c for v, c in counts.items()) / n
    var = sum(c * (v - mean) ** 2 for v, c in counts.items()) / (n - 1) if n > 1 else 0.0
    return n, mean, var


def mann_whitney_p(a: Mapping[float, int], b: Mapping[float, int]) -> float:
    """Two-sided p-value of the Mann–Whitney U test of samples a and b ({value: count}, neither
    empty): normal approximation with tie and continuity corrections."""
    n_a, n_b = sum(a.values()), sum(b.values())
    if n_a == 0 or n_b == 0:
        raise ValueError("The samples must not be empty.")
    n = n_a + n_b
    rank_sum_a, ties, below = 0.0, 0.0, 0
    for value in sorted(set(a) | set(b)):
        here = a.get(value, 0) + b.get(value, 0)
        mid_rank = below + (here + 1) / 2
        rank_sum_a += a.get(value, 0) * mid_rank
        ties += here**3 - here
        below += here
    u = rank_sum_a - n_a * (n_a + 1) / 2
    mean = n_a * n_b / 2
    variance = n_a * n_b / 12 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if variance <= 0:
        return 1.0
    return _two_sided(max(0.0, abs(u - mean) - 0.5) / math.sqrt(variance))


def two_distributions(a: Mapping[float, int], b: Mapping[float, int]) -> TwoSample:
    """mean b − mean a, Welch's 95% interval (normal quantile), and the Mann–Whitney p-value."""
    n_a, mean_a, var_a = moments(a)
    n_b, mean_b, var_b = moments(b)
    half = Z95 * math.sqrt(var_a / n_a + var_b / n_b)
    size = mean_b - mean_a
    return TwoSample(size, size - half, size + half, mann_whitney_p(a, b))
