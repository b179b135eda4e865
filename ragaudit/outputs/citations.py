"""Citation rendering (docs/reference.md §6): a CitationRecord as markdown, and claim-level citations as inline
footnotes. Knowledge-base sources are named by collection and file; web sources as `[Title](URL)`.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import quote, unquote, urlparse

from ragaudit.core.markers import strip_markers
from ragaudit.core.types import Payload, Trace
from ragaudit.outputs.render.markdown import md

FORMATS = ("internal_kb", "web_urls", "mixed")


@dataclass(frozen=True)
class Hit:
    """One retrieved source: a web page (`url` http/https) or a knowledge-base file."""

    source_id: str
    title: str | None = None
    url: str | None = None
    collection: str | None = None
    file: str | None = None
    section_id: str | None = None
    page: int | None = None
    score: float | None = None
    snippet: str | None = None

    @property
    def is_web(self) -> bool:
        return bool(self.url) and urlparse(self.url).scheme in ("http", "https")


@dataclass(frozen=True)
class CitationRecord:
    query: str
    hits: tuple[Hit, ...]
    retrieved_at: str | None = None
    retriever_name: str | None = None

    @property
    def citation_format(self) -> str:
        kinds = {h.is_web for h in self.hits}
        return "web_urls" if kinds == {True} else "internal_kb" if kinds <= {False} else "mixed"

    @classmethod
    def from_trace(cls, trace: Trace) -> "CitationRecord":
        return cls(
            trace.query or "", tuple(hit_of(p) for p in trace.retrieved), trace.retrieved_at, trace.retriever_name
        )


def hit_of(payload: Payload) -> Hit:
    """A payload as a Hit: `file:` URLs become collection (the corpus folder) and file; http(s) stay web."""
    url = payload.source_url
    collection = file = None
    if url and urlparse(url).scheme == "file":
        path = PurePosixPath(unquote(urlparse(url).path))
        doc = PurePosixPath(payload.doc_id or path.stem)
        depth = len(doc.parts)  # doc_id is the path below the corpus folder
        file = "/".join(path.parts[-depth:]) if len(path.parts) > depth else path.name
        collection = path.parts[-depth - 1] if len(path.parts) > depth else None
        url = None
    elif url and urlparse(url).scheme not in ("http", "https"):
        url = None
    return Hit(
        source_id=payload.snippet_id or payload.doc_id or "?",
        title=None,
        url=url,
        collection=collection,
        file=file or payload.doc_id,
        section_id=payload.section_id,
        page=payload.page,
        score=payload.score_norm,
        snippet=payload.text,
    )


def _escape(text: object) -> str:
    """Trace text as inert markdown: a snippet or answer can carry `[x](javascript:…)` or HTML."""
    return md(text)


def _url(url: str) -> str:
    """A link target that cannot end the link early or open an HTML tag."""
    return quote(url, safe=":/?#@!$&'*+,;=%~-._")


def source_markdown(hit: Hit, *, base_url: str | None = None) -> str:
    """`[Title](URL)` for the web; `collection / file § section (p. N)` for the knowledge base,
    linked under `base_url` when one is given."""
    if hit.is_web:
        return f"[{_escape(hit.title or hit.url)}]({_url(hit.url or '')})"
    name = " / ".join(filter(None, [hit.collection, hit.file]))
    label = _escape(name or hit.source_id)
    if base_url:
        target = base_url.rstrip("/") + "/" + "/".join(filter(None, [hit.collection, hit.file]))
        anchor = "#" + hit.section_id.split("/")[-1] if hit.section_id else ""
        label = f"[{label}]({_url(target + anchor)})"
    extra = "".join(
        [f" § {_escape(hit.section_id)}" if hit.section_id else "", f" (p. {hit.page})" if hit.page else ""]
    )
    return label + extra


def render_record(record: CitationRecord, *, base_url: str | None = None) -> str:
    lines = [f"**Query:** {_escape(record.query)}", ""]
    meta = ", ".join(
        filter(
            None,
            [
                record.retriever_name and f"retriever {_escape(record.retriever_name)}",
                record.retrieved_at and f"retrieved {_escape(record.retrieved_at)}",
                f"format {record.citation_format}",
            ],
        )
    )
    lines += [f"_{meta}_", "", "**Sources**", ""]
    for i, hit in enumerate(record.hits, start=1):
        score = f" — score {hit.score:.3f}" if hit.score is not None else ""
        lines.append(f"{i}. {source_markdown(hit, base_url=base_url)}{score}")
    return "\n".join(lines) + "\n"


def render_claims(claims: list[tuple[str, list[str]]], record: CitationRecord, *, base_url: str | None = None) -> str:
    """Each claim followed by footnote marks for the sources it cites (by source_id), then the
    footnotes, numbered in order of first use."""
    by_id = {h.source_id: h for h in record.hits}
    numbers: dict[str, int] = {}
    body = []
    for text, cited in claims:
        marks = ""
        for source_id in cited:
            if source_id in by_id:
                numbers.setdefault(source_id, len(numbers) + 1)
                marks += f"[^{numbers[source_id]}]"
        stripped = " ".join(text.split())
        end = stripped[-1:] if marks and stripped[-1:] in ".!?" else ""
        body.append(f"{_escape(stripped[: len(stripped) - len(end)])}{marks}{_escape(end)}")
    notes = [f"[^{n}]: {source_markdown(by_id[s], base_url=base_url)}" for s, n in numbers.items()]
    return " ".join(body) + ("\n\n" + "\n".join(notes) if notes else "") + "\n"


def render_trace(trace: Trace, *, base_url: str | None = None) -> str:
    """A run's answer with claim-level footnotes (from its segments) and its source list."""
    record = CitationRecord.from_trace(trace)
    out = [f"### {_escape(trace.qid)} (variant {trace.variant}, seed {trace.seed})", ""]
    if trace.answer and trace.answer.segments:
        # segments read from the text's markers hold them: the footnotes take their place
        texts = [strip_markers(s.text, "") if trace.answer.marked else s.text for s in trace.answer.segments]
        out.append(
            render_claims(
                [(t, list(s.citations)) for t, s in zip(texts, trace.answer.segments)], record, base_url=base_url
            )
        )
    elif trace.error:
        out.append(f"_pipeline error: {_escape(trace.error)}_\n")
    out.append(render_record(record, base_url=base_url))
    return "\n".join(out)


def render_traces(
    paths: Iterable[str | os.PathLike[str]], *, qids: Collection[str] = (), base_url: str | None = None
) -> Iterator[str]:
    """Each run of the trace files (of the questions `qids`, all when empty) as markdown, in file
    order; the lines that are not traces raise one InputError naming each, after every readable run."""
    from ragaudit.core.errors import InputError
    from ragaudit.io.jsonl import BadLine
    from ragaudit.io.traces import read_traces

    bad: list[BadLine] = []
    for path in paths:
        for trace in read_traces(path):
            if isinstance(trace, BadLine):
                bad.append(trace)
            elif not qids or trace.qid in qids:
                yield render_trace(trace, base_url=base_url)
    if bad:
        raise InputError([b.problem for b in bad])
