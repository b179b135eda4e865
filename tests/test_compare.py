import json
import tracemalloc
from fractions import Fraction
from itertools import product

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import Lazy, as_questions

import ragaudit.comparison as compare_module
from ragaudit.cli import main
from ragaudit.comparison import (
    EXACT_MAX,
    RESAMPLES,
    SEED,
    System,
    compare,
    compare_pair,
    holm,
    permutation_p,
)

stats = Lazy("scipy.stats")  # imported when a test first uses it: collecting stays fast


def system(name, values, state="convergent"):
    return System(
        name,
        as_questions(
            {
                f"q{i}": {
                    "metrics": {"citation_match": v, "coverage": v, "delta_s_qr": 0.3},
                    "lambda": {"state": state if v else "chaotic"},
                }
                for i, v in enumerate(values)
            }
        ),
    )


def test_clearly_worse_configuration_is_reported_worse():
    good = system("good", [1.0] * 30)
    bad = system("bad", [1.0] * 5 + [0.0] * 25)
    result = compare([(good, bad)])
    m = result["pairs"][0]["metrics"]["citation_match"]
    assert m["p_holm"] < 0.05 and m["verdict"] == "worse"
    assert (m["wins"], m["ties"], m["losses"]) == (0, 5, 25)
    assert m["ci95"][1] < 0 and m["difference"] == pytest.approx(-25 / 30)
    assert result["pairs"][0]["metrics"]["delta_s_qr"]["verdict"] == "tie"
    assert result["pairs"][0]["lambda_transitions"]["convergent"]["chaotic"] == 25


def test_identical_systems_tie():
    a = system("a", [1.0, 0.0] * 10)
    m = compare([(a, system("b", [1.0, 0.0] * 10))])["pairs"][0]["metrics"]["coverage"]
    assert (m["p_value"], m["verdict"], m["ties"]) == (1.0, "tie", 20)


def test_comparison_is_seeded():
    a, b = system("a", [1.0, 0.0, 1.0] * 7), system("b", [0.0, 1.0, 0.0] * 7)
    assert compare([(a, b)]) == compare([(a, b)])


def test_holm_adjustment():
    assert holm({"x": 0.01, "y": 0.04, "z": 0.03}) == pytest.approx({"x": 0.03, "z": 0.06, "y": 0.06})


def test_permutation_p_detects_a_shift():
    assert permutation_p(np.array([0.2] * 20)) < 0.001


def test_compare_command_writes_json_and_html(tmp_path):
    def report(name, values):
        return {
            "summary": {"pipelines": {name: {"runs": len(values), "metrics": {}}}},
            "questions": [
                {
                    "pipeline": name,
                    "qid": f"q{i}",
                    "metrics": {"citation_match": v},
                    "lambda": {"state": "convergent"},
                    "stats": {"runs": 1},
                }
                for i, v in enumerate(values)
            ],
        }

    for run, values in (("a", [1.0] * 20), ("b", [0.0] * 20)):
        (tmp_path / run).mkdir()
        (tmp_path / run / "report.json").write_text(json.dumps(report("p", values)))
    result = CliRunner().invoke(main, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "compare.json").read_text())
    assert data["systems"] == ["a/p", "b/p"]
    assert data["pairs"][0]["metrics"]["citation_match"]["verdict"] == "worse"
    assert "<script" not in (tmp_path / "compare.html").read_text()


def test_the_first_configured_pipeline_is_the_reference(tmp_path):
    from helpers import BM25, TFIDF, run_dir_of, write_config

    config = write_config(tmp_path, TFIDF + BM25, items=3, seeds="[1]")  # tfidf first, though bm25 sorts first
    result = CliRunner().invoke(main, ["run", str(config), "--no-gate"])
    assert result.exit_code == 0, result.output
    compared = json.loads((run_dir_of(result) / "compare.json").read_text())
    assert compared["systems"] == ["tfidf", "bm25"] and compared["pairs"][0]["a"] == "tfidf"
    # compare reads report.json again, whose objects are key-sorted: the config's order still holds
    again = CliRunner().invoke(main, ["compare", str(run_dir_of(result)), "--out", str(tmp_path / "again")])
    assert again.exit_code == 0, again.output
    reread = json.loads((tmp_path / "again" / "compare.json").read_text())
    assert (reread["pairs"][0]["a"], reread["pairs"][0]["b"]) == ("tfidf", "bm25")


def graded_systems(n):
    """Two systems over n questions with metrics of three pair counts, one of them all ties: the second
    system differs from the first on about 40% of the questions."""
    rng = np.random.default_rng(3)
    first = rng.random(n)
    second = np.clip(first + np.where(rng.random(n) < 0.4, rng.normal(-0.05, 0.1, n), 0.0), 0, 1)

    def questions(base):
        return {
            f"q{i}": {
                "qid": f"q{i}",
                "lambda": {"state": "convergent"},
                "metrics": {
                    "citation_match": float(base[i] > 0.5),
                    "mrr": float(round(base[i], 1)),
                    "ndcg@k": float(base[i]),
                    "delta_s_qr": 0.3,
                    "support": None if i % 7 == 0 else float(base[i] ** 2),
                    "coverage": None if i % 3 == 0 else float(base[i] > 0.4),
                },
            }
            for i in range(n)
        }

    return System("a", as_questions(questions(first))), System("b", as_questions(questions(second)))


def paired_differences(reference, other, name):
    """other − reference per question that both systems scored on `name`, in qid order, read from the
    question records."""
    both = sorted(
        q
        for q in reference.questions
        if reference.questions[q].metrics.get(name) is not None
        and q in other.questions
        and other.questions[q].metrics.get(name) is not None
    )
    return np.array([other.questions[q].metrics[name] - reference.questions[q].metrics[name] for q in both])


def scipy_ci(diffs):
    """scipy's BCa bootstrap CI in one unbatched call (a constant sample has its value as both ends)."""
    if np.ptp(diffs) == 0:
        return [float(diffs[0])] * 2
    ci = stats.bootstrap((diffs,), np.mean, n_resamples=RESAMPLES, method="BCa", rng=np.random.default_rng(SEED))
    return [float(ci.confidence_interval.low), float(ci.confidence_interval.high)]


def scipy_p(diffs):
    """The sign-flip p-value from scipy in one unbatched call: every sign pattern of the non-zero
    differences when they are few, else a Monte Carlo test drawing each resample's signs at once."""
    flipping = diffs[diffs != 0]
    if flipping.size < 2 or abs(flipping.sum()) <= 1e-9 * np.abs(flipping).sum():
        return 1.0  # see test_gains_and_losses_that_cancel_have_p_1_whatever_the_rounding
    if flipping.size <= EXACT_MAX:
        return float(
            stats.permutation_test((flipping,), np.mean, permutation_type="samples", n_resamples=np.inf).pvalue
        )
    rng = np.random.default_rng(SEED)

    def null(size):
        return np.stack(
            [flipping * np.where(rng.integers(0, 2, size=size[1], dtype=bool), -1.0, 1.0) for _ in range(size[0])]
        )

    return float(stats.monte_carlo_test(flipping, null, np.mean, n_resamples=RESAMPLES).pvalue)


def test_ci_and_p_value_are_scipys_on_the_paired_differences():
    reference, other = graded_systems(60)
    metrics = compare_pair(reference, other)["metrics"]
    assert {m["questions"] for m in metrics.values()} == {60, 51, 40}
    permuted = [name for name in metrics if name != "citation_match"]
    flipping = {name: np.count_nonzero(paired_differences(reference, other, name)) for name in permuted}
    assert min(flipping.values()) == 0 and any(0 < m <= EXACT_MAX for m in flipping.values())
    assert max(flipping.values()) > EXACT_MAX  # both the exact and the randomized test are exercised
    for name, m in metrics.items():
        diffs = paired_differences(reference, other, name)
        # a per-run 0/1 outcome takes the exact sign test, every other metric the permutation test
        p = scipy_sign_p(diffs) if name == "citation_match" else scipy_p(diffs)
        assert (m["ci95"], m["ci_method"], m["p_value"]) == (scipy_ci(diffs), "BCa", p), name
    assert metrics["citation_match"]["test"] == "sign test, exact"
    assert (metrics["delta_s_qr"]["ci95"], metrics["delta_s_qr"]["p_value"]) == ([0.0, 0.0], 1.0)


def scipy_sign_p(diffs):
    up, down = int(np.sum(diffs > 0)), int(np.sum(diffs < 0))
    return 1.0 if up + down == 0 else float(stats.binomtest(up, up + down, 0.5).pvalue)


def test_bca_differs_from_the_percentile_interval_on_skewed_differences():
    diffs = np.array([1.0] * 3 + [0.0] * 57)  # three wins in sixty: a skewed bootstrap distribution
    reference = System(
        "a", as_questions({f"q{i}": {"metrics": {"coverage": 0.0}, "lambda": {"state": "chaotic"}} for i in range(60)})
    )
    other = System(
        "b",
        as_questions(
            {f"q{i}": {"metrics": {"coverage": float(d)}, "lambda": {"state": "chaotic"}} for i, d in enumerate(diffs)}
        ),
    )
    ci = compare_pair(reference, other)["metrics"]["coverage"]["ci95"]
    percentile = stats.bootstrap(
        (diffs,), np.mean, n_resamples=RESAMPLES, method="percentile", rng=np.random.default_rng(SEED)
    ).confidence_interval
    assert ci == scipy_ci(diffs) and ci != [percentile.low, percentile.high]
    assert 0 < ci[0] < 0.05 < ci[1]


def test_exact_p_value_of_a_tiny_case_by_hand():
    # |d| = (0.5, 0.25, 0.25, 0.25) and a tie; observed sum 0.75. Of the 16 sign patterns, the sum is
    # >= 0.75 for 4 (+0.5 with at least two of three +0.25), so p = 2 * 4/16.
    diffs = np.array([0.5, 0.25, 0.0, 0.25, -0.25])
    sums = [sum(s * d for s, d in zip(signs, diffs)) for signs in product((1, -1), repeat=len(diffs))]
    by_hand = 2 * Fraction(sum(x >= 0.75 for x in sums), len(sums))
    assert by_hand == Fraction(1, 2)
    assert permutation_p(diffs) == 0.5
    # the tie changes nothing: scipy over all 2^5 patterns, the zero included
    assert stats.permutation_test((diffs,), np.mean, permutation_type="samples", n_resamples=np.inf).pvalue == 0.5


def test_a_single_difference_decides_nothing():
    # its two sign patterns are the two tails: p = 2 * 1/2 (scipy needs two observations)
    assert permutation_p(np.array([0.3])) == permutation_p(np.array([0.0, -0.3, 0.0])) == 1.0


def test_gains_and_losses_that_cancel_have_p_1_whatever_the_rounding():
    # citation precision of five questions won and five lost by the same steps (the demo's): the mean
    # difference is 0, but the float sum is -2.2e-16
    reference = [5 / 6, 5 / 6, 5 / 6, 1.0, 5 / 6, 4 / 6, 3 / 6, 5 / 6, 1.0, 4 / 6]
    other = [1.0, 1.0, 1.0, 4 / 6, 4 / 6, 3 / 6, 4 / 6, 4 / 6, 5 / 6, 1.0]
    diffs = np.array(other) - np.array(reference)
    assert sum(Fraction(round(6 * d), 6) for d in diffs) == 0 and diffs.sum() != 0
    assert permutation_p(diffs) == 1.0
    # scipy's tolerance for ties is relative to the observed mean, here 2e-17: exact zeros of the null
    # distribution then count on one side only
    scipy_own = stats.permutation_test((diffs,), np.mean, permutation_type="samples", n_resamples=np.inf)
    assert scipy_own.pvalue < 0.9


@pytest.mark.parametrize("n", [2, 5, 16])
def test_up_to_the_exact_limit_the_p_value_is_exact(n):
    diffs = np.round(np.random.default_rng(n).normal(0.1, 0.3, n), 2)
    full = stats.permutation_test((diffs,), np.mean, permutation_type="samples", n_resamples=np.inf)
    assert len(full.null_distribution) == 2**n and permutation_p(diffs) == pytest.approx(full.pvalue, abs=1e-12)
    assert (permutation_p(diffs) * 2**n / 2).is_integer()  # a count of sign patterns over 2^n, doubled


def test_above_the_exact_limit_the_randomized_p_value_estimates_the_exact_one():
    n = EXACT_MAX + 2
    diffs = np.round(np.random.default_rng(11).normal(0.1, 0.3, n), 2)
    exact = stats.permutation_test((diffs,), np.mean, permutation_type="samples", n_resamples=np.inf).pvalue
    p = permutation_p(diffs)
    assert (p * (RESAMPLES + 1) / 2).is_integer() and p == scipy_p(diffs)
    assert abs(p - exact) < 2 * 4 * np.sqrt(exact * (1 - exact) / RESAMPLES) + 2 / RESAMPLES


def test_comparison_is_deterministic_and_does_not_depend_on_the_batch(monkeypatch):
    reference, other = graded_systems(60)
    first = compare_pair(reference, other)
    assert compare_pair(reference, other) == first
    monkeypatch.setattr(compare_module, "BATCH_BYTES", 40_000)  # batches of 39 resamples
    assert compare_module.batch_size(60) < 40
    assert compare_pair(reference, other) == first


def test_compare_memory_does_not_grow_with_resamples_times_questions():
    n = 5_000  # one (RESAMPLES, n) float64 array is 400 MB
    reference, other = graded_systems(n)
    tracemalloc.start()
    try:
        result = compare_pair(reference, other)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result["metrics"]["citation_match"]["questions"] == n
    assert peak < compare_module.BATCH_BYTES + 8 * 2**20 < RESAMPLES * n * 8 / 30


def test_metric_values_that_are_not_numbers_are_a_damaged_report(tmp_path):
    for run, value in (("a", 1.0), ("b", [1.0, 0.0])):
        (tmp_path / run).mkdir()
        (tmp_path / run / "report.json").write_text(
            json.dumps(
                {
                    "summary": {"pipelines": {"p": {"runs": 3, "metrics": {}}}},
                    "questions": [
                        {
                            "pipeline": "p",
                            "qid": f"q{i}",
                            "metrics": {"citation_match": value},
                            "lambda": {"state": "convergent"},
                            "stats": {"runs": 1},
                        }
                        for i in range(3)
                    ],
                }
            )
        )
    result = CliRunner().invoke(main, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path)])
    assert result.exit_code == 3
    assert "$.questions[0].metrics.citation_match: expected a number or null, found an array" in result.output


def test_randomized_sign_flips_are_numpys_boolean_draws_one_resample_at_a_time():
    comparison = compare_module
    values = np.random.default_rng(7).normal(0.01, 0.2, size=comparison.EXACT_MAX + 83)
    rng = np.random.default_rng(comparison.SEED)

    def one_at_a_time(size):
        flips = np.empty(size, dtype=bool)
        for row in flips:
            row[:] = rng.integers(0, 2, size=size[1], dtype=bool)
        return np.where(flips, -values, values)

    for alternative in ("two-sided", "greater"):
        rng = np.random.default_rng(comparison.SEED)
        expected = stats.monte_carlo_test(
            values,
            one_at_a_time,
            np.mean,
            n_resamples=comparison.RESAMPLES,
            batch=comparison.batch_size(values.size),
            vectorized=True,
            alternative=alternative,
        ).pvalue
        assert comparison._sign_flip_p(values, alternative) == expected
