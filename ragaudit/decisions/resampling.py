"""The seeded resamples behind `compare`'s CIs and sign-flip tests, drawn once for many samples.

Every sample of one size n shares the same draws, which depend on n, the count and the seed alone,
never on the values or on which other samples are resampled beside them:
* bootstrap: resample r picks n of the n values uniformly with replacement, the indices
  `rng.integers(0, n, size=(count, n), dtype=np.uint32)` of `rng = np.random.default_rng(seed)`,
  resample after resample (row r). Its mean is (counts of each index) · values / n, so the means of
  every sample of that size are products of one count matrix with each sample;
* sign flips: resample r takes ceil(n / 32) words `rng.integers(0, 2**32, size=(count, words),
  dtype=np.uint32)` of a fresh `np.random.default_rng(seed)`; bit j of the row (lowest bit of the
  first word first) set flips the sign of value j. A value of 0 flips to itself, so the null
  distribution is that of flipping only the values that are not 0.
The draws are made and reduced in batches of rows whose working set is about `batch_bytes` (memory
O(n)); numpy draws 32-bit integers one after the other, so the batches hold the draws of one call.
Each sample is reduced against a batch on its own (one matrix-vector product), so its result, to
the last bit, does not depend on the other samples.

The intervals and p-values from these draws are in `ragaudit.decisions.comparison`; BCa is Efron's
(`bca_interval`), with the jackknife of a mean in closed form.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Callable

import numpy as np

# bytes of working set per value of a batch row: a drawn index (4), it as an offset (8), its count (8)
# and the count as a float (8)
CELL_BYTES = 28
NORMAL = NormalDist()


def rows_per_batch(n: int, batch_bytes: int) -> int:
    return max(1, batch_bytes // (CELL_BYTES * max(n, 1)))


Draw = Callable[[np.random.Generator, int, int], np.ndarray]  # (generator, rows, n) -> rows × n weights


def _reduced(samples: np.ndarray, count: int, seed: int, batch_bytes: int, draw: Draw) -> np.ndarray:
    """k × count: each row of `samples` (k × n) times each of the `count` rows that `draw(rng, rows,
    n)` makes, a batch of rows at a time from one generator seeded with `seed`."""
    k, n = samples.shape
    rng = np.random.default_rng(seed)
    out = np.empty((k, count))
    step = rows_per_batch(n, batch_bytes)
    for start in range(0, count, step):
        rows = min(step, count - start)
        weights = draw(rng, rows, n)
        for j in range(k):
            out[j, start : start + rows] = weights @ samples[j]
    return out


def _counts(rng: np.random.Generator, rows: int, n: int) -> np.ndarray:
    """How often each of n values is picked by each of `rows` resamples of n picks."""
    picks = rng.integers(0, n, size=(rows, n), dtype=np.uint32).astype(np.intp)
    picks += np.arange(0, rows * n, n, dtype=np.intp)[:, None]
    return np.bincount(picks.ravel(), minlength=rows * n).reshape(rows, n).astype(np.float64)


def _signs(rng: np.random.Generator, rows: int, n: int) -> np.ndarray:
    """±1 for each of n values in each of `rows` sign patterns."""
    words = rng.integers(0, 1 << 32, size=(rows, (n + 31) // 32), dtype=np.uint32)
    bits = np.unpackbits(words.astype("<u4", copy=False).view(np.uint8), axis=1, count=n, bitorder="little")
    return 1.0 - 2.0 * bits


def bootstrap_means(samples: np.ndarray, count: int, seed: int, batch_bytes: int) -> np.ndarray:
    """The means of `count` bootstrap resamples of each row of `samples` (k × n): k × count."""
    means: np.ndarray = _reduced(samples, count, seed, batch_bytes, _counts) / samples.shape[1]
    return means


def flipped_sums(samples: np.ndarray, count: int, seed: int, batch_bytes: int) -> np.ndarray:
    """The sums of `count` sign-flipped copies of each row of `samples` (k × n): k × count."""
    return _reduced(samples, count, seed, batch_bytes, _signs)


def every_flip(values: np.ndarray) -> np.ndarray:
    """The sums of all 2^m sign patterns of m values (the exact null distribution; m small)."""
    sums = np.zeros(1)
    for v in values:
        sums = np.concatenate((sums + v, sums - v))
    return sums


def tolerance(values: np.ndarray) -> float:
    """How far apart two sums of ± these values may lie from rounding alone and still be one value: a
    billionth of their absolute sum, far above rounding (n · 2⁻⁵² of it) and far below any step of
    values on a grid."""
    return 1e-9 * float(np.abs(values).sum())


def flip_p(observed: float, null: np.ndarray, alternative: str, tol: float, *, drawn: bool) -> float:
    """The p-value of a sum `observed` against the sums `null` of its sign patterns, counting a tie
    within `tol` as at least as extreme. Drawn patterns count the observed one among them ((c + 1) /
    (count + 1): a p-value on the 1/(count + 1) grid, never 0); all 2^m patterns give c / 2^m. Two-sided:
    twice the smaller tail, at most 1."""
    extra = 1 if drawn else 0
    greater = (np.count_nonzero(null >= observed - tol) + extra) / (null.size + extra)
    if alternative == "greater":
        return float(greater)
    less = (np.count_nonzero(null <= observed + tol) + extra) / (null.size + extra)
    return float(min(1.0, 2 * min(greater, less)))


def bca_interval(values: np.ndarray, means: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """Efron's BCa interval of the mean of `values` (not constant) from the bootstrap `means`.

    z0 = Φ⁻¹(share of resample means below the mean, one at it counting half), the share kept within
    half a resample of 0 and 1 so that z0 is finite; the acceleration a from the jackknife of the
    mean, whose leave-one-out means (Σx − x_i)/(n − 1) differ from their mean by (x̄ − x_i)/(n − 1):
    a = Σ(x_i − x̄)³ / (6 (Σ(x_i − x̄)²)^{3/2}). The ends are the linearly interpolated percentiles
    (numpy's default) of the resample means at Φ(z0 + (z0 + z)/(1 − a(z0 + z))) for z = Φ⁻¹(α/2) and
    Φ⁻¹(1 − α/2)."""
    mean = float(values.mean())
    tol = tolerance(values) / values.size
    below = np.count_nonzero(means < mean - tol) + np.count_nonzero(means <= mean + tol)
    share = min(max(below / (2 * means.size), 0.5 / means.size), 1 - 0.5 / means.size)
    z0 = NORMAL.inv_cdf(share)
    deviations = values - mean
    spread = float(np.square(deviations).sum())
    accel = float(np.power(deviations, 3).sum()) / (6 * spread**1.5)
    levels = []
    for z in (NORMAL.inv_cdf(alpha / 2), NORMAL.inv_cdf(1 - alpha / 2)):
        levels.append(100 * NORMAL.cdf(z0 + (z0 + z) / (1 - accel * (z0 + z))))
    low, high = np.percentile(means, levels)
    return float(low), float(high)


def normal_p(values: np.ndarray, alternative: str) -> float:
    """The normal approximation of the sign-flip test: the null sum is symmetric with variance Σv²."""
    z = float(values.sum()) / math.sqrt(float(np.square(values).sum()))
    upper = 0.5 * math.erfc(z / math.sqrt(2))
    return upper if alternative == "greater" else min(1.0, math.erfc(abs(z) / math.sqrt(2)))
