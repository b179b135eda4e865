import json

import pytest

from ragaudit.errors import InputError
from ragaudit.io.jsonl import BadLine
from ragaudit.io.traces import parse_trace, read_traces, trace_to_dict


def test_round_trip_is_canonical(valid_trace):
    parsed = parse_trace(valid_trace)
    again = parse_trace(json.loads(json.dumps(trace_to_dict(parsed))))
    assert again == parsed
    assert trace_to_dict(parsed)["retrieved"][0]["offsets"] == valid_trace["retrieved"][0]["offsets"]


def test_answer_citations_and_raw_key_order(valid_trace):
    answer = parse_trace(valid_trace).answer
    assert answer.citations == ("pol-keys-1",)
    assert answer.raw_keys == ("citations", "answer") and answer.raw_citations == ("pol-keys-1",)
    valid_trace["answer"]["segments"] = []
    valid_trace["answer"]["raw"] = '{"citations": [{"snippet_id": "x"}, "y"], "answer": "a"}'
    assert parse_trace(valid_trace).answer.citations == ("x", "y")


@pytest.mark.parametrize("line,message", [
    ("[1, 2]", "expected a trace object, found array of 2"),
    ('{"schema": "other/2", "qid": "q"}', "expected schema 'ragaudit.trace/1', found string 'other/2'"),
    ('{"retrieved": []}', "expected a trace object with a string qid, found no qid"),
    ('{"qid": "q", "retrieved": {}}', "expected retrieved to be an array of payloads, found object"),
])
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
