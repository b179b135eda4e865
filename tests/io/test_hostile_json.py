"""Hostile JSON fed to every JSON reader: deep nesting, lone surrogates, NaN and friends,
duplicate keys, wrong top-level types, random bytes and truncated lines. Whatever comes in,
only located problems may come out (a BadLine, a Problem, an InputError), never another
exception, and whatever is read can be written back as strict JSON in UTF-8."""

import json

import orjson
import pytest
from helpers import ONCALL, POLICIES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragaudit.adapters.graphrag.answers import read_answers
from ragaudit.checks.validation import Context, Validator
from ragaudit.core.errors import InputError, Problem
from ragaudit.core.types import Corpus, Trace
from ragaudit.io.corpus import load_corpus, text_document
from ragaudit.io.gold import read_gold
from ragaudit.io.jsonfiles import read_json_file
from ragaudit.io.jsonl import BadLine, JsonDefect, decode
from ragaudit.io.stream import read_trace_file
from ragaudit.io.traces import dump_trace, read_traces

SETTINGS = settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Keys the readers look for, so that generated objects reach deep into them.
VOCABULARY = [
    "qid",
    "retrieved",
    "doc_id",
    "section_id",
    "snippet_id",
    "offsets",
    "start",
    "end",
    "unit",
    "text",
    "score_norm",
    "score_raw",
    "rerank_score",
    "k_pos",
    "k_final",
    "tokens",
    "window",
    "answer",
    "raw",
    "segments",
    "citations",
    "seg",
    "steps",
    "confidence_score",
    "index",
    "analyzer",
    "error",
    "variant",
    "seed",
    "question",
    "anchor",
    "paraphrases",
    "expected_citations",
    "sections",
    "pages",
    "cells",
    "outputs",
    "data",
    "text/plain",
    "response",
    "summary",
    "gate",
    "questions",
    "schema",
]
TOKENS = [
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e999",
    b"-2E400",
    b"9" * 400,
    b"-" + b"9" * 320,
    b"18446744073709551616",
    b'"\\ud800"',
    b'"x\\udfffy"',
    b'"\\ud83d\\ude00"',
    b'"\\u0000\\u001f"',
    b'"\\u003a"',
    b'"ragaudit.trace/1"',
    b'"char"',
    b'"token"',
    b"-0",
    b"1E5",
    b"0.5",
    b"true",
    b"null",
]

KEYS = st.one_of(
    st.sampled_from(VOCABULARY),
    st.text(max_size=4),
    st.sampled_from(['"\\ud800"', '"k\\u0065y"', '"a\\u003ab"']).map(lambda raw: ("raw", raw)),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(TOKENS).map(lambda raw: ("raw", raw.decode())),
)
NODES = st.recursive(
    SCALARS,
    lambda kids: st.one_of(
        st.lists(kids, max_size=5).map(lambda items: ("array", items)),
        st.lists(st.tuples(KEYS, kids), max_size=6).map(lambda pairs: ("object", pairs)),
    ),
    max_leaves=25,
)


def render(node, spaced: bool) -> str:
    """JSON-ish text: objects are pair lists (so keys may repeat) and raw tokens pass as they are."""
    if isinstance(node, tuple) and node[0] == "raw":
        return node[1]
    if isinstance(node, tuple) and node[0] == "array":
        return "[" + (", " if spaced else ",").join(render(n, spaced) for n in node[1]) + "]"
    if isinstance(node, tuple):
        return (
            "{"
            + (", " if spaced else ",").join(
                render(k if isinstance(k, tuple) else json.dumps(k), spaced)
                + (": " if spaced else ":")
                + render(v, spaced)
                for k, v in node[1]
            )
            + "}"
        )
    return json.dumps(node)  # float infinity renders as Infinity: one more hostile token


def deep(depth: int, kind: str) -> bytes:
    opening, closing = {"array": (b"[", b"]"), "object": (b'{"qid":', b"}"), "mixed": (b'[{"a":', b"}]")}[kind]
    return b'{"qid": "q", "error": ' + opening * depth + b"1" + closing * depth + b"}"


TRACE_LIKE = st.fixed_dictionaries(
    {
        "qid": SCALARS,
        "retrieved": st.lists(
            st.lists(st.tuples(st.sampled_from(VOCABULARY), NODES), max_size=8).map(lambda pairs: ("object", pairs)),
            max_size=3,
        ),
    },
    optional={"answer": NODES, "steps": NODES, "index": NODES, "variant": SCALARS, "error": NODES},
).map(lambda d: ("object", list(d.items())))
LINES = st.one_of(
    st.tuples(st.one_of(NODES, TRACE_LIKE), st.booleans()).map(lambda t: render(*t).encode()),
    st.tuples(st.integers(200, 3_000), st.sampled_from(["array", "object", "mixed"])).map(lambda t: deep(*t)),
    st.tuples(TRACE_LIKE, st.integers(0, 400)).map(lambda t: render(t[0], False).encode()[: t[1]]),
    st.binary(max_size=80).map(lambda b: b.replace(b"\n", b" ")),
)
FILES = st.tuples(st.lists(LINES, min_size=0, max_size=5), st.booleans(), st.booleans()).map(
    lambda t: (b"\xef\xbb\xbf" if t[2] else b"") + b"\n".join(t[0]) + (b"\n" if t[1] else b"")
)

CORPUS = Corpus(
    {"policies": text_document("policies", POLICIES), "team/on-call": text_document("team/on-call", ONCALL)}
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("hostile")


def located(problem: Problem) -> None:
    assert isinstance(problem.file, str) and problem.message
    assert problem.line is None or (isinstance(problem.line, int) and problem.line >= 1)
    str(problem).encode("utf-8")  # printable on a UTF-8 terminal: no lone surrogate in a message


def input_error(call) -> object:
    """`call()`, or None when it raised an InputError, whose problems must all be located."""
    try:
        return call()
    except InputError as exc:
        assert exc.exit_code == 3 and exc.problems
        for problem in exc.problems:
            located(problem)
        return None


def writable(value) -> None:
    orjson.loads(json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8"))


@SETTINGS
@given(st.one_of(FILES, LINES), st.sampled_from([dict, list, object]))
def test_every_reader(workdir, data, expect):
    """The same bytes as a trace file, a gold set, a corpus.jsonl, a report and GraphRAG answers."""
    for name in ("traces.jsonl", "gold.jsonl", "corpus.jsonl", "report.json", "answers.json", "answers.ipynb"):
        (workdir / name).write_bytes(data)

    for item in input_error(lambda: list(read_traces(workdir / "traces.jsonl"))) or ():
        assert isinstance(item, (Trace, BadLine))
        if isinstance(item, BadLine):
            located(item.problem)
        else:
            assert orjson.loads(dump_trace(item).encode("utf-8"))["qid"] == item.qid
    input_error(lambda: read_trace_file(workdir / "traces.jsonl"))
    input_error(lambda: list(Validator(Context(corpus=CORPUS)).check_files([workdir / "traces.jsonl"])))

    items, problems = input_error(lambda: read_gold(workdir / "gold.jsonl")) or ((), ())
    for problem in problems:
        located(problem)
    for item in items:
        writable([item.qid, item.question, item.anchor.text, list(item.paraphrases)])

    corpus = input_error(lambda: load_corpus(workdir / "corpus.jsonl"))
    for doc in corpus.documents.values() if corpus else ():
        doc.text.encode("utf-8")
        assert all(0 <= s.start < s.end <= len(doc.text) for s in doc.sections if s.section_id != "_preamble")
        assert all(a.end <= b.start for a, b in zip(doc.sections, doc.sections[1:]))

    value = input_error(lambda: read_json_file(workdir / "report.json", what="report", expect=expect))
    if value is not None:
        assert expect is object or isinstance(value, expect)
        writable(value)

    for name in ("answers.json", "answers.ipynb"):
        for answer in input_error(lambda name=name: read_answers(workdir / name)) or ():
            answer.text.encode("utf-8")


@SETTINGS
@given(st.binary(max_size=120))
def test_corpus_directory_files(workdir, markdown):
    folder = workdir / "corpus"
    folder.mkdir(exist_ok=True)
    (folder / "doc.md").write_bytes(markdown)
    corpus = input_error(lambda: load_corpus(folder))
    assert corpus is None or corpus["doc"].text == markdown.decode("utf-8")


@SETTINGS
@given(LINES, st.booleans())
def test_decode_refuses_or_returns_strict_json(data, finite):
    try:
        value, notes = decode(data, finite=finite)
    except JsonDefect as defect:
        assert defect.line >= 1 and defect.path.startswith("$")
        defect.message.encode("utf-8")
        return
    writable(value)
    assert all(n.expected in ("Unicode text", "a finite number") for n in notes)
    assert finite is False or all(n.expected == "Unicode text" for n in notes)
