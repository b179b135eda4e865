"""The GraphRAG citation grammar, and the answer split into claims (sentences).

GraphRAG prompts ask the model to cite as `[Data: Reports (5, 7); Entities (1, 2, +more)]`. The
block is one form of the citation-marker grammar (`ragaudit.core.markers.DATA_BLOCK`); its body is
GraphRAG's own syntax, read here. Models drift from it, so the parser accepts any case and spacing, `;` or `,` (or nothing)
between kinds, singular kinds, `Documents`/`Covariates`/`Communities` as aliases, a bare
`(ids)` group continuing the previous kind, `+more` in any spelling, and several blocks per
sentence. Whatever it cannot read as an id is kept as a `bad` token rather than dropped, so it
can be reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragaudit.core.markers import DATA_BLOCK
from ragaudit.core.text import sentence_spans

KINDS = ("Reports", "Entities", "Relationships", "Claims", "Sources")
_ALIASES = {
    "report": "Reports",
    "reports": "Reports",
    "community report": "Reports",
    "community reports": "Reports",
    "community": "Reports",
    "communities": "Reports",
    "entity": "Entities",
    "entities": "Entities",
    "relationship": "Relationships",
    "relationships": "Relationships",
    "claim": "Claims",
    "claims": "Claims",
    "covariate": "Claims",
    "covariates": "Claims",
    "source": "Sources",
    "sources": "Sources",
    "document": "Sources",
    "documents": "Sources",
    "text unit": "Sources",
    "text units": "Sources",
}

_GROUP = re.compile(r"(?P<kind>[A-Za-z][A-Za-z _-]*?)?\s*\((?P<ids>[^()]*)\)")
_MORE = re.compile(r"^\+?\s*more$|^\.{3}$|^…$", re.IGNORECASE)
_SEPARATORS = re.compile(r"^[\s;,&]*(?:and)?[\s;,&]*$", re.IGNORECASE)


def canonical_kind(word: str) -> str | None:
    """`Reports`, `Entities`, `Relationships`, `Claims` or `Sources` for a written kind, else None.
    Only the last one or two words count, so `and Entities` is Entities."""
    words = word.replace("_", " ").replace("-", " ").lower().split()
    return _ALIASES.get(" ".join(words[-2:])) or (_ALIASES.get(words[-1]) if words else None)


@dataclass(frozen=True, slots=True)
class Citation:
    """One `Kind (ids)` group: `kind` is canonical, or the words as written when unknown."""

    kind: str
    ids: tuple[int, ...]
    more: bool = False
    known: bool = True
    bad: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Block:
    """One `[Data: …]` block at `[start, end)` of the answer."""

    start: int
    end: int
    raw: str
    citations: tuple[Citation, ...]


def parse_body(body: str) -> tuple[Citation, ...]:
    """The citations of the text between `[Data:` and `]`."""
    found: list[Citation] = []
    kind_word, last = None, 0
    leftovers = []
    for match in _GROUP.finditer(body):
        leftovers.append(body[last : match.start()])
        last = match.end()
        written = (match.group("kind") or "").strip()
        if written:
            kind_word = written
        if kind_word is None:
            found.append(Citation(kind="", ids=(), known=False, bad=(match.group().strip(),)))
            continue
        ids, more, bad = _ids(match.group("ids"))
        kind = canonical_kind(kind_word)
        found.append(Citation(kind=kind or kind_word, ids=ids, more=more, known=kind is not None, bad=bad))
    leftovers.append(body[last:])
    junk = [part.strip() for part in leftovers if not _SEPARATORS.match(part)]
    if junk:
        found.append(Citation(kind="", ids=(), known=False, bad=tuple(junk)))
    return tuple(found)


def _ids(text: str) -> tuple[tuple[int, ...], bool, tuple[str, ...]]:
    ids, more, bad = [], False, []
    for token in (t.strip() for t in re.split(r"[,;]|\s(?=\d)", re.sub(r"\+\s+more", "+more", text, flags=re.I))):
        if not token:
            continue
        if token.isdigit():
            ids.append(int(token))
        elif _MORE.match(token):
            more = True
        else:
            bad.append(token)
    return tuple(ids), more, tuple(bad)


def parse_blocks(text: str) -> list[Block]:
    """Every `[Data: …]` block of an answer, in order."""
    return [Block(m.start(), m.end(), m.group(), parse_body(m.group("body"))) for m in DATA_BLOCK.finditer(text)]


# ---------------------------------------------------------------- claims


@dataclass(frozen=True, slots=True)
class Claim:
    """One sentence of the answer: its span (blocks included), its text without blocks, its blocks."""

    index: int
    start: int
    end: int
    text: str
    blocks: tuple[Block, ...]


_HEADING = re.compile(r"^\s*#{1,6}\s")
_MASK = "\x00"


def split_claims(text: str, blocks: list[Block] | None = None) -> list[Claim]:
    """The answer's sentences, headings without citations left out. A block standing after a sentence's period, or
    alone on its line, belongs to the sentence before it."""
    blocks = parse_blocks(text) if blocks is None else blocks
    masked = list(text)
    for block in blocks:
        masked[block.start : block.end] = _MASK * (block.end - block.start)
    masked_text = "".join(masked)

    spans: list[tuple[int, int]] = []
    for line in re.finditer(r"[^\n]+", masked_text):
        if _HEADING.match(line.group()) and _MASK not in line.group():
            continue
        if not line.group().replace(_MASK, "").strip():
            if spans:  # a line of blocks only: it cites the sentence above
                spans[-1] = (spans[-1][0], line.end())
            else:
                spans.append((line.start(), line.end()))
            continue
        spans.extend(_sentences(masked_text, line.start(), line.end()))

    claims: list[Claim] = []
    for start, end in spans:
        inside = tuple(b for b in blocks if start <= b.start < end)
        claims.append(Claim(len(claims) + 1, start, end, _without_blocks(text, start, end, inside), inside))
    return claims


def _sentences(masked: str, start: int, end: int) -> list[tuple[int, int]]:
    """The sentences of one line of the answer (blocks masked out), by the one sentence splitter;
    blocks right after a sentence's end still cite that sentence."""
    out: list[list[int]] = []
    # the blocks read as spaces to the splitter: "decodes.[Data: ...] Cruz" ends a sentence
    for a, b in sentence_spans(masked[start:end].replace(_MASK, " "), start):
        rest = b
        while rest < end and masked[rest] in f" \t{_MASK}":
            rest += 1
        cut = masked.rindex(_MASK, b, rest) + 1 if _MASK in masked[b:rest] else b
        if masked[a:b].strip(f" \t{_MASK}"):
            out.append([a, cut])
        elif out:  # a sentence of blocks alone: it belongs to the one before
            out[-1][1] = max(out[-1][1], cut)
    return [(a, b) for a, b in out]


def _without_blocks(text: str, start: int, end: int, blocks: tuple[Block, ...]) -> str:
    parts, cursor = [], start
    for block in blocks:
        parts.append(text[cursor : block.start])
        cursor = block.end
    parts.append(text[cursor:end])
    joined = " ".join("".join(parts).split())
    return re.sub(r"\s+([.,;:!?])", r"\1", joined).strip()
