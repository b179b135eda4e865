"""Quantities, dates and identifiers written in a text, and the ones a segment states that none of
its cited texts contains (docs/reference.md §3, *hallucination*).

One parser reads both sides. A number is compared by value after normalising (`$1,499` =
`1499.0`, `1.5 million` = `1,500,000`) and with its unit when one follows (`12 days` ≠
`12 weeks`; `12%` = `12 percent`); a bare number in a segment is covered by the same value with
any unit. Dates compare as calendar dates (`2024-03-01` = `March 1, 2024` = `1 March 2024`),
versions and codes with digits as written, separators aside (`AES-256` = `AES 256`, `FIDO2` ≠
`FIDO7`). Durations compare by length (`two weeks` = `14 days`, `1 year` = `12 months`; months
and days do not convert). Number words are read with their unit on both sides (`seventeen
seconds`, `two weeks`, `a dozen`, `the third business day`); without one only in cited texts: in
an answer, "one of them" or "two main types" are turns of phrase far more often than claims. How
often, in words, is a duration of its period (`annual` = `every 12 months`, `every quarter` = `3
months`), and so is a cited text's "a day" or "an hour".

An answer's acronyms (`SEB`, `PCI`) are identifiers too (`acronyms.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator, Sequence

from ragaudit.checks.metrics.acronyms import unwritten
from ragaudit.checks.metrics.units import (
    CURRENCY,
    CURRENCY_CODES,
    DURATION,
    EVERY,
    MONTH_OF,
    ORDINAL,
    ORDINAL_WORDS,
    PERIOD,
    QUALIFIER,
    SCALE,
    SMALL,
    TENS,
    UNIT,
    UNIT_OF,
    WORD_VALUE,
    fold,
)
from ragaudit.core.forgetting import forgotten
from ragaudit.core.markers import strip_markers

__all__ = ["Mention", "dimension", "hallucinated", "holds", "mentions"]

# list numbering, read after the markers are blanked ("1[1]."): "1." or "1)" opening a line, and an
# enumerator "2)" inside one ("… tests 5) self-assessments")
_BULLET = re.compile(r"^\s*\d+\s*[.)](?=\s|$)|(?<![\w(.,])\d{1,2}\)(?=\s)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Mention:
    """A quantity, date or identifier at text[start:end]; `key` is what two mentions compare by:
    `1499`, `12 day`, `12 percent`, `2024-03-01`, `2024-03`, `--03-01`, `aes256`, `v3.2`."""

    start: int
    end: int
    surface: str
    kind: str  # "number" | "date" | "identifier"
    key: str


_MONTH = r"(?P<month>" + "|".join(sorted(MONTH_OF, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"

# ---------------------------------------------------------------- patterns, in the order they claim text

_DATES = [
    re.compile(r"(?<![\w.\-/])(?P<year>\d{4})(?P<sep>[-/.])(?P<mon>\d{1,2})(?P=sep)(?P<day>\d{1,2})(?![\w\-/]|\.\d)"),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+(?P<year>\d{{4}})(?!\w|\.\d)"),
    re.compile(rf"(?<![\w.]){_DAY}\s+(?:of\s+)?{_MONTH},?\s+(?P<year>\d{{4}})(?!\w|\.\d)"),
    re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?(?P<year>\d{{4}})(?!\w|\.\d)"),
    re.compile(rf"\b{_MONTH}\s+{_DAY}\b(?!\s*[,.]?\s*\d|[\s-]?{QUALIFIER}(?:{UNIT})(?!\w))"),
    re.compile(rf"(?<![\w.]){_DAY}\s+(?:of\s+)?{_MONTH}\b"),
]
# an acronym then a number: TLS 1.3, ISO 27001, SEV 1; not a quantity (FDA 12 weeks, USD 500)
_ACRONYM = re.compile(
    rf"(?<![\w.\-/])(?P<name>[A-Z]{{2,}}(?:[/-][A-Z]{{2,}})*)[ \u00a0](?:(?:v|version)\s?)?"
    rf"(?P<num>\d+(?:\.\d+)*)(?![\w%]|\.\d|,\d{{3}}|[\s-]?{QUALIFIER}(?:{UNIT})(?!\w))"
)
_VERSION = re.compile(r"(?<![\w.\-/])(?:[Vv]ersion\s?|[Vv](?=\d))(?P<num>\d+(?:\.\d+)*)(?![\w%]|\.\d)")
_TOKEN = re.compile(r"(?<![\w.\-/$€£¥])(?=[A-Za-z0-9._-]*\d)[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)*")
_GLUED = re.compile(r"\d+(?:\.\d+)?(?P<suffix>[A-Za-z]+)")
_UNIT_RE = re.compile(f"(?:{UNIT})")
_TIME = re.compile(
    r"(?<![\w.:])(?P<h>[01]?\d|2[0-3])(?::(?P<m>[0-5]\d)(?::[0-5]\d)?)?"
    r"(?:\s?(?P<ampm>[ap]\.?m\.?|[AP]M)(?!\w))?(?![\w:]|\.\d)"
)
_NUMBER = re.compile(
    rf"(?<![\w.])(?P<cur>{CURRENCY})?(?P<num>\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)*|\.\d+)"
    rf"(?:(?:st|nd|rd|th|s|x|X)(?!\w))?"
    rf"(?:(?P<abbr>k|K|mn|bn|m|M|b|B)(?!\w)|\s(?P<scale>(?i:thousand|million|billion|trillion))\b)?"
    rf"(?:[\s-]?{QUALIFIER}(?P<unit>{UNIT})(?!\w))?"
)
_WORDS = re.compile(
    rf"\b(?P<words>(?i:(?:{'|'.join(TENS)})(?:[\s-](?:{'|'.join(SMALL[1:10])}))?"
    rf"|{'|'.join(sorted(SMALL, key=len, reverse=True))})(?:\s(?i:hundred|dozen))?"
    rf"|(?i:a\s+dozen|dozen)|(?P<ordinal>(?i:{'|'.join(sorted(ORDINAL_WORDS, key=len, reverse=True))})))"
    rf"(?:\s(?P<scale>(?i:thousand|million|billion|trillion)))?\b"
    rf"(?:[\s-]?{QUALIFIER}(?P<unit>{UNIT})(?!\w))?"
)
_FREQUENCY = re.compile(
    rf"(?<![\w-])(?i:(?P<adverb>{'|'.join(EVERY)})"
    rf"|(?:every|each|per|once\s+(?:a|an|per|every))\s+(?:calendar\s+)?(?P<period>{'|'.join(PERIOD)}))(?![\w-])"
)
# in a cited text also "a day", "an hour" ("8 hours a day", "500 requests an hour"), never "a quarter" (a share)
_A_PERIOD = re.compile(
    rf"(?<![\w-])(?i:an?)\s+(?P<period>(?i:{'|'.join(p for p in PERIOD if p != 'quarter')}))(?![\w-])"
)
# what joins the numbers of a range or list that share one unit: 10-12 days, 10 to 12 days, 3, 6 or 12 months
_JOIN = re.compile(r"\s*(?:-|–|—|to|or|through|,\s*(?:and|or))\s*")
_AND = re.compile(r"\s*and\s*")
_BETWEEN = re.compile(r"\bbetween\s+$", re.IGNORECASE)
_LIST = re.compile(r"\s*,\s*")
# in a cited text, a code split by extraction (TiO 2, BiVO 4 from subscripts) still covers TiO2
_SPLIT_CODE = re.compile(
    r"(?<![\w.\-/])(?P<name>[A-Za-z][A-Za-z0-9]*)[ \u00a0\-_/](?P<num>\d+(?:\.\d+)*)(?![\w%]|\.\d)"
)


# ---------------------------------------------------------------- reading one text


def _canonical(value: float) -> str:
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"


def _number_key(raw: str, scale: float = 1.0) -> str:
    raw = raw.replace(",", "")
    if raw.count(".") > 1:  # a version-like 3.10.2 is not a decimal
        return raw
    return _canonical(float(raw) * scale)


def _with_unit(value: str, alias: str | None) -> str:
    return value if alias is None else f"{value} {UNIT_OF[fold(alias)]}"


def _identifier_key(text: str) -> str:
    text = re.sub(r"(?<=[A-Z])v(?=\d)", "", text)  # TLSv1.3 = TLS 1.3, IPv6 = IP 6
    return re.sub(r"[\s\-_/]+", "", text.lower())


def _masked(text: str) -> str:
    """`text` with citation markers and list numbering blanked, offsets kept."""
    blank = lambda m: " " * len(m.group())  # noqa: E731
    return _BULLET.sub(blank, strip_markers(text, keep_length=True))


def _dates(text: str) -> Iterator[tuple[int, int, str, str]]:
    for pattern in _DATES:
        for m in pattern.finditer(text):
            parts = m.groupdict()
            month = int(parts["mon"]) if parts.get("mon") else MONTH_OF[parts["month"]]
            day = int(parts["day"]) if parts.get("day") else None
            if not 1 <= month <= 12 or day is not None and not 1 <= day <= 31:
                continue
            if parts.get("year"):
                key = f"{int(parts['year'])}-{month:02d}" + (f"-{day:02d}" if day else "")
            else:
                key = f"--{month:02d}-{day:02d}"
            yield m.start(), m.end(), "date", key


def _token_identifier(m: re.Match[str]) -> tuple[int, int, str, str] | None:
    """An identifier (FIDO2, AES-256, H2O, p99, eu-west-1, a number written in three or more groups:
    9-1-1, 1-800-555-0100), or None for a quantity (21st, 12-day, 5k, a range 10-12)."""
    token, start = m.group(), m.start()
    if re.fullmatch(r"\d+(?:-\d+){2,}", token):
        return start, m.end(), "identifier", _identifier_key(token)
    if not any(c.isalpha() for c in token):
        return None
    parts = re.split(r"(?<=[A-Za-z0-9])-(?=[A-Za-z0-9])", token)
    while parts and parts[-1].isalpha():  # COVID-19-related: the code is COVID-19
        parts.pop()
    if len(parts) == 2 and parts[0].isalpha() and parts[0].islower():
        start += len(parts.pop(0)) + 1  # mid-2020, top-10, pre-COVID19: a word, then a number or a code
    core = "-".join(parts)
    glued = _GLUED.fullmatch(core)
    if (
        re.fullmatch(r"\d+(?:\.\d+)*", core)
        or glued
        and (glued["suffix"] in ORDINAL or glued["suffix"] in ("k", "K") or _UNIT_RE.fullmatch(glued["suffix"]))
    ):
        return None
    return start, start + len(core), "identifier", _identifier_key(core)


def _identifiers(text: str) -> Iterator[tuple[int, int, str, str]]:
    for m in _ACRONYM.finditer(text):
        # the UK 2019 ...: a year, not a code; USD 500: an amount
        if not re.fullmatch(r"(?:19|20)\d\d", m["num"]) and m["name"] not in CURRENCY_CODES:
            yield m.start(), m.end(), "identifier", _identifier_key(m["name"] + m["num"])
    for m in _VERSION.finditer(text):
        yield m.start(), m.end(), "identifier", "v" + m["num"]
    for m in _TOKEN.finditer(text):
        found = _token_identifier(m)
        if found:
            yield found


def _times(text: str) -> Iterator[tuple[int, int, str, str]]:
    for m in _TIME.finditer(text):
        if m["m"] or m["ampm"]:  # else a plain number
            hour = int(m["h"])
            if m["ampm"]:
                hour = hour % 12 + (12 if m["ampm"].lower().startswith("p") else 0)
            yield m.start(), m.end(), "number", f"{hour:02d}:{m['m'] or '00'}"


def _numbers(text: str) -> Iterator[tuple[int, int, str, str]]:
    for m in _NUMBER.finditer(text):
        if m["abbr"] and not m["cur"] and m["abbr"] not in ("k", "K"):
            continue  # 5m or 2B with no currency is a name: the identifiers have it
        scale = SCALE[m["scale"].lower()] if m["scale"] else SCALE[m["abbr"]] if m["abbr"] else 1.0
        start = m.start("cur") if m["cur"] else m.start("num")
        yield start, m.end(), "number", _with_unit(_number_key(m["num"], scale), m["unit"])


def _words(text: str, every: bool = True) -> Iterator[tuple[int, int, str, str]]:
    """Numbers written as words; with `every` False, those with a unit only (and never a bare
    ordinal: "the third party")."""
    for m in _WORDS.finditer(text):
        words = [w for w in re.split(r"[\s-]+", m["words"].lower()) if w != "a"]
        if not m["unit"] and (m["ordinal"] or not every and words[-1] != "dozen"):
            continue
        value = sum(WORD_VALUE.get(w, 0) for w in words if w not in ("hundred", "dozen"))
        value = (value or 1) * 12 if words[-1] == "dozen" else value * (100 if words[-1] == "hundred" else 1)
        scale = SCALE[m["scale"].lower()] if m["scale"] else 1.0
        yield m.start(), m.end(), "number", _with_unit(_canonical(value * scale), m["unit"])


def _frequencies(text: str, every: bool = False) -> Iterator[tuple[int, int, str, str]]:
    """How often, in words; with `every` (a source's text) "a day" and "an hour" too."""
    for m in _FREQUENCY.finditer(text):
        key = EVERY[m["adverb"].lower()] if m["adverb"] else PERIOD[m["period"].lower()]
        yield m.start(), m.end(), "number", key
    if every:
        for m in _A_PERIOD.finditer(text):
            yield m.start(), m.end(), "number", PERIOD[m["period"].lower()]


def _any_frequencies(text: str) -> Iterator[tuple[int, int, str, str]]:
    return _frequencies(text, every=True)


def _unit_words(text: str) -> Iterator[tuple[int, int, str, str]]:
    return _words(text, every=False)


def _scan(text: str, *, words: bool) -> list[Mention]:
    masked = _masked(text)
    found: list[list[Any]] = []  # [start, end, kind, key, took the unit written after it]
    occupied = bytearray(len(text))
    for find in (
        _dates,
        _times,
        _identifiers,
        _numbers,
        _words if words else _unit_words,
        _any_frequencies if words else _frequencies,
    ):
        for start, end, kind, key in find(masked):
            if end > start and not any(occupied[start:end]):
                occupied[start:end] = b"\x01" * (end - start)
                found.append([start, end, kind, key, False])
    found.sort()
    # a range or list shares the unit written after its last number: 10-12 days, between 10 and 12
    # days, 3, 6 or 12 months; not a clause (in 2019, 12 days later) nor a pair (1,499 and 12%)
    for left, right in zip(reversed(found[:-1]), reversed(found[1:])):
        if (
            left[2] == right[2] == "number"
            and " " not in left[3]
            and " " in right[3]
            and (
                _JOIN.fullmatch(masked, left[1], right[0])
                or _AND.fullmatch(masked, left[1], right[0])
                and _after_between(masked, left[0])
                or right[4]
                and _LIST.fullmatch(masked, left[1], right[0])
            )
        ):
            left[3] += " " + right[3].split(" ", 1)[1]
            left[4] = True
    return [Mention(s, e, text[s:e], kind, key) for s, e, kind, key, _ in found]


def _after_between(text: str, at: int) -> bool:
    """Does `text` read "between" and spaces just before `at`? Reads back over those spaces and the
    word only: searched from the text's start, a text of many ranges would be read once per range."""
    gap = at
    while gap > 0 and text[gap - 1].isspace():
        gap -= 1
    return _BETWEEN.search(text, max(0, gap - len("between")), at) is not None


def mentions(text: str, *, number_words: bool = False) -> list[Mention]:
    """The numbers, dates and identifiers written in `text`, in order, not overlapping. Citation
    markers (`[3]`, `[pol-keys-1]`, `[Data: Reports (4)]`) and list numbering are not mentions.
    Numbers written as words count with their unit ("twelve days"), and without one only with
    `number_words` (a source's text: in an answer "one of them" is more often a turn of phrase
    than a claim)."""
    return list(_scanned(text, number_words))


@forgotten
@lru_cache(maxsize=1 << 15)  # cited passages and claims come back run after run
def _scanned(text: str, words: bool) -> tuple[Mention, ...]:
    return tuple(_scan(text, words=words))


# ---------------------------------------------------------------- covering


def _duration(m: Mention) -> tuple[str, str] | None:
    """A duration's length in its base unit (`("duration", "1209600 second")` for 14 days)."""
    if m.kind != "number" or " " not in m.key:
        return None
    value, unit = m.key.split(" ", 1)
    if unit not in DURATION or ":" in value:
        return None
    base, size = DURATION[unit]
    try:
        return ("duration", f"{_canonical(float(value) * size)} {base}")
    except ValueError:
        return None


def dimension(m: Mention) -> str:
    """What a quantity measures: a duration's base unit ("second", "month"), else its own unit."""
    found = _duration(m)
    if found is not None:
        return found[1].split(" ", 1)[1]
    return m.key.split(" ", 1)[1] if m.kind == "number" and " " in m.key else ""


def _needs(m: Mention) -> set[tuple[str, str]]:
    """Any one of these among the cited mentions covers `m`."""
    needs = {(m.kind, m.key)}
    if (length := _duration(m)) is not None:
        needs.add(length)
    if m.kind == "identifier" and re.fullmatch(r"v\d+(?:\.\d+)*", m.key):
        needs.add(("number", m.key[1:]))  # v3.2 is covered by a cited "Python 3.2"
    return needs


def _provides(m: Mention) -> set[tuple[str, str]]:
    """What a cited mention covers: itself, and the less specific forms of it."""
    out = {(m.kind, m.key)}
    if (length := _duration(m)) is not None:
        out.add(length)
    if m.kind == "number" and " " in m.key:
        out.add(("number", m.key.split(" ", 1)[0]))  # a bare number is covered by any unit
    elif m.kind == "date" and not m.key.startswith("--"):
        year, month, *day = m.key.split("-")
        out |= {("number", year), ("date", f"{year}-{month}")} | {("date", f"--{month}-{d}") for d in day}
    elif m.kind == "identifier":
        out |= {("number", n) for n in re.findall(r"\d+(?:\.\d+)*", m.key)}
    return out


@forgotten
@lru_cache(maxsize=1 << 15)
def _covered_by(text: str) -> frozenset[tuple[str, str]]:
    """What one cited text covers. Cached: the same snippets are cited by run after run."""
    covered: set[tuple[str, str]] = set()
    for m in _scan(text, words=True):
        covered |= _provides(m)
    covered |= {("identifier", _identifier_key(m["name"] + m["num"])) for m in _SPLIT_CODE.finditer(_masked(text))}
    return frozenset(covered)


@forgotten
@lru_cache(maxsize=1 << 15)
def _needed(segment: str) -> tuple[tuple[str, tuple[str, str], frozenset[tuple[str, str]]], ...]:
    """Each distinct mention of a segment: its surface, its key and what would cover it."""
    out, seen = [], set()
    for m in mentions(segment):
        if (m.kind, m.key) not in seen:
            seen.add((m.kind, m.key))
            out.append((m.surface, (m.kind, m.key), frozenset(_needs(m))))
    return tuple(out)


def holds(mention: Mention, text: str) -> bool:
    """Does `text` state `mention` (by value and unit, in digits or in words)?"""
    return bool(_needs(mention) & _covered_by(text))


def hallucinated(segment: str, cited_texts: Sequence[str]) -> list[str]:
    """The quantities, dates and identifiers of `segment` (as written, each once, in order), then
    its acronyms, that no cited text contains. `12 days` is covered by a cited `12 days`, `twelve days` or `12-day`, not
    by `12 weeks`; a bare `12` by `12` with any unit; `FIDO2` only by `FIDO2` (or `FIDO 2`)."""
    needed = _needed(segment)
    found = []
    if needed:
        covered = [_covered_by(t) for t in cited_texts]  # looked up in, not joined: a long text covers much
        found = [surface for surface, _, needs in needed if not any(needs & c for c in covered)]
    taken = {surface for surface, _, _ in needed}
    return found + [a for a in unwritten(segment, cited_texts) if a not in taken]
