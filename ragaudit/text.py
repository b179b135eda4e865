"""Sentence splitting shared by the chunker, the answerer and the support scorer."""
from __future__ import annotations

import re

# A sentence ends at . ! or ? followed by space; a line break always ends a unit (headings, bullets).
_UNIT = re.compile(r"[^\n]+?(?:[.!?](?=\s)|$)", re.MULTILINE)


def sentence_spans(text: str, offset: int = 0) -> list[tuple[int, int]]:
    """Char spans of the sentences and lines of `text`, whitespace trimmed, shifted by `offset`."""
    spans = []
    for match in _UNIT.finditer(text):
        piece = match.group()
        stripped = piece.strip()
        if stripped:
            lead = len(piece) - len(piece.lstrip())
            start = offset + match.start() + lead
            spans.append((start, start + len(stripped)))
    return spans


def sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)]
