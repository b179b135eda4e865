"""λ: does a question converge across its variants and seeds? And does a reasoning chain?"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ragaudit.core.types import LAMBDA_STATES, LAMBDA_SYMBOLS

STATES, SYMBOLS = LAMBDA_STATES, LAMBDA_SYMBOLS


@dataclass(frozen=True)
class RunPoint:
    """What λ needs of one run: the (doc_id, section_id) pairs it cites, whether it is correct
    (citation match and, with an answer, the gold anchor supports what it says), its ΔS, and
    whether it failed (errored, or no citations at all)."""

    sections: frozenset[tuple[str | None, str | None]]
    correct: bool
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


def lambda_state(*, runs: int, failed: bool, correct: int, css: float, css_min: float) -> str:
    """The docs/reference.md §3 decision table, first rule that applies: divergent (a run errored or has empty
    citations), chaotic (no run correct), recursive (some correct and some not, or section-level
    css < css_min), convergent (every run correct and css >= css_min).

    The ΔS spread across runs is reported but decides nothing: a paraphrase moves ΔS by about 0.13
    even when the cited passage is fixed, so a spread rule flags stable pipelines.
    """
    if not runs or failed:
        return "divergent"
    if correct == 0:
        return "chaotic"
    if correct < runs or css < css_min:
        return "recursive"
    return "convergent"


def question_lambda(runs: list[RunPoint], *, css_min: float = 0.50) -> Lambda:
    """λ of one question from its runs (see `lambda_state`)."""
    sets = [r.sections for r in runs]
    union = frozenset().union(*sets) if sets else frozenset()
    css = len(frozenset.intersection(*sets)) / len(union) if union else 0.0
    values = [r.delta_s for r in runs if r.delta_s is not None and not math.isnan(r.delta_s)]
    spread = max(values) - min(values) if values else None
    failed = any(r.errored or not r.sections for r in runs)
    state = lambda_state(runs=len(runs), failed=failed, correct=sum(r.correct for r in runs), css=css, css_min=css_min)
    return Lambda(state, css, spread)


def chain_states(distances: list[float]) -> list[str]:
    """The state at each step t >= 2 of a reasoning chain from its per-step ΔS values d_t.

    Δ_t = d_t − d_{t−1}; E_t = mean of the last min(t, 5) d values. chaotic if Δ > 0.04;
    convergent if Δ ≤ −0.02 and E_t ≤ E_{t−1}; recursive if |Δ| < 0.02 and |E_t − E_{t−1}| < 0.02;
    else divergent. The chain's state is its last step's.
    """

    def mean_to(t: int) -> float:  # E_t for 1-based t
        window = distances[max(0, t - 5) : t]
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
