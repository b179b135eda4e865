"""Decisions between configurations: chosen pairs, non-inferiority against a margin, exact sign tests
for per-run outcomes, the noise floor of pipelines that sample, and the CI switch above a size."""

import json
import math
from itertools import product

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import BM25, TFIDF, Lazy, as_questions, invoke, run_dir_of, write_config, write_demo_config

import ragaudit.decisions.comparison as compare_module
from ragaudit.decisions.comparison import System, bootstrap_ci, compare_pair, noninferiority_p, sign_test_p
from ragaudit.decisions.noise import NoiseFloor, noise_floor

stats = Lazy("scipy.stats")  # imported when a test first uses it: collecting stays fast


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo's three pipelines on every handbook question, two seeds, with the hashing encoder."""
    folder = tmp_path_factory.mktemp("demo")
    result = invoke("run", write_demo_config(folder), "--no-gate")
    assert result.exit_code == 0, result.output
    return run_dir_of(result)


def compared(run_dir, out, *args):
    result = invoke("compare", run_dir, "--out", out, "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def questions(values: dict[str, list[float]], runs: int = 1) -> dict:
    n = len(next(iter(values.values())))
    return as_questions(
        {
            f"q{i:03d}": {
                "qid": f"q{i:03d}",
                "metrics": {name: v[i] for name, v in values.items()},
                "lambda": {"state": "convergent"},
                "stats": {"runs": runs},
            }
            for i in range(n)
        }
    )


# ---- the targets on the demo -----------------------------------------------------------------------


def test_a_pipeline_against_itself_is_non_inferior_with_no_difference(demo, tmp_path):
    for name in ("dense-k5", "hybrid-mmr-k5"):  # deterministic, and one that samples
        pair = compared(demo, tmp_path, "--pair", f"{name}:{name}")["pairs"][0]
        assert (pair["a"], pair["b"], pair["questions"]) == (name, name, 80)
        for metric, m in pair["metrics"].items():
            assert (m["difference"], m["ci95"], m["p_value"], m["p_holm"]) == (0.0, [0.0, 0.0], 1.0, 1.0), metric
            assert m["verdict"] == "tie" and m["noninferior"]["holds"] and m["noninferior"]["margin"] == 0.02


def test_hybrid_is_not_non_inferior_to_dense_on_citation_match(demo, tmp_path):
    result = compared(demo, tmp_path, "--pair", "dense-k5:hybrid-mmr-k5", "--margin", "0.02")
    m = result["pairs"][0]["metrics"]["citation_match"]
    assert m["difference"] < -0.02 and m["noninferior"] == {
        "margin": 0.02,
        "p_value": m["noninferior"]["p_value"],
        "holds": False,
    }
    assert m["noninferior"]["p_value"] > 0.5 and m["verdict"] == "worse" and m["test"] == "sign test, exact"


def test_the_noise_floor_of_the_demo(demo, tmp_path):
    result = compared(demo, tmp_path)
    noise = result["noise"]
    assert noise["bm25-k5"]["state"] == noise["dense-k5"]["state"] == "deterministic"
    sampling = noise["hybrid-mmr-k5"]
    assert sampling["state"] == "sampling" and sampling["seeds"] == [1, 2]
    # the floor is the spread of the per-seed means, read here from the runs themselves
    runs = pq.read_table(demo / "runs.parquet", columns=["pipeline", "seed", "m.citation_match"]).to_pandas()
    mine = runs[runs.pipeline == "hybrid-mmr-k5"].groupby("seed")["m.citation_match"].mean()
    assert sampling["floors"]["citation_match"] == pytest.approx(mine.max() - mine.min())
    assert sampling["floors"]["citation_match"] > 0
    pair = next(p for p in result["pairs"] if p["b"] == "hybrid-mmr-k5")
    assert pair["metrics"]["citation_match"]["noise_floor"] == sampling["floors"]["citation_match"]
    text = invoke("compare", demo, "--out", tmp_path)
    assert "bm25-k5 deterministic (floor 0)" in text.stdout and "hybrid-mmr-k5 samples (seeds 1, 2 move" in text.stdout


def test_the_run_says_its_decisions_in_words(demo):
    summary = (demo / "summary.md").read_text()
    assert "## Decisions between pipelines" in summary
    assert "hybrid-mmr-k5 may be worse than bm25-k5 on citation\\_match by more than 2 points" in summary
    assert "dense-k5 is no worse than bm25-k5 on" in summary
    html = (demo / "compare.html").read_text()
    assert "hybrid-mmr-k5 may be worse than bm25-k5 on citation_match by more than 2 points" in html
    assert "detectable change in a rate" in html and "noise floor" in html


# ---- pairs ------------------------------------------------------------------------------------------


def test_pairs_across_two_runs(tmp_path):
    """RUN_k3 holds dense-k3 and bm25-k3, RUN_k5 their k5 namesakes: --pair lines them up."""
    runs = {}
    for k in (3, 5):
        pipelines = "".join(
            f'[[pipelines]]\nname = "{r}-k{k}"\nkind = "reference"\nretriever = "{r}"\nk = {k}\n'
            for r in ("bm25", "tfidf")
        )
        folder = tmp_path / f"k{k}"
        folder.mkdir()
        result = invoke("run", write_config(folder, pipelines, items=4, seeds="[1]"), "--no-gate")
        runs[k] = run_dir_of(result)
    pairs = compared(runs[3], tmp_path, runs[5], "--pair", "bm25-k3:bm25-k5", "--pair", "tfidf-k3:tfidf-k5")
    named = [(p["a"], p["b"]) for p in pairs["pairs"]]
    assert named == [
        (f"{runs[3].name}/bm25-k3", f"{runs[5].name}/bm25-k5"),
        (f"{runs[3].name}/tfidf-k3", f"{runs[5].name}/tfidf-k5"),
    ]
    # no name in both runs and no --pair: say so, with the names
    result = invoke("compare", runs[3], runs[5], "--out", tmp_path)
    assert result.exit_code == 2 and "bm25-k3" in result.output and "--pair" in result.output


def test_default_pairs_across_runs_are_namesakes(tmp_path):
    dirs = []
    for seed in ("[1]", "[2]"):
        folder = tmp_path / seed.strip("[]")
        folder.mkdir()
        dirs.append(run_dir_of(invoke("run", write_config(folder, TFIDF + BM25, items=3, seeds=seed), "--no-gate")))
    result = compared(dirs[0], tmp_path, dirs[1])
    assert [(p["a"].split("/")[1], p["b"].split("/")[1]) for p in result["pairs"]] == [
        ("tfidf", "tfidf"),
        ("bm25", "bm25"),
    ]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--pair", "bm25:nope"], ["'nope'", "choices: tfidf, bm25"]),
        (["--pair", "bm25"], ["expected PIPE_A:PIPE_B"]),
        (["--margin", "0"], ["--margin", "(0, 1)"]),
        (["--margin", "1"], ["--margin"]),
        (["--margin", "nan"], ["--margin"]),
    ],
)
def test_bad_pairs_and_margins_are_usage_errors(tmp_path, args, words):
    run = run_dir_of(invoke("run", write_config(tmp_path, TFIDF + BM25, items=2, seeds="[1]"), "--no-gate"))
    result = invoke("compare", run, "--out", tmp_path, *args)
    assert result.exit_code == 2, result.output
    assert all(w in result.output for w in words), result.output
    assert "Traceback" not in result.output


def test_configured_pairs_and_margin(tmp_path):
    extra = '[compare]\npairs = [["bm25", "tfidf"], ["bm25", "bm25"]]\nmargin = 0.05\n'
    config = write_config(tmp_path, TFIDF + BM25, items=3, seeds="[1]")
    config.write_text(config.read_text() + extra)
    run = run_dir_of(invoke("run", config, "--no-gate"))
    result = json.loads((run / "compare.json").read_text())
    assert [(p["a"], p["b"]) for p in result["pairs"]] == [("bm25", "tfidf"), ("bm25", "bm25")]
    assert result["margin"] == 0.05 and result["pairs"][0]["metrics"]["coverage"]["noninferior"]["margin"] == 0.05
    # compare of that run keeps them; --margin and --pair override them
    again = compared(run, tmp_path / "again", "--margin", "0.1", "--pair", "tfidf:bm25")
    assert [(p["a"], p["b"]) for p in again["pairs"]] == [("tfidf", "bm25")] and again["margin"] == 0.1


def test_configured_pairs_name_configured_pipelines(tmp_path):
    config = write_config(tmp_path, TFIDF + BM25, items=2, seeds="[1]")
    config.write_text(config.read_text() + '[compare]\npairs = [["bm25", "dense"]]\nmargin = 1.5\n')
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 3
    assert "$.compare.pairs[0]: expected pairs of configured pipelines (tfidf, bm25), found 'dense'" in result.output
    assert "$.compare.margin: expected a number in (0, 1), found number 1.5" in result.output


# ---- the statistics ---------------------------------------------------------------------------------


def test_non_inferiority_p_by_hand():
    # differences in the better direction, margin 0.02: shifted (0.12, -0.03, 0.02, 0.04), sum 0.15; of the
    # 16 sign patterns those with a sum >= 0.15 are counted (one-sided)
    better = np.array([0.1, -0.05, 0.0, 0.02])
    shifted = better + 0.02
    sums = [sum(s * x for s, x in zip(signs, shifted)) for signs in product((1, -1), repeat=4)]
    by_hand = sum(total >= shifted.sum() - 1e-12 for total in sums) / 16
    assert noninferiority_p(better, 0.02) == pytest.approx(by_hand)


def test_non_inferiority_p_of_a_single_question_is_its_two_signs():
    # one shifted difference d: the null flips it to -d; P(mean >= d) is 1/2 above 0, 1 below
    assert noninferiority_p(np.array([0.1]), 0.02) == 0.5
    assert noninferiority_p(np.array([-0.1]), 0.02) == 1.0


def test_non_inferiority_follows_the_direction_of_the_metric():
    n = 60
    base = [0.3] * n
    a = System("a", questions({"delta_s_qr": base, "coverage": [0.8] * n}))
    worse = System("b", questions({"delta_s_qr": [0.4] * n, "coverage": [0.7] * n}))  # ΔS up, coverage down
    better = System("c", questions({"delta_s_qr": [0.25] * n, "coverage": [0.85] * n}))
    for name in ("delta_s_qr", "coverage"):
        assert not compare_pair(a, worse)["metrics"][name]["noninferior"]["holds"]
        assert compare_pair(a, better)["metrics"][name]["noninferior"]["holds"]


def test_the_non_inferiority_test_holds_its_size_at_the_margin(monkeypatch):
    """Questions that lose on average exactly the margin: the test claims non-inferiority about 5% of the time."""
    monkeypatch.setattr(compare_module, "RESAMPLES", 999)  # p in steps of 1/1,000 is enough to count rejections
    rng = np.random.default_rng(5)
    values, chances = np.array([-1 / 6, 0.0, 1 / 6]), [0.18, 0.76, 0.06]  # mean −0.02
    rejected = [noninferiority_p(rng.choice(values, 80, p=chances), 0.02) < 0.05 for _ in range(300)]
    assert np.mean(rejected) < 0.05 + 3 * math.sqrt(0.05 * 0.95 / 300)
    clearly = [noninferiority_p(rng.choice(values, 80, p=[0.06, 0.76, 0.18]), 0.02) < 0.05 for _ in range(50)]
    assert np.mean(clearly) > 0.9  # B better by two points: non-inferior nearly always


def test_outcomes_take_the_exact_mcnemar_test():
    # one run a question, 0/1 outcomes: 9 questions flip 1 -> 0, 2 flip 0 -> 1, the rest agree
    a = [1.0] * 9 + [0.0] * 2 + [1.0] * 30
    b = [0.0] * 9 + [1.0] * 2 + [1.0] * 30
    m = compare_pair(System("a", questions({"correct": a})), System("b", questions({"correct": b})))["metrics"][
        "correct"
    ]
    # exact McNemar by hand: two-sided binomial tail of 2 of 11 discordant pairs at 1/2
    tail = sum(math.comb(11, k) for k in range(0, 3)) / 2**11
    assert m["p_value"] == pytest.approx(2 * tail) and m["test"] == "sign test, exact"
    assert sign_test_p(np.zeros(5)) == 1.0


def test_a_difference_inside_the_noise_floor_is_noise_never_a_regression():
    n = 400
    a_values = [1.0] * n
    b_values = [1.0] * (n - 12) + [0.0] * 12  # -0.03, with p far below 0.05
    sampling = NoiseFloor("sampling", (1, 2), {"citation_match": 0.04})
    a = System("a", questions({"citation_match": a_values}), sampling)
    b = System("b", questions({"citation_match": b_values}), NoiseFloor("deterministic", (1, 2)))
    m = compare_pair(a, b)["metrics"]["citation_match"]
    assert m["p_value"] < 0.001 and m["noise_floor"] == 0.04 and m["verdict"] == "noise"
    deterministic = System("a", questions({"citation_match": a_values}), NoiseFloor("deterministic", (1, 2)))
    assert compare_pair(deterministic, b)["metrics"]["citation_match"]["verdict"] == "worse"
    unknown = compare_pair(System("a", questions({"citation_match": a_values})), b)["metrics"]["citation_match"]
    assert (unknown["noise_floor"], unknown["verdict"]) == (None, "worse")


def test_noise_floor_from_stored_runs(tmp_path):
    rows = []
    for q, v, seed, pipeline, value in [
        ("q1", 0, 1, "det", 1.0), ("q1", 0, 2, "det", 1.0), ("q2", 0, 1, "det", 0.0), ("q2", 0, 2, "det", 0.0),
        ("q1", 0, 1, "smp", 1.0), ("q1", 0, 2, "smp", 0.0), ("q2", 0, 1, "smp", 1.0), ("q2", 0, 2, "smp", 1.0),
        ("q1", 0, 1, "one", 1.0),
    ]:  # fmt: skip
        rows.append({"pipeline": pipeline, "qid": q, "variant": v, "seed": seed, "m.citation_match": value})
    path = tmp_path / "runs.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert noise_floor(path, "det", ["citation_match"]).state == "deterministic"
    sampled = noise_floor(path, "smp", ["citation_match", "coverage"])
    # seed 1: mean 1.0, seed 2: mean 0.5
    assert (sampled.state, sampled.seeds, sampled.floors) == ("sampling", (1, 2), {"citation_match": 0.5})
    assert sampled.floor_of("coverage") is None  # not stored: unknown, never 0
    one = noise_floor(path, "one", ["citation_match"])
    assert one.state == "unknown" and "one seed" in one.note
    assert noise_floor(tmp_path / "absent.parquet", "det", ["citation_match"]).state == "unknown"


def test_above_the_bca_limit_the_ci_is_the_t_interval(monkeypatch):
    rng = np.random.default_rng(2)
    diffs = np.round(rng.normal(0.01, 0.2, 3000), 2)
    bca = bootstrap_ci(diffs)
    monkeypatch.setattr(compare_module, "BCA_MAX", 1000)
    t = bootstrap_ci(diffs)
    half = stats.t.ppf(0.975, diffs.size - 1) * diffs.std(ddof=1) / math.sqrt(diffs.size)
    assert t == pytest.approx((diffs.mean() - half, diffs.mean() + half))
    # at this size the bootstrap's interval and the t interval agree within a tenth of their width
    assert abs(t[0] - bca[0]) < 0.1 * (bca[1] - bca[0]) and abs(t[1] - bca[1]) < 0.1 * (bca[1] - bca[0])
    assert compare_module.ci_method(3000) == "t"


def test_above_the_monte_carlo_limit_the_p_value_is_the_normal_approximation(monkeypatch):
    rng = np.random.default_rng(4)
    diffs = np.round(rng.normal(0.02, 0.3, 400), 2)
    randomized = compare_module.permutation_p(diffs)
    monkeypatch.setattr(compare_module, "MONTE_CARLO_MAX", 100)
    normal = compare_module.permutation_p(diffs)
    moving = diffs[diffs != 0]
    assert normal == pytest.approx(2 * stats.norm.sf(abs(moving.sum()) / math.sqrt(np.square(moving).sum())))
    assert abs(normal - randomized) < 0.01
