import pytest

from ragaudit.adapters.graphrag.cite import (
    Citation,
    canonical_kind,
    parse_blocks,
    parse_body,
    split_claims,
)


def cites(text: str) -> list[tuple[str, tuple, bool]]:
    return [(c.kind, c.ids, c.more) for b in parse_blocks(text) for c in b.citations]


def test_the_prompt_form():
    assert cites("x [Data: Reports (5, 7); Entities (1, 2, +more)].") == [
        ("Reports", (5, 7), False),
        ("Entities", (1, 2), True),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "[Data: Reports (5, 7); Entities (1)]",
        "[Data: Reports (5, 7), Entities (1)]",
        "[Data: Reports (5, 7) Entities (1)]",
        "[Data: Reports (5, 7) and Entities (1)]",
        "[data: reports (5,7); entities (1)]",
        "[DATA:REPORTS(5 , 7);ENTITIES(1)]",
        "[ Data : Reports ( 5, 7 ) ; Entities ( 1 ) ]",
        "[Data: Report (5, 7); Entity (1)]",
        "[Data: Reports (5 7); Entities (1)]",
        "[Data: Reports (5); (7); Entities (1)]",
    ],
)
def test_separators_case_spacing_and_singular_forms(text):
    found = cites(text)
    assert [(k, ids) for k, ids, _ in found] in (
        [("Reports", (5, 7)), ("Entities", (1,))],
        [("Reports", (5,)), ("Reports", (7,)), ("Entities", (1,))],
    )


@pytest.mark.parametrize("written", ["+more", "+ more", "+More", "more", "..."])
def test_more_in_any_spelling(written):
    assert cites(f"[Data: Sources (1, 2, {written})]") == [("Sources", (1, 2), True)]


@pytest.mark.parametrize(
    "written, kind",
    [
        ("Documents", "Sources"),
        ("Document", "Sources"),
        ("Sources", "Sources"),
        ("Text Units", "Sources"),
        ("Covariates", "Claims"),
        ("Claims", "Claims"),
        ("Communities", "Reports"),
        ("Relationships", "Relationships"),
        ("community reports", "Reports"),
    ],
)
def test_kind_aliases(written, kind):
    assert canonical_kind(written) == kind
    assert cites(f"[Data: {written} (3)]") == [(kind, (3,), False)]


def test_unknown_kind_is_kept_not_dropped():
    (citation,) = parse_body(" Widgets (4)")
    assert citation == Citation(kind="Widgets", ids=(4,), known=False)


def test_tokens_that_are_not_ids_are_kept_as_bad():
    (citation,) = parse_body(" Entities (1, ALEX MERCER, 2)")
    assert citation.ids == (1, 2) and citation.bad == ("ALEX MERCER",)


def test_text_that_is_not_a_group_is_kept_as_bad():
    found = parse_body(" see the reports")
    assert len(found) == 1 and not found[0].known and found[0].bad == ("see the reports",)


def test_several_blocks_and_their_spans():
    text = "A [Data: Reports (1)] and B [Data: Sources (2, 3)]."
    blocks = parse_blocks(text)
    assert [text[b.start : b.end] for b in blocks] == ["[Data: Reports (1)]", "[Data: Sources (2, 3)]"]
    assert [b.raw for b in blocks] == ["[Data: Reports (1)]", "[Data: Sources (2, 3)]"]


def test_other_brackets_are_not_citations():
    assert parse_blocks("A list [1, 2] and a link [x](http://y) [Data sources]") == []


# ---------------------------------------------------------------- claims


def test_sentences_carry_their_own_blocks():
    text = "Mercer leads the squad [Data: Entities (0)]. Hayes decodes signals [Data: Entities (2); Claims (5)]."
    claims = split_claims(text)
    assert [c.text for c in claims] == ["Mercer leads the squad.", "Hayes decodes signals."]
    assert [[cit.kind for b in c.blocks for cit in b.citations] for c in claims] == [
        ["Entities"],
        ["Entities", "Claims"],
    ]


def test_abbreviations_and_initials_do_not_end_a_sentence():
    text = "Dr. Jordan Hayes met Mr. J. B. Lippincott at St. Mary's [Data: Sources (1)]. It rained."
    claims = split_claims(text)
    assert len(claims) == 2 and claims[0].text.startswith("Dr. Jordan Hayes met Mr. J. B. Lippincott")
    assert len(claims[0].blocks) == 1 and not claims[1].blocks


def test_a_block_after_the_period_belongs_to_the_sentence_before():
    text = "Mercer leads. [Data: Entities (0)] Hayes decodes.[Data: Entities (2)] Cruz argues."
    claims = split_claims(text)
    assert [c.text for c in claims] == ["Mercer leads.", "Hayes decodes.", "Cruz argues."]
    assert [len(c.blocks) for c in claims] == [1, 1, 0]


def test_a_block_alone_on_its_line_cites_the_sentence_above():
    text = "Mercer leads the squad.\n\n[Data: Reports (3)]\n\nNext paragraph."
    claims = split_claims(text)
    assert [c.text for c in claims] == ["Mercer leads the squad.", "Next paragraph."]
    assert len(claims[0].blocks) == 1


def test_headings_are_not_claims_unless_they_cite():
    text = (
        "## Overview\n\nMercer leads [Data: Entities (0)].\n\n### Mercer's team [Data: Reports (1)]\n- Hayes decodes."
    )
    claims = split_claims(text)
    assert [c.text for c in claims] == ["Mercer leads.", "### Mercer's team", "- Hayes decodes."]


def test_lowercase_after_a_period_continues_the_sentence():
    assert len(split_claims("It cost approx. five dollars. Then it rose.")) == 2


def test_spans_cover_the_blocks():
    text = "One [Data: Sources (1)]. Two."
    first, second = split_claims(text)
    assert text[first.start : first.end] == "One [Data: Sources (1)]."
    assert text[second.start : second.end] == "Two."
    assert [c.index for c in (first, second)] == [1, 2]
