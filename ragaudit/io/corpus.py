"""Corpus reader: a directory of `.md`/`.txt` files, or a `corpus.jsonl` (SPEC §1.1)."""
from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from pathlib import Path

from ragaudit.errors import InputError, Problem
from ragaudit.io.fields import Fields
from ragaudit.io.jsonl import BadLine, iter_json_lines
from ragaudit.types import Corpus, Document, Section

PREAMBLE = "_preamble"
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*(?:#+[ \t]*)?$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def revision(text: str) -> str:
    """First 12 hex digits of the sha256 of the UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def slugify(title: str) -> str:
    folded = unicodedata.normalize("NFKD", title)
    folded = "".join(c for c in folded if not unicodedata.combining(c)).lower()
    return re.sub(r"[^a-z0-9]+", "-", folded).strip("-") or "section"


def markdown_sections(text: str) -> tuple[Section, ...]:
    """Sections from ATX headings: each runs from its heading line to the next heading of any level.

    Headings inside fenced code blocks do not count. A repeated section id gets `-2`, `-3`, …
    """
    heads: list[tuple[int, int, str]] = []  # (char offset, level, title)
    fence = None
    offset = 0
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        fence_match = _FENCE.match(stripped)
        if fence_match:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker[0] * len(marker)
            elif marker.startswith(fence):
                fence = None
        elif fence is None:
            match = _HEADING.match(stripped)
            if match:
                heads.append((offset, len(match.group(1)), (match.group(2) or "").strip()))
        offset += len(line)

    sections: list[Section] = []
    first = heads[0][0] if heads else len(text)
    if text[:first].strip():
        sections.append(Section(PREAMBLE, 0, first, ""))
    stack: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    for i, (start, level, title) in enumerate(heads):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, slugify(title)))
        base = "/".join(slug for _, slug in stack)
        seen[base] = seen.get(base, 0) + 1
        if seen[base] > 1:
            stack[-1] = (level, f"{stack[-1][1]}-{seen[base]}")
        section_id = "/".join(slug for _, slug in stack)
        end = heads[i + 1][0] if i + 1 < len(heads) else len(text)
        sections.append(Section(section_id, start, end, title))
    return tuple(sections)


def load_corpus(path: str | os.PathLike) -> Corpus:
    """Read a corpus directory or `corpus.jsonl`; raises InputError listing every defect found."""
    path = Path(path)
    if path.is_dir():
        return _load_directory(path)
    if path.exists() or path.suffix == ".jsonl":
        return _load_jsonl(path)
    raise InputError(Problem(str(path), "no such corpus: expected a directory of .md/.txt files or a corpus.jsonl"))


def text_document(doc_id: str, text: str, *, markdown: bool = True, title: str = "",
                  source_url: str | None = None) -> Document:
    """A document from its text: its markdown heading sections (else one `_preamble` section),
    revision, and the first heading as title (else `title`)."""
    sections = (markdown_sections(text) if markdown else ()) or (Section(PREAMBLE, 0, len(text), ""),)
    title = next((s.title for s in sections if s.title), title)
    return Document(doc_id, text, revision(text), title, source_url, sections)


def _load_directory(root: Path) -> Corpus:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".md", ".txt"))
    if not files:
        raise InputError(Problem(str(root), "expected .md or .txt files in the corpus directory, found none"))
    documents: dict[str, Document] = {}
    origin: dict[str, Path] = {}
    problems: list[Problem] = []
    for file in files:
        doc_id = file.relative_to(root).with_suffix("").as_posix()
        if doc_id in documents:
            problems.append(Problem(str(file), f"duplicate doc_id {doc_id!r}: expected one file per doc_id, "
                                               f"found {origin[doc_id].name} and {file.name}"))
            continue
        try:
            with open(file, encoding="utf-8", newline="") as handle:
                text = handle.read()
        except UnicodeDecodeError as exc:
            problems.append(Problem(str(file), f"expected UTF-8 text, found byte {exc.object[exc.start]:#04x} at offset {exc.start}"))
            continue
        documents[doc_id] = text_document(doc_id, text, markdown=file.suffix == ".md", title=file.stem,
                                          source_url=file.resolve().as_uri())
        origin[doc_id] = file
    if problems:
        raise InputError(problems)
    return Corpus(documents, str(root))


def _load_jsonl(file: Path) -> Corpus:
    name = str(file)
    documents: dict[str, Document] = {}
    first_line: dict[str, int] = {}
    problems: list[Problem] = []
    for number, obj in iter_json_lines(file):
        if isinstance(obj, BadLine):
            problems.append(obj.problem)
            continue
        if not isinstance(obj, dict):
            problems.append(Problem(name, "expected a document object, found " + type(obj).__name__, number))
            continue
        document = _document(Fields(obj, problems, file=name, line=number))
        if document is None:
            continue
        if document.doc_id in documents:
            problems.append(Problem(name, f"duplicate doc_id {document.doc_id!r}: expected unique ids, "
                                          f"found it first on line {first_line[document.doc_id]}", number, "$.doc_id"))
            continue
        documents[document.doc_id] = document
        first_line[document.doc_id] = number
    if problems:
        raise InputError(problems)
    return Corpus(documents, name)


def _document(fields: Fields) -> Document | None:
    before = len(fields.problems)
    doc_id = fields.get("doc_id", "string", required=True)
    text = fields.get("text", "string", required=True)
    title = fields.get("title", "string", default="")
    source_url = fields.get("source_url", "string")
    rev = fields.get("rev", "string")
    sections = []
    for i, raw in enumerate(fields.get("sections", "array", default=[])):
        at = f"{fields.at('sections')}[{i}]"
        if not isinstance(raw, dict):
            fields.problem(at, f"expected a section object, found {json.dumps(raw)[:40]}")
            continue
        section = Fields(raw, fields.problems, file=fields.file, line=fields.line, path=at)
        sid = section.get("section_id", "string", required=True)
        start = section.get("start", "integer", required=True)
        end = section.get("end", "integer", required=True)
        if None in (sid, start, end):
            continue
        if text is not None and not 0 <= start < end <= len(text):
            fields.problem(at, f"expected 0 <= start < end <= {len(text)} (text length), found [{start}, {end}]")
            continue
        sections.append(Section(sid, start, end, section.get("title", "string", default="")))
    pages = []
    for i, raw in enumerate(fields.get("pages", "array", default=[])):
        if (isinstance(raw, list) and len(raw) == 2 and all(type(v) is int for v in raw)
                and 0 <= raw[0] < raw[1]):
            pages.append((raw[0], raw[1]))
        else:
            fields.problem(f"{fields.at('pages')}[{i}]", f"expected [start, end] with 0 <= start < end, found {json.dumps(raw)[:40]}")
    if len(fields.problems) > before or doc_id is None or text is None:
        return None
    if not sections:
        sections = [Section(PREAMBLE, 0, len(text), "")]
    return Document(doc_id, text, rev or revision(text), title, source_url, tuple(sections), tuple(pages))
