"""Section titles of reStructuredText (Sphinx) documents, found the way docutils finds them.

A title is a line of text with an underline of one punctuation character repeated, or between an
overline and an underline of the same character and length (the title may then be inset). Each
adornment style, the character together with whether it has an overline, is a level, in the order
the styles first appear in the document: `=` underlined and `=` over- and underlined are two
styles. An underline shorter than its title counts when it has at least four characters, as
docutils accepts it with a warning.

Not titles: indented lines (block quotes, literal blocks, directive bodies), a paragraph's later
lines, a lone adornment line (a transition), a simple table's `===  ===` rules (more than one
run of the character). Directives, roles and comments are left as the text they are; only the
offsets of the titles matter, and sections run from a title's first line (its overline, if any)
to the next title of any level.
"""

from __future__ import annotations

import re
import unicodedata

# docutils: any non-alphanumeric printable 7-bit ASCII character may adorn a title
_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1*")
_SHORT = 4  # an underline at least this long counts even when shorter than its title


def rst_headings(text: str) -> list[tuple[int, int, str]]:
    """The titles of `text` as (char offset of the title's first line, level from 1, title)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    bare = [line.rstrip() for line in lines]
    styles: list[tuple[str, bool]] = []
    heads: list[tuple[int, int, str]] = []
    after_blank = True  # a title starts a block: at the start, after a blank line or another title
    i = 0
    while i < len(bare):
        line = bare[i]
        found = _titled(bare, i) if after_blank else None
        if found is None:
            after_blank = not line
            i += 1
            continue
        style, title, size = found
        if style not in styles:
            styles.append(style)
        heads.append((starts[i], styles.index(style) + 1, title))
        after_blank = True
        i += size
    return heads


def _titled(bare: list[str], i: int) -> tuple[tuple[str, bool], str, int] | None:
    """The style, title and line count of a title starting at line `i`, else None."""
    line = bare[i]
    if not line or line[0].isspace():
        return None
    following = bare[i + 1] if i + 1 < len(bare) else ""
    if _adornment(line):
        # an overline: an inset title, then an underline of the same character and length
        under = bare[i + 2] if i + 2 < len(bare) else ""
        title = following.strip()
        if title and not _adornment(following) and under == line and _fits(line, title):
            return (line[0], True), title, 3
        return None
    if _adornment(following) and _fits(following, line):
        return (following[0], False), line.strip(), 2
    return None


def _adornment(line: str) -> bool:
    return bool(line) and _ADORNMENT.fullmatch(line) is not None


def _fits(adornment: str, title: str) -> bool:
    return len(adornment) >= _SHORT or len(adornment) >= _width(title)


def _width(title: str) -> int:
    """Columns the title takes (wide East Asian characters take two), as docutils measures it."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in title.strip())
