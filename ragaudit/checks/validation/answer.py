"""Rules on the answer: dangling and late citations, segments without or across sections."""

from __future__ import annotations

import re
from typing import Iterable, Iterator, cast

from ragaudit.checks.validation.registry import Context, rule
from ragaudit.core.citing import retrieved_names
from ragaudit.core.codes import issue, where
from ragaudit.core.markers import ALL_FORMS
from ragaudit.core.markers import markers as find_markers
from ragaudit.core.text import sentence_spans
from ragaudit.core.types import Answer, Issue, Trace

_WORD_CHAR = re.compile(r"\w")


@rule("dangling_citation")
def dangling(trace: Trace, ctx: Context) -> Iterable[Issue]:
    retrieved = {p.snippet_id for p in trace.retrieved}
    for step in trace.steps:
        for cited in step.citations:
            if cited not in retrieved:
                return _dangling_issues(trace, retrieved)
    answer = trace.answer
    if answer is not None:
        if answer.segments:
            for segment in answer.segments:
                for cited in segment.citations:
                    if cited not in retrieved:
                        return _dangling_issues(trace, retrieved)
        else:
            for cited in answer.citations:
                if cited not in retrieved:
                    return _dangling_issues(trace, retrieved)
    return ()


def _dangling_issues(trace: Trace, retrieved: set[str | None]) -> Iterator[Issue]:
    for k, step in enumerate(trace.steps):
        for j, cited in enumerate(step.citations):
            if cited not in retrieved:
                yield issue(
                    "dangling_citation",
                    f"expected a retrieved snippet_id in step {step.step_number}, found {cited!r}",
                    **where(trace, f"$.steps[{k}].citations[{j}]", citation=cited),
                )
    if trace.answer is None:
        return
    if trace.answer.marked:  # segments read from the text's markers: the marker is what is wrong
        for cited in trace.answer.citations:
            if cited not in retrieved:
                yield issue(
                    "dangling_citation",
                    f"expected a citation marker naming one of the {len(trace.retrieved)} retrieved contexts "
                    f"(by number, snippet_id or doc_id), found [{cited}]",
                    **where(trace, "$.answer.text", citation=cited),
                )
        return
    for k, segment in enumerate(trace.answer.segments):
        for j, cited in enumerate(segment.citations):
            if cited not in retrieved:
                yield issue(
                    "dangling_citation",
                    f"expected a retrieved snippet_id, found {cited!r}",
                    **where(trace, f"$.answer.segments[{k}].citations[{j}]", seg=segment.seg, citation=cited),
                )
    if not trace.answer.segments:
        for cited in trace.answer.citations:
            if cited not in retrieved:
                yield issue(
                    "dangling_citation",
                    f"expected a retrieved snippet_id, found {cited!r}",
                    **where(trace, "$.answer.raw", citation=cited),
                )


def citations_trail(text: str, names: frozenset[str] | None = None, forms: frozenset[str] = ALL_FORMS) -> bool:
    """True when the text has citation markers and every one stands after its last sentence, with
    more than one sentence before them, the last one ended: a list of sources after the answer
    ("… two. [1][2]", "… Sources: [1]"); "… two [1]." cites its sentence. A marker right after a
    sentence's full stop (`… within 12 hours. [1]`) cites that sentence, so one sentence followed by
    its markers, punctuated or not, cites inline."""
    markers = list(find_markers(text, names=names, forms=forms))
    if not markers:
        return False
    before = text[: markers[0].start()].rstrip()
    if not before or before[-1] not in ".!?:" or len(sentence_spans(before)) < 2:
        return False  # nothing before, one sentence, or the marker stands inside the last sentence
    # After the first marker, only markers and what is not a word may follow.
    gap_start = markers[0].end()
    for marker in markers[1:]:
        if _WORD_CHAR.search(text, gap_start, marker.start()):
            return False
        gap_start = marker.end()
    return not _WORD_CHAR.search(text, gap_start)


@rule("cite_after_answer")
def cite_first(trace: Trace, ctx: Context) -> Iterable[Issue]:
    answer = trace.answer
    if answer is None:
        return ()
    keys = answer.raw_keys
    if "citations" in keys and "answer" in keys:
        if keys.index("citations") > keys.index("answer"):
            return [
                issue(
                    "cite_after_answer",
                    "expected the `citations` key before `answer` in answer.raw, found it after",
                    **where(trace, "$.answer.raw"),
                )
            ]
    elif answer.text and citations_trail(answer.text, retrieved_names(trace.retrieved), ctx.markers):
        return [
            issue(
                "cite_after_answer",
                "expected citation markers within or before the sentences they "
                "support, found them all after the last sentence",
                **where(trace, "$.answer.text"),
            )
        ]
    return ()


@rule("cross_section_reuse", "uncited_segment")
def segments(trace: Trace, ctx: Context) -> Iterable[Issue]:
    answer = trace.answer
    if answer is None or not answer.segments:
        return ()
    for segment in answer.segments:
        cited = len(segment.citations)
        if cited == 0 or cited > 1 and not ctx.allow_cross_section:
            return _segment_issues(trace, ctx)
    return ()  # every segment cites, and none can reach across sections


def _segment_issues(trace: Trace, ctx: Context) -> Iterator[Issue]:
    section_of = {p.snippet_id: p.section_id for p in trace.retrieved if p.section_id is not None}
    for i, segment in enumerate(cast(Answer, trace.answer).segments):  # asked only of an answer with segments
        at = f"$.answer.segments[{i}]"
        if not segment.citations:
            yield issue(
                "uncited_segment",
                f"expected at least one citation, found none for {segment.text[:60]!r}",
                **where(trace, f"{at}.citations", seg=segment.seg),
            )
            continue
        sections = {section_of[c] for c in segment.citations if c in section_of}
        if (
            len(sections) > 1
            and not ctx.allow_cross_section
            and not any(sections <= group for group in ctx.cross_section_whitelist)
        ):
            yield issue(
                "cross_section_reuse",
                f"expected one section per segment, found {len(sections)}: {sorted(sections)}",
                **where(trace, f"{at}.citations", seg=segment.seg),
            )
