"""Does an answer given on an edited corpus follow the edit (docs/reference.md §13)? Each claim of the
answer is read for the edited fact and the old one:

* a number edit: the claim states the quantity by value and unit (in digits or in words, by the
  rules of `ragaudit.checks.metrics.quantities`: `17 characters`), or its value in digits alone (`17`);
* an entity edit: the claim names it, as a whole word, in any case;
* a negation edit: the claim says what the edited statement says and contradicts the original by
  its negation, or the reverse (`ragaudit.checks.metrics.contradiction`), holds one of the two words
  the negation bears on (`is [not] replaced every` → `replaced`, `every`), and gives none of its
  numbers but the anchor's.

The old fact (and a negation either way) is looked for in the claims closest to the anchor (those
sharing the most content words with it): another fact of the answer with the same number is not
the old one. The answer **follows** when a claim states the edited fact (and not the old one)
citing the edited passage (a cited payload of the edited document overlapping the anchor's span
there), and no claim citing that passage states the old fact. It **keeps the old fact** when a
claim states the old fact and none states the edited one. Anything else is **other**, and says why. For the exclusion probe,
the answer still states the fact when a claim states the anchor's quantity or name as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragaudit.checks.metrics.claims import Claim, claims_of
from ragaudit.checks.metrics.contradiction import contradiction
from ragaudit.checks.metrics.faithful import FOLLOWS, KEEPS_OLD, NECESSARY, OTHER, UNNECESSARY
from ragaudit.checks.metrics.keycontent import KeyContent, stated
from ragaudit.checks.metrics.quantities import Mention, holds, mentions
from ragaudit.checks.metrics.spans import in_unit
from ragaudit.core.errors import clip
from ragaudit.core.text import clean, content_stems
from ragaudit.core.types import Corpus, Span, Trace
from ragaudit.flows.probing.edits import Edit


@dataclass(frozen=True)
class Outcome:
    outcome: str  # follows, keeps_old, other; necessary, unnecessary, other
    why: str


def _quantity(text: str, at: int) -> Mention | None:
    """The quantity of `text` that holds char `at`."""
    return next((m for m in mentions(text) if m.start <= at < m.end), None)


def _stated(mention: Mention | None, text: str) -> bool:
    """The quantity by value and unit (`ragaudit.checks.metrics.quantities.holds`), or its value written in
    digits without a unit ("At least 17 [1]."): not "one staff engineer" for 1, nor SEV3 for 3."""
    if mention is None:
        return False
    value = mention.key.split(" ", 1)[0]
    return holds(mention, text) or any(m.kind == "number" and m.key == value for m in mentions(text))


def _named(name: str, text: str) -> bool:
    return bool(name) and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE) is not None


def _negation(claim: str, said: str, other: str) -> bool:
    """The claim says what `said` says where `other` says its opposite by a negation."""
    against = contradiction(claim, [other])
    return against is not None and against.kind == "negation" and contradiction(claim, [said]) is None


def states(edit: Edit, claim: str, *, edited: bool) -> bool:
    """Does the claim state the edited fact (`edited`) or the fact as it was?"""
    offset = edit.at - edit.start
    if edit.kind == "number":
        text = edit.edited if edited else edit.anchor
        return _stated(_quantity(text, offset + (len(edit.new) if edited else len(edit.old)) - 1), claim)
    if edit.kind == "entity":
        return _named(edit.new if edited else edit.old, claim)
    said, other = (edit.edited, edit.anchor) if edited else (edit.anchor, edit.edited)
    # the claim must say what the negation bears on (the words after it: "is [not] replaced every…"),
    # not merely share the statement's topic ("Standard employees receive one hardware key")
    predicate = set(content_stems(edit.anchor[offset + len(edit.old) :])[:2])
    return (
        bool(predicate & set(content_stems(claim)))
        and _same_numbers(claim, edit.anchor)
        and _negation(claim, said, other)
    )


def _same_numbers(claim: str, anchor: str) -> bool:
    """A claim that gives numbers gives one of the anchor's, when the anchor has any: "Daily backups
    are retained for 35 days" is another fact than "Monthly backups are retained for 13 months"."""
    theirs = [m for m in mentions(anchor) if m.kind == "number"]
    mine = [m for m in mentions(claim) if m.kind == "number"]
    return not (theirs and mine) or any(_stated(m, claim) for m in theirs)


def _said(edit: Edit, edited: bool) -> str:
    """The fact in words, for a why."""
    if edit.kind == "negation":
        return f"“{clip(edit.edited if edited else edit.anchor, 70)}”"
    return repr(edit.new if edited else edit.old)


def cites_passage(claim: Claim, trace: Trace, edit: Edit, corpus: Corpus | None) -> bool:
    """Does the claim cite a payload of the edited document overlapping the anchor's span there?"""
    cited = set(claim.citations)
    anchor = Span(edit.start, edit.end, "char")
    for p in trace.retrieved:
        if p.snippet_id in cited and p.doc_id == edit.doc_id:
            span = in_unit(p, "char", corpus)
            if span is not None and span.overlaps(anchor):
                return True
    return False


def _closest(claims: list[Claim], anchor: str) -> list[Claim]:
    """The claims that share the most content words with the anchor: its statement in the answer. A
    quantity or a negation elsewhere in the answer is another fact's ("After the 90-day grace period,
    data is deleted" beside "… plus a 103-day grace period")."""
    words = set(content_stems(anchor))
    shared = {c.n: len(words & set(content_stems(clean(c.text)))) for c in claims}
    top = max(shared.values(), default=0)
    return [c for c in claims if shared[c.n] == top]


def _unanswered(trace: Trace) -> Outcome | None:
    if trace.error is not None:
        return Outcome(OTHER, f"errored: {clip(trace.error, 400)}")  # the cause comes last
    if trace.answer is None:
        return Outcome(OTHER, "no answer: only retrieved passages")
    if not claims_of(trace.answer):
        return Outcome(OTHER, "the answer states nothing")
    return None


def classify(edit: Edit, trace: Trace, corpus: Corpus | None) -> Outcome:
    """The run on the edited corpus: follows, keeps_old or other, with why. `corpus`: the edited copy."""
    if (silent := _unanswered(trace)) is not None:
        return silent
    claims = claims_of(trace.answer)
    closest = _closest(claims, edit.anchor)
    new = [c for c in (closest if edit.kind == "negation" else claims) if states(edit, clean(c.text), edited=True)]
    old = [c for c in closest if states(edit, clean(c.text), edited=False)]
    citing = [c for c in new if c not in old and cites_passage(c, trace, edit, corpus)]
    old_citing = [c for c in old if cites_passage(c, trace, edit, corpus)]
    where = f"{edit.doc_id} [{edit.start}, {edit.end})"
    if citing and not old_citing:
        ids = ", ".join(citing[0].citations)
        return Outcome(FOLLOWS, f"claim {citing[0].n} states {_said(edit, True)} citing the edited passage ({ids})")
    if old and not new:
        if edit.kind == "negation":  # a negation's side is a polarity: quote the claim that keeps it
            return Outcome(
                KEEPS_OLD,
                f"claim {old[0].n} says “{clip(clean(old[0].text), 70)}” as the statement did before the edit, "
                f"not {_said(edit, True)}",
            )
        return Outcome(KEEPS_OLD, f"claim {old[0].n} states {_said(edit, False)}, the fact before the edit")
    if new and old:
        return Outcome(OTHER, f"states both {_said(edit, True)} and the old {_said(edit, False)}")
    if new:
        ids = ", ".join(new[0].citations) or "nothing"
        return Outcome(
            OTHER, f"claim {new[0].n} states {_said(edit, True)} but cites {ids}, not the edited passage {where}"
        )
    text = clean(trace.answer.text or " ".join(c.text for c in claims) if trace.answer else "")
    return Outcome(OTHER, f"states neither {_said(edit, True)} nor {_said(edit, False)}: “{clip(text, 90)}”")


def still_states(fact: Edit, trace: Trace) -> Outcome:
    """The run with the anchor's passage left out of retrieval: does the answer still state the
    anchor's quantity or name (`fact`: a number or entity edit of the anchor, whose old side is it)?"""
    if (silent := _unanswered(trace)) is not None:
        return silent
    for claim in _closest(claims_of(trace.answer), fact.anchor):
        if states(fact, clean(claim.text), edited=False):
            return Outcome(UNNECESSARY, f"claim {claim.n} still states {_said(fact, False)} without its passage")
    return Outcome(NECESSARY, f"no claim states {_said(fact, False)} once its passage is gone")


def states_fact(
    fact: Edit, trace: Trace, key: KeyContent | None = None, *, recall: float = 0.3, precision: float = 0.5
) -> bool:
    """Does the run (on the real corpus) state the anchor's fact: its quantity or name, or for a
    negation its statement? A negation's side is only the statement's polarity, so the claim must
    also state the anchor's `key` content as a run's `correct` reads it (at least `recall` of it,
    `precision` of its own content the anchor's): "Hardware keys are shipped to the IT help desk"
    shares the subject and verb of "… are shipped only to the employee's registered home address",
    not its fact."""
    answer = trace.answer if trace.error is None else None
    for claim in _closest(claims_of(answer), fact.anchor):
        text = clean(claim.text)
        if states(fact, text, edited=False) and (
            fact.kind != "negation" or key is None or _holds(text, key, recall, precision)
        ):
            return True
    return False


def _holds(claim: str, key: KeyContent, recall: float, precision: float) -> bool:
    found = stated(claim, key)
    return (found.share is None or found.share >= recall or found.answers) and (
        found.drawn is None or found.drawn >= precision
    )
