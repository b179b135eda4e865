"""Claims: an answer split into sentences with the sources each cites (docs/reference.md §3)."""

import pytest

from ragaudit.checks.metrics.claims import asserts, claims_of
from ragaudit.core.types import Answer, Segment


def cites(text: str, **answer) -> list[tuple[str, tuple[str, ...], str]]:
    return [(c.text, c.citations, c.cited_by) for c in claims_of(Answer(text=text, **answer))]


def test_each_sentence_cites_its_own_markers():
    assert cites("Keys rotate every 12 months [a]. Lost keys are reported within 4 hours [b, c].") == [
        ("Keys rotate every 12 months [a].", ("a",), "marker"),
        ("Lost keys are reported within 4 hours [b, c].", ("b", "c"), "marker"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Keys rotate every 12 months. [a] Lost keys are reported within 4 hours.",
        "Keys rotate every 12 months.[a] Lost keys are reported within 4 hours.",
        "Keys rotate every 12 months [a]. Lost keys are reported within 4 hours.",
    ],
)
def test_a_marker_after_the_full_stop_belongs_to_the_sentence_it_follows(text):
    first, second = claims_of(Answer(text=text))
    assert first.citations == ("a",) and first.cited_by == "marker"
    assert second.citations == () and second.cited_by == "none"


def test_an_unmarked_sentence_takes_the_next_marked_sentence_of_its_paragraph():
    text = "Keys rotate yearly. Admins hold two keys [k].\n\nVaults are audited monthly. Another sentence here."
    assert [(c.citations, c.cited_by) for c in claims_of(Answer(text=text))] == [
        (("k",), "next"),
        (("k",), "marker"),
        ((), "none"),  # the next paragraph has no marker: uncited
        ((), "none"),
    ]


def test_an_unpunctuated_one_sentence_answer_keeps_its_marker():
    assert cites("Passwords need 14 characters [3]") == [("Passwords need 14 characters [3]", ("3",), "marker")]


def test_a_cite_first_answer_without_markers_cites_its_list_everywhere():
    got = cites("Keys rotate yearly. Vaults are audited.", raw_citations=("s1", "s2"))
    assert [c for _, c, _ in got] == [("s1", "s2"), ("s1", "s2")] and {how for *_, how in got} == {"answer"}


def test_segments_give_the_citations_and_a_bracket_that_names_none_of_them_is_text():
    answer = Answer(
        text="x",
        segments=(
            Segment(1, "First published in 1923 [2] in Paris.", ("p1",)),
            Segment(2, "Keys rotate yearly. Vaults are audited [v].", ("k", "v")),
        ),
    )
    assert [(c.seg, c.citations, c.cited_by) for c in claims_of(answer)] == [
        (1, ("p1",), "segment"),
        (2, ("v",), "next"),
        (2, ("v",), "marker"),
    ]


@pytest.mark.parametrize(
    "sentence,claim",
    [
        ("According to the documentation:", False),
        ("Here is what I found.", False),
        ("Based on the provided context, here is the answer.", False),
        ("Sure.", False),
        ("Keys rotate every 12 months.", True),
        ("According to the documentation, keys rotate yearly.", True),
    ],
)
def test_openers_are_not_claims(sentence, claim):
    assert asserts(sentence) is claim
    assert bool(claims_of(Answer(text=sentence))) is claim


def test_no_answer_no_claims():
    assert claims_of(None) == [] and claims_of(Answer(text="")) == []
