import json
import math
from itertools import pairwise

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragaudit.core.errors import InputError
from ragaudit.core.types import FieldError
from ragaudit.io.jsonfiles import JsonLines, iter_json_lines, iter_json_values, read_json_file
from ragaudit.io.jsonl import BadLine, JsonDefect, decode, dump_line, scrub

LIMIT = 254  # the documented nesting limit: what orjson can write back


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def defect(data: bytes, **kw) -> JsonDefect:
    with pytest.raises(JsonDefect) as caught:
        decode(data, **kw)
    return caught.value


# ---- nesting ----------------------------------------------------------------------------------


def test_nesting_up_to_the_limit_is_read_and_one_more_is_a_located_defect():
    value, _ = decode(nested(LIMIT))
    depth = 1
    while value:  # each list holds the next one; the innermost is empty
        value, depth = value[0], depth + 1
    assert depth == LIMIT
    found = defect(nested(LIMIT + 1))
    assert found.message == f"expected JSON nested at most {LIMIT} deep, found deeper" and found.line == 1


@pytest.mark.parametrize("depth", [1_024, 1_025, 5_000, 100_000])
def test_nesting_that_crashed_the_standard_parser_is_a_defect(depth):
    for data in (
        nested(depth),
        b'{"a":' * depth + b"1" + b"}" * depth,
        b"[" * depth,
        b'{"a": NaN, "b": ' + nested(depth) + b"}",
    ):
        assert "nested at most" in defect(data).message


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = json.dumps({"a": "[" * 5_000 + "{" * 5_000}).encode()
    assert decode(text)[0] == {"a": "[" * 5_000 + "{" * 5_000}
    # and through the standard parser too (NaN forces the slow path)
    assert decode(text[:-1] + b', "n": NaN}', finite=False)[0]["a"].startswith("[[")


def test_deep_nesting_in_a_whole_file_names_its_line(tmp_path):
    path = tmp_path / "report.json"
    path.write_bytes(b'{\n  "summary": {},\n  "deep": ' + nested(300) + b"\n}\n")
    with pytest.raises(InputError) as caught:
        read_json_file(path, what="report")
    assert str(caught.value) == f"{path}:3: expected JSON nested at most {LIMIT} deep, found deeper"
    assert caught.value.exit_code == 3


# ---- duplicate keys ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, key, path",
    [
        ('{"a":1,"a":2}', "a", "$.a"),
        ('{"a": 1, "b": {"c": [1, {"d": 1, "d": 1}]}}', "d", "$.b.c[1].d"),
        ('{"a": "x:y", "b": "\\u003a", "b": 2}', "b", "$.b"),  # an escaped colon would hide it from counting
        ('{"k\\u0061": 1, "ka": 2}', "ka", "$.ka"),  # the same key, spelt two ways
        ('{"a": {"a": 1}, "a": {"a": 1}}', "a", "$.a"),
        ('{"x y": 1, "x y": 2}', "x y", '$["x y"]'),
    ],
)
def test_duplicate_keys_are_defects_naming_key_and_path(text, key, path):
    found = defect(text.encode())
    assert found.message == f"expected each key once in an object, found {key!r} twice" and found.path == path


@pytest.mark.parametrize(
    "text",
    [
        '{"a": "x:y:z", "b": {"a": 1}, "c": [{"a": 1}, {"a": 2}]}',
        '{"a": "\\u003a\\u003A", "b": 1}',
        '{"url": "file:///a#b:c", "t": "10:00:00", "k\\":": 1}',
    ],
)
def test_no_false_duplicates(text):
    assert decode(text.encode())[0] == json.loads(text)


def test_duplicate_key_in_a_whole_file_names_its_line(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text('{\n  "inputs": {\n    "gold": "a",\n    "gold": "b"\n  }\n}\n', encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_json_file(path, what="manifest")
    assert str(caught.value) == f"{path}:4: $.inputs.gold: expected each key once in an object, found 'gold' twice"


KEYS = st.sampled_from(["a", "b", "a:", ":", 'k"', "é"])
SCALARS = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.text(alphabet='ab:"\\é \n', max_size=6),
)
TREES = st.recursive(
    SCALARS,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4).map(lambda items: ("array", items)),
        st.lists(st.tuples(KEYS, kids), max_size=4).map(lambda pairs: ("object", pairs)),
    ),
    max_leaves=12,
)


def render(node, *, item: str, colon: str, ascii_only: bool, escape_colons: bool) -> str:
    """JSON text of a tree whose objects are pair lists, so that a key may occur twice."""

    def string(value: str) -> str:
        text = json.dumps(value, ensure_ascii=ascii_only)
        return text.replace(":", "\\u003a") if escape_colons else text

    if isinstance(node, tuple) and node[0] == "array":
        return (
            "["
            + item.join(
                render(k, item=item, colon=colon, ascii_only=ascii_only, escape_colons=escape_colons) for k in node[1]
            )
            + "]"
        )
    if isinstance(node, tuple):
        return (
            "{"
            + item.join(
                string(k)
                + colon
                + render(v, item=item, colon=colon, ascii_only=ascii_only, escape_colons=escape_colons)
                for k, v in node[1]
            )
            + "}"
        )
    return string(node) if isinstance(node, str) else json.dumps(node)


def has_duplicate(text: str) -> bool:
    found = []

    def pairs(items):
        found.append(len({k for k, _ in items}) < len(items))
        return dict(items)

    json.loads(text, object_pairs_hook=pairs)
    return any(found)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(TREES, st.sampled_from([",", ", "]), st.sampled_from([":", ": ", " : ", "\t:"]), st.booleans(), st.booleans())
def test_duplicate_detection_agrees_with_the_standard_parser(tree, item, colon, ascii_only, escape_colons):
    text = render(tree, item=item, colon=colon, ascii_only=ascii_only, escape_colons=escape_colons)
    if has_duplicate(text):
        assert "twice" in defect(text.encode()).message
    else:
        assert decode(text.encode())[0] == json.loads(text)


# ---- NaN, Infinity and numbers beyond a double --------------------------------------------------


@pytest.mark.parametrize(
    "token, found",
    [
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("-Infinity", "-Infinity"),
        ("1e999", "1e999"),
        ("-2.5E400", "-2.5E400"),
        ("9" * 400, "9" * 21 + "..."),
    ],
)
def test_non_finite_numbers(token, found):
    data = ('{"a": [1, {"b": %s}]}' % token).encode()
    strict = defect(data)
    assert (strict.message, strict.path) == (f"expected a finite number, found {found}", "$.a[1].b")
    value, notes = decode(data, finite=False)
    assert value == {"a": [1, {"b": None}]}
    [note] = notes
    assert note.path == "$.a[1].b" and note.expected == "a finite number"
    assert note.found == {"NaN": "NaN", "-Infinity": "-Infinity"}.get(
        token, "-Infinity" if token[0] == "-" else "Infinity"
    )


def test_large_but_finite_numbers_are_kept_alike_on_both_paths():
    big = "9" * 300
    expected = [float(big), 1e308, 5e-324, 2**64 - 1, float(2**64), -(2**63)]
    text = f"[{big}, 1e308, 5e-324, {2**64 - 1}, {2**64}, {-(2**63)}"
    fast = decode(f"{text}]".encode())
    slow = decode(f"{text}, NaN]".encode(), finite=False)
    assert fast == (expected, ()) and slow[0] == expected + [None]
    assert [type(v) for v in fast[0]] == [type(v) for v in slow[0][:-1]]


def test_nan_in_a_whole_file_names_line_and_path(tmp_path):
    path = tmp_path / "baseline.json"
    path.write_text('{\n  "summary": {\n    "delta_s": NaN\n  }\n}\n', encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_json_file(path, what="report")
    assert str(caught.value) == f"{path}:3: $.summary.delta_s: expected a finite number, found NaN"
    assert read_json_file(path, what="report", finite=False) == {"summary": {"delta_s": None}}


def test_dump_line_refuses_to_write_nan():
    for value in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError):
            dump_line({"score": value})
    assert dump_line({"b": 1.5, "a": "é"}) == '{"a":"é","b":1.5}'


# ---- lone surrogates --------------------------------------------------------------------------


def test_lone_surrogates_become_replacement_characters_with_a_note():
    value, notes = decode(b'{"a": "x\\ud800y", "\\udfffk": ["\\ud83d\\ude00", "\\udc00"]}')
    assert value == {"a": "x\ufffdy", "\ufffdk": ["\U0001f600", "\ufffd"]}
    assert list(value) == ["a", "\ufffdk"]  # key order kept
    assert notes == (
        FieldError("$.a", "Unicode text", "lone surrogate U+D800 (read as U+FFFD)"),
        FieldError('$["\ufffdk"]', "Unicode text", "a key with lone surrogate U+DFFF (read as U+FFFD)"),
        FieldError('$["\ufffdk"][1]', "Unicode text", "lone surrogate U+DC00 (read as U+FFFD)"),
    )
    json.dumps(value, ensure_ascii=False).encode("utf-8")  # writable


def test_utf8_encoded_surrogates_are_not_utf8():
    found = defect(b'{"a": "\xed\xa0\x80"}')
    assert found.message == "expected UTF-8 text, found byte 0xed at column 8"


def test_scrub_copies_only_what_changes_and_leaves_the_callers_objects_alone():
    inner = {"score": math.nan, "keep": [1, 2]}
    outer = {"p": inner, "q": {"x": 1}, "t": ("\ud800",)}
    value, notes = scrub(outer)
    assert outer["p"]["score"] != outer["p"]["score"] and outer["t"] == ("\ud800",)  # untouched
    assert value == {"p": {"score": None, "keep": [1, 2]}, "q": {"x": 1}, "t": ["\ufffd"]}
    assert value["q"] is outer["q"] and value["p"]["keep"] is inner["keep"]
    assert [n.path for n in notes] == ["$.p.score", "$.t[0]"]
    clean = {"a": [1, "b"]}
    assert scrub(clean) == (clean, ()) and scrub(clean)[0] is clean


def test_scrub_survives_cycles_and_depth():
    cyclic: dict = {"a": math.inf}
    cyclic["self"] = cyclic
    value, notes = scrub(cyclic)
    assert value["a"] is None and [n.path for n in notes] == ["$.a"]
    deep: list = [math.nan]
    for _ in range(5_000):
        deep = [deep]
    assert len(scrub(deep)[1]) == 1


# ---- whole files --------------------------------------------------------------------------------


def test_read_json_file_reads_objects_and_honours_expect(tmp_path):
    path = tmp_path / "r.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"summary": {"x": 1}}).encode() + b"\n")
    assert read_json_file(path, what="report") == {"summary": {"x": 1}}
    path.write_text("[1, 2]", encoding="utf-8")
    assert read_json_file(path, what="list", expect=list) == [1, 2]
    assert read_json_file(path, what="anything", expect=object) == [1, 2]


@pytest.mark.parametrize(
    "content, message",
    [
        (b"[]", "expected a report object, found an array"),
        (b'"text"', "expected a report object, found a string"),
        (b"null", "expected a report object, found null"),
        (b"true", "expected a report object, found a boolean"),
        (b"3", "expected a report object, found an integer"),
        (b"", "expected a report in JSON, found an empty file"),
        (b" \n\n", "expected a report in JSON, found an empty file"),
    ],
)
def test_read_json_file_top_level(tmp_path, content, message):
    path = tmp_path / "report.json"
    path.write_bytes(content)
    with pytest.raises(InputError) as caught:
        read_json_file(path, what="report")
    assert str(caught.value) == f"{path}: {message}"


@pytest.mark.parametrize(
    "content, message",
    [
        (b'{\n  "a": 1,\n  "b": \n}', "4: expected a JSON value, found invalid JSON (Expecting value at column 1)"),
        (b'{\n  "a": "\xff"\n}', "2: expected UTF-8 text, found byte 0xff at column 9"),
        (b'{\n  "a": [1, 2', "2: expected a JSON value, found invalid JSON (Expecting ',' delimiter at column 13)"),
    ],
)
def test_read_json_file_locates_bad_content(tmp_path, content, message):
    path = tmp_path / "report.json"
    path.write_bytes(content)
    with pytest.raises(InputError) as caught:
        read_json_file(path, what="report")
    assert str(caught.value) == f"{path}:{message}"


def test_read_json_file_missing_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such baseline$"):
        read_json_file(tmp_path / "nope.json", what="baseline")
    with pytest.raises(InputError, match="expected a manifest, found a directory"):
        read_json_file(tmp_path, what="manifest")


# ---- lines ----------------------------------------------------------------------------------------


def test_lines_go_on_after_every_kind_of_defect(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(
        b'\xef\xbb\xbf{"a": 1}\n' + nested(2_000) + b'\n{"a": NaN}\n{"a":1,"a":2}\n\n{"b": "\\ud800"}\n[1,'
    )
    items = list(iter_json_lines(path))
    assert [n for n, _ in items] == [1, 2, 3, 4, 6, 7]
    assert items[0][1] == {"a": 1} and items[4][1] == {"b": "\ufffd"}
    bad = {n: v for n, v in items if isinstance(v, BadLine)}
    assert bad[2].message.startswith("expected JSON nested at most")
    assert (bad[3].message, bad[3].path) == ("expected a finite number, found NaN", "$.a")
    assert bad[4].path == "$.a" and "twice" in bad[4].message
    assert bad[7].message.startswith("truncated last line: expected a complete JSON value, found invalid JSON")
    lenient = list(iter_json_values(path, finite=False))
    assert lenient[2][1:] == ({"a": None}, (FieldError("$.a", "a finite number", "NaN"),))


def test_orjson_and_the_fallback_give_the_same_values():
    text = json.dumps({"a": [1, 2.5, "é", None, True], "b": {"c": "x:y"}}, ensure_ascii=True)
    fast = decode(text.encode())[0]
    slow = decode(text[:-1].encode() + b', "n": NaN}', finite=False)[0]
    assert slow.pop("n") is None and fast == slow == orjson.loads(text)


# ---- byte ranges ------------------------------------------------------------------------------------

# Every way a line can end or be empty, a byte order mark, a defect and a torn last line.
RANGED = (
    b'\xef\xbb\xbf{"a": 1}\r\n\n{"b": [1, 2]}\n   \n{"c": "x\\ny"}\r\n{"d": NaN}\nnot json\r\n\r\n'
    b'{"e": {"f": "\\u003a"}}\n{"g":1,"g":2}\n{"h": "\xc3\xa9"}\n{"i": tru'
)


def read_in_ranges(path, cuts: list[int]) -> tuple[list, int]:
    """Read `path` range by range, turning range line numbers into file line numbers as a caller
    stitching ranges does; (items, lines)."""
    bounds = [0, *cuts, None]
    items, lines = [], 0
    for start, end in pairwise(bounds):
        reader = JsonLines(path, finite=False, start=start, end=end)
        for number, value, notes in reader:
            if isinstance(value, BadLine):
                value = BadLine(value.file, value.line + lines, value.message, value.path)
            items.append((number + lines, value, notes))
        lines += reader.lines
    return items, lines


def test_ranges_cut_anywhere_read_as_the_whole_file(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(RANGED)
    whole = JsonLines(path, finite=False)
    expected = list(whole)
    assert [n for n, _, _ in expected] == [1, 3, 5, 6, 7, 9, 10, 11, 12]
    assert expected[0][1] == {"a": 1}
    for cut in range(len(RANGED) + 2):  # every byte, and past the end
        assert read_in_ranges(path, [cut]) == (expected, whole.lines), cut
    for first in range(0, len(RANGED), 7):  # three ranges, the middle one possibly empty
        for second in range(first, len(RANGED) + 1, 5):
            assert read_in_ranges(path, [first, second]) == (expected, whole.lines), (first, second)


def test_a_range_counts_lines_and_records_and_leaves_emptiness_to_the_caller(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\n\n\n" + b'{"a": 1}\n')
    blank = JsonLines(path, start=0, end=3)
    assert list(blank) == [] and (blank.lines, blank.records) == (3, 0)
    rest = JsonLines(path, start=3)
    assert list(rest) == [(1, {"a": 1}, ())] and (rest.lines, rest.records) == (1, 1)
    with pytest.raises(InputError, match="found only blank lines"):
        blank.require_records()
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="found an empty file"):
        list(iter_json_values(empty))
