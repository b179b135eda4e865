"""The one citation-marker grammar, and the modules that read markers through it: the late-citation
rule, the quantity reader, the support scorer's text cleaning and the adapters."""

import re

import pytest
from helpers import ROOT

from ragaudit.adapters.graphrag.cite import parse_blocks
from ragaudit.markers import MARKER, marker_ids
from ragaudit.metrics.quantities import hallucinated, mentions
from ragaudit.text import clean
from ragaudit.validation.answer import citations_trail

# (marker, the source ids it names)
FORMS = [
    ("[hb24-sec-keys-0007]", ["hb24-sec-keys-0007"]),
    ("[3]", ["3"]),
    ("[1, 2]", ["1", "2"]),
    ("[ 1 ; 22 ]", ["1", "22"]),
    ("[1 2]", ["1", "2"]),
    ("[kb-7 kb-9; faq]", ["kb-7", "kb-9", "faq"]),
    ("[faq]", ["faq"]),
    ("[^1]", ["^1"]),
    ("[^4^]", ["^4^"]),
    ("[doc:3]", ["doc:3"]),
    ("[5,+more]", ["5", "+more"]),
    ("[Data: Reports (4, 7); Entities (1, +more)]", []),
    ("[data:sources (12)]", []),
    ("【4:0†source】", []),
]


@pytest.mark.parametrize("marker, ids", FORMS)
def test_each_form_is_one_marker_with_its_ids(marker, ids):
    [found] = MARKER.finditer(f"Keys rotate every 12 months {marker}.")
    assert (found.group(), marker_ids(found)) == (marker, ids)


@pytest.mark.parametrize(
    "text",
    [
        "[the handbook](https://example.com/handbook)",  # a markdown link
        "[1,\n2]",  # across lines
        "[" + "x" * 201 + "]",  # longer than 200 characters
        "[Cl−] ions",  # a character no id has
        "[]",
        "[see below]",  # words in brackets, separated by blanks alone
        "[citation needed]",
        "[Figure 3]",
    ],
)
def test_what_is_not_a_marker(text):
    assert MARKER.search(text) is None


def test_graphrag_blocks_are_the_grammars_data_references():
    text = "Scrooge kept it cold [Data: Sources (0, 2)] and [Data: Reports (5)]."
    assert [(b.start, b.end) for b in parse_blocks(text)] == [m.span() for m in MARKER.finditer(text)]


@pytest.mark.parametrize("marker", [m for m, _ in FORMS])
def test_markers_standing_after_the_answer_are_late_and_inline_ones_are_not(marker):
    assert citations_trail(f"Keys rotate every 12 months. Admins keep two. {marker}")
    assert not citations_trail(f"Keys rotate every 12 months {marker}. Admins keep two {marker}.")


@pytest.mark.parametrize("marker", [m for m, _ in FORMS])
@pytest.mark.parametrize(
    "answer",
    [
        "Keys rotate every 12 months. {marker}",  # after the full stop, as LLMs often place it
        "Keys rotate every 12 months.{marker}",
        "Keys rotate every 12 months {marker}.",
        "Redirect every request to HTTPS:: {marker}",  # a final sentence without its stop
        "Keys rotate every 12 months {marker}",
        "Keys rotate every 12 months. {marker} Admins keep two. {marker}",
        "Keys rotate every 12 months.{marker}{marker} Admins keep two.{marker}",
    ],
)
def test_a_marker_after_its_sentence_cites_it_inline(marker, answer):
    assert not citations_trail(answer.format(marker=marker))


@pytest.mark.parametrize("marker", [m for m, _ in FORMS])
def test_numbers_inside_markers_are_not_quantities(marker):
    segment = f"Keys rotate every 12 months {marker}."
    assert [m.surface for m in mentions(segment)] == ["12 months"]
    assert hallucinated(segment, ["Keys rotate every 12 months."]) == []


@pytest.mark.parametrize("marker", [m for m, _ in FORMS])
def test_the_support_scorer_reads_the_sentence_without_its_markers(marker):
    assert clean(f"Keys rotate every 12 months {marker}.") == "Keys rotate every 12 months ."


def test_bracketed_words_that_are_not_a_list_of_ids_stay_text():
    segment = "The ratio [Equation 9.9 of chapter (2)] is 3.5."
    assert {m.surface for m in mentions(segment)} >= {"9.9", "3.5"}


def test_no_module_writes_its_own_marker_pattern():
    """A complement to the tests above: a regex that opens with a literal bracket is a marker pattern."""
    own = re.compile(r"re\.compile\(\s*r?[\"'] ?\\\[")
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "ragaudit").rglob("*.py")
        if path.name != "markers.py" and own.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
