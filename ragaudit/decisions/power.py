"""Power of a paired comparison of two configurations on one gold set: the smallest change in a rate
it can detect, and how many questions a target change needs (`ragaudit plan`, and the MDE line of
every `ragaudit compare`).

A rate is the mean of a per-run 0/1 outcome (correct, citation match, coverage pass, grounded),
averaged per question and then over questions. `compare` tests such a rate with the exact two-sided
sign test on the per-question differences (exact McNemar when a question has one run), so power is
computed for that test, exactly, under this model of how two configurations A and B differ:

* **discordance** ψ: the share of runs (one question, variant and seed) whose outcome differs
  between A and B. A change δ = rate(B) − rate(A) moves (ψ + δ)/2 of the runs up and (ψ − δ)/2
  down, so |δ| <= ψ: a change of 5 points needs at least 5% of the runs to differ.
* **ICC** ρ: how alike the runs of one question are in that difference. With probability ρ a
  question's runs all share one draw (the question moves as a unit); otherwise each run draws on
  its own. Two runs of one question then correlate with coefficient ρ, which is the usual
  intraclass correlation.
* the questions are independent; a question with fewer variants (a gold item with fewer
  paraphrases) has fewer runs, and the test's power uses the average of the questions' chances
  to move up or down (exact when every question has as many runs).

A question's chance to move is summed exactly over the counts of differing runs that carry any
weight (memory grows as the square root of its runs) up to 10⁸ runs a question, and in closed form
(the normal law of ups − downs) above: `plan --variants 1000000000 --seeds 1000000000` takes the
time and memory of a small plan. A design is held as counts of questions per number of runs.

The defaults are conservative for the bundled demo, where ψ is 0.01–0.32 and ρ 0.05–0.20 between
its three pipelines; set them from a comparison of your own (`compare` prints the figures it
measures). A deterministic pipeline gives the same result for every seed: plan it with one seed.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Iterable

import numpy as np

RATES = ("correct", "citation_match", "coverage_pass", "grounded")
DESCRIPTIONS = {
    "correct": "share of runs that are correct",
    "citation_match": "share of runs whose citations match the gold",
    "coverage_pass": "share of runs whose coverage reaches coverage_min",
    "grounded": "share of answered runs whose claims are all supported",
}
DISCORDANCE = 0.10
ICC = 0.5
ALPHA = 0.05
POWER = 0.80
MAX_QUESTIONS = 10_000_000  # questions_needed searches up to this many
EXACT_RUNS = 100_000_000  # runs a question up to which its chance to move is summed exactly; above, in closed form


@dataclass(frozen=True)
class Assumptions:
    discordance: float = DISCORDANCE
    icc: float = ICC
    alpha: float = ALPHA
    power: float = POWER

    def __post_init__(self) -> None:
        from ragaudit.core.errors import UsageError

        for name, value, low_open in (
            ("discordance", self.discordance, True),
            ("icc", self.icc, False),
            ("alpha", self.alpha, True),
            ("power", self.power, True),
        ):
            if not (0 < value < 1 if low_open else 0 <= value <= 1) or value != value:
                bounds = "(0, 1)" if low_open else "[0, 1]"
                raise UsageError(f"The '{name}' parameter must be a number in {bounds}. Got {value!r} instead.")


@dataclass(frozen=True)
class Design:
    """How many runs each question has in each configuration (its variants × seeds), as counts:
    `(runs, questions with that many runs)` in order of runs. Its size is the number of distinct
    run counts, not of questions or runs, so no plan allocates by either."""

    counts: tuple[tuple[int, int], ...]

    @property
    def questions(self) -> int:
        return sum(n for _, n in self.counts)

    @property
    def mean_runs(self) -> float:
        """Runs a question, on average (0 without questions)."""
        return sum(r * n for r, n in self.counts) / self.questions if self.counts else 0.0

    @classmethod
    def of(cls, runs: Iterable[int]) -> Design:
        """The design of questions with these runs, one count a question."""
        return cls(tuple(sorted(Counter(runs).items())))

    @classmethod
    def uniform(cls, questions: int, runs: int) -> Design:
        return cls(((runs, questions),) if questions else ())

    @classmethod
    def of_gold(cls, variant_counts: Iterable[int], variants: int, seeds: int) -> Design:
        """Each gold item runs its first `variants` variants (fewer when it has fewer) under `seeds` seeds."""
        return cls.of(min(variants, count) * seeds for count in variant_counts)

    def scaled(self, questions: int) -> Design:
        """The same mix of runs per question over another number of questions (largest remainders)."""
        if not self.counts:
            return self
        share = np.array([n for _, n in self.counts], dtype=float) / self.questions
        per = np.floor(share * questions).astype(np.int64)
        per[np.argsort(-(share * questions - per), kind="stable")[: questions - int(per.sum())]] += 1
        return Design(tuple((r, int(k)) for (r, _), k in zip(self.counts, per) if k))


class Binomial:
    """The binomial distribution's pmf, cdf, sf and ppf over arrays of counts, from `scipy.special`
    (which imports in a fraction of the time `scipy.stats` takes)."""

    @staticmethod
    def pmf(k: np.ndarray, n: np.ndarray | int, p: float) -> np.ndarray:
        from scipy import special

        k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
        inside = (k >= 0) & (k <= n)
        k = np.where(inside, k, 0)
        log = (
            special.gammaln(n + 1)
            - special.gammaln(k + 1)
            - special.gammaln(n - k + 1)
            + special.xlogy(k, p)
            + special.xlog1py(n - k, -p)
        )
        return np.where(inside, np.exp(log), 0.0)

    @staticmethod
    def cdf(k: np.ndarray, n: np.ndarray | int, p: float) -> np.ndarray:
        from scipy import special

        k, n = np.floor(np.asarray(k)).astype(np.int64), np.asarray(n, dtype=np.int64)
        inside = special.bdtr(np.clip(k, 0, np.maximum(n - 1, 0)), n, p)
        return np.where(k < 0, 0.0, np.where(k >= n, 1.0, inside))

    @staticmethod
    def sf(k: np.ndarray, n: np.ndarray | int, p: float) -> np.ndarray:
        from scipy import special

        k, n = np.floor(np.asarray(k)).astype(np.int64), np.asarray(n, dtype=np.int64)
        inside = special.bdtrc(np.clip(k, 0, np.maximum(n - 1, 0)), n, p)
        return np.where(k < 0, 1.0, np.where(k >= n, 0.0, inside))

    @staticmethod
    def ppf(q: float, n: np.ndarray, p: float) -> np.ndarray:
        """The smallest k with cdf(k) >= q."""
        from scipy import special

        n = np.asarray(n, dtype=np.int64)
        k = np.clip(np.ceil(special.bdtrik(q, n, p)), 0, n)
        below = np.maximum(k - 1, 0)
        smallest: np.ndarray = np.where(Binomial.cdf(below, n, p) >= q, below, k)
        return smallest


def _moves(runs: int, delta: float, a: Assumptions) -> tuple[float, float]:
    """P(a question's mean difference > 0), P(< 0), for a question with `runs` runs."""
    up, down = (a.discordance + delta) / 2, (a.discordance - delta) / 2
    independent_up, independent_down = (_apart if runs <= EXACT_RUNS else _apart_normal)(runs, delta, a)
    return (
        a.icc * up + (1 - a.icc) * independent_up,
        a.icc * down + (1 - a.icc) * independent_down,
    )


def _apart(runs: int, delta: float, a: Assumptions) -> tuple[float, float]:
    """P(more runs up than down), P(fewer), when each of `runs` runs draws on its own: t of them
    differ (binomial), a share up/ψ of those went up. Exact, summed over the counts t that carry
    any weight (12 standard deviations either side), so the arrays grow as √runs."""
    up = (a.discordance + delta) / 2
    spread = 12 * math.sqrt(runs * a.discordance * (1 - a.discordance)) + 12
    t = np.arange(max(0, int(runs * a.discordance - spread)), min(runs, math.ceil(runs * a.discordance + spread)) + 1)
    differing = Binomial.pmf(t, runs, a.discordance)
    theta = up / a.discordance
    more_up = Binomial.sf(np.floor(t / 2), t, theta)  # P(ups > t/2)
    more_down = Binomial.cdf(np.ceil(t / 2) - 1, t, theta)  # P(ups < t/2)
    return float(differing @ more_up), float(differing @ more_down)


def _apart_normal(runs: int, delta: float, a: Assumptions) -> tuple[float, float]:
    """`_apart` in closed form above EXACT_RUNS runs: ups − downs is a sum of `runs` independent
    draws (+1, −1 or 0) with mean δ and variance ψ − δ², normal to well within the planning
    model's own precision at that size (continuity-corrected)."""
    from scipy import special

    sd = math.sqrt(float(runs) * (a.discordance - delta * delta))
    mean = float(runs) * delta
    return float(special.ndtr((mean - 0.5) / sd)), float(special.ndtr((-mean - 0.5) / sd))


def sign_test_rejections(m: np.ndarray, alpha: float) -> np.ndarray:
    """For each count m of non-zero differences, the largest count c of one sign at which the exact
    two-sided sign test rejects at `alpha` (p = 2·P(Bin(m, ½) <= c) < alpha); -1 when no count does."""
    m = np.asarray(m)
    # ppf: the smallest k with P(X <= k) >= alpha/2; every count below it has 2·P(X <= c) < alpha
    return np.where(m > 0, Binomial.ppf(alpha / 2, np.maximum(m, 1), 0.5) - 1, -1).astype(int)


def power(design: Design, delta: float, assumptions: Assumptions = Assumptions()) -> float:
    """The chance that compare's sign test (two-sided, at `assumptions.alpha`) finds a change `delta`
    in a rate, under the model of this module's docstring."""
    if abs(delta) > assumptions.discordance:
        raise ValueError(f"a change of {delta} needs a discordance of at least {abs(delta)}")
    n = design.questions
    if n == 0:
        return 0.0
    weight = np.array([k for _, k in design.counts], dtype=float)
    moves = np.array([_moves(r, delta, assumptions) for r, _ in design.counts])
    up, down = (weight @ moves) / n
    if up + down <= 0:
        return 0.0
    share = min(1.0, up + down)
    # the counts of moving questions that carry any weight: 12 standard deviations either side
    spread = 12 * np.sqrt(n * share * (1 - share)) + 12
    m = np.arange(max(0, int(n * share - spread)), min(n, int(np.ceil(n * share + spread))) + 1)
    moving = Binomial.pmf(m, n, share)
    c = sign_test_rejections(m, assumptions.alpha)
    theta = up / (up + down)
    reject = np.where(c >= 0, Binomial.cdf(c, m, theta) + Binomial.sf(m - c - 1, m, theta), 0.0)
    return min(1.0, float(moving @ reject))


def mde(design: Design, assumptions: Assumptions = Assumptions(), *, tolerance: float = 1e-5) -> float | None:
    """The smallest change in a rate detected with probability `assumptions.power`; None when even a
    change as large as the discordance is not."""
    high = assumptions.discordance
    if power(design, high, assumptions) < assumptions.power:
        return None
    low = 0.0
    while high - low > tolerance:
        middle = (low + high) / 2
        if power(design, middle, assumptions) >= assumptions.power:
            high = middle
        else:
            low = middle
    return high


def questions_needed(design: Design, effect: float, assumptions: Assumptions = Assumptions()) -> int | None:
    """The fewest questions (with the design's mix of runs per question) at which a change `effect` is
    detected with probability `assumptions.power`; None when the model rules it out (an effect larger
    than the discordance) or it needs more than MAX_QUESTIONS."""
    effect = abs(effect)
    if effect == 0 or effect > assumptions.discordance:
        return None

    def enough(n: int) -> bool:
        return power(design.scaled(n), effect, assumptions) >= assumptions.power

    high = 1
    while not enough(high):
        if high >= MAX_QUESTIONS:
            return None
        high = min(MAX_QUESTIONS, high * 2)
    low = high // 2  # not enough (or 0)
    while high - low > 1:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return high


TEST = "exact two-sided sign test on per-question differences"


@dataclass(frozen=True)
class RatePlan:
    """What `plan` says of one rate: its MDE (None: no change reaches the power), the design and the
    assumptions it was computed for; with no MDE, the power at the assumed discordance and the
    questions that reach the power; with a target effect, the questions it needs (None: not reachable)."""

    mde: float | None
    questions: int
    runs_per_question: float
    assumptions: Assumptions
    power_at_discordance: float | None = None
    questions_for_discordance: int | None = None
    effect: float | None = None
    questions_needed: int | None = None
    test: str = TEST

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mde": self.mde,
            "questions": self.questions,
            "runs_per_question": self.runs_per_question,
            "test": self.test,
            **asdict(self.assumptions),
        }
        if self.mde is None:
            out["power_at_discordance"] = self.power_at_discordance
            out["questions_for_discordance"] = self.questions_for_discordance
        if self.effect is not None:
            out["effect"] = self.effect
            out["questions_needed"] = self.questions_needed
        return out


@dataclass(frozen=True)
class Plan:
    """`ragaudit plan`'s answer: a `RatePlan` per rate (RATES)."""

    rates: dict[str, RatePlan]

    def to_json(self) -> dict[str, Any]:
        return {rate: figures.to_json() for rate, figures in self.rates.items()}


def rate_plan(design: Design, assumptions: Assumptions, effect: float | None) -> RatePlan:
    """What `plan` says of one rate: its MDE, and the questions a target effect needs."""
    found = mde(design, assumptions)
    missed = found is None  # why: even the largest change the model allows is missed too often
    return RatePlan(
        mde=None if found is None else round(found, 4),
        questions=design.questions,
        runs_per_question=_runs_summary(design),
        assumptions=assumptions,
        power_at_discordance=round(power(design, assumptions.discordance, assumptions), 4) if missed else None,
        questions_for_discordance=questions_needed(design, assumptions.discordance, assumptions) if missed else None,
        effect=effect,
        questions_needed=None if effect is None else questions_needed(design, effect, assumptions),
    )


def _runs_summary(design: Design) -> float:
    return round(design.mean_runs, 4)


def plan(design: Design, assumptions: Assumptions = Assumptions(), *, effect: float | None = None) -> Plan:
    """Per rate (RATES): the MDE and, with `effect`, the questions needed. The model is the same for
    every rate, so their figures agree unless the assumptions differ."""
    if effect is not None and not 0 < effect < 1:
        from ragaudit.core.errors import UsageError

        raise UsageError(f"The 'effect' parameter must be a number in (0, 1). Got {effect!r} instead.")
    figures = rate_plan(design, assumptions, effect)
    return Plan(dict.fromkeys(RATES, figures))


def plan_gold(
    gold_path: str | os.PathLike[str],
    *,
    variants: int = 3,
    seeds: int = 1,
    effect: float | None = None,
    discordance: float = 0.10,
    icc: float = 0.5,
) -> Plan:
    """`plan` for the questions of a gold set: a UsageError for an effect outside (0, 1), an InputError
    naming each problem of an unreadable gold set."""
    from ragaudit.core.errors import InputError, UsageError
    from ragaudit.io.gold import read_gold

    if effect is not None and not 0 < effect < 1:
        raise UsageError(f"--effect: expected a number in (0, 1), found {effect}")
    assumptions = Assumptions(discordance=discordance, icc=icc)
    items, problems = read_gold(gold_path)
    if problems:
        raise InputError(problems)
    design = Design.of_gold((len(item.variants) for item in items), variants, seeds)
    return plan(design, assumptions, effect=effect)


def render_text(result: Plan) -> str:
    """`plan`'s table for people: the design, the model's assumptions, and per rate its figures."""
    first = next(iter(result.rates.values()))
    effect, assumed = first.effect, first.assumptions
    lines = [
        f"{first.questions} questions × {first.runs_per_question:g} runs a question (variants × seeds)",
        f"test: {first.test}, α = {assumed.alpha:g}, power {assumed.power:.0%}",
        f"assumed: discordance {assumed.discordance:g} (share of runs whose outcome differs between the two "
        f"configurations), ICC {assumed.icc:g} (how alike a question's runs are in that difference)",
        "",
        f"{'rate':<16} {'MDE':>7}" + (f"  {'questions for ' + format(effect, 'g'):>20}" if effect is not None else ""),
    ]
    for rate, figures in result.rates.items():
        shown = "–" if figures.mde is None else f"{figures.mde:.3f}"
        line = f"{rate:<16} {shown:>7}"
        if effect is not None:
            needed = figures.questions_needed
            line += f"  {'not reachable' if needed is None else format(needed, ','):>20}"
        lines.append(line)
    lines.append("MDE: the smallest change in the rate detected with that power; the model is the same for every rate")
    if first.mde is None:
        needed = first.questions_for_discordance
        lines.append(
            f"–: no change reaches {assumed.power:.0%} power: even a change of {assumed.discordance:g} (the assumed "
            f"discordance, the largest change the model allows) is detected with {first.power_at_discordance or 0:.0%} "
            f"power on {first.questions} questions × {first.runs_per_question:g} runs; "
            + (
                f"{needed:,} questions reach {assumed.power:.0%}"
                if needed is not None
                else "no number of questions does"
            )
            + " (more variants or seeds help too; raise --discordance if more runs differ between the configurations)"
        )
    if effect is not None and first.questions_needed is None:
        lines.append(
            f"a change of {effect:g} needs at least that share of runs to differ: raise --discordance if yours do"
            if effect > assumed.discordance
            else f"a change of {effect:g} needs more than {MAX_QUESTIONS:,} questions"
        )
    return "\n".join(lines) + "\n"
