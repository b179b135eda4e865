import json
import math
import subprocess
import sys
import tracemalloc
from fractions import Fraction
from itertools import product

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import Lazy, as_questions

import ragaudit.decisions.comparison as compare_module
from ragaudit.cli.commands import main
from ragaudit.decisions.comparison import (
    COMPARED,
    EXACT_MAX,
    RESAMPLES,
    SEED,
    System,
    bootstrap_ci,
    compare,
    compare_pair,
    holm,
    noninferiority_p,
    permutation_p,
)

stats = Lazy("scipy.stats")  # imported when a test first uses it: collecting stays fast
special = Lazy("scipy.special")


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


def tolerance(values):
    """The documented tie rule: sums within a billionth of the values' absolute sum are one value."""
    return 1e-9 * float(np.abs(values).sum())


def textbook_ci(diffs):
    """Efron's BCa, slowly: every resample of the documented draws (one call for all of them), its mean
    over the picked values, the jackknife by leaving each value out in turn."""
    n = diffs.size
    if np.ptp(diffs) == 0:
        return [float(diffs[0])] * 2
    picks = np.random.default_rng(SEED).integers(0, n, size=(RESAMPLES, n), dtype=np.uint32)
    means = np.array([diffs[row].mean() for row in picks])
    mean, tie = diffs.mean(), tolerance(diffs) / n
    share = (np.sum(means < mean - tie) + np.sum(means <= mean + tie)) / (2 * RESAMPLES)
    z0 = special.ndtri(share)
    jackknife = np.array([np.delete(diffs, i).mean() for i in range(n)])
    u = jackknife.mean() - jackknife
    a = np.sum(u**3) / (6 * np.sum(u**2) ** 1.5)
    levels = [special.ndtr(z0 + (z0 + z) / (1 - a * (z0 + z))) for z in (special.ndtri(0.025), special.ndtri(0.975))]
    return [float(np.percentile(means, 100 * level)) for level in levels]


def textbook_p(values, alternative="two-sided"):
    """The sign-flip p-value, slowly: every pattern of the values not 0 when they are few, else the
    documented draws (bit j of a resample's row of 32-bit words, lowest bit of the first word first,
    flips value j), the observed sum counted among them."""
    moving = values[values != 0]
    tie = tolerance(values)
    if alternative == "two-sided" and abs(moving.sum()) <= tie:
        return 1.0  # see test_gains_and_losses_that_cancel_have_p_1_whatever_the_rounding
    if moving.size <= EXACT_MAX:
        null = np.array([np.dot(signs, moving) for signs in product((1, -1), repeat=moving.size)])
        extra = 0
    else:
        words = np.random.default_rng(SEED).integers(
            0, 2**32, size=(RESAMPLES, (values.size + 31) // 32), dtype=np.uint32
        )
        j = np.arange(values.size)
        flips = (words[:, j // 32] >> (j % 32).astype(np.uint32)) & 1
        null = np.where(flips == 1, -values, values).sum(axis=1)
        extra = 1
    observed = values.sum()
    greater = (np.sum(null >= observed - tie) + extra) / (null.size + extra)
    if alternative == "greater":
        return float(greater)
    less = (np.sum(null <= observed + tie) + extra) / (null.size + extra)
    return float(min(1.0, 2 * min(greater, less)))


def test_ci_and_p_values_are_the_textbook_ones_from_the_documented_draws():
    reference, other = graded_systems(60)
    metrics = compare_pair(reference, other)["metrics"]
    assert {m["questions"] for m in metrics.values()} == {60, 51, 40}
    permuted = [name for name in metrics if name != "citation_match"]
    flipping = {name: np.count_nonzero(paired_differences(reference, other, name)) for name in permuted}
    assert min(flipping.values()) == 0 and any(0 < m <= EXACT_MAX for m in flipping.values())
    assert max(flipping.values()) > EXACT_MAX  # both the exact and the randomized test are exercised
    for name, m in metrics.items():
        diffs = paired_differences(reference, other, name)
        better = diffs if m["higher_is_better"] else -diffs
        # a per-run 0/1 outcome takes the exact sign test, every other metric the permutation test
        p = scipy_sign_p(diffs) if name == "citation_match" else textbook_p(diffs)
        assert m["ci95"] == pytest.approx(textbook_ci(diffs), rel=1e-9, abs=1e-12) and m["ci_method"] == "BCa", name
        assert (m["p_value"], m["noninferior"]["p_value"]) == (p, textbook_p(better + 0.02, "greater")), name
    assert metrics["citation_match"]["test"] == "sign test, exact"
    assert (metrics["delta_s_qr"]["ci95"], metrics["delta_s_qr"]["p_value"]) == ([0.0, 0.0], 1.0)


def scipy_sign_p(diffs):
    up, down = int(np.sum(diffs > 0)), int(np.sum(diffs < 0))
    return 1.0 if up + down == 0 else float(stats.binomtest(up, up + down, 0.5).pvalue)


SAMPLES = {  # paired differences of several shapes, each with its own seed
    "skewed": lambda rng: rng.choice([0.0, 1.0], 80, p=[0.9, 0.1]),
    "graded": lambda rng: rng.choice([-1 / 6, 0.0, 1 / 6, 2 / 6], 120, p=[0.2, 0.5, 0.2, 0.1]),
    "continuous": lambda rng: rng.normal(0.02, 0.2, 200),
    "heavy-tailed": lambda rng: rng.standard_t(2, 150) * 0.05,
}


@pytest.mark.parametrize("shape", sorted(SAMPLES))
def test_ci_and_p_value_agree_with_scipys_within_monte_carlo_error(shape):
    """scipy's own BCa bootstrap and randomized sign-flip test, from draws of another seed: both are
    Monte Carlo estimates of the same quantities, so they differ by their Monte Carlo error alone.
    An interval end is a 2.5% quantile of 9,999 resample means: its standard error is about
    sqrt(0.025 · 0.975 / 9,999) / φ(1.96) = 0.027 standard errors of the mean (plus the error of z0),
    so two independent ends differ by about 0.04 of them; the bound is 0.2 (five of those). A p-value
    estimated from 9,999 patterns has the binomial standard error sqrt(p(1 − p)/9,999) (twice that
    two-sided); the bound is five of the difference of two such estimates, plus the grid step."""
    diffs = SAMPLES[shape](np.random.default_rng(len(shape)))
    se = diffs.std(ddof=1) / np.sqrt(diffs.size)
    ours = compare_module.bootstrap_ci(diffs)
    theirs = stats.bootstrap((diffs,), np.mean, n_resamples=RESAMPLES, method="BCa", rng=np.random.default_rng(1))
    theirs_ci = theirs.confidence_interval
    assert abs(ours[0] - theirs_ci.low) < 0.2 * se and abs(ours[1] - theirs_ci.high) < 0.2 * se
    moving = diffs[diffs != 0]  # scipy enumerates the patterns when they are fewer than RESAMPLES
    flips = stats.permutation_test(
        (moving,), np.sum, permutation_type="samples", n_resamples=RESAMPLES, rng=np.random.default_rng(1)
    )
    p = permutation_p(diffs)
    assert abs(p - flips.pvalue) < 5 * 2 * np.sqrt(2 * p * (1 - p) / RESAMPLES) + 2 / RESAMPLES, (p, flips.pvalue)


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
    picks = np.random.default_rng(SEED).integers(0, 60, size=(RESAMPLES, 60), dtype=np.uint32)
    percentile = np.percentile(diffs[picks].mean(axis=1), [2.5, 97.5])
    assert ci == pytest.approx(textbook_ci(diffs), rel=1e-9) and ci != pytest.approx(list(percentile), abs=1e-6)
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
    # one-sided, at or above its value: one pattern of two when it is positive, both when it is negative
    assert noninferiority_p(np.array([-0.02, 0.1, -0.02]), 0.02) == 0.5
    assert noninferiority_p(np.array([-0.1, -0.02]), 0.02) == 1.0


def test_a_constant_sample_has_its_value_as_its_ci():
    assert bootstrap_ci(np.full(40, 0.25)) == (0.25, 0.25)
    assert bootstrap_ci(np.zeros(3)) == (0.0, 0.0)


def test_gains_and_losses_that_cancel_have_p_1_whatever_the_rounding():
    # citation precision of five questions won and five lost by the same steps (the demo's): the mean
    # difference is 0, but the float sum is -2.2e-16
    reference = [5 / 6, 5 / 6, 5 / 6, 1.0, 5 / 6, 4 / 6, 3 / 6, 5 / 6, 1.0, 4 / 6]
    other = [1.0, 1.0, 1.0, 4 / 6, 4 / 6, 3 / 6, 4 / 6, 4 / 6, 5 / 6, 1.0]
    diffs = np.array(other) - np.array(reference)
    assert sum(Fraction(round(6 * d), 6) for d in diffs) == 0 and diffs.sum() != 0
    assert permutation_p(diffs) == 1.0
    # randomized too: 30 such pairs of questions
    assert permutation_p(np.tile(diffs, 3)) == 1.0
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
    assert (p * (RESAMPLES + 1) / 2).is_integer() and p == textbook_p(diffs)
    assert abs(p - exact) < 2 * 4 * np.sqrt(exact * (1 - exact) / RESAMPLES) + 2 / RESAMPLES
    one_sided = noninferiority_p(diffs, 0.02)
    assert (one_sided * (RESAMPLES + 1)).is_integer() and one_sided == textbook_p(diffs + 0.02, "greater")


def test_comparison_is_deterministic_and_does_not_depend_on_the_batch(monkeypatch):
    reference, other = graded_systems(60)
    first = compare_pair(reference, other)
    assert compare_pair(reference, other) == first
    monkeypatch.setattr(compare_module, "BATCH_BYTES", 40_000)  # batches of 23 resamples
    assert compare_module.batch_size(60) < 40
    assert compare_pair(reference, other) == first


def decided(result, name):
    m = result["metrics"][name]
    return m["ci95"], m["p_value"], m["noninferior"]["p_value"]


def test_a_metrics_result_does_not_depend_on_what_is_compared_beside_it():
    reference, other = graded_systems(60)
    together = compare([(reference, other), (other, reference)])["pairs"]
    for name in ("mrr", "ndcg@k", "support", "coverage"):

        def only(system):
            kept = {q: {"qid": q, "metrics": {name: x.metrics.get(name)}, "lambda": {"state": "convergent"}}
                    for q, x in system.questions.items()}  # fmt: skip
            return System(system.name, as_questions(kept))

        alone = compare_pair(only(reference), only(other))
        assert decided(alone, name) == decided(together[0], name), name


def test_every_sample_of_one_size_shares_one_set_of_draws(monkeypatch):
    from ragaudit.decisions import resampling

    calls = {"bootstrap": [], "flips": []}
    for key, function in (("bootstrap", "bootstrap_means"), ("flips", "flipped_sums")):
        original = getattr(resampling, function)

        def counted(samples, *args, _original=original, _key=key):
            calls[_key].append(samples.shape)
            return _original(samples, *args)

        monkeypatch.setattr(resampling, function, counted)
    reference, other = graded_systems(60)
    compare([(reference, other), (other, reference)])
    # three sizes (60, 51 and 40 paired questions): one pass of each kind per size, every metric of
    # both pairs in it (each pair's CIs of the metrics whose differences are not constant)
    varying = [n for n in COMPARED if (d := paired_differences(reference, other, n)).size and np.ptp(d) > 0]
    assert sorted(n for _, n in calls["bootstrap"]) == [40, 51, 60]
    assert sum(k for k, _ in calls["bootstrap"]) == 2 * len(varying) >= 8
    assert sorted(n for _, n in calls["flips"]) == [40, 51, 60]


def test_the_same_runs_give_the_same_compare_json_bytes(tmp_path):
    def report(name, values):
        return {
            "summary": {"pipelines": {p: {"runs": len(values), "metrics": {}} for p in ("a", "b")}},
            "questions": [
                {
                    "pipeline": p,
                    "qid": f"q{i}",
                    "metrics": {"ndcg@k": v + (0.05 * (i % 3) if p == "b" else 0.0), "citation_match": 1.0},
                    "lambda": {"state": "convergent"},
                    "stats": {"runs": 1},
                }
                for p in ("a", "b")
                for i, v in enumerate(values)
            ],
        }

    (tmp_path / "run").mkdir()
    values = np.random.default_rng(0).random(300).round(3).tolist()
    (tmp_path / "run" / "report.json").write_text(json.dumps(report("p", values)))
    written = []
    for out in ("one", "two"):
        result = CliRunner().invoke(main, ["compare", str(tmp_path / "run"), "--out", str(tmp_path / out)])
        assert result.exit_code == 0, result.output
        written.append((tmp_path / out / "compare.json").read_bytes())
    assert written[0] == written[1]
    assert json.loads(written[0])["pairs"][0]["metrics"]["ndcg@k"]["test"] == "permutation, 9,999 sign flips"


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


@pytest.mark.parametrize("up,down", [(0, 1), (2, 9), (9, 2), (5, 5), (0, 40), (13, 30), (400, 470), (4100, 3900)])
def test_the_sign_test_is_the_exact_binomial_tail(up, down):
    diffs = np.array([0.5] * up + [-1.0] * down + [0.0] * 7)
    k, n = min(up, down), up + down
    exact = min(Fraction(1), 2 * Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2**n)) if up != down else 1
    assert compare_module.sign_test_p(diffs) == float(exact)
    assert compare_module.sign_test_p(diffs) == pytest.approx(stats.binomtest(up, n, 0.5).pvalue, rel=1e-12)


COMPARE_ALONE = """
import sys
import numpy as np
from ragaudit.decisions.comparison import System, compare_pair
from ragaudit.core.model import Question

def system(name, shift):
    values = np.random.default_rng(0).random(300)
    return System(name, {
        f"q{i}": Question.from_json({"pipeline": name, "qid": f"q{i}", "lambda": {"state": "convergent"},
            "metrics": {"citation_match": float(v > 0.5), "ndcg@k": float(v) + shift}, "stats": {"runs": 2}}, "$")
        for i, v in enumerate(values)
    })

compare_pair(system("a", 0.0), system("b", 0.01))
print("scipy.stats" in sys.modules)
"""


def test_a_comparison_does_not_import_scipy_stats():
    # scipy.stats takes about a second of CPU to import; the tests and the planned power need none of it
    done = subprocess.run([sys.executable, "-c", COMPARE_ALONE], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr


def test_compare_without_out_writes_nothing_so_the_run_stays_verified_and_attestable(tmp_path):
    """`compare RUN` used to rewrite the run's stamped compare.json and compare.html: verify then
    exited 5 and attest refused the run. It prints the comparison and writes nothing; --out writes
    the files elsewhere, never into a run directory."""
    from helpers import BM25, TFIDF, invoke, run_dir_of, write_config

    run_dir = run_dir_of(invoke("run", write_config(tmp_path, TFIDF + BM25, items=3, seeds="[1, 2]"), "--no-gate"))
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    result = invoke("compare", run_dir, "--pair", "bm25:tfidf", "--margin", "0.1")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("tfidf vs bm25 (3 questions)\n") and "wrote" not in result.output
    as_json = invoke("compare", run_dir, run_dir, "--format", "json")
    assert as_json.exit_code == 0 and json.loads(as_json.stdout)["systems"]
    into = invoke("compare", run_dir, "--out", run_dir)
    assert into.exit_code == 2
    assert into.stderr == (
        f"error: --out {run_dir / 'compare.json'}: expected an output that is not one of a run's own files, found "
        f"{run_dir.resolve() / 'compare.json'}: only the run {run_dir.resolve()} writes it, and its manifest stamps it\n"
    )
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before
    assert invoke("verify", run_dir).exit_code == 0
    assert invoke("attest", run_dir).exit_code == 0
    elsewhere = invoke("compare", run_dir, "--out", tmp_path / "compared")
    assert elsewhere.exit_code == 0 and (tmp_path / "compared" / "compare.json").is_file()
    assert f"wrote {tmp_path / 'compared' / 'compare.json'} and" in elsewhere.stdout


def test_compare_of_runs_on_two_gold_sets_says_what_it_pairs(tmp_path):
    from helpers import BM25, invoke, run_dir_of, write_config

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = run_dir_of(invoke("run", write_config(tmp_path / "a", BM25, items=4, seeds="[1]"), "--no-gate"))
    second = run_dir_of(invoke("run", write_config(tmp_path / "b", BM25, items=3, seeds="[1]"), "--no-gate"))
    gold = [json.loads((d / "report.json").read_text())["meta"]["inputs"]["gold"] for d in (first, second)]
    result = invoke("compare", first, second)
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stdout.splitlines() if line.startswith("note: ")]
    assert notes == [
        f"note: run {second.name} ran on another gold set than run {first.name} (sha256 {gold[1][:12]}…, not "
        f"{gold[0][:12]}…): questions are paired by qid, and only those both hold are compared",
        f"note: {second.name}/bm25 vs {first.name}/bm25: the 3 questions both scored are compared; 1 only "
        f"{first.name}/bm25 scored and 0 only {second.name}/bm25 scored are not",
    ]
    as_json = invoke("compare", first, second, "--format", "json")
    assert as_json.stderr.splitlines() == notes


def test_a_ci_that_excludes_0_beside_a_tie_says_why():
    """3 of 80 questions up, none down: the exact sign test gives p = 2/8 (Holm: 0.75 across the three metrics),
    while the bootstrap CI excludes 0 (a resample misses all three with probability (77/80)^80, under
    2.5%). The tie stands (the exact test decides) and every view says why the two differ."""
    from ragaudit.outputs.render import compare_text

    a = system("a", [0.0] * 3 + [1.0] * 77)
    b = system("b", [1.0] * 80)
    assert (77 / 80) ** 80 < 0.05
    result = compare([(a, b)])
    pair = result["pairs"][0]
    m = pair["metrics"]["citation_match"]
    assert m["ci95"][0] > 0 and m["p_value"] == 0.25 and m["p_holm"] == 0.75 and m["verdict"] == "tie"  # 3 metrics
    why = (
        f"the CI excludes 0 but the exact test does not (p = 0.2500 before Holm's adjustment across the "
        f"{len(pair['metrics'])} metrics): 3 of 80 questions better and 0 worse, too few moves for a bootstrap CI to "
        "hold its level"
    )
    assert compare_text.ci_note(pair, "citation_match") == why
    assert f"citation_match, coverage: {why}" in compare_text.render_text(result) or (
        f"coverage, citation_match: {why}" in compare_text.render_text(result)
    )
    assert any(sentence.endswith(f"; {why}.") for sentence in compare_text.sentences(pair))
    assert compare_text.ci_note(pair, "delta_s_qr") is None  # no difference at all: its CI is [0, 0]


def test_compare_html_fits_a_1280_px_window(tmp_path):
    """Every metric of every pair of three pipelines, across two runs (systems named run/pipeline):
    no part of compare.html is wider than a 1280 px window."""
    from helpers import BM25, TFIDF, chromium, invoke, run_dir_of, write_config

    dense = '[[pipelines]]\nname = "dense-hybrid-mmr-k5"\nkind = "reference"\nretriever = "hybrid"\nrerank = "mmr"\n'
    pipelines = BM25 + TFIDF + dense
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = run_dir_of(invoke("run", write_config(tmp_path / "a", pipelines, items=4, seeds="[1]"), "--no-gate"))
    second = run_dir_of(invoke("run", write_config(tmp_path / "b", pipelines, items=4, seeds="[1]"), "--no-gate"))
    done = invoke("compare", first, second, "--out", tmp_path / "out")
    assert done.exit_code == 0, done.output
    with chromium(1280, 900) as browser:
        browser.get((tmp_path / "out" / "compare.html").as_uri())
        wide = browser.execute_script(
            "const w = document.documentElement.clientWidth;"
            "return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > w + 0.5)"
            ".map(e => e.tagName + ' ' + (e.textContent || '').slice(0, 40));"
        )
        assert wide == []
        assert browser.execute_script("return document.documentElement.scrollWidth") <= 1280
        header = browser.execute_script(
            "return [...document.querySelector('table tr').children].map(c => c.textContent)"
        )
        names = ("bm25", "tfidf", "dense-hybrid-mmr-k5")
        assert header[0] == "metric"
        assert sorted(header[1:]) == sorted(f"{d.name}/{p}" for d in (first, second) for p in names)
