"""Rules that check payloads against the corpus: documents, sections, spans, text, revisions, tokens."""
from __future__ import annotations

from ragaudit.analyzers import get_analyzer
from ragaudit.validate.codes import issue
from ragaudit.validate.registry import rule, where


@rule("unknown_document", "unknown_section", "span_out_of_bounds", "span_text_mismatch",
      "section_mismatch", "rev_mismatch", needs_corpus=True)
def against_corpus(trace, ctx):
    corpus = ctx.corpus
    for i, p in enumerate(trace.retrieved):
        at = f"$.retrieved[{i}]"
        loc = dict(citation=p.snippet_id)
        if p.doc_id is None:
            continue
        if p.doc_id not in corpus:
            yield issue("unknown_document", f"expected a doc_id of the corpus, found {p.doc_id!r}",
                        **where(trace, f"{at}.doc_id", **loc))
            continue
        doc = corpus[p.doc_id]
        if p.rev is not None and p.rev != doc.rev:
            yield issue("rev_mismatch", f"expected rev {doc.rev!r} (corpus), found {p.rev!r}",
                        **where(trace, f"{at}.rev", **loc))
        section = None
        if p.section_id is not None:
            section = corpus.section(p.doc_id, p.section_id)
            if section is None:
                yield issue("unknown_section", f"expected a section of {p.doc_id!r}, found {p.section_id!r}",
                            **where(trace, f"{at}.section_id", **loc))
        span = p.span
        if span is None:
            continue
        analyzer = get_analyzer(p.analyzer)
        if span.unit == "token" and analyzer is None:
            continue  # token spans under an analyzer ragaudit cannot reproduce are not checkable
        chars = corpus.char_span(p.doc_id, span, analyzer)
        limit = len(doc.text) if span.unit == "char" else len(corpus.token_spans(p.doc_id, analyzer))
        if chars is None or chars.end > len(doc.text):
            yield issue("span_out_of_bounds",
                        f"expected end <= {limit} ({span.unit}s in {p.doc_id!r}), found end {span.end}",
                        **where(trace, f"{at}.offsets", **loc))
            continue
        if p.text is not None and p.text != doc.text[chars.start:chars.end]:
            yield issue("span_text_mismatch", text_difference(doc.text[chars.start:chars.end], p.text, chars.start),
                        **where(trace, f"{at}.text", **loc))
        if section is not None and not section.span.contains(chars):
            yield issue("section_mismatch",
                        f"expected a span inside section {section.section_id!r} "
                        f"[{section.start}, {section.end}), found [{chars.start}, {chars.end}) chars",
                        **where(trace, f"{at}.offsets", **loc))


@rule("tokens_mismatch")
def token_count(trace, ctx):
    """Needs no corpus for token spans, or for char spans whose payload carries its text."""
    corpus = ctx.corpus
    for i, p in enumerate(trace.retrieved):
        span, analyzer = p.span, get_analyzer(p.analyzer)
        if p.tokens is None or span is None or analyzer is None:
            continue
        if span.unit == "token":
            expected = len(span)
        elif corpus is not None and p.doc_id in corpus and span.end <= len(corpus[p.doc_id].text):
            expected = analyzer.count(corpus[p.doc_id].text[span.start:span.end])
        elif p.text is not None:
            expected = analyzer.count(p.text)
        else:
            continue
        if p.tokens != expected:
            yield issue("tokens_mismatch",
                        f"expected tokens {expected} (span under {p.analyzer!r}), found {p.tokens}",
                        **where(trace, f"$.retrieved[{i}].tokens", citation=p.snippet_id))



WINDOW = 24  # characters shown on each side of the first difference


def text_difference(expected: str, found: str, start: int, name: str = "text") -> str:
    """Where `name` (a payload's or gold item's text) first departs from the document slice that
    starts at char `start`, with a short window of both around that point: two long texts that
    differ late would otherwise show the same truncated prefix twice."""
    at = next((i for i, (a, b) in enumerate(zip(expected, found)) if a != b), min(len(expected), len(found)))
    lengths = "" if len(expected) == len(found) else f"; the slice has {len(expected)} chars, the text {len(found)}"
    return (f"expected {name} == document slice [{start}, {start + len(expected)}), found a difference at char {at} "
            f"of the slice (document char {start + at}): slice {_window(expected, at)}, text {_window(found, at)}"
            f"{lengths}")


def _window(text: str, at: int) -> str:
    if len(text) <= 2 * WINDOW:
        return repr(text)
    before = "..." if at > WINDOW else ""
    after = "..." if at + WINDOW < len(text) else ""
    return before + repr(text[max(0, at - WINDOW):at + WINDOW]) + after
