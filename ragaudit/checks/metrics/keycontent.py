"""The key content of a gold anchor, and whether a claim states it or conflicts with it (docs/reference.md §3).

An anchor's *key content* is what an answer must say to state the anchor's fact rather than some
other fact about the same topic: its quantities, dates and identifiers, its names (capitalised
words that do not open a sentence), and its content words that the question does not already
hold. When the gold item has a reference answer, it tells which part of the anchor answers the
question: the key content is then the reference answer's items that the anchor also holds (all
of the anchor's when the reference answer shares none).

A claim states a key item when it holds it up to normalisation: numbers by value and unit, and
written as words (`fourteen characters` states `14 characters`); names and words by their stem;
and a content word also by the embedding model's similarity to a word of the claim
(`yearly` for `annually`). Names and quantities never match by similarity: the model finds
"France" and "Germany" 0.75 alike.

A claim *states* the anchor when it holds at least `lambda.key_recall_min` of the key content (its
recall) and at least `lambda.key_precision_min` of its own content beyond the question (a quantity
the question gives is the question's), in one of its clauses, is the anchor's (its precision):
"Keys rotate every 12 months, and lost keys are reported in 4 hours" states an anchor on rotation
in its first clause; a sentence on another fact that happens to name the answer ("… a
deterministic Turing machine is used") does not.

A claim *conflicts* with the anchor when it is the anchor's statement (of all the sentences of its
cited texts, the anchor shares the most content words with it) but gives a quantity, date or
identifier of the same kind and measure as one of the anchor's in place of it (`16 characters` for
`14 characters`; a duration in any unit, `annual` for `every quarter`), or negates it. A claim
closer to another sentence of its cited texts states another fact of them, which is never a
conflict: "Daily backups are kept 35 days" beside an anchor "Secondary copies are kept 7 days".
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ragaudit.checks.metrics.claims import DISCOURSE
from ragaudit.checks.metrics.memo import LONGEST, SIZE, Memo
from ragaudit.checks.metrics.quantities import Mention, dimension, holds, mentions
from ragaudit.core.forgetting import forgotten
from ragaudit.core.text import WORD, clauses, clean, content_stems, names, sentences, stem

if TYPE_CHECKING:
    from ragaudit.checks.metrics.embed import Encoder

WORD_SIMILARITY = 0.65  # cosine of two single words' embeddings that counts as the same word
# Words that relate a fact rather than carry it (modality, bounds, order in time): "must" or "will
# need to", "within" or "no later than", "at least" or "no fewer than" say the same of "4 hours".
RELATIONAL = frozenset(
    """able allowed earlier early exclusively fewer following later least less maximum merely minimum need needed
needs prior required requires solely soon sooner""".split()
)
NOT_KEY = DISCOURSE | RELATIONAL  # words that carry no fact of their own


@dataclass(frozen=True, slots=True)
class KeyContent:
    mentions: tuple[Mention, ...]  # quantities, dates and identifiers, each once
    names: tuple[str, ...]  # lower-cased
    words: tuple[str, ...]  # stems of content words, each once
    forms: tuple[str, ...]  # a written form of each word, for the similarity model
    anchor: str = ""  # the anchor the key is of
    asked: frozenset[str] = frozenset()  # the question's stems and names, which no key holds
    focus: tuple[str, ...] = ()  # the items that answer what the question asks for (`focus_of`)
    question: str = ""  # the question, whose quantities a claim restates rather than adds

    def __len__(self) -> int:
        return len(self.mentions) + len(self.names) + len(self.words)

    def describe(self) -> list[str]:
        return [m.surface for m in self.mentions] + list(self.names) + list(self.forms)


@dataclass(frozen=True, slots=True)
class Stated:
    """How much of a key a claim states."""

    share: float | None  # stated items / items; None for an empty key
    drawn: float | None  # share of the claim's own key items (beyond the question) that the anchor states
    missing: tuple[str, ...]  # the items it does not state, as written in the anchor
    conflicts: tuple[str, ...]  # the claim's quantities that replace one of the anchor's
    answers: bool = False  # it states every item of the key's focus (there is one)
    added: tuple[str, ...] = ()  # its own items (of the clause closest to the anchor) the anchor does not state


@forgotten
@lru_cache(maxsize=1 << 15)  # anchors, claims and cited sentences come back run after run
def _words(text: str) -> tuple[tuple[str, str], ...]:
    """(stem, surface) of the content words of `text`, names and numbers left out."""
    found = names(text)
    out = []
    for word in WORD.findall(clean(text)):
        lower = word.lower()
        if lower in found or any(c.isdigit() for c in word):
            continue
        first = _first_stem(lower)
        if first is not None:
            out.append((first, lower))
    return tuple(out)


def cited_words(text: str) -> tuple[tuple[str, str], ...]:
    """(stem, lower-cased word) of the content words of a text, names and numbers left out."""
    return _words(text)


@lru_cache(maxsize=1 << 16)
def _first_stem(word: str) -> str | None:
    stems = content_stems(word)
    return stems[0] if stems else None


def _distinct_mentions(text: str, *, number_words: bool = False) -> tuple[Mention, ...]:
    seen, out = set(), []
    for m in mentions(text, number_words=number_words):
        if (m.kind, m.key) not in seen:
            seen.add((m.kind, m.key))
            out.append(m)
    return tuple(out)


# what a question asks for: a quantity or a time, or who
_ASKS_QUANTITY = re.compile(
    r"\b(?:how\s+(?:long|often|many|much|soon|quickly|frequently|fast|old|large|big|far|early|late)|within\s+how|"
    r"after\s+how|what\s+(?:percentage|percent|share|fraction|number|time|date|deadline|period)|when)\b",
    re.IGNORECASE,
)
_ASKS_WHO = re.compile(r"^\s*(?:who|whom|which\s+(?:team|role|group|person|department|vendor|tool))\b", re.IGNORECASE)
# words that give a frequency or a period in answer to "how often": "every quarter", "yearly"
FREQUENCY = frozenset(
    stem(w)
    for w in """hourly daily weekly fortnightly monthly quarterly annually yearly biweekly biannually semiannually
hour day week fortnight month quarter year""".split()
)


def focus_of(question: str, key: KeyContent) -> tuple[str, ...]:
    """The key's items that answer what the question asks for: for a quantity or a time ("how
    long", "how often", "within how many days", "when"), its quantities and dates and its words of
    frequency; for "who" or "which team", its names. An answer that states them answers the
    question, whatever else of the anchor it leaves out ("7 years" for "kept 7 years so that
    archived data can still be decrypted"). None for other questions."""
    if _ASKS_QUANTITY.search(question):
        return tuple(
            [m.surface for m in key.mentions if m.kind in ("number", "date")]
            + [f for w, f in zip(key.words, key.forms) if w in FREQUENCY]
        )
    if _ASKS_WHO.search(question):
        return key.names
    return ()


@forgotten
@lru_cache(maxsize=1 << 14)
def key_content(anchor: str, question: str, reference: str | None = None) -> KeyContent:
    found = _key_content(anchor, question, reference)
    return dataclasses.replace(found, focus=focus_of(question, found), question=question)


def _key_content(anchor: str, question: str, reference: str | None) -> KeyContent:
    asked = frozenset(content_stems(question)) | frozenset(names(question))
    anchor_stems = {s for s, _ in _words(anchor)} | set(content_stems(anchor))
    anchor_names = names(anchor)
    own = _items(anchor, asked, anchor)
    if reference:
        theirs = _items(reference, asked, anchor)
        kept = KeyContent(
            tuple(m for m in theirs.mentions if holds(m, anchor)),
            tuple(n for n in theirs.names if n in anchor_names or stem(n) in anchor_stems),
            tuple(w for w in theirs.words if w in anchor_stems),
            tuple(f for w, f in zip(theirs.words, theirs.forms) if w in anchor_stems),
            anchor,
            asked,
        )
        if len(kept):
            return kept
    return own


def _items(text: str, asked: frozenset[str], anchor: str, *, number_words: bool = True) -> KeyContent:
    """The key items of `text` beyond what the question asks; the words of its quantities ("12
    months") are the quantities', not words of their own. Numbers written as words count in a
    source's text (`number_words`), not in an answer's."""
    found = _distinct_mentions(text, number_words=number_words)
    text_names = tuple(sorted(n for n in names(text) if n not in asked and stem(n) not in asked))
    taken = {w.lower() for m in found for w in WORD.findall(text[m.start : m.end])}
    words: dict[str, str] = {}
    for s, surface in _words(text):
        if s not in asked and s not in words and surface not in taken and surface not in NOT_KEY:
            words[s] = surface
    return KeyContent(found, text_names, tuple(words), tuple(words.values()), anchor, asked)


class WordVectors:
    """Single-word embeddings from the configured encoder, encoded a batch at a time (and cached
    by the encoder like any text)."""

    def __init__(self, encoder: Encoder | None) -> None:
        self.encoder = encoder
        self._rows: dict[str, np.ndarray] = {}

    def prepare(self, words: Sequence[str]) -> None:
        todo = [w for w in dict.fromkeys(words) if w not in self._rows]
        if todo and self.encoder is not None:
            for word, vector in zip(todo, self.encoder.encode(todo)):
                self._rows[word] = vector

    def similar(self, word: str, others: Sequence[str]) -> bool:
        mine = self._rows.get(word)
        if mine is None or not others:
            return False
        found = [self._rows[o] for o in others if o in self._rows]
        return bool(found) and float(np.max(np.stack(found) @ mine)) >= WORD_SIMILARITY


def words_to_prepare(claim: str, key: KeyContent) -> list[str]:
    """The words whose vectors `stated` may compare."""
    return [*key.forms, *(surface for _, surface in _words(claim)), *(surface for _, surface in _words(key.anchor))]


def _unstated(items: KeyContent, text: str, vectors: WordVectors | None) -> list[str]:
    """The items that `text` does not state, as written where they come from."""
    words = _words(text)
    stems = {s for s, _ in words} | set(content_stems(text))
    lowered = names(text) | {w.lower() for w in WORD.findall(text)}
    surfaces = [w for _, w in words]
    missing = [m.surface for m in items.mentions if not holds(m, text)]
    missing += [n for n in items.names if n not in lowered and stem(n) not in stems]
    missing += [
        form
        for w, form in zip(items.words, items.forms)
        if w not in stems and not (vectors is not None and vectors.similar(form, surfaces))
    ]
    return missing


def closest_to_anchor(claim: str, anchor: str, cited_texts: Sequence[str]) -> bool:
    """Is the anchor, of all the sentences of the cited texts, the one that shares the most content
    words with the claim (ties going to the anchor)?"""
    cited = tuple(cited_texts)
    if len(claim) + len(anchor) + sum(map(len, cited)) > LONGEST:
        return _closest(claim, anchor, cited)
    return _CLOSEST.get((claim, anchor, cited), _closest, claim, anchor, cited)


_CLOSEST: Memo[bool] = Memo(SIZE)  # a question's runs cite the same snippets with the same claims


def _closest(claim: str, anchor: str, cited_texts: Sequence[str]) -> bool:
    mine = set(content_stems(claim))
    if not mine:
        return False

    def overlap(text: str) -> float:
        theirs = set(content_stems(text))
        return len(mine & theirs) / len(mine | theirs) if theirs else 0.0

    bar = overlap(anchor)
    folded = " ".join(anchor.split())
    for text in cited_texts:
        for flat, theirs in _statements(text):
            if flat in folded or folded in flat:
                continue
            if theirs and len(mine & theirs) / len(mine | theirs) > bar:
                return False
    return True


@lru_cache(maxsize=64)  # every claim of an answer is weighed against the sentences of the same cited texts
def _statements(text: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """Each sentence of `text`, whitespace folded, with its content stems."""
    return tuple((" ".join(unit.split()), frozenset(content_stems(unit))) for unit in sentences(text))


def stated(claim: str, key: KeyContent, vectors: WordVectors | None = None, *, about: bool = True) -> Stated:
    """How much of `key` the claim states (recall), how much of its own content beyond the question
    the anchor states (precision), and what it states in place of the anchor's items; `about` says
    whether the claim is the anchor's statement (`closest_to_anchor`), without which it conflicts
    with nothing."""
    missing = _unstated(key, claim, vectors)
    share = None if not len(key) else 1.0 - len(missing) / len(key)
    drawn: float | None = None
    added: tuple[str, ...] = ()
    for clause in clauses(claim):  # "X, and Y": X may be the anchor's fact, Y another of the cited text
        own = _items(clause, key.asked, key.anchor, number_words=False)  # "one of them" is no claim
        own = dataclasses.replace(own, mentions=tuple(m for m in own.mentions if not holds(m, key.question)))
        if len(own) and key.anchor:
            unstated = _unstated(own, key.anchor, vectors)
            found = 1.0 - len(unstated) / len(own)
            if drawn is None or found > drawn:
                drawn, added = found, tuple(unstated)
    answers = bool(key.focus) and not any(f in missing for f in key.focus)
    conflicts = _conflicts(claim, key, missing) if about else ()
    return Stated(share, drawn, tuple(missing), conflicts, answers, added)


def rival_kind(m: Mention) -> tuple[str, str]:
    """What two mentions must share to be rival values: their kind and measure (a duration's base
    unit, a number's own unit) or a code's letters."""
    if m.kind == "number":
        return ("number", dimension(m))  # a duration's base unit: "annual" rivals "every quarter"
    if m.kind == "identifier":
        return ("identifier", re.sub(r"[\d.]+", "#", m.key))
    return (m.kind, "")


def _conflicts(claim: str, key: KeyContent, missing: list[str]) -> tuple[str, ...]:
    absent = {rival_kind(m) for m in key.mentions if m.surface in missing}
    rivals = tuple(
        m.surface
        for m in _distinct_mentions(claim)
        if rival_kind(m) in absent and all((m.kind, m.key) != (a.kind, a.key) for a in key.mentions)
    )
    return rivals  # a negation, an opposite: `contradiction.py`, statement by statement
