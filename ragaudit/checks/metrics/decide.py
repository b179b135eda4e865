"""What the thresholds decide about a claim (docs/reference.md §3), in one place: the scorer calls
these as it judges each claim, and `ragaudit calibrate --labels` calls them again with other
thresholds on what the scorer found (the `Evidence` each claim of report.json records), to fit the
thresholds to a person's labels without scoring anything twice.

Nothing here reads text: the evidence is read once, by `grounding.py`, `keycontent.py` and
`contradiction.py`; a threshold only compares numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ragaudit.io.config_schema import LambdaSection, SupportSection

TAKEN_MARGIN = 0.1  # how much better an uncited passage must support a claim to be where it came from
ADDS_MAX = 2  # content words a claim may add to its cited texts and the question: a third is something they do not say


_LAMBDA, _SUPPORT = LambdaSection(), SupportSection()  # the config's defaults


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The thresholds a claim's judgement reads: `[support] threshold` and the `[lambda]` bars, by
    default the config's."""

    support: float = _SUPPORT.threshold
    anchor_support_min: float = _LAMBDA.anchor_support_min
    key_recall_min: float = _LAMBDA.key_recall_min
    key_precision_min: float = _LAMBDA.key_precision_min

    FITTED = ("support", "anchor_support_min", "key_recall_min", "key_precision_min")


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a claim's grounding reads: how its cited texts stand to it."""

    cited: bool
    support: float | None  # the support scorer's, by its cited texts (None: no scorer ran)
    missed: bool  # it states a quantity, identifier or acronym its cited texts and the question lack
    contradicted: bool
    said: bool  # one sentence of its cited texts holds its and the question's content words
    other_support: float | None = None  # by the uncited passage holding the words its cited texts lack
    other_missed: bool = False  # that passage lacks one of its quantities
    adds: int = 0  # its content words that neither its cited texts nor the question hold, nor a word like them
    heading: bool = False  # its cited texts are headings only, which state nothing
    echoes: int = 0  # the question's words it repeats that its cited texts lack, nor a word like them
    swapped: int = 0  # names of its cited texts it changes one word of (`swaps.py`)
    unheld: bool = False  # its cited texts hold none of what it adds to the question, nor a word like it

    def to_json(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Evidence:
        return cls(**{f: value[f] for f in cls.__slots__ if f in value})  # a field added later takes its default


def taken(e: Evidence) -> bool:
    """Does an uncited retrieved passage say the claim better than its cited texts?"""
    return e.other_support is not None and (e.support is None or e.other_support >= e.support + TAKEN_MARGIN)


def grounding(e: Evidence, t: Thresholds) -> str:
    """`uncited`, `contradicted`, `misattributed`, `supported` or `unsupported` (docs/reference.md §3)."""
    if not e.cited:
        return "uncited"
    if e.contradicted:
        return "contradicted"
    elsewhere = taken(e)
    if elsewhere and e.other_support is not None and e.other_support >= t.support and not e.other_missed:
        return "misattributed"
    # a heading states nothing, so it supports nothing; a changed name, an answer they hold none
    # of, or the question restated in words they lack is not what they say, however close it scores
    if e.adds > ADDS_MAX or e.echoes > ADDS_MAX or e.heading or e.swapped or e.unheld:
        return "unsupported"
    if not e.missed and not elsewhere and (e.support is not None and e.support >= t.support or e.said):
        return "supported"
    return "unsupported"


@dataclass(frozen=True, slots=True)
class AnchorEvidence:
    """What a claim's judgement against the gold anchor reads."""

    conflicts: bool
    support: float | None  # the anchor's support of the claim (None: no scorer ran)
    share: float | None  # of the key content it states (None: an empty key)
    drawn: float | None  # of its own content the anchor states (None: it has none beyond the question)
    answers: bool  # it states every item of the key that answers the question
    mentioned: bool  # it states one of the key's quantities, or the key has none
    missing: tuple[str, ...] = ()  # the key items it does not state
    added: tuple[str, ...] = ()  # its own items the anchor does not state
    mentions: tuple[str, ...] = ()  # the key's quantities
    invented: tuple[str, ...] = ()  # names it writes that neither its cited texts nor the question write

    NUMBERS = ("conflicts", "support", "share", "drawn", "answers", "mentioned")  # what a threshold reads

    def to_json(self) -> dict[str, Any]:
        return {**{f: getattr(self, f) for f in self.NUMBERS}, "invented": list(self.invented)}

    @classmethod
    def from_json(
        cls, value: dict[str, Any], missing: Iterable[str] = (), added: Iterable[str] = (), mentions: Iterable[str] = ()
    ) -> AnchorEvidence:
        return cls(
            **{f: value[f] for f in cls.NUMBERS},
            missing=tuple(missing),
            added=tuple(added),
            mentions=tuple(mentions),
            invented=tuple(value.get("invented", ())),  # a report written before it names none
        )


def anchor_verdict(a: AnchorEvidence, t: Thresholds) -> tuple[str, tuple[str, ...]]:
    """`states`, `conflicts` or `other`, with each bar the claim misses, in words."""
    if a.conflicts:
        return "conflicts", ()
    unmet = []
    if not (a.share is None or a.share >= t.key_recall_min or a.answers):
        unmet.append(f"it lacks {', '.join(a.missing[:4])} (key content {a.share:.0%} < {t.key_recall_min:.0%})")
    if a.drawn is not None and a.drawn < t.key_precision_min:
        unmet.append(
            f"it adds {', '.join(a.added[:4])}, which the anchor does not state "
            f"({a.drawn:.0%} of its own content < {t.key_precision_min:.0%})"
        )
    if not a.mentioned:
        unmet.append(f"it states none of {', '.join(a.mentions[:4])}")
    if a.invented:  # another actor, place or thing than its sources give: not the anchor's fact
        unmet.append(f"it names {', '.join(a.invented[:4])}, which neither its cited texts nor the question name")
    if a.support is not None and a.support < t.anchor_support_min:  # no scorer: the key content decides
        unmet.append(f"anchor support {a.support:.2f} < {t.anchor_support_min:.2f}")
    return ("other" if unmet else "states"), tuple(unmet)
