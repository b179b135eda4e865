"""Acronyms an answer writes that its cited texts do not (docs/reference.md §3, *hallucination*).

An acronym is three to eight capitals, a plural "s" allowed (`APIs`), not a roman numeral; two
capitals (IT, AI, HD) are words of everyday prose more often than names a text must give, and a
text written mostly in capitals has none. A claim's acronym is written by a cited text (or the
question) that writes it, or that writes the words whose initials spell it (`MFA` for
"multi-factor authentication", linking words such as "of" left out or not). One the claim defines
in parentheses after some words (`Security Engineering Board (SEB)`) needs those words cited; an
acronym neither written nor spelled out is hallucinated.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

from ragaudit.core.forgetting import forgotten
from ragaudit.core.markers import strip_markers

_ACRONYM_WORD = re.compile(r"(?<![\w.\-/])(?!(?:[IVXLCDM]+)s?\b)(?P<letters>[A-Z]{3,8})s?(?![\w\-])")
_INITIAL_WORD = re.compile(r"[A-Za-z][A-Za-z']*")
_LINKING = frozenset({"of", "and", "for", "the", "to", "in", "on", "a", "an", "&"})


def acronyms(text: str) -> list[str]:
    """The acronyms of `text`, each once, in order; none in text written mostly in capitals."""
    masked = strip_markers(text, keep_length=True)
    letters = [c for c in masked if c.isalpha()]
    if not letters or sum(c.isupper() for c in letters) > len(letters) / 2:
        return []
    return list(dict.fromkeys(m["letters"] for m in _ACRONYM_WORD.finditer(masked)))


@forgotten
@lru_cache(maxsize=1 << 15)
def _spelled(text: str) -> tuple[frozenset[str], tuple[str, str]]:
    """The capitalised words of a text, and the initials of its words (with and without linking
    words such as "of"), for telling whether it writes an acronym or its long form."""
    words = _INITIAL_WORD.findall(text.replace("-", " "))
    initials = "".join(w[0].lower() for w in words)
    content = "".join(w[0].lower() for w in words if w.lower() not in _LINKING)
    return frozenset(re.findall(r"[A-Z]{2,8}", text)), (initials, content)


def _writes(acronym: str, text: str) -> bool:
    caps, (initials, content) = _spelled(text)
    short = acronym.lower()
    # two letters are the initials of some two words far too often ("in the"): content words only
    return acronym in caps or short in content or len(short) > 2 and short in initials


def unwritten(segment: str, cited_texts: Sequence[str]) -> list[str]:
    """The segment's acronyms that no cited text writes or spells out, in order."""
    out = []
    for acronym in acronyms(segment):
        if any(_writes(acronym, t) for t in cited_texts):
            continue
        defined = _defined(acronym, segment)
        if defined is None or not any(f" {defined} " in _plain_words(t) for t in cited_texts):
            out.append(acronym)
    return out


def _plain_words(text: str) -> str:
    """The words of a text, lower-cased, a plural "s" dropped, spaced: where a long form is looked up."""
    return " " + " ".join(w.lower().removesuffix("s") for w in _INITIAL_WORD.findall(text.replace("-", " "))) + " "


def _defined(acronym: str, segment: str) -> str | None:
    """What the segment defines the acronym as, when it writes it in parentheses after some words:
    the words whose initials spell it ("multi-factor authentication (MFA)" gives "multi factor
    authentication"), else the two words before it ("cardiothoracic ratio (CTR)"); None when it
    does not define it ("the SEB team (SEB)")."""
    at = segment.find(f"({acronym}")
    if at < 0:
        return None
    words = _INITIAL_WORD.findall(segment[:at].replace("-", " "))[-2 * len(acronym) :]
    for start in range(len(words)):
        tail = words[start:]
        spelled = {
            "".join(w[0].lower() for w in tail if w.lower() not in _LINKING),
            "".join(w[0].lower() for w in tail),
        }
        if acronym.lower() in spelled and tail[0].lower() not in _LINKING:
            return _plain_words(" ".join(tail)).strip()
    last = words[-2:]  # a name of its own ("cardiothoracic ratio (CTR)"): those words must be cited
    return None if not last or any(acronym in w for w in last) else _plain_words(" ".join(last)).strip()
