from datetime import datetime, timezone

from ragaudit.core.types import Trace
from ragaudit.io.traces import dump_trace, parse_trace
from ragaudit.pipelines.base import (
    Request,
    error_trace,
    trace_from_output,
    without_surrogates,
)

REQUEST = Request(qid="Q1", variant=0, seed=1, query="q", k=3)


def test_clean_values_come_back_as_the_same_objects():
    value = {"a": ["x", ("y", 1.5)], "b": {"c": None}, "é": "ü ✓ 😀"}
    assert without_surrogates(value) is value
    trace = parse_trace({"qid": "Q1", "answer": {"text": "fine"}})
    assert without_surrogates(trace) is trace


def test_every_surrogate_anywhere_becomes_one_replacement_character():
    value = {"k\ud800": ["a\udfffb", ("\ud83d\ude00",)], "n": 3, "same": "ok"}
    cleaned = without_surrogates(value)
    assert cleaned == {"k\ufffd": ["a\ufffdb", ("\ufffd\ufffd",)], "n": 3, "same": "ok"}
    assert value["k\ud800"] == ["a\udfffb", ("\ud83d\ude00",)]  # the input is not changed


def test_a_trace_and_its_parts_are_cleaned():
    trace = parse_trace(
        {
            "qid": "Q\ud800",
            "retrieved": [{"doc_id": "d", "text": "t\udc00", "offsets": [0, 2]}],
            "answer": {"text": "a\ud800", "segments": [{"seg": 1, "text": "s\ud800", "citations": ["c\ud800"]}]},
            "steps": [{"step_number": 1, "question": "?\ud800"}],
        }
    )
    cleaned = without_surrogates(trace)
    assert (cleaned.qid, cleaned.retrieved[0].text, cleaned.answer.text) == ("Q\ufffd", "t\ufffd", "a\ufffd")
    assert cleaned.answer.segments[0].citations == ("c\ufffd",) and cleaned.steps[0].question == "?\ufffd"
    assert cleaned.retrieved[0].span == trace.retrieved[0].span
    dump_trace(cleaned).encode("utf-8")


def test_an_error_message_quoting_user_text_stays_writable():
    trace = error_trace("mine", REQUEST, "ValueError: bad \ud800")
    assert trace.error == "ValueError: bad \ufffd"
    dump_trace(trace).encode("utf-8")


def test_a_trace_without_a_time_gets_the_time_it_was_received():
    before = datetime.now(timezone.utc).replace(microsecond=0)
    for output in ({"retrieved": []}, {"retrieved": [], "retrieved_at": None}):
        trace = trace_from_output("mine", REQUEST, output)
        stamp = datetime.strptime(trace.retrieved_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        assert before <= stamp <= datetime.now(timezone.utc)
    given = trace_from_output("mine", REQUEST, {"retrieved_at": "2026-11-22T10:00:00Z"})
    assert isinstance(given, Trace) and given.retrieved_at == "2026-11-22T10:00:00Z"
