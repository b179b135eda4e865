"""λ: does a question converge across its variants and seeds? And does a reasoning chain?"""
from __future__ import annotations

import math
from dataclasses import dataclass

SYMBOLS = {"convergent": "→", "recursive": "<>", "chaotic": "×", "divergent": "←"}


@dataclass(frozen=True)
class RunPoint:
    """What λ needs of one run: its cited snippet ids, whether it matched, its ΔS, and failure."""
    citations: frozenset[str]
    match: bool
    delta_s: float | None
    errored: bool = False


@dataclass(frozen=True)
class Lambda:
    state: str
    css: float
    spread: float | None

    @property
    def symbol(self) -> str:
        return SYMBOLS[self.state]


def question_lambda(runs: list[RunPoint], *, css_min: float = 0.70, spread_max: float = 0.10) -> Lambda:
    """The SPEC decision table, first rule that applies:
    divergent (an error or empty citations), chaotic (no match), recursive (some match),
    convergent (all match, css >= css_min, ΔS spread <= spread_max), else recursive."""
    sets = [r.citations for r in runs]
    union = frozenset().union(*sets) if sets else frozenset()
    css = len(frozenset.intersection(*sets)) / len(union) if union else 0.0
    values = [r.delta_s for r in runs if r.delta_s is not None and not math.isnan(r.delta_s)]
    spread = max(values) - min(values) if values else None
    if not runs or any(r.errored or not r.citations for r in runs):
        state = "divergent"
    elif not any(r.match for r in runs):
        state = "chaotic"
    elif not all(r.match for r in runs):
        state = "recursive"
    elif css >= css_min and spread is not None and spread <= spread_max:
        state = "convergent"
    else:
        state = "recursive"
    return Lambda(state, css, spread)


def chain_states(distances: list[float]) -> list[str]:
    """The state at each step t >= 2 of a reasoning chain from its per-step ΔS values d_t.

    Δ_t = d_t − d_{t−1}; E_t = mean of the last min(t, 5) d values. chaotic if Δ > 0.04;
    convergent if Δ ≤ −0.02 and E_t ≤ E_{t−1}; recursive if |Δ| < 0.02 and |E_t − E_{t−1}| < 0.02;
    else divergent. The chain's state is its last step's.
    """
    def mean_to(t: int) -> float:  # E_t for 1-based t
        window = distances[max(0, t - 5):t]
        return sum(window) / len(window)

    states = []
    for t in range(2, len(distances) + 1):
        delta = distances[t - 1] - distances[t - 2]
        e_now, e_before = mean_to(t), mean_to(t - 1)
        if delta > 0.04:
            states.append("chaotic")
        elif delta <= -0.02 and e_now <= e_before:
            states.append("convergent")
        elif abs(delta) < 0.02 and abs(e_now - e_before) < 0.02:
            states.append("recursive")
        else:
            states.append("divergent")
    return states
