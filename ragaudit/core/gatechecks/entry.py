"""What a gate check is (`GateCheck`, with its `Key`, `Tune` and `Card`) and what the checks of
`ragaudit.core.gatechecks.registry` read: a pipeline's figures, a question's, and the words that say why a
question fails a check."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # types only: the gate and the report model import this module
    from ragaudit.core.model import Check, Question, QuestionStats
    from ragaudit.decisions.agreement import Estimate
    from ragaudit.decisions.gating import Scope
    from ragaudit.io.config_schema import GateSection

AT_MOST, AT_LEAST, ABOVE = "<=", ">=", ">"
COMPARE: dict[str, Callable[[Any, Any], bool]] = {AT_MOST: operator.le, AT_LEAST: operator.ge, ABOVE: operator.gt}
NOT_GATED = "not gated"
DRIFT = 0.05
RANGES = {
    "rate": "[0, 1]",
    "count": "integer ≥ 0",
    "states": "array of λ states",
    "names": "names of configured pipelines",
    "path": "path",
}


@dataclass(frozen=True)
class Key:
    """A `[gate]` key: its kind (`rate`: a number in [0, 1]; `count`: an integer ≥ 0; `states`:
    an array of λ states), its default (None: not gated), whether TOML's absence of null matters
    (`nullable`: a calibration may set it to null), whether a calibration file may set it, and
    what reference §1.5 says of it."""

    name: str
    kind: str
    default: Any
    what: str
    nullable: bool = True
    calibrated: bool = False

    @property
    def range(self) -> str:
        return RANGES[self.kind]


@dataclass(frozen=True)
class Tune:
    """How `ragaudit calibrate` proposes a threshold: `max`, a ceiling on each run; `rate`, a floor on
    a pipeline's share; `count`, a ceiling on a count; from a per-question statistic, higher = worse."""

    kind: str
    stat: Callable[[Question], float | None]


@dataclass(frozen=True)
class Card:
    """The check's card on report.html: its label and hint (formatted with the thresholds in force,
    `{coverage_min}`), its figure from the pipeline's summary and its check (None: not gated), shown
    as a share (`pct`) or a number, with the mean of `mean` beside the bar; cards are shown by `rank`."""

    rank: int
    label: str
    value: Callable[[dict[str, Any], dict[str, Any] | None, GateSection], float | None]
    form: str = "pct"
    hint: str = ""
    mean: str | None = None


@dataclass(frozen=True)
class GateCheck:
    """One gate check. `value` is the pipeline's figure (None: not measured); `failing` names the
    questions that fail it at a threshold. Without a threshold the check is left out (`unset="omit"`)
    or kept as not gated (`unset="not gated"`); without a value it is left out (`missing="omit"`) or
    fails (`missing="fail"`). A structural check (no `key`) has a `bar` instead: its limit at the
    threshold it carries."""

    name: str
    op: str
    fails_when: str  # reference §4
    names: str  # reference §4: the questions it names
    key: Key | None = None
    settings: tuple[Key, ...] = ()  # other [gate] keys the check reads
    value: Callable[[Scope], float | None] | None = None
    failing: Callable[[Scope, float], list[str]] | None = None
    why: Callable[[Check, Question], str] | None = None
    detail: str = ""
    unset: str = "omit"
    missing: str = "fail"
    errored_note: bool = False  # the detail says how errored runs count
    explain: Callable[[Scope], str] | None = None  # its detail, from what the pipeline found
    limit: Callable[[GateSection], float | None] | None = None  # its threshold, when not its key's value
    bound_of: Callable[[float, GateSection], str] | None = None  # its bound, when not the threshold
    bar: Callable[[float], float] | None = None  # a structural check's limit at its threshold
    reads_claims: bool = False  # counts what a claim's judgement decides: a fit to labels moves it
    tune: Tune | None = None
    history: str | None = None  # the history's name for the figure it reads
    metric: str | None = None  # the metric of ragaudit.checks.metrics.registry it gates
    card: Card | None = None

    def threshold(self, t: GateSection) -> float | None:
        return self.limit(t) if self.limit is not None else t.threshold(self.name)

    def bound(self, limit: float, t: GateSection) -> str:
        return self.bound_of(limit, t) if self.bound_of is not None else f"{limit:g}"

    @property
    def keys(self) -> tuple[str, ...]:
        """The [gate] keys its threshold is made of: its settings, then its own."""
        return (*(k.name for k in self.settings), *((self.key.name,) if self.key else ()))


# ---- what the checks read ------------------------------------------------------------------------


def worst(scope: Scope, stat: str) -> float | None:
    found = [getattr(q.stats, stat) for q in scope.questions if getattr(q.stats, stat) is not None]
    return max(found, default=None)


def share_in(scope: Scope, state: str) -> float:
    return sum(q.lam.state == state for q in scope.questions) / len(scope.questions) if scope.questions else 0.0


def by_stats(failing: Callable[[QuestionStats, float], bool]) -> Callable[[Scope, float], list[str]]:
    return lambda scope, limit: sorted(q.qid for q in scope.questions if failing(q.stats, limit))


def run_share(key: str) -> Callable[[Question], float | None]:
    return lambda q: getattr(q.stats, key) / q.stats.runs if q.stats.runs else None


def labelled_detail(found: Estimate | None) -> str:
    if found is None:
        return "no labels of this pipeline's runs ([labels] path names none)"
    if found.ci is None:
        return f"no corrected good-run rate: {found.why_not}"
    return (
        f"good-run rate {found.rate:.3f} over {found.runs} runs, corrected by {found.labelled} labels on a random "
        f"sample to {found.corrected:.3f}, 95% interval [{found.ci[0]:.3f}, {found.ci[1]:.3f}]"
    )


def convergent(p: dict[str, Any], check: dict[str, Any] | None, t: GateSection) -> float | None:
    lam = p.get("lambda") or {}
    n = sum(lam.values()) or p.get("questions") or 0
    return lam.get("convergent", 0) / n if n else None


def covered(summary: dict[str, Any], check: dict[str, Any] | None, minimum: float) -> float | None:
    """The share of runs meeting coverage_min, as the gate counted it (a missing coverage does
    not); for an ungated pipeline, from the coverage histogram's bins at or above the bar."""
    if check is not None:
        value: float | None = check["value"]
        return value
    counts: list[int] | None = (summary.get("histograms") or {}).get("coverage")
    if not counts or not sum(counts):
        return None
    bins = len(counts) - 1
    return sum(counts[b] for b in range(bins) if b / bins >= minimum - 1e-9) / sum(counts)


# ---- why a question fails a check ------------------------------------------------------------------


def number(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.3g}"


def beyond(value: float | None, sign: str, bar: float | None) -> str:
    """`0.3862 > 0.3856`: a question's figure against the bar it crossed, each with as many digits
    beyond three as it takes to tell them apart (rounded alike, never `0.386 > 0.386`)."""
    if value is None or bar is None or value == bar:
        return f"{number(value)} {sign} {number(bar)}"
    digits = next((d for d in range(3, 17) if f"{value:.{d}g}" != f"{bar:.{d}g}"), 17)
    return f"{value:.{digits}g} {sign} {bar:.{digits}g}"


def runs_that(count: int, q: Question, what: str) -> str:
    return f"{count} of {q.stats.runs} runs {what}"
