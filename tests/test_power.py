"""`ragaudit plan` and the power model behind every compare's detectable-change line: the formulas
against a simulation of the model they describe, run through compare's own sign test."""

import json

import numpy as np
import pytest
from helpers import DEMO, Lazy, invoke

from ragaudit.decisions.comparison import sign_test_p
from ragaudit.decisions.power import Assumptions, Design, mde, power, questions_needed, sign_test_rejections
from ragaudit.io.gold import read_gold

stats = Lazy("scipy.stats")  # imported when a test first uses it: collecting stays fast

GOLD = DEMO / "gold.jsonl"


def simulated_power(runs: list[int], delta: float, a: Assumptions, sims: int, seed: int) -> float:
    """Draw the model's runs (module docstring of ragaudit.decisions.power) and count how often compare's sign test
    rejects at α: each run moves up with (ψ + δ)/2, down with (ψ − δ)/2; a question's runs share one draw
    with probability ρ."""
    rng = np.random.default_rng(seed)
    up, down = (a.discordance + delta) / 2, (a.discordance - delta) / 2
    width = max(runs)
    draws = rng.random((sims, len(runs), width))
    moves = np.where(draws < up, 1.0, np.where(draws < up + down, -1.0, 0.0))
    together = rng.random((sims, len(runs))) < a.icc
    moves = np.where(together[..., None], moves[..., :1], moves)
    counted = np.arange(width)[None, :] < np.array(runs)[:, None]  # a question's own runs only
    means = (moves * counted).sum(-1) / np.array(runs)
    return float(np.mean([sign_test_p(d) < a.alpha for d in means]))


def demo_design(variants: int = 3, seeds: int = 2) -> Design:
    items, problems = read_gold(GOLD)
    assert problems == []
    return Design.of_gold((len(i.variants) for i in items), variants, seeds)


def test_the_exact_sign_test_rejects_where_scipys_binomial_test_does():
    for m in range(1, 61):
        c = sign_test_rejections(np.array([m]), 0.05)[0]
        rejected = [k for k in range(m + 1) if stats.binomtest(k, m, 0.5).pvalue < 0.05]
        assert rejected == [k for k in range(m + 1) if k <= c or k >= m - c], m


def test_the_mde_on_the_demo_gold_set_matches_a_simulation_within_001():
    design = demo_design()
    assert design.counts == ((6, 80),)
    a = Assumptions()
    found = mde(design, a)
    assert found is not None and 0.03 < found < 0.1
    runs = [6] * 80
    below, at, above = (
        simulated_power(runs, d, a, 3000, seed) for seed, d in enumerate((found - 0.01, found, found + 0.01))
    )
    # the simulated power crosses 80% between MDE − 0.01 and MDE + 0.01: the simulated MDE is within 0.01
    assert below < 0.8 < above, (below, at, above)
    assert abs(at - 0.8) < 0.03


@pytest.mark.parametrize(("discordance", "icc"), [(0.2, 0.0), (0.05, 1.0), (0.3, 0.3)])
def test_power_matches_the_simulation_under_other_assumptions(discordance, icc):
    a = Assumptions(discordance=discordance, icc=icc)
    design = Design.uniform(50, 4)
    delta = 0.6 * discordance
    assert abs(power(design, delta, a) - simulated_power([4] * 50, delta, a, 3000, 7)) < 0.03


def test_questions_with_fewer_variants_are_averaged_in():
    runs = [6] * 60 + [2] * 20  # a gold set in which a quarter of the items has no paraphrase
    design = Design.of(runs)
    a = Assumptions()
    assert abs(power(design, 0.06, a) - simulated_power(runs, 0.06, a, 3000, 11)) < 0.03


def test_the_mde_falls_as_questions_grow():
    found = [mde(Design.uniform(n, 6)) for n in (40, 80, 160, 320, 640)]
    assert all(x is not None for x in found)
    assert found == sorted(found, reverse=True) and len(set(found)) == len(found)
    assert mde(Design.uniform(10, 6)) is None  # ten questions cannot show a change of 10 points or less


def test_questions_needed_is_the_first_count_with_the_power():
    design = demo_design()
    n = questions_needed(design, 0.03)
    assert n is not None and n > 80
    assert power(design.scaled(n), 0.03) >= 0.8 > power(design.scaled(n - 1), 0.03)
    assert questions_needed(design, 0.2) is None  # more than the discordance: no run mix gives it


def test_plan_prints_every_rate(tmp_path):
    result = invoke("plan", GOLD, "--variants", 3, "--seeds", 2, "--effect", 0.03, "--format", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert set(plan) == {"correct", "citation_match", "coverage_pass", "grounded"}
    expected = round(mde(demo_design()), 4)
    for rate in plan.values():
        assert rate["mde"] == expected and rate["questions"] == 80 and rate["runs_per_question"] == 6
        assert (rate["discordance"], rate["icc"], rate["alpha"], rate["power"]) == (0.1, 0.5, 0.05, 0.8)
        assert rate["questions_needed"] == questions_needed(demo_design(), 0.03)
    text = invoke("plan", GOLD, "--variants", 3, "--seeds", 2)
    assert text.exit_code == 0 and "discordance 0.1" in text.stdout and f"{expected:.3f}" in text.stdout
    fewer = json.loads(invoke("plan", GOLD, "--variants", 1, "--seeds", 1, "--format", "json").stdout)
    assert fewer["correct"]["mde"] > expected  # one run a question detects less


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("--effect", "0", "--effect"),
        ("--effect", "1.5", "--effect"),
        ("--discordance", "0", "discordance"),
        ("--icc", "2", "icc"),
    ],
)
def test_plan_parameters_out_of_range_are_usage_errors(option, value, named):
    result = invoke("plan", GOLD, option, value)
    assert result.exit_code == 2 and named in result.output


def test_plan_of_an_unreadable_gold_set_names_the_line(tmp_path):
    gold = tmp_path / "gold.jsonl"
    gold.write_text((GOLD.read_text().splitlines(keepends=True)[0]) + "{not json\n")
    result = invoke("plan", gold)
    assert result.exit_code == 3 and f"{gold}:2" in result.output


def test_the_binomial_functions_are_scipy_stats_ones():
    from ragaudit.decisions.power import Binomial

    for n in [0, 1, 2, 7, 30, 101, 1000, 8000]:
        for p in (0.0, 0.1, 0.5, 0.77, 1.0):
            k = np.arange(-2, n + 3)
            assert Binomial.pmf(k, n, p) == pytest.approx(stats.binom.pmf(k, n, p), rel=1e-9, abs=1e-15), (n, p)
            assert Binomial.cdf(k, n, p) == pytest.approx(stats.binom.cdf(k, n, p), rel=1e-9, abs=1e-12), (n, p)
            assert Binomial.sf(k, n, p) == pytest.approx(stats.binom.sf(k, n, p), rel=1e-9, abs=1e-12), (n, p)
    m = np.arange(1, 5001)
    assert (Binomial.ppf(0.025, m, 0.5) == stats.binom.ppf(0.025, m, 0.5)).all()


def test_the_closed_form_above_the_exact_bound_agrees_with_the_exact_sum(monkeypatch):
    """Above EXACT_RUNS runs a question, its chance to move is the normal law of ups − downs: at a
    size the exact sum still reaches, both agree, and the power is continuous across the bound."""
    from ragaudit.decisions import power as module

    for runs in (2_000, 50_000):
        exact = [power(Design.uniform(40, runs), d) for d in (0.0, 0.002, 0.01, 0.05)]
        monkeypatch.setattr(module, "EXACT_RUNS", 0)
        closed = [power(Design.uniform(40, runs), d) for d in (0.0, 0.002, 0.01, 0.05)]
        monkeypatch.undo()
        assert closed == pytest.approx(exact, abs=0.005), runs
    below, above = (power(Design.uniform(40, module.EXACT_RUNS + k), 0.0005) for k in (0, 1))
    assert above == pytest.approx(below, abs=0.002)


def test_a_plan_of_a_billion_variants_and_seeds_takes_the_memory_of_a_small_one():
    """`plan --variants 1000000000 --seeds 1000000000` allocated 22 GiB (10 GB after 6 minutes): in a
    process limited to 2 GiB of address space it answers at once, in closed form."""
    import resource
    import subprocess
    import sys

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    args = ["plan", str(GOLD), "--variants", "1000000000", "--seeds", "1000000000", "--effect", "0.001"]
    done = subprocess.run(
        [sys.executable, "-m", "ragaudit", *args, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limited,
        env={**__import__("os").environ, "OPENBLAS_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)["correct"]
    assert plan["questions"] == 80 and plan["runs_per_question"] == 3 * 10**9
    assert plan["mde"] is not None and plan["mde"] < 0.01  # billions of runs a question pin each one down
    assert plan["questions_needed"] is not None and plan["questions_needed"] < 80


def test_a_plan_that_detects_nothing_says_why_and_what_would(tmp_path):
    """25 questions of 3 runs: no change up to the discordance reaches 80% power; the plan says the
    power it gets for the largest change and how many questions reach 80% for it."""
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(GOLD.read_text(encoding="utf-8").splitlines(keepends=True)[:25]), encoding="utf-8")
    items, _ = read_gold(gold)
    design = Design.of_gold((len(item.variants) for item in items), 3, 1)
    assert mde(design) is None
    reached = power(design, 0.1)
    needed = next(n for n in range(25, 1000) if power(design.scaled(n), 0.1) >= 0.8)
    text = invoke("plan", gold, "--variants", 3, "--seeds", 1)
    assert text.exit_code == 0 and "correct                –" in text.stdout
    assert (
        f"–: no change reaches 80% power: even a change of 0.1 (the assumed discordance, the largest change the model "
        f"allows) is detected with {reached:.0%} power on 25 questions × 3 runs; {needed} questions reach 80%"
    ) in text.stdout
    figures = json.loads(invoke("plan", gold, "--format", "json").stdout)["grounded"]
    assert figures["mde"] is None and figures["questions_for_discordance"] == needed
    assert figures["power_at_discordance"] == round(reached, 4)
