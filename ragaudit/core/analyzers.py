"""Analyzers: how a text is cut into tokens. Token offsets and payload `tokens` are counted with these.

| name                   | a token is                         | its term                             |
|------------------------|------------------------------------|--------------------------------------|
| `whitespace`           | a maximal run of non-space chars   | the token as written                 |
| `lowercase`            | a maximal run of word chars (`\\w`) | lowercased                           |
| `lowercase+ascii_fold` | a maximal run of word chars (`\\w`) | lowercased, accents folded to ASCII  |

A token offset `[start, end)` indexes the tokens of the whole document; a char span holds the
tokens the analyzer finds in its slice of the text.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable


def _fold(term: str) -> str:
    if term.isascii():
        return term.lower()
    decomposed = unicodedata.normalize("NFKD", term)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


@dataclass(frozen=True)
class Analyzer:
    name: str
    pattern: re.Pattern[str]
    normalize: Callable[[str], str]
    description: str

    def spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in self.pattern.finditer(text)]

    def terms(self, text: str) -> list[str]:
        normalize = self.normalize
        return [normalize(t) for t in self.pattern.findall(text)]

    def count(self, text: str) -> int:
        return _count(self.pattern, text)


@lru_cache(maxsize=1 << 14)
def _count(pattern: re.Pattern[str], text: str) -> int:
    # the same snippet text recurs across the runs of a trace file; count it once
    return len(pattern.findall(text))


_WORD = re.compile(r"\w+")
ANALYZERS: dict[str, Analyzer] = {
    a.name: a
    for a in (
        Analyzer("whitespace", re.compile(r"\S+"), str, "runs of non-space characters, case kept"),
        Analyzer("lowercase", _WORD, str.lower, "runs of word characters, lowercased"),
        Analyzer("lowercase+ascii_fold", _WORD, _fold, "runs of word characters, lowercased, accents folded to ASCII"),
    )
}


def get_analyzer(name: str | None) -> Analyzer | None:
    """The analyzer of that name, or None when ragaudit cannot reproduce it."""
    return ANALYZERS.get(name) if name else None
