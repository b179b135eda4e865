"""Two independent samples (`ragaudit.decisions.twosample`), checked against scipy.stats and the textbook
formulas computed here from the raw samples."""

import math
import random
from collections import Counter

import pytest
from scipy import stats

from ragaudit.decisions.twosample import mann_whitney_p, two_distributions, two_proportions, wilson


@pytest.mark.parametrize(
    ("a", "n_a", "b", "n_b"), [(45, 150, 30, 150), (0, 40, 5, 60), (12, 20, 12, 20), (99, 100, 80, 90)]
)
def test_two_proportions_p_is_pearson_chi2_without_correction(a, n_a, b, n_b):
    table = [[a, n_a - a], [b, n_b - b]]
    expected = stats.chi2_contingency(table, correction=False).pvalue
    assert two_proportions(a, n_a, b, n_b).p == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("hits", "n"), [(0, 10), (3, 10), (10, 10), (57, 150)])
def test_wilson_matches_scipy(hits, n):
    ci = stats.binomtest(hits, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson(hits, n) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_newcombe_interval_from_the_two_wilson_intervals():
    # Newcombe (1998), method 10, on the two Wilson intervals scipy computes
    a, n_a, b, n_b = 56, 70, 48, 80
    wa = stats.binomtest(a, n_a).proportion_ci(method="wilson")
    wb = stats.binomtest(b, n_b).proportion_ci(method="wilson")
    pa, pb = a / n_a, b / n_b
    low = (pb - pa) - math.sqrt((pb - wb.low) ** 2 + (wa.high - pa) ** 2)
    high = (pb - pa) + math.sqrt((wb.high - pb) ** 2 + (pa - wa.low) ** 2)
    got = two_proportions(a, n_a, b, n_b)
    assert (got.size, got.low, got.high) == pytest.approx((pb - pa, low, high), abs=1e-12)
    assert got.low < got.size < got.high


def samples(seed: int, ties: bool):
    rng = random.Random(seed)
    draw = (lambda: round(rng.random(), 1)) if ties else rng.random
    return [draw() for _ in range(60)], [draw() + 0.1 for _ in range(45)]


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_mann_whitney_matches_scipy_asymptotic(seed, ties):
    a, b = samples(seed, ties)
    expected = stats.mannwhitneyu(a, b, use_continuity=True, alternative="two-sided", method="asymptotic").pvalue
    assert mann_whitney_p(Counter(a), Counter(b)) == pytest.approx(expected, rel=1e-9)


def test_welch_interval_of_the_difference_of_means():
    a, b = samples(7, False)
    got = two_distributions(Counter(a), Counter(b))
    se = math.sqrt(stats.tvar(a) / len(a) + stats.tvar(b) / len(b))
    diff = sum(b) / len(b) - sum(a) / len(a)
    z = stats.norm.ppf(0.975)
    assert (got.size, got.low, got.high) == pytest.approx((diff, diff - z * se, diff + z * se), abs=1e-12)


def test_identical_samples_are_not_different():
    assert mann_whitney_p({1.0: 30}, {1.0: 40}) == 1.0
    assert two_proportions(0, 30, 0, 40).p == 1.0


def test_empty_samples_are_rejected():
    with pytest.raises(ValueError, match="'n' parameters"):
        two_proportions(0, 0, 1, 2)
    with pytest.raises(ValueError, match="must not be empty"):
        mann_whitney_p({}, {1.0: 2})
