"""Corpus reader: a directory of `.md`/`.rst`/`.txt` files, or a `corpus.jsonl` (docs/reference.md §1.1).

Nothing outside a corpus folder is read: a file that is a symlink leading out of it is an input
error, and a symlink to a folder is not followed.

Markdown sections come from ATX headings, reStructuredText sections from adorned titles
(`ragaudit.io.rst`); both get their ids the same way (`sections_of`). A `.txt` file is one section.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from pathlib import Path

from ragaudit.core.errors import InputError, Problem, describe
from ragaudit.core.types import Corpus, Document, Section
from ragaudit.io.fields import Fields
from ragaudit.io.jsonfiles import iter_json_lines
from ragaudit.io.jsonl import BadLine

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


SUFFIXES = (".md", ".rst", ".txt")


def markdown_sections(text: str) -> tuple[Section, ...]:
    """Sections from ATX headings: each runs from its heading line to the next heading of any level.

    Headings inside fenced code blocks do not count. Section ids as `sections_of` makes them.
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
    return sections_of(text, heads)


def rst_sections(text: str) -> tuple[Section, ...]:
    """Sections from reStructuredText titles (levels by adornment style, `ragaudit.io.rst`): each
    runs from its title's first line to the next title of any level. Ids as `sections_of` makes them."""
    from ragaudit.io.rst import rst_headings

    return sections_of(text, rst_headings(text))


def sections_of(text: str, heads: list[tuple[int, int, str]]) -> tuple[Section, ...]:
    """Sections from headings given as (char offset, level, title), in text order: a section runs
    from its heading to the next heading of any level, and text before the first heading is the
    `_preamble` section (when it holds more than blanks). A section's id is the slugs of its own
    and its enclosing headings' titles joined by `/`; a repeated id gets `-2`, `-3`, …
    """
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


def load_corpus(path: str | os.PathLike[str]) -> Corpus:
    """Read a corpus directory or `corpus.jsonl`; raises InputError listing every defect found."""
    path = Path(path)
    if path.is_dir():
        return _load_directory(path)
    if path.suffix in SUFFIXES and path.is_file():
        raise InputError(
            Problem(
                str(path),
                f"expected a directory of .md/.rst/.txt files or a corpus.jsonl, "
                f"found one {path.suffix} file (give the directory holding it)",
            )
        )
    if path.exists() or path.suffix == ".jsonl":
        return _load_jsonl(path)
    raise InputError(
        Problem(str(path), "no such corpus: expected a directory of .md/.rst/.txt files or a corpus.jsonl")
    )


def text_document(
    doc_id: str,
    text: str,
    *,
    markdown: bool = True,
    rst: bool = False,
    title: str = "",
    source_url: str | None = None,
) -> Document:
    """A document from its text: its markdown heading sections (`rst`: its reStructuredText title
    sections; else one `_preamble` section), revision, and the first heading as title (else `title`)."""
    found = rst_sections(text) if rst else markdown_sections(text) if markdown else ()
    sections = found or (Section(PREAMBLE, 0, len(text), ""),)
    title = next((s.title for s in sections if s.title), title)
    return Document(doc_id, text, revision(text), title, source_url, sections)


def corpus_files(root: Path) -> list[Path]:
    """The `.md`, `.rst` and `.txt` files below the corpus folder `root`, in order. A symlink to a
    folder is not followed; a file that is a symlink leading out of the folder is refused, unread
    (InputError naming each): nothing outside the corpus folder is a document."""
    from ragaudit.io.files import inside

    try:
        files = sorted(p for p in root.rglob("*") if p.suffix in SUFFIXES and p.is_file())
    except OSError as exc:  # a symlink loop, or a folder that cannot be listed
        raise InputError(
            Problem(exc.filename or str(root), f"cannot list the corpus directory: {exc.strerror}")
        ) from None
    outside = [
        Problem(
            str(p),
            f"expected a file inside the corpus folder {root}, found a symlink to {os.path.realpath(p)}: "
            "not read (copy the file into the folder, or remove the link)",
        )
        for p in files
        if not inside(root, p)
    ]
    if outside:
        raise InputError(outside)
    return files


def _load_directory(root: Path) -> Corpus:
    files = corpus_files(root)
    if not files:
        raise InputError(Problem(str(root), "expected .md, .rst or .txt files in the corpus directory, found none"))
    documents: dict[str, Document] = {}
    origin: dict[str, Path] = {}
    problems: list[Problem] = []
    for file in files:
        doc_id = file.relative_to(root).with_suffix("").as_posix()
        if doc_id in documents:
            problems.append(
                Problem(
                    str(file),
                    f"duplicate doc_id {doc_id!r}: expected one file per doc_id, "
                    f"found {origin[doc_id].name} and {file.name}",
                )
            )
            continue
        try:
            data = file.read_bytes()
        except OSError as exc:
            problems.append(Problem(str(file), f"cannot read corpus file: {exc.strerror}"))
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(_not_utf8(file, data, exc))
            continue
        documents[doc_id] = text_document(
            doc_id,
            text,
            markdown=file.suffix == ".md",
            rst=file.suffix == ".rst",
            title=file.stem,
            source_url=file.resolve().as_uri(),
        )
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
            problems.append(Problem(name, f"expected a document object, found {describe(obj)}", number))
            continue
        document = _document(Fields(obj, problems, file=name, line=number))
        if document is None:
            continue
        if document.doc_id in documents:
            problems.append(
                Problem(
                    name,
                    f"duplicate doc_id {document.doc_id!r}: expected unique ids, "
                    f"found it first on line {first_line[document.doc_id]}",
                    number,
                    "$.doc_id",
                )
            )
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
    sections: list[Section] = []
    for i, raw in enumerate(fields.get("sections", "array", default=[])):
        at = f"{fields.at('sections')}[{i}]"
        if not isinstance(raw, dict):
            fields.problem(at, f"expected a section object, found {describe(raw)}")
            continue
        section = Fields(raw, fields.problems, file=fields.file, line=fields.line, path=at)
        sid = section.get("section_id", "string", required=True)
        start = section.get("start", "integer", required=True)
        end = section.get("end", "integer", required=True)
        section_title = section.get("title", "string", default="")
        if None in (sid, start, end):
            continue
        if text is not None and not 0 <= start < end <= len(text):
            fields.problem(at, f"expected 0 <= start < end <= {len(text)} (text length), found [{start}, {end}]")
            continue
        previous = sections[-1] if sections else None
        if any(s.section_id == sid for s in sections):
            fields.problem(f"{at}.section_id", f"expected a section_id unique in the document, found {sid!r} again")
        elif previous is not None and start < previous.end:
            # Spans are checked against the one section they name: overlapping or unordered
            # sections would let a span belong to two of them.
            fields.problem(
                at,
                f"expected sections in text order without overlap (starting at or after "
                f"{previous.end}, the end of {previous.section_id!r}), found [{start}, {end}]",
            )
        else:
            sections.append(Section(sid, start, end, section_title))
    pages: list[tuple[int, int]] = []
    for i, raw in enumerate(fields.get("pages", "array", default=[])):
        at = f"{fields.at('pages')}[{i}]"
        if not (isinstance(raw, list) and len(raw) == 2 and all(type(v) is int for v in raw)):
            fields.problem(at, f"expected [start, end] integers, found {describe(raw)}")
        elif text is not None and not 0 <= raw[0] < raw[1] <= len(text):
            fields.problem(at, f"expected [start, end] with 0 <= start < end <= {len(text)} (text length), found {raw}")
        elif pages and raw[0] < pages[-1][1]:
            fields.problem(
                at,
                f"expected pages in text order without overlap (starting at or after {pages[-1][1]}, "
                f"where the page before ends), found {raw}",
            )
        else:
            pages.append((raw[0], raw[1]))
    if len(fields.problems) > before or doc_id is None or text is None:
        return None
    if not sections:
        sections = [Section(PREAMBLE, 0, len(text), "")]
    return Document(doc_id, text, rev or revision(text), title, source_url, tuple(sections), tuple(pages))


def _not_utf8(file: Path, data: bytes, exc: UnicodeDecodeError) -> Problem:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return Problem(
            str(file),
            "expected UTF-8 text, found UTF-16 (it starts with a UTF-16 byte order mark); save the file as UTF-8",
        )
    line = data.count(b"\n", 0, exc.start) + 1
    column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
    return Problem(
        str(file),
        f"expected UTF-8 text, found byte {data[exc.start]:#04x} at column {column} (byte offset {exc.start})",
        line,
    )
