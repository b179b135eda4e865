import json
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import shared_path

from ragaudit.adapters.graphrag import (
    Resolver,
    load_index,
    read_answers,
    trace_answer,
    trace_file,
)
from ragaudit.adapters.graphrag.render import marked_answer, to_json, to_markdown
from ragaudit.core.errors import InputError

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "graphrag"


@pytest.fixture(scope="module")
def dulce():
    return load_index(shared_path("graphrag", "v2-operation-dulce"))


def notebook(name: str) -> Path:
    return shared_path("graphrag", "v2-operation-dulce", f"{name}.ipynb")


def by_kind(traces) -> dict[str, tuple[int, int]]:
    out: dict[str, list[int]] = {}
    for trace in traces:
        for kind, row in trace.counts()["by_kind"].items():
            into = out.setdefault(kind, [0, 0])
            into[0] += row["citations"]
            into[1] += row["dangling"]
    return {k: tuple(v) for k, v in sorted(out.items())}


# ---------------------------------------------------------------- acceptance: the recorded answers


@pytest.mark.shared
def test_every_citation_of_the_local_search_answers_resolves(dulce):
    traces = trace_file(dulce, notebook("local_search"))
    assert [t.origin for t in traces] == ["local_search.ipynb cell 22", "local_search.ipynb cell 23"]
    assert [by_kind([t]) for t in traces] == [
        {"Entities": (4, 0), "Relationships": (2, 0)},
        {"Claims": (11, 0), "Entities": (9, 0), "Relationships": (7, 0)},
    ]
    assert all(not t.dangling and not any(s.warnings for s in t.sources) for t in traces)


@pytest.mark.shared
def test_every_citation_of_the_global_search_answer_resolves(dulce):
    (trace,) = trace_file(dulce, notebook("global_search"))
    assert trace.origin == "global_search.ipynb cell 13"
    assert by_kind([trace]) == {"Reports": (4, 0)}
    (report,) = trace.sources
    assert (report.title, report.via, [u.position for u in report.units]) == (
        "Galactic Orchestra and Interstellar Duet",
        "community",
        [36],
    )
    assert [d.title for d in report.documents] == ["dulce.txt"]


@pytest.mark.shared
def test_every_citation_of_the_drift_search_answers_resolves(dulce):
    traces = trace_file(dulce, notebook("drift_search"))
    # 58 node answers (251 nodes have none); the final answer printed again in cell 7 is node 0's
    assert len(traces) == 58 and sum(1 for t in traces if t.blocks) == 57
    assert by_kind(traces) == {"Reports": (145, 0), "Sources": (691, 0)}
    assert sum(len(t.blocks) for t in traces) == 290


@pytest.mark.shared
def test_all_873_citations_of_the_three_notebooks_resolve(dulce):
    names = ("local_search", "global_search", "drift_search")
    traces = [t for name in names for t in trace_file(dulce, notebook(name))]
    counts = [t.counts() for t in traces]
    assert sum(c["citations"] for c in counts) == 873
    assert sum(c["resolved"] for c in counts) == 873 and sum(c["dangling"] for c in counts) == 0


# ---------------------------------------------------------------- the mapping, checked against what the model saw


def drift_contexts() -> list[dict[str, dict[int, str]]]:
    """Per DRIFT node, the `reports` (id → title) and `sources` (id → text start) tables it was given."""
    raw = json.loads(notebook("drift_search").read_text(encoding="utf-8"))
    shown = "".join(raw["cells"][6]["outputs"][0]["data"]["text/plain"])
    starts = [m.start() for m in re.finditer(r"\{'query': ", shown)]
    out = []
    for a, b in zip(starts, [*starts[1:], len(shown)]):
        node = shown[a:b]
        out.append({name: _frame_rows(node, name) for name in ("reports", "sources")})
    return out


def _frame_rows(node: str, name: str) -> dict[int, str]:
    found = re.search(rf"'{name}':(.*?)(?:\n\s*'\w+':|\}}\}},|\Z)", node, re.S)
    rows: dict[int, str] = {}
    for line in found.group(1).split("\n") if found else []:
        row = re.match(r"^\s*(\d+)\s+(\d+)\s{1,3}(.*?)\s*(?:,|\}\})?$", line)
        if row and int(row.group(1)) == len(rows):
            rows[int(row.group(2))] = row.group(3)
        elif not line.strip() and rows:
            break  # pandas prints the wrapped `content` column as a second block
    return rows


def _prefix(shown: str) -> str:
    return shown.replace("...", "").strip()


@pytest.mark.shared
def test_drift_citations_resolve_to_the_rows_in_that_answers_context(dulce):
    """Reports (n) = community n and Sources (n) = text-unit row n: each cited id was in the context
    table of its answer, and that row's title (reports) or text (sources) is the record resolved."""
    contexts = drift_contexts()
    checked = 0
    for trace in trace_file(dulce, notebook("drift_search")):
        node = int(trace.origin.rsplit(" ", 1)[1])
        context = contexts[node]
        for source in trace.sources:
            if source.kind == "Reports":
                assert source.title.startswith(_prefix(context["reports"][source.key]))
            else:
                text = source.units[0].text.replace("\n", "\\n").strip()
                assert text.startswith(_prefix(context["sources"][source.key])[:30])
                # the human_readable_id would point one row further
                assert source.units[0].human_readable_id == source.key + 1
            checked += 1
    assert checked == 297


@pytest.mark.shared
def test_global_citation_is_in_its_context_table(dulce):
    raw = json.loads(notebook("global_search").read_text(encoding="utf-8"))
    table = "".join(raw["cells"][14]["outputs"][0]["data"]["text/plain"])
    titles = {int(m.group(1)): m.group(2) for m in re.finditer(r"^\s*\d+\s+(\d+)\s+(.+?)\s{2,}[\d.]+\s*$", table, re.M)}
    assert len(titles) == 56  # the level-2 reports
    (trace,) = trace_file(dulce, notebook("global_search"))
    assert all(titles[s.key] == s.title for s in trace.sources)


@pytest.mark.shared
def test_local_search_answers_were_recorded_against_another_index(dulce):
    """The notebook's outputs come from an older index (178 entities, shown in its cell 7): ids
    resolve, but to different records than the model saw. Verification is what catches this."""
    raw = json.loads(notebook("local_search").read_text(encoding="utf-8"))
    assert "Entity count: 178" in "".join(raw["cells"][7]["outputs"][0]["text"])
    table = "".join(raw["cells"][25]["outputs"][0]["data"]["text/plain"])
    seen = {int(m.group(1)): m.group(2) for m in re.finditer(r"^\d+\s+(\d+)\s+(.+?)\s{2,}", table, re.M)}
    assert seen[17] == "DR. JORDAN HAYES"
    resolver = Resolver(dulce)
    assert [resolver.resolve("Entities", k).title for k in (2, 17, 47)] == ["MICROSOFT", "OMBERG", "BROADWAY"]
    assert [seen[k] for k in (2, 17, 47)] == ["JORDAN HAYES", "DR. JORDAN HAYES", "DR. HAYES"]


# ---------------------------------------------------------------- v3 and every id of both outputs


@pytest.mark.shared
def test_christmas_carol_citations_resolve_to_the_book():
    index = load_index(shared_path("graphrag", "v3-christmas-carol"))
    answer = (
        "Dickens wrote the book [Data: Entities (1); Relationships (0); Claims (0)]. "
        "Project Gutenberg publishes it [Data: Reports (120); Entities (0, +more); Sources (0, 41)]."
    )
    trace = trace_answer(index, answer)
    assert trace.layout == "v3" and not trace.dangling
    assert [(s.kind, s.key, s.title) for s in trace.sources] == [
        ("Entities", 1, "CHARLES DICKENS"),
        ("Relationships", 0, "CHARLES DICKENS -> A CHRISTMAS CAROL"),
        ("Claims", 0, "CHARLES DICKENS (AUTHORSHIP)"),
        ("Reports", 120, "Project Gutenberg Digital Library Community"),
        ("Entities", 0, "PROJECT GUTENBERG"),
        ("Sources", 0, "text unit 0"),
        ("Sources", 41, "text unit 41"),
    ]
    assert {d.title for s in trace.sources for d in s.documents} == {"a-christmas-carol.txt"}
    assert trace.sources[2].units[0].position == 0  # the claim's text_unit_id is the first chunk
    assert trace.counts()["more"] == 1
    assert [c.sources for c in trace.claims] == [(1, 2, 3), (4, 5, 6, 7)]


@pytest.mark.shared
@pytest.mark.parametrize("folder", ["v2-operation-dulce", "v3-christmas-carol"])
def test_every_record_of_both_outputs_reaches_a_document(folder):
    index = load_index(shared_path("graphrag", folder))
    resolver = Resolver(index)
    resolved = [resolver.resolve(kind, key) for kind, table in index.records.items() for key in table]
    resolved += [resolver.resolve("Sources", n) for n in range(len(index.text_units))]
    assert len(resolved) == sum(map(len, index.records.values())) + len(index.text_units)
    assert [r for r in resolved if r.dangling or r.warnings or not r.documents or not r.documents[0].title] == []


# ---------------------------------------------------------------- dangling ids


def test_dangling_ids_are_reported_with_kind_id_and_reason():
    answer = "A [Data: Entities (2, 99); Sources (3)]. B [Data: Widgets (1); Claims (ALEX)]. C [Data: Reports (1)]."
    trace = trace_answer(FIXTURES / "v3", answer)
    assert [(n, s.kind, s.key, s.reason) for n, s in trace.dangling] == [
        (2, "Entities", 99, "unknown_id"),
        (3, "Sources", 3, "unknown_id"),
        (4, "Widgets", 1, "unknown_kind"),
        (5, "Claims", "ALEX", "bad_id"),
    ]
    assert trace.dangling[0][1].message == "no row of entities has human_readable_id 99"
    counts = trace.counts()
    assert (counts["citations"], counts["resolved"], counts["dangling"]) == (6, 2, 4)
    assert counts["by_kind"]["unknown"] == {"citations": 1, "resolved": 0, "dangling": 1}


def test_a_broken_link_is_a_warning_not_a_dangling_id():
    (rel,) = trace_answer(FIXTURES / "v1", "x [Data: Relationships (0)]").sources
    assert not rel.dangling and rel.warnings == ("text unit tu-gone is not in text_units",)
    assert [u.id for u in rel.units] == ["tu-a", "tu-b"]


# ---------------------------------------------------------------- verification


class WordScorer:
    """Deterministic stand-in for the support scorer: share of the claim's long words in the evidence."""

    threshold = 0.5

    def __init__(self):
        self.calls = []

    def score_many(self, pairs):
        self.calls.append(list(pairs))
        out = []
        for claim, texts in pairs:
            words = {w for w in re.findall(r"[a-z]+", claim.lower()) if len(w) > 4}
            evidence = " ".join(texts).lower()
            out.append(sum(w in evidence for w in words) / len(words) if words else 0.0)
        return np.array(out)


ANSWER = (
    "Scrooge was a miser who kept his counting-house cold [Data: Sources (0); Entities (2)]. "
    "Marley had died seven years before [Data: Entities (1); Reports (7)].\n\nUncited closing line."
)


def test_each_claim_is_scored_against_each_of_its_sources():
    scorer = WordScorer()
    trace = trace_answer(FIXTURES / "v3", ANSWER, scorer=scorer)
    assert trace.verified and trace.threshold == 0.5
    scrooge = "Scrooge was a miser who kept his counting-house cold."
    assert [pair[0] for pair in scorer.calls[0]] == [scrooge, scrooge, "Marley had died seven years before."]
    assert [pair[1] for pair in scorer.calls[0]][1] == ["Bob Cratchit earned fifteen shillings a week as a clerk."]
    first, second, third = trace.claims
    assert first.support == {1: 1.0, 2: 0.0} and second.support == {3: 0.75} and third.support is None
    assert marked_answer(trace) == (
        "Scrooge was a miser who kept his counting-house cold [1✓,2✗]. "
        "Marley had died seven years before [3✓,4?].\n\nUncited closing line."
    )
    counts = trace.counts()
    assert (counts["checked"], counts["supported"], counts["cited_claims"]) == (3, 2, 2)


def test_an_explicit_threshold_wins_over_the_scorers():
    trace = trace_answer(FIXTURES / "v3", ANSWER, scorer=WordScorer(), threshold=0.0)
    assert marked_answer(trace).count("✓") == 3


def test_without_verification_markers_are_plain_numbers():
    trace = trace_answer(FIXTURES / "v3", ANSWER + " Z [Data: Sources (1, +more)].")
    assert not trace.verified and all(c.support is None for c in trace.claims)
    assert marked_answer(trace).startswith("Scrooge was a miser who kept his counting-house cold [1,2]. ")
    assert marked_answer(trace).endswith("Z [5,+more].")


@pytest.mark.model
def test_the_real_support_scorer_tells_a_true_source_from_a_wrong_one():
    answer = (
        "Scrooge was a miser who kept his counting-house cold [Data: Sources (0)]. "
        "Scrooge was a miser who kept his counting-house cold [Data: Sources (2)]."
    )
    trace = trace_answer(FIXTURES / "v3", answer, verify=True)
    right, wrong = trace.claims[0].support[1], trace.claims[1].support[2]
    assert 0.0 <= wrong < right <= 1.0
    assert marked_answer(trace).count("✓") == 1 and marked_answer(trace).count("✗") == 1


# ---------------------------------------------------------------- rendering and answer files


def test_markdown_lists_numbered_sources_with_documents_text_units_and_pages():
    trace = trace_answer(FIXTURES / "v3", ANSWER, origin="answer.md")
    assert (
        to_markdown([trace], output_dir="out", layout="v3")
        == """\
# GraphRAG trace

- output: `out` (layout v3)
- answers: 1; citations: 4 (3 resolved, 1 dangling)

## Answer 1 — answer.md

- citations: 4 (3 resolved, 1 dangling) — Entities 2, Reports 1, Sources 1
- claims: 3, 2 cited

Scrooge was a miser who kept his counting-house cold [1,2]. Marley had died seven years before [3,4].

Uncited closing line.

### Sources

1. **Sources (0)** text unit 0
   - alpha.txt: text unit 0 (`tu-a`); page 3
2. **Entities (2)** BOB CRATCHIT
   - beta.txt: text unit 2 (`tu-c`)
3. **Entities (1)** MARLEY
   - alpha.txt: text unit 1 (`tu-b`); page 3
4. **Reports (7)** — dangling (unknown_id): no row of community_reports has community 7

### Dangling citations

- [4] Reports (7): unknown_id — no row of community_reports has community 7
"""
    )


def test_json_is_one_structured_document():
    trace = trace_answer(FIXTURES / "v3", ANSWER, scorer=WordScorer(), origin="answer.md")
    document = json.loads(json.dumps(to_json([trace], output_dir="out", layout="v3")))
    assert document["schema"] == "ragaudit.graphrag.trace/1"
    assert document["counts"] == {
        "answers": 1,
        "citations": 4,
        "resolved": 3,
        "dangling": 1,
        "by_kind": {
            "Entities": {"citations": 2, "resolved": 2, "dangling": 0},
            "Reports": {"citations": 1, "resolved": 0, "dangling": 1},
            "Sources": {"citations": 1, "resolved": 1, "dangling": 0},
        },
    }
    (answer,) = document["answers"]
    assert answer["claims"][0]["sources"] == [1, 2] and answer["claims"][0]["marks"] == {"1": "✓", "2": "✗"}
    assert answer["sources"][0]["documents"] == [{"id": "doc-1", "title": "alpha.txt", "pages": [3], "text_units": [0]}]
    assert answer["dangling"] == [
        {
            "number": 4,
            "kind": "Reports",
            "id": 7,
            "reason": "unknown_id",
            "message": "no row of community_reports has community 7",
        }
    ]


def test_answers_are_read_from_text_json_and_notebooks(tmp_path):
    (tmp_path / "a.md").write_text("One [Data: Sources (0)].", encoding="utf-8")
    (tmp_path / "a.json").write_text(
        json.dumps([{"query": "q?", "response": "R [Data: Sources (1)]"}, "S"]), encoding="utf-8"
    )
    assert [(a.text, a.origin) for a in read_answers(tmp_path / "a.md")] == [("One [Data: Sources (0)].", "a.md")]
    assert [(a.text, a.origin, a.query) for a in read_answers(tmp_path / "a.json")] == [
        ("R [Data: Sources (1)]", "a.json [0]", "q?"),
        ("S", "a.json [1]", None),
    ]


def test_a_notebook_answer_is_stdout_or_a_shown_string_never_a_log(tmp_path):
    cells = [
        {
            "cell_type": "code",
            "outputs": [
                {"output_type": "stream", "name": "stdout", "text": ["Entity count: 3\n"]},
                {"output_type": "stream", "name": "stderr", "text": ["failed: [Data: Sources (9)]"]},
                {"output_type": "stream", "name": "stdout", "text": ["Answer [Data: ", "Sources (0)].\n"]},
                {
                    "output_type": "execute_result",
                    "data": {
                        "text/plain": [
                            "{'nodes': [{'query': 'Why?',\n",
                            "   'answer': \"It's [Data: Sources (1)]\",\n",
                            "   'score': 1}, {'query': 'x', 'answer': None}]}",
                        ]
                    },
                },
                {"output_type": "execute_result", "data": {"text/plain": ['"It\'s [Data: Sources (1)]"']}},
            ],
        }
    ]
    (tmp_path / "n.ipynb").write_text(json.dumps({"cells": cells, "nbformat": 4}), encoding="utf-8")
    assert [(a.text, a.origin, a.query) for a in read_answers(tmp_path / "n.ipynb")] == [
        ("Answer [Data: Sources (0)].", "n.ipynb cell 0", None),
        ("It's [Data: Sources (1)]", "n.ipynb cell 0 answer 0", "Why?"),
    ]


@pytest.mark.parametrize(
    "content, message",
    [("{not json", "expected JSON"), ('{"cells": []}', "found none"), ('{"x": 1}', "expected a Jupyter notebook")],
)
def test_unusable_answer_files_are_input_errors(tmp_path, content, message):
    (tmp_path / "n.ipynb").write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        read_answers(tmp_path / "n.ipynb")
