"""Markers → citations: an answer given as text with citation markers cites, per sentence, the
retrieved contexts its markers name; the one grammar of where a marker binds holds for the
validator, the mapping and the claims splitter. Answers are written in the styles real LLM stacks
answer in."""

import copy

import pytest
from helpers import ITEM

from ragaudit.checks.metrics.citation import RunView
from ragaudit.checks.metrics.claims import claims_of
from ragaudit.checks.metrics.correct import judge
from ragaudit.checks.validation import Context, validate_trace
from ragaudit.io.traces import parse_trace, trace_to_dict

KEYS, PASSWORDS = "pol-keys-1", "pol-pw-1"  # k_pos 1 and 2 of the valid_trace fixture


def with_text(valid_trace: dict, text: str, **answer) -> dict:
    trace = copy.deepcopy(valid_trace)
    trace["answer"] = {"text": text, **answer}
    return trace


def read(obj: dict):
    trace = parse_trace(obj)
    assert not hasattr(trace, "problem"), trace
    return trace


def cited(trace) -> list[tuple[str, ...]]:
    return [s.citations for s in trace.answer.segments]


def codes(trace, corpus) -> list[str]:
    return sorted(i.code for i in validate_trace(trace, Context(corpus=corpus)))


@pytest.mark.parametrize(
    "marker, names",
    [
        ("[1]", (KEYS,)),
        ("[2]", (PASSWORDS,)),
        ("[1, 2]", (KEYS, PASSWORDS)),
        ("[2][1]", (PASSWORDS, KEYS)),
        ("[^1]", (KEYS,)),
        ("[^2^]", (PASSWORDS,)),
        ("【1】", (KEYS,)),
        ("【2:0†source】", (PASSWORDS,)),
        (f"[{KEYS}]", (KEYS,)),
        ("[policies]", (KEYS,)),  # a doc_id names its best-ranked payload
    ],
)
def test_each_marker_form_names_its_retrieved_context(valid_trace, marker, names):
    trace = read(with_text(valid_trace, f"Hardware keys are rotated every 12 months {marker}."))
    assert trace.answer.marked and cited(trace) == [names]
    assert trace.answer.citations == names


def test_numbers_follow_k_pos_not_list_order_and_the_list_order_without_it(valid_trace):
    obj = with_text(valid_trace, "Keys rotate yearly [1]. Passwords every 90 days [2].")
    obj["retrieved"][0]["k_pos"], obj["retrieved"][1]["k_pos"] = 2, 1
    assert cited(read(obj)) == [(PASSWORDS,), (KEYS,)]
    for p in obj["retrieved"]:
        del p["k_pos"]
    assert cited(read(obj)) == [(KEYS,), (PASSWORDS,)]


@pytest.mark.parametrize(
    "text",
    [
        "Hardware keys are rotated every 12 months [1]. Passwords are rotated every 90 days [2].",
        "Hardware keys are rotated every 12 months. [1] Passwords are rotated every 90 days. [2]",
        "Hardware keys are rotated every 12 months.[1] Passwords are rotated every 90 days.[2]",
        "Hardware keys are rotated every 12 months.[1] Passwords are rotated every 90 days [2]",
    ],
)
def test_a_marker_binds_to_the_sentence_it_stands_in_or_closes(valid_trace, corpus, text):
    trace = read(with_text(valid_trace, text))
    assert cited(trace) == [(KEYS,), (PASSWORDS,)]
    assert [s.text.split(" [")[0].split(".[")[0].rstrip(".") for s in trace.answer.segments] == [
        "Hardware keys are rotated every 12 months",
        "Passwords are rotated every 90 days",
    ]
    assert codes(trace, corpus) == []
    assert [(c.citations, c.cited_by) for c in claims_of(trace.answer)] == [
        ((KEYS,), "marker"),
        ((PASSWORDS,), "marker"),
    ]


def test_a_sentence_without_a_marker_cites_with_the_next_marked_one(valid_trace, corpus):
    trace = read(with_text(valid_trace, "Hardware keys expire. They are rotated every 12 months. [1]\n\nThat is all."))
    assert cited(trace) == [(KEYS,), (KEYS,), ()]
    assert [c.cited_by for c in claims_of(trace.answer)] == ["next", "marker"]  # "That is all." asserts nothing
    assert codes(trace, corpus) == ["uncited_segment"]


def test_a_marker_naming_no_retrieved_context_is_dangling_at_the_answer_text(valid_trace, corpus):
    trace = read(with_text(valid_trace, "Hardware keys are rotated every 12 months [7]."))
    [issue] = validate_trace(trace, Context(corpus=corpus))
    assert (issue.code, issue.path, issue.citation) == ("dangling_citation", "$.answer.text", "7")
    assert "found [7]" in issue.message and "2 retrieved contexts" in issue.message


def test_given_segments_and_markerless_answers_are_kept_as_they_are(valid_trace):
    given = read(valid_trace)
    assert not given.answer.marked and cited(given) == [(KEYS,)]
    plain = read(with_text(valid_trace, "Hardware keys are rotated every 12 months."))
    assert plain.answer.segments == () and plain.answer.citations == ()


def test_an_answer_without_any_marker_is_uncited_and_the_verdict_says_so(valid_trace, corpus):
    trace = read(with_text(valid_trace, "Hardware keys are rotated every 12 months."))
    verdict = judge(RunView(trace, ITEM, corpus), [])
    assert not verdict.correct and verdict.why.startswith("uncited: the answer's text has no citation marker")


def test_a_written_trace_keeps_the_answer_as_given_and_reads_back_the_same(valid_trace):
    trace = read(with_text(valid_trace, "Hardware keys are rotated every 12 months. [1]"))
    written = trace_to_dict(trace)
    assert written["answer"]["segments"] == []
    assert read(written).answer == trace.answer


# Answers in the styles of real stacks, each given twice: markers after the full stop, as several
# LLMs write them, and before it. Both validate clean and cite the same contexts, sentence by sentence.
STYLES = {
    "openai file citations": (
        "Administrator hardware keys are rotated every 12 months.【1:0†source】 "
        "Passwords are rotated every 90 days.【2:0†source】",
        "Administrator hardware keys are rotated every 12 months 【1:0†source】. "
        "Passwords are rotated every 90 days 【2:0†source】.",
    ),
    "openai numbered": (
        "Hardware keys are rotated every 12 months. [1] Passwords are rotated every 90 days. [2]",
        "Hardware keys are rotated every 12 months [1]. Passwords are rotated every 90 days [2].",
    ),
    "anthropic": (
        "Hardware keys are rotated every 12 months.[1][2] Both keys and passwords rotate on a schedule.[1][2]",
        "Hardware keys are rotated every 12 months [1][2]. Both keys and passwords rotate on a schedule [1][2].",
    ),
    "llamaindex citation engine": (
        "According to Source 1, hardware keys are rotated every 12 months. [1]\n\n"
        "Passwords are rotated every 90 days. [2]",
        "According to Source 1, hardware keys are rotated every 12 months [1].\n\n"
        "Passwords are rotated every 90 days [2].",
    ),
    "langchain doc ids": (
        f"Hardware keys are rotated every 12 months. [{KEYS}] Passwords are rotated every 90 days. [{PASSWORDS}]",
        f"Hardware keys are rotated every 12 months [{KEYS}]. Passwords are rotated every 90 days [{PASSWORDS}].",
    ),
}


@pytest.mark.parametrize("style", sorted(STYLES))
def test_real_answer_styles_validate_clean_and_cite_the_same_wherever_the_stop_stands(valid_trace, corpus, style):
    after, before = (read(with_text(valid_trace, text)) for text in STYLES[style])
    context = Context(corpus=corpus, allow_cross_section=True)  # "[1][2]" cites two sections on purpose
    assert validate_trace(after, context) == validate_trace(before, context) == []
    assert cited(after) == cited(before) and all(cited(after))
    assert [c.citations for c in claims_of(after.answer)] == [c.citations for c in claims_of(before.answer)]


def test_cite_renders_the_markers_as_footnotes(valid_trace):
    from ragaudit.outputs.citations import render_trace

    text = render_trace(read(with_text(valid_trace, "Keys rotate every 12 months. [1] Passwords every 90 days [2].")))
    assert "Keys rotate every 12 months[^1]. Passwords every 90 days[^2]." in text and "[1]" not in text


def test_a_run_of_leading_markers_is_read_in_place():
    """The markers that open a sentence are read where they stand: slicing off the rest of the
    sentence for each of them made a run of n markers cost n times the sentence."""
    from ragaudit.core.citing import _leading_markers
    from ragaudit.core.markers import markers

    class Piece(str):
        copied = 0

        def __getitem__(self, key):
            part = super().__getitem__(key)
            Piece.copied += len(part)
            return part

    piece = Piece(" [1]," * 2_000 + " Keys rotate yearly.")
    found = list(markers(piece))
    Piece.copied = 0
    assert _leading_markers(piece, 0, found) == len(" [1],") * 2_000 - 1  # up to the last marker's end
    assert Piece.copied <= len(piece)


def test_a_sentence_citing_two_sections_is_a_warning_and_validate_exits_0(valid_trace, corpus, corpus_dir, tmp_path):
    """`… [1] … [2].` as LLMs write it: one segment citing passages of two sections is judged
    against both by the claim checks; validation notes it as a warning, not an error."""
    import json

    from helpers import invoke

    text = "Hardware keys are rotated every 12 months [1] and passwords every 90 days [2]."
    trace = read(with_text(valid_trace, text))
    assert cited(trace) == [(KEYS, PASSWORDS)]
    [found] = validate_trace(trace, Context(corpus=corpus))
    assert (found.code, found.severity) == ("cross_section_reuse", "warning")
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(with_text(valid_trace, text)) + "\n", encoding="utf-8")
    result = invoke("validate", str(path), "--corpus", str(corpus_dir))
    assert result.exit_code == 0, result.output
    assert "1 records, 0 errors, 1 warnings" in result.output


@pytest.mark.parametrize("stop", ["[1]. passwords", "[1] . passwords", "[^1]. passwords", "【1】. passwords"])
def test_a_lower_case_sentence_after_a_marked_full_stop_is_a_segment_of_its_own(valid_trace, corpus, stop):
    """After `[1].` a sentence that opens in lower case is a new segment citing its own marker, where
    a piece opening in lower case after an abbreviation (`approx.`) continues its sentence."""
    marker = stop.split(".")[0].replace("1", "2").strip()
    text = f"Hardware keys are rotated every 12 months {stop} are rotated every 90 days {marker}."
    trace = read(with_text(valid_trace, text))
    assert cited(trace) == [(KEYS,), (PASSWORDS,)]
    assert codes(trace, corpus) == []  # no segment reaches across the two sections
    abbreviated = read(with_text(valid_trace, "Keys cost approx. five dollars [1]."))
    assert [s.text for s in abbreviated.answer.segments] == ["Keys cost approx. five dollars [1]."]
