import pytest

from ragaudit.checks.metrics.lam import RunPoint, chain_states, question_lambda


def point(sections=("A", "B"), correct=True, d=0.3, errored=False):
    return RunPoint(frozenset(("doc", s) for s in sections), correct, d, errored)


@pytest.mark.parametrize(
    "runs,state",
    [
        ([point(), point(errored=True)], "divergent"),
        ([point(), point(sections=())], "divergent"),  # no citations at all
        ([point(correct=False), point(correct=False)], "chaotic"),
        ([point(), point(correct=False)], "recursive"),
        ([point(), point(), point(d=0.35)], "convergent"),
        ([point(sections="AB"), point(sections="AC")], "recursive"),  # css 1/3 < 0.50
        ([point(sections="AB"), point(sections="A")], "convergent"),  # css 1/2 = 0.50
        ([point(d=0.1), point(d=0.6)], "convergent"),  # a ΔS spread decides nothing
        ([point(correct=False, errored=True)], "divergent"),  # first rule wins
    ],
)
def test_decision_table(runs, state):
    assert question_lambda(runs).state == state


def test_css_is_section_level_and_spread_is_reported():
    lam = question_lambda([point(sections="ABC", d=0.2), point(sections="ABD", d=0.25), point(sections="AB", d=0.3)])
    assert lam.css == pytest.approx(2 / 4) and lam.spread == pytest.approx(0.1)
    assert lam.state == "convergent" and lam.symbol == "→"
    assert question_lambda([point(sections="ABC"), point(sections="AB")], css_min=0.7).state == "recursive"


@pytest.mark.parametrize(
    "ds,states",
    [
        ([0.5, 0.6], ["chaotic"]),  # Δ = +0.10
        ([0.5, 0.45], ["convergent"]),  # Δ = −0.05, E falls
        ([0.5, 0.51], ["recursive"]),  # |Δ| < 0.02, |ΔE| = 0.005
        ([0.5, 0.53], ["divergent"]),  # 0.02 <= Δ <= 0.04
        ([0.6, 0.5, 0.45, 0.48, 0.53], ["convergent", "convergent", "divergent", "chaotic"]),
    ],
)
def test_chain_states(ds, states):
    assert chain_states(ds) == states


def test_chain_mean_uses_the_last_five():
    # d: 1,1,1,1,1 then 0.97: Δ = −0.03; E_6 = mean(1,1,1,1,.97) < E_5 = 1 → convergent
    assert chain_states([1, 1, 1, 1, 1, 0.97])[-1] == "convergent"
