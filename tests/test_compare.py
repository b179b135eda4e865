import json
import tracemalloc

import numpy as np
import pytest
from click.testing import CliRunner

import ragaudit.compare as compare_module
from ragaudit.cli import main
from ragaudit.compare import (
    RESAMPLES,
    SEED,
    System,
    bootstrap_ci,
    bootstrap_means,
    compare,
    compare_pair,
    holm,
    permutation_p,
    sign_flip_p,
)


def system(name, values, state="convergent"):
    return System(
        name,
        {
            f"q{i}": {
                "qid": f"q{i}",
                "metrics": {"citation_match": v, "coverage": v, "delta_s_qr": 0.3},
                "lambda": {"state": state if v else "chaotic"},
            }
            for i, v in enumerate(values)
        },
    )


def test_clearly_worse_configuration_is_reported_worse():
    good = system("good", [1.0] * 30)
    bad = system("bad", [1.0] * 5 + [0.0] * 25)
    result = compare([good, bad])
    m = result["comparisons"][0]["metrics"]["citation_match"]
    assert m["p_holm"] < 0.05 and m["verdict"] == "worse"
    assert (m["wins"], m["ties"], m["losses"]) == (0, 5, 25)
    assert m["ci95"][1] < 0 and m["difference"] == pytest.approx(-25 / 30)
    assert result["comparisons"][0]["metrics"]["delta_s_qr"]["verdict"] == "tie"
    assert result["comparisons"][0]["lambda_transitions"]["convergent"]["chaotic"] == 25


def test_identical_systems_tie():
    a = system("a", [1.0, 0.0] * 10)
    m = compare([a, system("b", [1.0, 0.0] * 10)])["comparisons"][0]["metrics"]["coverage"]
    assert (m["p_value"], m["verdict"], m["ties"]) == (1.0, "tie", 20)


def test_comparison_is_seeded():
    a, b = system("a", [1.0, 0.0, 1.0] * 7), system("b", [0.0, 1.0, 0.0] * 7)
    assert compare([a, b]) == compare([a, b])


def test_holm_adjustment():
    assert holm({"x": 0.01, "y": 0.04, "z": 0.03}) == pytest.approx({"x": 0.03, "z": 0.06, "y": 0.06})


def test_permutation_p_detects_a_shift():
    import numpy as np

    rng = np.random.default_rng(0)
    assert permutation_p(np.array([0.2] * 20), rng) < 0.001


def test_compare_command_writes_json_and_html(tmp_path):
    def report(name, values):
        return {
            "summary": {"pipelines": {name: {}}},
            "questions": [
                {"pipeline": name, "qid": f"q{i}", "metrics": {"citation_match": v}, "lambda": {"state": "convergent"}}
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
    assert data["comparisons"][0]["metrics"]["citation_match"]["verdict"] == "worse"
    assert "<script" not in (tmp_path / "compare.html").read_text()


def test_the_first_configured_pipeline_is_the_reference(tmp_path):
    from helpers import BM25, TFIDF, run_dir_of, write_config

    config = write_config(tmp_path, TFIDF + BM25, items=3, seeds="[1]")  # tfidf first, though bm25 sorts first
    result = CliRunner().invoke(main, ["run", str(config), "--no-gate"])
    assert result.exit_code == 0, result.output
    compared = json.loads((run_dir_of(result) / "compare.json").read_text())
    assert compared["systems"] == ["tfidf", "bm25"] and compared["comparisons"][0]["reference"] == "tfidf"


def one_shot(diffs, seed):
    """The whole (RESAMPLES, n) computation in one piece: bootstrap means, CI, sign-flip p, and the generator after."""
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, len(diffs), size=(RESAMPLES, len(diffs)))].mean(axis=1)
    ci = (float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975)))
    if not np.any(diffs != 0):
        return means, ci, 1.0, rng
    signs = rng.choice((-1.0, 1.0), size=(RESAMPLES, len(diffs)))
    flipped = np.abs((signs * diffs).mean(axis=1))
    return means, ci, float((np.sum(flipped >= abs(diffs.mean()) - 1e-12) + 1) / (RESAMPLES + 1)), rng


def differences(n, seed):
    rng = np.random.default_rng(seed + 1000)
    return np.round(rng.normal(0.05, 0.3, n), 2)  # rounded, so that ties with the observed mean occur


@pytest.mark.parametrize("seed", [0, 7, SEED])
@pytest.mark.parametrize("n", [1, 2, 37])
@pytest.mark.parametrize("chunk_rows", [1, 3, 997, RESAMPLES, RESAMPLES + 5])
def test_blockwise_resampling_equals_the_one_shot_computation(seed, n, chunk_rows):
    diffs = differences(n, seed)
    means, ci, p, after = one_shot(diffs, seed)
    rng = np.random.default_rng(seed)
    assert np.array_equal(bootstrap_means(diffs[None, :], rng, chunk_rows=chunk_rows)[0], means)
    if np.any(diffs != 0):
        assert permutation_p(diffs, rng, chunk_rows=chunk_rows) == p
    assert rng.integers(0, 2**63) == after.integers(0, 2**63)  # the same draws consumed, no more, no fewer
    assert bootstrap_ci(diffs, np.random.default_rng(seed), chunk_rows=chunk_rows) == ci


@pytest.mark.parametrize("chunk_rows", [2, 1250, None])
def test_series_resampled_together_get_the_draws_each_would_get_alone(chunk_rows):
    block = np.stack([differences(50, s) for s in range(3)])
    rng = np.random.default_rng(SEED)
    means = bootstrap_means(block, rng, chunk_rows=chunk_rows)
    p = sign_flip_p(block, rng, chunk_rows=chunk_rows)
    for i, diffs in enumerate(block):
        alone_means, _, alone_p, _ = one_shot(diffs, SEED)
        assert np.array_equal(means[i], alone_means) and p[i] == alone_p


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8"])
def test_block_size_is_validated(bad):
    with pytest.raises(ValueError, match=r"The 'chunk_rows' parameter must be an int in \[1, inf\)"):
        bootstrap_means(np.zeros((1, 3)), np.random.default_rng(0), chunk_rows=bad)


def graded_systems(n):
    """Two systems over n questions with metrics of three pair counts, one of them all ties."""
    rng = np.random.default_rng(3)

    def questions(shift):
        base = np.clip(rng.random(n) + shift, 0, 1)
        return {
            f"q{i}": {
                "qid": f"q{i}",
                "lambda": {"state": "convergent"},
                "metrics": {
                    "citation_match": float(base[i] > 0.5),
                    "mrr": float(round(base[i], 1)),
                    "ndcg@10": float(base[i]),
                    "delta_s_qr": 0.3,
                    "support": None if i % 7 == 0 else float(base[i] ** 2),
                    "coverage": None if i % 3 == 0 else float(base[i] > 0.4),
                },
            }
            for i in range(n)
        }

    return System("a", questions(0.0)), System("b", questions(-0.05))


@pytest.mark.parametrize("chunk_bytes", [1, 4000, 1 << 20])
def test_compare_equals_one_shot_resampling_metric_by_metric(monkeypatch, chunk_bytes):
    monkeypatch.setattr(compare_module, "CHUNK_BYTES", chunk_bytes)  # 1 byte: blocks of a single row
    reference, other = graded_systems(60)
    metrics = compare_pair(reference, other)["metrics"]
    assert {m["questions"] for m in metrics.values()} == {60, 51, 40}
    for name, m in metrics.items():
        shared = [q for q in sorted(reference.questions) if reference.questions[q]["metrics"][name] is not None]
        diffs = np.array([other.questions[q]["metrics"][name] for q in shared]) - np.array(
            [reference.questions[q]["metrics"][name] for q in shared]
        )
        _, ci, p, _ = one_shot(diffs, SEED)
        assert (m["ci95"], m["p_value"]) == (list(ci), p), name
    assert metrics["delta_s_qr"]["p_value"] == 1.0


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
    assert peak < compare_module.CHUNK_BYTES + 4 * 2**20 < RESAMPLES * n * 8 / 40


def test_metric_values_that_are_not_numbers_are_a_damaged_report(tmp_path):
    for run, value in (("a", 1.0), ("b", [1.0, 0.0])):
        (tmp_path / run).mkdir()
        (tmp_path / run / "report.json").write_text(
            json.dumps(
                {
                    "summary": {"pipelines": {"p": {}}},
                    "questions": [
                        {
                            "pipeline": "p",
                            "qid": f"q{i}",
                            "metrics": {"citation_match": value},
                            "lambda": {"state": "convergent"},
                        }
                        for i in range(3)
                    ],
                }
            )
        )
    result = CliRunner().invoke(main, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path)])
    assert result.exit_code == 3 and "metric citation_match: expected one number per question" in result.output
