"""Across runs, one snippet of one index has one span: the runs that record another are named."""

import copy

from ragaudit.checks.validation.snippets import SnippetSpans
from ragaudit.core.types import Trace
from ragaudit.io.traces import parse_trace


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


def _reachable(root) -> list:
    """Every object `root` holds, directly or not (its class and the names it shares excepted)."""
    import gc

    seen, found, todo = {id(root)}, [], [root]
    while todo:
        for child in gc.get_referents(todo.pop()):
            if id(child) not in seen and not isinstance(child, type):
                seen.add(id(child))
                found.append(child)
                todo.append(child)
    return found


def test_memory_holds_a_small_entry_per_snippet_and_no_trace(valid_trace):
    spans = SnippetSpans()
    runs = [_run(valid_trace, f"Q{n % 3}", start=3) for n in range(60)]  # 3 questions, one snippet, one span
    runs += [_run(valid_trace, f"Q{n}", start=3, index=f"sha256:{n}") for n in range(4)]  # 4 more indexes
    for trace in runs:
        spans.add(trace)
    snippets = {(t.config, p.index_hash, p.snippet_id) for t in runs for p in t.retrieved if p.span is not None}
    assert len(snippets) >= 5
    assert len(spans) == len(snippets)  # one entry per (pipeline, index, snippet), however many runs cite it
    held = _reachable(spans)
    assert not [o for o in held if isinstance(o, Trace)]  # a run is named by its keys, not kept
    # one copy of each repeated name, whichever run it came from
    assert len([o for o in held if isinstance(o, str) and o == "Q0"]) == 1
    assert len([o for o in held if isinstance(o, str) and o == runs[0].config]) == 1
    assert len([o for o in held if isinstance(o, str) and o == runs[0].retrieved[0].doc_id]) == 1
    assert spans.issues() == []
