"""Rules that check payloads against the corpus: documents, sections, spans, text, revisions, tokens."""

from __future__ import annotations

from typing import Iterable, cast

from ragaudit.checks.validation.registry import Context, rule
from ragaudit.core.analyzers import Analyzer, get_analyzer
from ragaudit.core.codes import issue, where
from ragaudit.core.types import Corpus, Issue, Trace


@rule(
    "unknown_document",
    "unknown_section",
    "span_out_of_bounds",
    "span_text_mismatch",
    "section_mismatch",
    "rev_mismatch",
    needs_corpus=True,
)
def against_corpus(trace: Trace, ctx: Context) -> Iterable[Issue]:
    corpus = cast(Corpus, ctx.corpus)  # needs_corpus: the engine runs this rule only with a corpus
    documents = corpus.documents
    found = []
    for i, p in enumerate(trace.retrieved):
        doc_id = p.doc_id
        if doc_id is None:
            continue
        doc = documents.get(doc_id)
        if doc is None:
            found.append(
                issue(
                    "unknown_document",
                    f"expected a doc_id of the corpus, found {doc_id!r}",
                    **where(trace, f"$.retrieved[{i}].doc_id", citation=p.snippet_id),
                )
            )
            continue
        if p.rev is not None and p.rev != doc.rev:
            found.append(
                issue(
                    "rev_mismatch",
                    f"expected rev {doc.rev!r} (corpus), found {p.rev!r}",
                    **where(trace, f"$.retrieved[{i}].rev", citation=p.snippet_id),
                )
            )
        section = None
        if p.section_id is not None:
            section = corpus.section(doc_id, p.section_id)
            if section is None:
                found.append(
                    issue(
                        "unknown_section",
                        f"expected a section of {doc_id!r}, found {p.section_id!r}",
                        **where(trace, f"$.retrieved[{i}].section_id", citation=p.snippet_id),
                    )
                )
        span = p.span
        if span is None:
            continue
        analyzer = get_analyzer(p.analyzer)
        if span.unit == "token" and analyzer is None:
            continue  # token spans under an analyzer ragaudit cannot reproduce are not checkable
        text = doc.text
        chars = span if span.unit == "char" else corpus.char_span(doc_id, span, analyzer)
        if chars is None or chars.end > len(text):
            # a token span has its analyzer (one ragaudit cannot reproduce was passed over above)
            limit = len(text) if span.unit == "char" else len(corpus.token_spans(doc_id, cast(Analyzer, analyzer)))
            found.append(
                issue(
                    "span_out_of_bounds",
                    f"expected end <= {limit} ({span.unit}s in {doc_id!r}), found end {span.end}",
                    **where(trace, f"$.retrieved[{i}].offsets", citation=p.snippet_id),
                )
            )
            continue
        start, end = chars.start, chars.end
        # Compared in place: copying the slice of a long document for every payload costs.
        if p.text is not None and not (len(p.text) == end - start and text.startswith(p.text, start)):
            found.append(
                issue(
                    "span_text_mismatch",
                    text_difference(text[start:end], p.text, start),
                    **where(trace, f"$.retrieved[{i}].text", citation=p.snippet_id),
                )
            )
        if section is not None and not (section.start <= start and end <= section.end):
            found.append(
                issue(
                    "section_mismatch",
                    f"expected a span inside section {section.section_id!r} "
                    f"[{section.start}, {section.end}), found [{start}, {end}) chars",
                    **where(trace, f"$.retrieved[{i}].offsets", citation=p.snippet_id),
                )
            )
    return found


@rule("tokens_mismatch")
def token_count(trace: Trace, ctx: Context) -> Iterable[Issue]:
    """Needs no corpus for token spans, or for char spans whose payload carries its text."""
    documents = ctx.corpus.documents if ctx.corpus is not None else None
    found = []
    name = analyzer = None  # the payloads of a run almost always share their analyzer
    for i, p in enumerate(trace.retrieved):
        span = p.span
        if p.tokens is None or span is None:
            continue
        if p.analyzer != name or analyzer is None:
            name, analyzer = p.analyzer, get_analyzer(p.analyzer)
            if analyzer is None:
                continue
        if span.unit == "token":
            expected = len(span)
        elif (
            documents is not None
            and p.doc_id is not None
            and (doc := documents.get(p.doc_id)) is not None
            and span.end <= len(doc.text)
        ):
            expected = analyzer.count(doc.text[span.start : span.end])
        elif p.text is not None:
            expected = analyzer.count(p.text)
        else:
            continue
        if p.tokens != expected:
            found.append(
                issue(
                    "tokens_mismatch",
                    f"expected tokens {expected} (span under {p.analyzer!r}), found {p.tokens}",
                    **where(trace, f"$.retrieved[{i}].tokens", citation=p.snippet_id),
                )
            )
    return found


WINDOW = 24  # characters shown on each side of the first difference


def text_difference(expected: str, found: str, start: int, name: str = "text") -> str:
    """Where `name` (a payload's or gold item's text) first departs from the document slice that
    starts at char `start`, with a short window of both around that point: two long texts that
    differ late would otherwise show the same truncated prefix twice."""
    at = first_difference(expected, found)
    lengths = "" if len(expected) == len(found) else f"; the slice has {len(expected)} chars, the text {len(found)}"
    return (
        f"expected {name} == document slice [{start}, {start + len(expected)}), found a difference at char {at} "
        f"of the slice (document char {start + at}): slice {_window(expected, at)}, text {_window(found, at)}"
        f"{lengths}"
    )


def first_difference(a: str, b: str, step: int = 4096) -> int:
    """Where `a` and `b` first differ (the shorter one's length when one starts the other): compared
    a slice of `step` characters at a time, then character by character in the slice that differs."""
    at, shortest = 0, min(len(a), len(b))
    while at < shortest and a[at : at + step] == b[at : at + step]:
        at += step
    while at < shortest and a[at] == b[at]:
        at += 1
    return min(at, shortest)


def _window(text: str, at: int) -> str:
    if len(text) <= 2 * WINDOW:
        return repr(text)
    before = "..." if at > WINDOW else ""
    after = "..." if at + WINDOW < len(text) else ""
    return before + repr(text[max(0, at - WINDOW) : at + WINDOW]) + after
