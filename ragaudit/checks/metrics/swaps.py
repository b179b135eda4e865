"""A name a claim changes (docs/reference.md §3, *changes a name*).

A *name* is two or more capitalised words in a row, not opening a sentence or a clause, that only
spaces, hyphens or "of" join: `King William II of Normandy`, `Comnenian Restoration`. A claim
changes a name when its cited texts (and the question) never write the claim's name, but write
one of the same words with one word in place of the claim's, itself capitalised, that is not the
name's head (its last word before any "of"): "the Duke of Normandy was King William II of
Normandy" where the text says "Duke William II of Normandy"; "during the Byzantine Restoration"
where it says "during the period of the Comnenian Restoration". The claim keeps every other word
of the name, so it speaks of that thing and gives it another name. A changed head names another
kind of thing, which a text may well call differently ("New York Penal Law" for "New York Penal
Code"), and is left to the other checks; so is a name the texts do not write at all, which no
cited name is changed into (`novel` words and the support scorer judge it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from ragaudit.checks.metrics.claims import DISCOURSE
from ragaudit.core.forgetting import forgotten
from ragaudit.core.text import STOPWORDS, WORD, clean, sentences, stem

_RUN = re.compile(r"[^\W_]+(?:(?:[ \t]|-)[^\W_]+)*")  # words only spaces or hyphens join
_CLAUSE = re.compile(r"(?<=:)\s+")  # "Note: Keys ..." opens a clause like a sentence
_JOIN = "of"
_NOT_NAME = STOPWORDS | DISCOURSE


@dataclass(frozen=True, slots=True)
class Swap:
    """A name of the claim and the name of its cited texts it changes."""

    claim: str  # "King William II of Normandy"
    text: str  # "Duke William II of Normandy"

    def describe(self) -> str:
        return f"{self.claim} where it says {self.text}"


def _capitalised(word: str) -> bool:
    return len(word) > 1 and word[0].isupper() and word.lower() not in _NOT_NAME


@forgotten
@lru_cache(maxsize=1 << 13)
def _runs(text: str) -> tuple[tuple[tuple[str, ...], bool], ...]:
    """Each run of words of `text` (words only spaces or hyphens join), with whether it opens its
    sentence or clause, whose first word is then capitalised by its place, not as a name."""
    out = []
    for sentence in sentences(clean(text)):
        for clause in _CLAUSE.split(sentence):
            for i, match in enumerate(_RUN.finditer(clause)):
                out.append((tuple(WORD.findall(match.group())), i == 0))
    return tuple(out)


def _names(text: str) -> list[tuple[str, ...]]:
    """The names of `text`: runs of two or more capitalised words, "of" between two of them."""
    out = []
    for words, opens in _runs(text):
        i = 1 if opens else 0
        while i < len(words):
            if not _capitalised(words[i]):
                i += 1
                continue
            j, end, capitals = i, i, 0
            while j < len(words) and (
                _capitalised(words[j]) or (words[j] == _JOIN and j + 1 < len(words) and _capitalised(words[j + 1]))
            ):
                if _capitalised(words[j]):
                    capitals, end = capitals + 1, j + 1
                j += 1
            if capitals >= 2:
                out.append(words[i:end])
            i = max(j, i + 1)
    return out


def _head(name: tuple[str, ...]) -> int:
    return (name.index(_JOIN) if _JOIN in name else len(name)) - 1


def _changed(name: tuple[str, ...], texts: Sequence[str]) -> Swap | None:
    """The name of `texts` that `name` changes one word of, or None (also when they write it)."""
    key = [stem(w.lower()) for w in name]
    head = _head(name)
    found: Swap | None = None
    for text in texts:
        for words, opens in _runs(text):
            stems = [stem(w.lower()) for w in words]
            for a in range(len(words) - len(key) + 1):
                window = stems[a : a + len(key)]
                if window == key:
                    return None  # written as the claim writes it
                differ = [k for k in range(len(key)) if window[k] != key[k]]
                if found is not None or len(differ) != 1 or differ[0] == head or key[differ[0]] in window:
                    continue
                theirs = words[a : a + len(key)]
                if (opens and a + differ[0] == 0) or not all(
                    _capitalised(t) for t, mine in zip(theirs, name) if _capitalised(mine)
                ):
                    continue  # not a name there, or capitalised by its place
                found = Swap(" ".join(name), " ".join(theirs))
    return found


def swaps(claim: str, texts: Sequence[str]) -> tuple[Swap, ...]:
    """The names of the claim that change a name its `texts` write (the cited texts and the
    question), each once, in order."""
    out: list[Swap] = []
    for name in dict.fromkeys(_names(claim)):
        found = _changed(name, texts)
        if found is not None:
            out.append(found)
    return tuple(out)
