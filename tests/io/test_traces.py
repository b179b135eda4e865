import dataclasses
import json

import orjson
import pytest

from ragaudit.checks.validation import Context, Validator
from ragaudit.checks.validation.engine import validate_trace
from ragaudit.core.errors import InputError
from ragaudit.core.types import Trace
from ragaudit.io.jsonl import BadLine
from ragaudit.io.traces import (
    dump_trace,
    parse_trace,
    read_traces,
    trace_lines,
    trace_to_dict,
    traces_in,
)


def test_round_trip_is_canonical(valid_trace):
    parsed = parse_trace(valid_trace)
    again = parse_trace(json.loads(json.dumps(trace_to_dict(parsed))))
    assert again == parsed
    assert trace_to_dict(parsed)["retrieved"][0]["offsets"] == valid_trace["retrieved"][0]["offsets"]


def test_runs_that_retrieve_one_text_share_one_string_of_it(valid_trace):
    """Read from two lines, a payload's text and ids, the qid, the query and the answer's texts are
    one object each: held once in memory, and pickled once in a batch sent to a worker process."""
    first, second = (parse_trace(orjson.loads(orjson.dumps(valid_trace))) for _ in range(2))
    a, b = first.retrieved[0], second.retrieved[0]
    assert a.text == valid_trace["retrieved"][0]["text"] and a.text is b.text
    assert a.doc_id is b.doc_id and a.snippet_id is b.snippet_id and a.section_id is b.section_id
    assert first.qid is second.qid and first.query is second.query
    assert first.answer.text is second.answer.text and first.answer.raw is second.answer.raw
    assert first.answer.segments[0].text is second.answer.segments[0].text
    changed = dict(valid_trace, retrieved=[dict(valid_trace["retrieved"][0], text=a.text + " more")])
    assert parse_trace(changed).retrieved[0].text == a.text + " more"


def test_answer_citations_and_raw_key_order(valid_trace):
    answer = parse_trace(valid_trace).answer
    assert answer.citations == ("pol-keys-1",)
    assert answer.raw_keys == ("citations", "answer") and answer.raw_citations == ("pol-keys-1",)
    valid_trace["answer"]["segments"] = []
    valid_trace["answer"]["raw"] = '{"citations": [{"snippet_id": "x"}, "y"], "answer": "a"}'
    assert parse_trace(valid_trace).answer.citations == ("x", "y")


@pytest.mark.parametrize(
    "line,message",
    [
        ("[1, 2]", "expected a trace object, found array of 2"),
        ('{"schema": "other/2", "qid": "q"}', "expected schema 'ragaudit.trace/1', found string 'other/2'"),
        ('{"retrieved": []}', "expected a trace object with a string qid, found no qid"),
        ('{"qid": "q", "retrieved": {}}', "expected retrieved to be an array of payloads, found object"),
    ],
)
def test_not_a_trace_object(line, message):
    bad = parse_trace(json.loads(line), file="f", line=3)
    assert isinstance(bad, BadLine) and bad.message == message and bad.line == 3


def test_reader_goes_on_after_bad_lines(tmp_path, valid_trace):
    path = tmp_path / "t.jsonl"
    good = json.dumps(valid_trace)
    path.write_text(f"{good}\n\nnot json\n{good}\n" + good[:40], encoding="utf-8")
    items = list(read_traces(path))
    assert [type(i).__name__ for i in items] == ["Trace", "BadLine", "Trace", "BadLine"]
    assert items[1].line == 3 and items[3].line == 5
    assert items[3].message.startswith("truncated last line")
    assert items[2].line == 4


def test_a_byte_range_reads_the_traces_that_start_in_it_numbered_from_its_first_line(tmp_path, valid_trace):
    path = tmp_path / "t.jsonl"
    good = json.dumps(valid_trace)
    path.write_text(f"{good}\nnot json\n\n{good}\n{good}\n", encoding="utf-8")
    cut = len(good) + 5  # inside the second line, which belongs to the first range
    first, second = trace_lines(path, 0, cut), trace_lines(path, cut)
    head, tail = list(traces_in(first)), list(traces_in(second))
    assert [(type(i).__name__, i.line) for i in head] == [("Trace", 1), ("BadLine", 2)]
    assert [(type(i).__name__, i.line) for i in tail] == [("Trace", 2), ("Trace", 3)]  # lines 4 and 5 of the file
    assert (first.lines, second.lines) == (2, 3) and head[0].file == tail[0].file == str(path)
    assert [i.line for i in read_traces(path)] == [1, 2, 4, 5]


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        list(read_traces(tmp_path / "nope.jsonl"))
    with pytest.raises(InputError, match="found a directory"):
        list(read_traces(tmp_path))


def test_non_utf8_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"qid": "\xff"}\n')
    [bad] = list(read_traces(path))
    assert isinstance(bad, BadLine) and "expected UTF-8" in bad.message


# ---- hostile JSON in trace files ----------------------------------------------------------------


def write_lines(path, *lines) -> None:
    path.write_bytes(
        b"\n".join(line if isinstance(line, bytes) else json.dumps(line).encode() for line in lines) + b"\n"
    )


def test_deep_nesting_is_a_malformed_record_and_the_rest_is_checked(tmp_path, valid_trace):
    path = tmp_path / "t.jsonl"
    deep = b'{"qid": "q", "error": ' + b"[" * 1_500 + b"]" * 1_500 + b"}"
    write_lines(path, valid_trace, deep, valid_trace)
    validator = Validator(Context())
    issues = list(validator.check_files([path]))
    assert validator.records == 3
    assert [(i.code, i.line, i.message) for i in issues] == [
        ("malformed_record", 2, "expected JSON nested at most 254 deep, found deeper")
    ]


def test_nan_in_a_number_field_is_wrong_type_and_dropped(tmp_path, valid_trace):
    line = (
        json.dumps(valid_trace)
        .replace('"score_norm": 0.9', '"score_norm": NaN')
        .replace('"score_raw": 9.0', '"score_raw": Infinity')
    )
    assert "NaN" in line and "Infinity" in line
    path = tmp_path / "t.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    [trace] = list(read_traces(path))
    payload = trace.retrieved[0]
    assert payload.score_norm is None and payload.score_raw is None
    assert [(e.path, e.expected, e.found) for e in trace.field_errors] == [
        ("$.retrieved[0].score_norm", "a finite number", "NaN"),
        ("$.retrieved[0].score_raw", "a finite number", "Infinity"),
    ]
    messages = [(i.code, i.path, i.message) for i in validate_trace(trace)]
    assert ("wrong_type", "$.retrieved[0].score_norm", "expected a finite number, found NaN") in messages
    written = dump_trace(trace)
    assert "NaN" not in written and "Infinity" not in written
    assert orjson.loads(written)["retrieved"][0].get("score_norm") is None


def test_nan_from_a_pipeline_object_is_caught_at_parse_time(valid_trace):
    valid_trace["retrieved"][0]["offsets"] = {"start": float("nan"), "end": 5, "unit": "char"}
    valid_trace["retrieved"][1]["window"] = {"pre": float("-inf")}
    trace = parse_trace(valid_trace)
    assert [(e.path, e.found) for e in trace.field_errors] == [
        ("$.retrieved[0].offsets.start", "NaN"),
        ("$.retrieved[1].window.pre", "-Infinity"),
    ]
    assert valid_trace["retrieved"][0]["offsets"]["start"] != valid_trace["retrieved"][0]["offsets"]["start"]
    orjson.loads(dump_trace(trace))  # strict JSON


def test_lone_surrogate_reads_as_replacement_character_with_an_issue(tmp_path, valid_trace):
    path = tmp_path / "t.jsonl"
    line = json.dumps(valid_trace).replace("keys rotated?", "keys rotated \\ud83d?")
    path.write_text(line + "\n", encoding="utf-8")
    [trace] = list(read_traces(path))
    assert trace.query == "How often are hardware keys rotated \ufffd?"
    [note] = trace.field_errors
    assert (note.path, note.found) == ("$.query", "lone surrogate U+D83D (read as U+FFFD)")
    [issue] = [i for i in validate_trace(trace) if i.code == "wrong_type"]
    assert issue.message == "expected Unicode text, found lone surrogate U+D83D (read as U+FFFD)"
    assert "\ufffd" in dump_trace(trace).encode("utf-8").decode("utf-8")


def test_duplicate_key_is_a_malformed_record(tmp_path, valid_trace):
    path = tmp_path / "t.jsonl"
    line = json.dumps(valid_trace).replace('"doc_id": "policies",', '"doc_id": "policies", "doc_id": "other",', 1)
    write_lines(path, line.encode(), valid_trace)
    bad, good = list(read_traces(path))
    assert isinstance(bad, BadLine) and isinstance(good, Trace)
    assert (bad.line, bad.path, bad.message) == (
        1,
        "$.retrieved[0].doc_id",
        "expected each key once in an object, found 'doc_id' twice",
    )


def test_every_payload_field_lands_in_its_own_attribute(valid_trace):
    raw = valid_trace["retrieved"][0]
    raw.update(
        window={"pre": 1, "post": 2},
        page=3,
        score_raw=4.5,
        score_norm=0.5,
        rerank_score=6.5,
        k_pos=7,
        k_final=1,
        text="Hardware keys are rotated every 12 months.",
    )
    payload = parse_trace(valid_trace).retrieved[0]
    for key, value in raw.items():
        got = getattr(payload, key)
        assert (got if key != "offsets" else {"start": got.start, "end": got.end, "unit": got.unit}) == value, key
    assert payload.missing == frozenset()
    del raw["rev"], raw["tokens"]
    raw["doc_id"] = 3
    payload = parse_trace(valid_trace).retrieved[0]
    assert payload.missing == {"rev", "tokens"} and payload.doc_id is None


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"score_raw": 7.579544029403025e-05, "score_norm": 1e-07},  # json.dumps writes an exponent, orjson need not
        {"score_raw": 1e16, "rerank_score": 1.2345678901234568e17},
        {"score_raw": 1e-4, "score_norm": 0.0, "rerank_score": -0.0},
        {"tokens": 2**70},  # beyond 64 bits
        {"text": "keys \ud800 rotate"},  # a lone surrogate
        {"text": "ΟΔΟΣ \u2028 \x00 \x7f é 😀", "window": {"b": 1, "a": [0.5, None, True]}},
        {"window": {2: "a key that is no string"}},
    ],
)
def test_a_trace_line_is_what_json_dumps_writes(valid_trace, changes):
    parsed = parse_trace(valid_trace)
    trace = dataclasses.replace(parsed, retrieved=(dataclasses.replace(parsed.retrieved[0], **changes),))
    expected = json.dumps(
        trace_to_dict(trace), sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )
    assert dump_trace(trace) == expected


def test_a_trace_with_nan_is_never_written(valid_trace):
    parsed = parse_trace(valid_trace)
    trace = dataclasses.replace(parsed, retrieved=(dataclasses.replace(parsed.retrieved[0], score_raw=float("nan")),))
    with pytest.raises(ValueError):
        dump_trace(trace)
