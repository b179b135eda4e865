import json

import pytest

from ragaudit.core.errors import InputError
from ragaudit.io.gold import read_gold

SENTENCE = "Hardware keys are rotated every 12 months."


def item(qid="K1", **extra) -> dict:
    return {
        "qid": qid,
        "question": "How often are keys rotated?",
        "doc_id": "policies",
        "section_id": "policies/security/keys",
        "anchor": {"start": 10, "end": 10 + len(SENTENCE), "unit": "char", "text": SENTENCE},
        **extra,
    }


def read(tmp_path, *lines) -> tuple[list, list[str]]:
    path = tmp_path / "gold.jsonl"
    path.write_bytes(
        b"\n".join(line if isinstance(line, bytes) else json.dumps(line).encode() for line in lines) + b"\n"
    )
    items, problems = read_gold(path)
    return items, [str(p).removeprefix(f"{path}:") for p in problems]


@pytest.mark.parametrize(
    "start, end, message",
    [
        (10.0, 52, "$.anchor.start: expected an integer, found number 10.0"),
        (True, 52, "$.anchor.start: expected an integer, found boolean true"),
        (10, "52", "$.anchor.end: expected an integer, found string '52'"),
        (10, None, "$.anchor.end: expected an integer, found null"),
        (52, 10, "$.anchor: expected 0 <= start < end, found [52, 10)"),
        (-1, 10, "$.anchor: expected 0 <= start < end, found [-1, 10)"),
        (10, [52], "$.anchor.end: expected an integer, found array of 1"),
    ],
)
def test_anchor_offsets_of_the_wrong_kind_are_located_problems(tmp_path, start, end, message):
    anchor = {"start": start, "end": end, "unit": "char", "text": SENTENCE}
    items, problems = read(tmp_path, item(), item("K2", anchor=anchor))
    assert [i.qid for i in items] == ["K1"] and problems == [f"2: {message}"]


def test_expected_citation_offsets_are_checked_too(tmp_path):
    cite = {"doc_id": "policies", "start": False, "end": 2.5}
    _, problems = read(tmp_path, item(expected_citations=[cite, "x"]))
    assert problems == [
        "1: $.expected_citations[0].start: expected an integer, found boolean false",
        "1: $.expected_citations[0].end: expected an integer, found number 2.5",
        "1: $.expected_citations[1]: expected a citation object {doc_id, start, end, unit}, found string 'x'",
    ]


def test_nan_duplicate_keys_deep_nesting_and_wrong_top_level(tmp_path):
    nan = json.dumps(item("K2")).replace('"start": 10', '"start": NaN').encode()
    dup = json.dumps(item("K3")).replace('"qid": "K3"', '"qid": "K3", "qid": "K4"').encode()
    deep = b'{"qid": "K5", "notes": ' + b"[" * 3_000 + b"]" * 3_000 + b"}"
    items, problems = read(tmp_path, item(), nan, dup, deep, [item("K6")], b"\xff\xfe", item("K7"))
    assert [i.qid for i in items] == ["K1", "K7"]
    assert problems == [
        "2: $.anchor.start: expected a finite number, found NaN",
        "3: $.qid: expected each key once in an object, found 'qid' twice",
        "4: expected JSON nested at most 254 deep, found deeper",
        "5: expected a gold item object, found array of 1",
        "6: expected UTF-8 text, found byte 0xff at column 1",
    ]


def test_lone_surrogates_in_gold_text_read_as_replacement_characters(tmp_path):
    line = json.dumps(item()).replace("every 12 months.", "every 12 months \\udc00.").encode()
    [read_item], problems = read(tmp_path, line)
    assert problems == [] and read_item.anchor.text == "Hardware keys are rotated every 12 months \ufffd."


def test_an_empty_gold_file_is_an_input_error(tmp_path):
    path = tmp_path / "gold.jsonl"
    path.write_bytes(b"\n \n")
    with pytest.raises(InputError, match="found only blank lines"):
        read_gold(path)


@pytest.mark.parametrize("qid", ["", " ", "\t\n"])
def test_an_empty_or_blank_qid_is_a_located_problem(tmp_path, qid):
    items, problems = read(tmp_path, item(), item(qid), item("K3"))
    assert [i.qid for i in items] == ["K1", "K3"]
    assert problems == [f"2: $.qid: expected a non-empty qid, found string {qid!r}"]
