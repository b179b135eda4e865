"""The one citation-marker grammar: how an answer's text cites its sources.

A marker has one of four forms (`FORMS`):

* `number`: a list of context numbers in brackets: `[3]`, `[1, 2]`, `[1 2]`, `[^1]`, `[^1^]`,
  `[5,+more]`;
* `id`: a list of source ids in brackets: `[hb24-sec-keys-0007]`, `[a; b]`, `[kb-7 kb-9]`. An id
  is word characters and `. : / # @ + ^ † -`, holds a letter or a digit and does not end with `:`
  (`[default: 1]` is a label); ids are separated by commas, semicolons or spaces;
* `file`: an OpenAI file citation, `【4:0†source】`;
* `data`: a GraphRAG data reference, `[Data: Reports (1, 5); Entities (3, +more)]` (`DATA_BLOCK`;
  its body is parsed by the GraphRAG adapter).

A bracketed list is on one line and at most 200 characters long. A markdown link `[text](url)` is
not a marker, nor are words in brackets separated by blanks alone (`[see below]`, `[citation
needed]`): ids separated by blanks alone each hold more than letters (`[1 2]`, `[kb-7 kb-9]`).

`MARKER` finds the candidates; `markers()` keeps those that stand where a marker stands, as
technical documentation writes brackets that cite nothing:

* nothing inside code: an inline code span (`` `flask[async]` ``), a fenced code block, an
  indented one (four spaces or a tab, after a blank line or a reST `::`, not a list item) or a
  line that opens with an interpreter prompt (`>>> r[1]`, `$ pip install`);
* no list of ids attached to a word (`flask[async]`, `requests[use_chardet_on_py3]`,
  `data[key]`); a number attached to a word is a marker (`every 12 months[1]`), as LLMs write it;
* no list of ids that fills its line (`[build-system]`, `[tool.pytest.ini_options]`: a TOML or
  INI table header);
* no date or time (`[2022-01-25T08:52Z]`, `[08:52]`), nothing inside angle brackets on its line
  (`<Response [200]>`);
* given the names of the retrieved sources (`names`), a list of ids is a marker only when one of
  its ids names one of them or holds a digit, as snippet ids do (`[hb24-sec-keys-0099]` then
  cites a source that was not retrieved: a dangling citation); `[OPTIONS]` or `[socks]` is text;
* only the forms a config accepts (`[audit] markers`, default all four).

The validator (citations placed after the answer), the quantity reader and the support scorer
(a marker is not part of what a sentence says) find markers with `markers()`; adapters read the
source ids out of a list marker with `marker_ids`.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Iterator

FORMS = ("number", "id", "file", "data")
ALL_FORMS: frozenset[str] = frozenset(FORMS)

_ID = r"(?=[\w.:/#@+^†-]*[^\W_])[\w.:/#@+^†-]*[\w.#@+^†/-]"  # holds a letter or digit, does not end with ":"
_NOT_A_WORD = r"(?=[\w.:/#@+^†-]*[\d_.:/#@+^†-])" + _ID  # an id that is more than letters
_ITEM = rf"{_NOT_A_WORD}(?:[ \t]+{_NOT_A_WORD})+|{_ID}"  # ids separated by blanks alone, or one id
_SEPARATOR = r"[ \t]*[,;][ \t]*|[ \t]+"
_ID_LIST = rf"\[(?=[^\]\n]{{0,200}}\])[ \t]*(?P<ids>(?:{_ITEM})(?:[ \t]*[,;][ \t]*(?:{_ITEM}))*)[ \t]*\](?!\()"
_DATA = r"\[\s*data\s*:(?P<body>[^\[\]]*)\]"
_FILE = r"【[^】\n]{1,200}】"

MARKER = re.compile(f"{_DATA}|{_ID_LIST}|{_FILE}", re.IGNORECASE)
DATA_BLOCK = re.compile(_DATA, re.IGNORECASE)
_SPLIT_IDS = re.compile(_SEPARATOR)
_NUMBER_ID = re.compile(r"\^?\d+\^?|\+more", re.IGNORECASE)
_DATE_OR_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d")
_BLANKS_OPEN = re.compile(r"[ \t\[]*")
_BLANKS_CLOSE = re.compile(r"[ \t\]]*")
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})", re.MULTILINE)  # opens or closes a fenced code block
_INLINE = re.compile(r"(`+)(?!`)[^\n]*?(?<!`)\1(?!`)")  # an inline code span, on one line
_LINE = re.compile(r"[^\n]*(?:\n|$)")
_INDENTED = re.compile(r"(?: {4}|\t)[ \t]*\S")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+•]|\d+[.)])[ \t]")
_DIRECTIVE = re.compile(r"[ \t]*\.\.[ \t]+[\w:-]+::")
_CODE_DIRECTIVE = re.compile(
    r"[ \t]*\.\.[ \t]+(?:code-block|code|sourcecode|literalinclude|doctest|testcode|testoutput|parsed-literal)::"
)
_PROMPT = re.compile(r"[ \t]*(?:>>>|\.\.\.|\$)(?: |$)")


def marker_ids(match: re.Match[str]) -> list[str]:
    """The source ids of a list marker found by `MARKER`, as written (`[1, 2]` gives `["1", "2"]`);
    none for a GraphRAG data reference or a file citation."""
    ids = match.group("ids")
    return _SPLIT_IDS.split(ids) if ids else []


def form(match: re.Match[str]) -> str:
    """The form (`FORMS`) of a marker found by `MARKER`."""
    if match.group("body") is not None:
        return "data"
    if match.group().startswith("【"):
        return "file"
    return "number" if all(_NUMBER_ID.fullmatch(i) for i in marker_ids(match)) else "id"


def _code(text: str) -> list[tuple[int, int]]:
    """The spans of `text` that are code: fenced and indented blocks, prompt lines and inline code
    spans."""
    spans = _code_lines(text) if "\n" in text or text[:1] in " \t>$." else []
    if "`" not in text and "~~~" not in text:
        return spans
    opened: re.Match[str] | None = None
    for fence in _FENCE.finditer(text):
        if opened is None:
            opened = fence
        elif fence.group(1)[0] == opened.group(1)[0] and len(fence.group(1)) >= len(opened.group(1)):
            spans.append((opened.start(), text.find("\n", fence.end()) % (len(text) + 1)))
            opened = None
    if opened is not None:
        spans.append((opened.start(), len(text)))  # a block left open runs to the end
    for m in _INLINE.finditer(text):
        if not any(a <= m.start() < b for a, b in spans):
            spans.append(m.span())
    return spans


def _code_lines(text: str) -> list[tuple[int, int]]:
    """Indented code blocks (markdown: four spaces after a blank line, outside a list; reST: any
    indentation after a paragraph ending in `::` or a code directive) and prompt lines."""
    spans: list[tuple[int, int]] = []
    block: int | None = None  # the indentation of the block being read
    opener = in_list = False
    blank_before = True
    for m in _LINE.finditer(text):
        line = m.group()
        if not line:
            break
        body = line.lstrip(" \t")
        if not body.strip():
            if block is not None:
                spans.append(m.span())
            blank_before = True
            continue
        indent = len(line.expandtabs(4)) - len(body.expandtabs(4))
        if block is not None and indent >= block:
            spans.append(m.span())
            continue
        block = None
        item = bool(_LIST_ITEM.match(line))
        if indent and (opener or indent >= 4 and blank_before and not in_list and not item):
            block = indent
            spans.append(m.span())
        elif _PROMPT.match(line):
            spans.append(m.span())
        in_list = item or in_list and indent > 0
        opener = bool(_CODE_DIRECTIVE.match(line)) or line.rstrip().endswith("::") and not _DIRECTIVE.match(line)
        blank_before = False
    return spans


def _in_angle_brackets(text: str, start: int, end: int) -> bool:
    """Inside `<…>` on its line (a repr such as `<Response [200]>`), looking at most 200 characters
    either way."""
    head = max(text.rfind("\n", max(0, start - 200), start) + 1, start - 200)
    opened = text.rfind("<", head, start)
    if opened < 0 or not text[opened + 1 : opened + 2].isalpha() or text.find(">", opened, start) >= 0:
        return False  # "latency < 200 ms [1]" is no tag
    closed = text.find(">", end, end + 200)
    return closed >= 0 and text.find("\n", end, closed) < 0 and not text[closed - 1].isspace()


def _fills_line(text: str, start: int, end: int) -> bool:
    """Only blanks and brackets beside the marker on its line (`[build-system]`, `[[tool.x]]`)."""
    head = text.rfind("\n", 0, start) + 1
    tail = text.find("\n", end)
    tail = len(text) if tail < 0 else tail
    return (
        _BLANKS_OPEN.fullmatch(text, head, start) is not None and _BLANKS_CLOSE.fullmatch(text, end, tail) is not None
    )


def _is_marker(match: re.Match[str], text: str, names: Collection[str] | None, forms: Collection[str]) -> bool:
    kind = form(match)
    if kind not in forms:
        return False
    if kind not in ("number", "id"):
        return True
    ids = marker_ids(match)
    if len(ids) == 1 and _DATE_OR_TIME.fullmatch(ids[0]) or _in_angle_brackets(text, *match.span()):
        return False
    if kind == "number":
        return True
    start, end = match.span()
    if start and (text[start - 1].isalnum() or text[start - 1] == "_"):
        return False  # flask[async], data[key]
    if names is not None and any(i in names for i in ids):
        return True
    if _fills_line(text, start, end):
        return False  # [build-system], [[tool.uv.sources]]
    return names is None or any(_DIGIT.search(i) for i in ids)


def markers(
    text: str, *, names: Collection[str] | None = None, forms: Collection[str] = ALL_FORMS
) -> Iterator[re.Match[str]]:
    """The markers of `text`, in order: the candidates of `MARKER` that stand where a marker stands
    (see the module's docstring). `names`: the snippet and document ids of the retrieved sources,
    when they are known; `forms`: the forms accepted."""
    if "[" not in text and "【" not in text:
        return
    code = _code(text)
    for m in MARKER.finditer(text):
        if code and any(a <= m.start() < b for a, b in code):
            continue
        if _is_marker(m, text, names, forms):
            yield m


def strip_markers(text: str, replace: str = " ", *, keep_length: bool = False) -> str:
    """`text` with its markers replaced (by `replace`, or by as many spaces when `keep_length`)."""
    found = list(markers(text))
    if not found:
        return text
    out, at = [], 0
    for m in found:
        out += [text[at : m.start()], " " * (m.end() - m.start()) if keep_length else replace]
        at = m.end()
    out.append(text[at:])
    return "".join(out)
