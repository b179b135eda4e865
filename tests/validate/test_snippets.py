"""Across runs, one snippet of one index has one span: the runs that record another are named."""

import copy

from ragaudit.io.traces import parse_trace
from ragaudit.validation.snippets import SnippetSpans


def _run(valid_trace, qid, start=None, index="sha256:aa"):
    raw = copy.deepcopy(valid_trace)
    raw["qid"] = qid
    raw["retrieved"][0]["index_hash"] = index
    if start is not None:
        raw["retrieved"][0]["offsets"] = {"start": start, "end": start + 10, "unit": "char"}
    return parse_trace(raw, file="t.jsonl", line=len(qid))


def test_the_runs_that_disagree_with_the_majority_are_named(valid_trace):
    spans = SnippetSpans()
    first = _run(valid_trace, "A", start=3)  # seen first, but in the minority
    for trace in (
        first,
        _run(valid_trace, "B", start=10),
        _run(valid_trace, "C", start=10),
        _run(valid_trace, "D", start=5),
    ):
        spans.add(trace)
    found = spans.issues()
    assert sorted(i.qid for i in found) == ["A", "D"]
    assert {i.code for i in found} == {"inconsistent_snippet"} and all(i.severity == "error" for i in found)
    a = next(i for i in found if i.qid == "A")
    assert a.citation == first.retrieved[0].snippet_id and a.path == "$.retrieved[0].offsets"
    assert "10–20, as 2 runs record it" in a.message and "3–13" in a.message


def test_another_index_or_an_unchanged_span_is_no_conflict(valid_trace):
    spans = SnippetSpans()
    spans.add(_run(valid_trace, "A", start=3))
    spans.add(_run(valid_trace, "B", start=3))
    spans.add(_run(valid_trace, "C", start=7, index="sha256:bb"))  # a re-index may move a chunk
    assert spans.issues() == []
