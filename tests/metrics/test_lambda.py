import pytest

from ragaudit.metrics.lam import RunPoint, chain_states, question_lambda


def point(cites="ab", match=True, d=0.3, errored=False):
    return RunPoint(frozenset(cites), match, d, errored)


@pytest.mark.parametrize("runs,state", [
    ([point(), point(errored=True)], "divergent"),
    ([point(), point(cites="")], "divergent"),
    ([point(match=False), point(match=False)], "chaotic"),
    ([point(), point(match=False)], "recursive"),
    ([point(), point(), point(d=0.35)], "convergent"),
    ([point(cites="ab"), point(cites="ac")], "recursive"),        # css 1/3 < 0.70
    ([point(d=0.2), point(d=0.31)], "recursive"),                 # spread 0.11 > 0.10
    ([point(match=False, errored=True)], "divergent"),            # first rule wins
])
def test_decision_table(runs, state):
    assert question_lambda(runs).state == state


def test_css_and_spread():
    lam = question_lambda([point(cites="abc", d=0.2), point(cites="abd", d=0.25), point(cites="ab", d=0.3)])
    assert lam.css == pytest.approx(2 / 4) and lam.spread == pytest.approx(0.1)
    assert lam.state == "recursive" and lam.symbol == "<>"
    assert question_lambda([point(d=0.2), point(d=0.3)], spread_max=0.2, css_min=0.5).state == "convergent"


@pytest.mark.parametrize("ds,states", [
    ([0.5, 0.6], ["chaotic"]),                      # Δ = +0.10
    ([0.5, 0.45], ["convergent"]),                  # Δ = −0.05, E falls
    ([0.5, 0.51], ["recursive"]),                   # |Δ| < 0.02, |ΔE| = 0.005
    ([0.5, 0.53], ["divergent"]),                   # 0.02 <= Δ <= 0.04
    ([0.6, 0.5, 0.45, 0.48, 0.53], ["convergent", "convergent", "divergent", "chaotic"]),
])
def test_chain_states(ds, states):
    assert chain_states(ds) == states


def test_chain_mean_uses_the_last_five():
    # d: 1,1,1,1,1 then 0.97: Δ = −0.03; E_6 = mean(1,1,1,1,.97) < E_5 = 1 → convergent
    assert chain_states([1, 1, 1, 1, 1, 0.97])[-1] == "convergent"
