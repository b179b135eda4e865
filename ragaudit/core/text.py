"""Sentence splitting shared by the chunker, the answerer and the support scorer."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable

from ragaudit.core.forgetting import forgotten
from ragaudit.core.markers import strip_markers

_LINE = re.compile(r"[^\n]+")
Spans = tuple[tuple[int, int], ...]  # (start, end) of each sentence
# pysbd's time grows with the square of the text it is given, so a long line goes to it in blocks
# of about BLOCK characters, cut where a sentence surely ends: after a word of three or more
# lower-case letters or digits and its full stop, before a capital ("Dr. Smith", "U.S. law" and
# "e.g. Vault" are never cut). A line without such a place is cut at its first space between 4 and
# 8 × BLOCK, and one without a space there either (a run of symbols, a blob of code) at 4 × BLOCK.
BLOCK = 500
_SURE_END = re.compile(r"(?<=[a-z0-9]{3}[.!?])\s+(?=[A-Z])")
_SPACE = re.compile(r"\s+")
# A stop right after a closing bracket ("… 12 months [1]. they …", "… [^2]. also …") is no
# abbreviation's: the piece after it opens a sentence of its own, even in lower case.
_BRACKET_STOP = re.compile(r"[\]】][ \t]*[.!?][\"')]*\Z")


@lru_cache(maxsize=1)
def _segmenter() -> Any:  # a pysbd.Segmenter (pysbd has no types)
    import pysbd

    return pysbd.Segmenter(language="en", clean=False, char_span=True)


def _blocks(line: str) -> list[tuple[int, int]]:
    """Cuts of `line` into blocks of about BLOCK characters or fewer (see BLOCK); one block when short."""
    cuts, start = [], 0
    while len(line) - start > BLOCK:
        end = _SURE_END.search(line, start + BLOCK, start + 4 * BLOCK)
        if end is None and (space := _SPACE.search(line, start + 4 * BLOCK, start + 8 * BLOCK)) is not None:
            end = _SPACE.match(line, space.start())  # the whole run of spaces, even past 8 × BLOCK
        if end is not None:
            cuts.append((start, end.start()))
            start = end.end()
        elif len(line) - start > 8 * BLOCK:
            cuts.append((start, start + 4 * BLOCK))
            start += 4 * BLOCK
        else:
            break
    cuts.append((start, len(line)))
    return cuts


def _pysbd_spans(block: str) -> list[tuple[int, int]]:
    """pysbd's sentences of `block` with their char spans (each sentence and the whitespace after
    it), found as pysbd's `char_span` mode finds them (each sentence's first occurrence ending past
    the one before) but by plain string search: pysbd compiles a regular expression per sentence.
    pysbd reads a sentence's occurrences from the block's start, one after another; a sentence said
    again resumes that reading where it stopped rather than from the start."""
    if not block:
        return []
    spans: list[tuple[int, int]] = []
    prior = 0
    resume: dict[str, int] = {}
    for sentence in _segmenter().processor(block).process():
        at = resume.get(sentence, 0)
        while (start := block.find(sentence, at)) >= 0:
            end = start + len(sentence)
            while end < len(block) and block[end].isspace():
                end += 1
            at = end if end > start else start + 1
            if end > prior:
                spans.append((start, end))
                prior = end
                break
        resume[sentence] = at
    return spans


# A line of plain prose leaves pysbd nothing to decide but to end a sentence at each full stop or
# question mark that follows a word of two or more letters (and its citation markers: "Okta.",
# "the CISO.", "rotated [keys:0001].") and precedes a capital, a closing parenthetical ("Who
# approves it? (EU only)": pysbd makes it a sentence of its own), or the line's end: such a line is
# split here, by one expression, into the sentences pysbd gives (tests/test_text.py holds the two
# to each other on real and generated text). Plain means: ASCII letters, digits, spaces and
# , ; : / % - # ( ) [ ] " ' . ? only; an apostrophe only inside a word; every full stop and
# question mark such an end, after a word that is neither an abbreviation pysbd knows ("Ms.",
# "Gen.", in any case) nor a roman numeral ("II."); no stop inside brackets or after a double
# quote, no list marker ("a)", "(iv)", "2)"), no "--", and no bracket or quote opening the line.
_PLAIN = re.compile(r"[A-Za-z0-9 ,;:/%()\[\]\"'.?#-]*\Z")
_NOT_PLAIN = re.compile(r"""\d\)|(?:^|[\s(])(?:[a-z]|[ivxlcdm]+)\)|--|^\s*[(\["]|(?<![A-Za-z])'|'(?![A-Za-z])""")
_ENCLOSING = re.compile(r'[()\[\]".?]')
_PLAIN_END = re.compile(r"(?<![A-Za-z])([A-Za-z]{2,})(?: ?\[[^\][]*\])*[.?](?: +(?=[A-Z]|\([^()\[\]\".?]*\) *\Z)| *\Z)")
_STOP = re.compile(r"[.?]")
_ROMAN = re.compile(r"[ivxlcdm]+\Z")  # matched lower-cased, as the abbreviations are


def _enclosed_stop(line: str) -> bool:
    """Whether a full stop or question mark stands inside brackets or after a double quote."""
    parens = brackets = 0
    quoted = False
    for found in _ENCLOSING.finditer(line):
        mark = found.group()
        if mark == "(":
            parens += 1
        elif mark == ")":
            parens = max(0, parens - 1)
        elif mark == "[":
            brackets += 1
        elif mark == "]":
            brackets = max(0, brackets - 1)
        elif mark == '"':
            quoted = True
        elif parens or brackets or quoted:
            return True
    return False


@lru_cache(maxsize=1)
def _abbreviations() -> frozenset[str]:
    from pysbd.lang.english import English

    return frozenset(a.lower() for a in English.Abbreviation.ABBREVIATIONS)


def _plain_sentences(line: str) -> Spans | None:
    """The sentence spans of a line of plain prose (see _PLAIN), else None (pysbd decides)."""
    if not _PLAIN.match(line) or _NOT_PLAIN.search(line) or _enclosed_stop(line):
        return None
    ends = list(_PLAIN_END.finditer(line))
    if len(ends) != len(_STOP.findall(line)):
        return None  # a stop that does not surely end a sentence
    abbreviations = _abbreviations()
    if any((w := m.group(1).lower()) in abbreviations or _ROMAN.match(w) for m in ends):
        return None
    spans: list[tuple[int, int]] = []
    start = 0
    for m in ends:
        stop = m.end()
        while stop > start and line[stop - 1] == " ":
            stop -= 1
        spans.append((start, stop))
        start = m.end()
    if start < len(line):
        spans.append((start, len(line)))
    trimmed = []
    for a, b in spans:
        piece = line[a:b]
        if piece.strip():
            a += len(piece) - len(piece.lstrip())
            trimmed.append((a, a + len(piece.strip())))
    return tuple(trimmed)


@forgotten
@lru_cache(maxsize=65_536)  # the same passages come back run after run
def _line_sentences(line: str) -> Spans:
    """Char spans of the sentences of one line, by pysbd (which keeps "e.g.", "Dr.", "U.S.", "3.5"
    and ellipses inside their sentence), whitespace trimmed; a piece that opens in lower case
    continues the sentence before it, unless that one ends in a closing bracket and its stop
    ("… [1]. then …"). Linear in the line's length (see BLOCK); a block of plain prose never
    reaches pysbd (see _PLAIN)."""
    return _split(line, _pieces)


def _split(line: str, pieces: Callable[[str], Spans]) -> Spans:
    """The sentence spans of `line`, its blocks (see BLOCK) split by `pieces`."""
    spans: list[tuple[int, int]] = []
    for first, last in _blocks(line):
        for start, end in pieces(line[first:last]):
            if (
                spans
                and line[first + start].islower()  # "approx. five dollars": no sentence opens in lower case
                and not _BRACKET_STOP.search(line, spans[-1][0], spans[-1][1])
            ):
                spans[-1] = (spans[-1][0], first + end)
            else:
                spans.append((first + start, first + end))
    return tuple(spans)


def _pieces(block: str) -> Spans:
    plain = _plain_sentences(block)
    return plain if plain is not None else _pysbd_pieces(block)


def _pysbd_pieces(block: str) -> Spans:
    """pysbd's sentences of `block`, whitespace trimmed."""
    out = []
    for found_start, found_end in _pysbd_spans(block):
        piece = block[found_start:found_end]
        stripped = piece.strip()
        if stripped:
            start = found_start + len(piece) - len(piece.lstrip())
            out.append((start, start + len(stripped)))
    return tuple(out)


def sentence_spans(text: str, offset: int = 0) -> list[tuple[int, int]]:
    """Char spans of the sentences of `text`, shifted by `offset`. A line break always ends a
    sentence (headings, bullets, table rows); within a line, pysbd decides. This is the one
    sentence splitter: the chunker, the answerer, the support scorer and the adapters use it."""
    spans: list[tuple[int, int]] = []
    for line in _LINE.finditer(text):
        base = offset + line.start()
        spans.extend((base + a, base + b) for a, b in _line_sentences(line.group()))
    return spans


def sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)]


# The one stopword list: function words that say nothing about what a sentence claims.
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each either else etc ever every few
for from further had has have having he her here hers herself him himself his how however i if in into is it
its itself just may me might more most much must my myself no nor not now of off often on once one only or
other our ours ourselves out over own per same shall she should so some such than that the their theirs them
themselves then there these they this those through thus to too under until up upon us very via was we were
what when where which while who whom whose why will with within without would yet you your yours""".split()
)
WORD = re.compile(r"[^\W_]+")
_AFTER_COLON = re.compile(r"(?<=:)\s+")
_MARKUP = re.compile(r"[*#_`>|]+|^\s*(?:[-•]|\d+[.)])\s+", re.MULTILINE)


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A crude suffix stripper: enough to match "rotated"/"rotates"/"rotate" on both sides (not
    "rotation": "rot"). Snowball's English stemmer gives the demo's outputs and the handbook's
    agreement with labels unchanged but passes one more SQuAD run a person labelled bad
    (bench/agreement.py), so this one stays."""
    for suffix in (
        "ational",
        "ations",
        "ation",
        "ities",
        "ity",
        "ments",
        "ment",
        "ness",
        "ings",
        "ing",
        "ies",
        "ied",
        "ers",
        "er",
        "ed",
        "es",
        "ly",
        "s",
        "e",
        "al",
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_stems(text: str) -> tuple[str, ...]:
    """The stems of the words of `text` that are neither stopwords nor bare numbers, in order."""
    return _content_stems(text) if len(text) <= _LONGEST_REMEMBERED else _stems_of(text)


_LONGEST_REMEMBERED = 4_000  # characters: a longer text is read each time rather than held as a key


@forgotten
@lru_cache(maxsize=1 << 13)  # a claim, a passage, a window: each is read for several features and runs
def _content_stems(text: str) -> tuple[str, ...]:
    return _stems_of(text)


def _stems_of(text: str) -> tuple[str, ...]:
    return tuple([stem(w) for w in (t.lower() for t in WORD.findall(text)) if w not in STOPWORDS and not w.isdigit()])


# a negation, but not a comparison or an emphasis: "no later than", "no more than", "not only", "no matter"
_NEGATION = re.compile(
    r"\b(?:not(?!\s+only\b)|no(?!\s+(?:more|less|later|earlier|fewer|longer|shorter|sooner|greater|smaller|"
    r"higher|lower)\s+than\b|\s+matter\b)|never|none|cannot|neither|nor)\b|n't\b",
    re.IGNORECASE,
)
_CLAUSE = re.compile(r"\s*(?:;|,\s+(?:and|but|while|whereas|so|which means|which)\s+|\s+[—–]\s+)\s*", re.IGNORECASE)


_UNDERLINE = re.compile(r"[=\-~^*#+`'\".:_]{3,}\Z")  # a reStructuredText heading's under- or overline
HEADING_WORDS = 12  # a line longer than this is a statement, however it ends


def heading_only(text: str) -> bool:
    """Is `text` a heading and nothing else: one line (besides reStructuredText's under- and
    overlines) of at most `HEADING_WORDS` words that ends with no sentence's punctuation? A heading
    names what follows it and states nothing."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not _UNDERLINE.match(line.strip())]
    if len(lines) != 1:
        return False
    line = lines[0].lstrip("#").strip()
    return 0 < len(WORD.findall(line)) <= HEADING_WORDS and not line.endswith((".", "!", "?", ":", ";", ","))


def negated(text: str) -> bool:
    """Does the text hold a negation (`not`, `no`, `never`, `cannot`, `n't`; not "no later than")?"""
    return _NEGATION.search(text) is not None


def clauses(text: str) -> list[str]:
    """The text and, when it joins clauses ("X, and Y", "X; Y", "X — Y"), each of them."""
    parts = [p for p in _CLAUSE.split(text) if p.strip()]
    return [text, *parts] if len(parts) > 1 else [text]


def clean(text: str) -> str:
    """The text without citation markers, markdown emphasis or list bullets, whitespace collapsed."""
    return " ".join(_MARKUP.sub(" ", strip_markers(text)).split())


@forgotten
@lru_cache(maxsize=1 << 15)  # the same passages and claims come back run after run
def names(text: str) -> frozenset[str]:
    """Capitalised words that do not open a sentence or a clause, lower-cased: names, places,
    organisations, acronyms."""
    out: set[str] = set()
    for sentence in sentences(text):
        if sentence.lstrip().startswith("#"):
            continue  # a heading capitalises its words
        for clause in _AFTER_COLON.split(sentence):  # "Note: Keys ..." opens a clause like a sentence
            words = WORD.findall(clause)
            out.update(w.lower() for w in words[1:] if w[0].isupper() and w.lower() not in STOPWORDS)
    return frozenset(out)


@forgotten
@lru_cache(maxsize=1 << 15)
def _units(text: str) -> tuple[str, ...]:
    found = [clean(s) for s in sentences(text)]
    kept = [u for u in found if len(u.split()) >= 3]
    return tuple(kept or [u for u in found if u])


def units(text: str) -> list[str]:
    """Sentences and lines of a text, markup removed, without fragments of fewer than 3 words (all of
    them when every one is that short): what a text states, one statement at a time."""
    return list(_units(text))
