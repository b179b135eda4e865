"""A claim that says the opposite of a text it is read against (docs/reference.md §3, *contradicts*).

Each clause of the claim is aligned with the one statement of the text that says most of what it says: the
sentence sharing the most content stems with the claim, at least two and at least half of the
claim's own (ties go to the shorter), narrowed to its clause that shares the most (`text.clauses`:
"X; Y" is X and Y) when that clause is aligned too: "Credentials may only be stored in the vault;
other password managers are not allowed" does not negate "Credentials are allowed in the vault". Against that statement the claim contradicts when it

* gives another value of the same measure: a duration for a duration (`2 hours` where it says `4
  hours`, `seventeen seconds` where it says `5 minutes`), a count for a count, a percentage for a
  percentage, and does not also give the statement's own value;
* uses the opposite term: one word of a pair of opposites (`required` / `optional`, `accepted` /
  `rejected`, `before` / `after`, …) where the statement uses the other;
* negates it, or it negates the claim: one of them holds a negation (`not`, `no`, `never`,
  `cannot`, `n't`; not "no later than" or "not only") and the other does not, unless an opposite
  term makes them agree ("is not optional" = "is required"). When two statements align equally
  well and only one of them is negated, the claim is taken to say the other: no contradiction.

Nothing here reads meaning beyond words: a claim that contradicts in other words ("SMS is fine"
for "SMS codes are not accepted") goes unseen here, and is left to the support scorer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from ragaudit.checks.metrics.memo import LONGEST, SIZE, Memo
from ragaudit.checks.metrics.quantities import Mention, dimension, holds, mentions
from ragaudit.core.forgetting import forgotten
from ragaudit.core.text import WORD, clauses, content_stems, negated, sentences, stem

# pairs of opposites, as words; compared by stem, so "required"/"requires" and "optional" match
_OPPOSITES = [
    ("required", "optional"),
    ("mandatory", "optional"),
    ("allowed", "forbidden"),
    ("allowed", "prohibited"),
    ("permitted", "prohibited"),
    ("permitted", "forbidden"),
    ("accepted", "rejected"),
    ("approved", "rejected"),
    ("approved", "denied"),
    ("granted", "revoked"),
    ("granted", "denied"),
    ("enabled", "disabled"),
    ("included", "excluded"),
    ("always", "never"),
    ("before", "after"),
    ("earlier", "later"),
    ("minimum", "maximum"),
    ("increase", "decrease"),
    ("public", "private"),
    ("internal", "external"),
    ("encrypted", "unencrypted"),
    ("encrypted", "plaintext"),
    ("automatic", "manual"),
    ("automatically", "manually"),
    ("allow", "deny"),
    ("allow", "block"),
    ("online", "offline"),
    ("temporary", "permanent"),
    ("shorter", "longer"),
    ("more", "fewer"),
    ("more", "less"),
    ("higher", "lower"),
    ("above", "below"),
    ("inside", "outside"),
    ("start", "end"),
    ("first", "last"),
]
OPPOSITE: dict[str, frozenset[str]] = {}
for _a, _b in _OPPOSITES:
    for _x, _y in ((_a, _b), (_b, _a)):
        OPPOSITE[stem(_x)] = OPPOSITE.get(stem(_x), frozenset()) | {stem(_y)}


@dataclass(frozen=True, slots=True)
class Contradiction:
    kind: str  # "quantity" | "opposite" | "negation"
    claim: str  # what the claim says: "2 hours", "optional", "not"
    text: str  # what the statement says instead: "4 hours", "required", "" (no negation)
    statement: str  # the statement of the text it contradicts

    def describe(self) -> str:
        if self.kind == "negation":
            return "negates it" if self.claim else "drops its negation"
        return f"says {self.claim} where it says {self.text}"


@dataclass(frozen=True, slots=True)
class _Statement:
    text: str
    stems: frozenset[str]
    words: dict[str, str]  # the stem of every word, stopwords included, and the word as written
    negated: bool
    measures: tuple[tuple[str, Mention], ...]  # (what it measures, the quantity)


_NEXT_WORD = re.compile(r"[\s-]*([^\W\d_]+)")


def _measures(text: str) -> tuple[tuple[str, Mention], ...]:
    """Quantities with what they measure: a duration's base unit or another unit, else the word
    that follows a bare number ("14 characters")."""
    out = []
    for m in mentions(text, number_words=True):
        if m.kind != "number":
            continue
        measure = dimension(m)
        if not measure and (after := _NEXT_WORD.match(text, m.end)):
            measure = "of " + stem(after.group(1).lower())
        if measure:
            out.append((measure, m))
    return tuple(out)


@forgotten
@lru_cache(maxsize=1 << 14)
def _statement(text: str) -> _Statement:
    return _Statement(
        " ".join(text.split()),
        frozenset(content_stems(text)),
        {stem(w.lower()): w for w in WORD.findall(text)},
        negated(text),
        _measures(text),
    )


@forgotten
@lru_cache(maxsize=1 << 12)
def _statements(text: str) -> tuple[tuple[_Statement, tuple[_Statement, ...]], ...]:
    """Each sentence of `text` as a statement, with its clauses when it joins several."""
    out = []
    for sentence in sentences(text):
        whole, *parts = clauses(sentence)
        out.append((_statement(whole), tuple(_statement(p) for p in parts)))
    return tuple(out)


def _aligned(claim: _Statement, texts: Sequence[str]) -> list[_Statement]:
    """The statements of `texts` the claim is aligned with: the sentences sharing the most of its
    content stems (at least two and half of them), each narrowed to its clause that shares the
    most when that clause is aligned too; the shortest first."""
    best: list[tuple[int, _Statement]] = []
    top = 0
    for text in texts:
        for whole, parts in _statements(text):
            shared = len(claim.stems & whole.stems)
            if shared < 2 or 2 * shared < len(claim.stems) or shared < top:
                continue
            if shared > top:
                top, best = shared, []
            narrowest = whole
            if parts:
                part = max(parts, key=lambda p: (len(claim.stems & p.stems), -len(p.stems)))
                kept = len(claim.stems & part.stems)
                if kept >= 2 and 2 * kept >= len(claim.stems):
                    narrowest = part
            best.append((len(narrowest.stems), narrowest))
    return [s for _, s in sorted(best, key=lambda b: b[0])]


def _rival(claim: _Statement, statement: _Statement) -> Contradiction | None:
    """A quantity of the claim where the statement gives another of the same measure."""
    for measure, m in claim.measures:
        if holds(m, statement.text):
            continue
        rivals = [r for kind, r in statement.measures if kind == measure]
        if rivals and not any(holds(r, claim.text) for r in rivals):
            return Contradiction("quantity", m.surface, rivals[0].surface, statement.text)
    return None


def _opposite(claim: _Statement, statement: _Statement) -> tuple[str, str] | None:
    for word, written in claim.words.items():
        if word in statement.words:
            continue
        for other in OPPOSITE.get(word, ()):
            if other in statement.words and other not in claim.words:
                return written, statement.words[other]
    return None


def contradiction_of(claim: str, texts: Sequence[str]) -> Contradiction | None:
    """`contradiction`, remembered: a question's runs repeat their claims over the same texts."""
    key = (claim, tuple(texts))
    if len(claim) + sum(map(len, key[1])) > LONGEST:
        return contradiction(claim, texts)
    return _CONTRADICTIONS.get(key, contradiction, claim, key[1])


_CONTRADICTIONS: Memo[Contradiction | None] = Memo(SIZE)


def contradiction(claim: str, texts: Sequence[str]) -> Contradiction | None:
    """How the claim, or one of its clauses, contradicts the statement of `texts` it is aligned
    with, or None."""
    whole, *parts = clauses(claim)
    for part in parts or [whole]:
        found = _contradiction(part, texts)
        if found is not None:
            return found
    return None


def _contradiction(claim: str, texts: Sequence[str]) -> Contradiction | None:
    mine = _statement(claim)
    if len(mine.stems) < 2:
        return None
    aligned = _aligned(mine, texts)
    if not aligned:
        return None
    statement = aligned[0]
    found = _rival(mine, statement)
    if found is not None:
        return found
    opposite = _opposite(mine, statement)
    if mine.negated == statement.negated:
        if opposite is not None:
            return Contradiction("opposite", opposite[0], opposite[1], statement.text)
        return None
    if opposite is not None:  # "is not optional" says "is required"
        return None
    if any(s.negated == mine.negated for s in aligned[1:]):
        return None  # another statement, as close, says what the claim says
    return Contradiction("negation", "not" if mine.negated else "", "" if mine.negated else "not", statement.text)
