"""Section-aware chunking: chunks never cross a section, carry char offsets and token counts."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from ragaudit.core.analyzers import Analyzer
from ragaudit.core.text import sentence_spans
from ragaudit.core.types import Corpus


@dataclass(frozen=True, slots=True)
class Chunk:
    snippet_id: str
    doc_id: str
    section_id: str
    start: int
    end: int
    text: str
    tokens: int
    rev: str
    source_url: str
    page: int | None = None


def chunk_corpus(corpus: Corpus, analyzer: Analyzer, *, chunk_size: int, overlap: int = 0) -> list[Chunk]:
    """Pack each section's sentences greedily into chunks of at most `chunk_size` tokens (a longer
    sentence stands alone); `overlap` sentences are repeated at the start of the next chunk."""
    chunks: list[Chunk] = []
    for doc_id in sorted(corpus.documents):
        doc = corpus[doc_id]
        number = 0
        for section in doc.sections:
            units = sentence_spans(doc.text[section.start : section.end], section.start)
            sizes = [analyzer.count(doc.text[a:b]) for a, b in units]
            i = 0
            while i < len(units):
                j, total = i, 0
                while j < len(units) and (j == i or total + sizes[j] <= chunk_size):
                    total += sizes[j]
                    j += 1
                start, end = units[i][0], units[j - 1][1]
                text = doc.text[start:end]
                number += 1
                chunks.append(
                    Chunk(
                        snippet_id=f"{doc_id}:{number:04d}",
                        doc_id=doc_id,
                        section_id=section.section_id,
                        start=start,
                        end=end,
                        text=text,
                        tokens=analyzer.count(text),
                        rev=doc.rev,
                        source_url=f"{doc.source_url or doc_id}#{section.section_id}",
                        page=doc.page_of(start),
                    )
                )
                i = j if j >= len(units) else max(j - overlap, i + 1)
    return chunks


def index_hash(chunks: list[Chunk], **parameters: Any) -> str:
    """sha256 over everything that defines an index: its parameters and every chunk's identity and span."""
    body = {
        "parameters": parameters,
        "chunks": [[c.snippet_id, c.doc_id, c.rev, c.section_id, c.start, c.end] for c in chunks],
    }
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return f"sha256:{digest}"
