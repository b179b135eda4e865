"""Hostile input never gives a traceback: generated traces, gold sets, corpora, configs and damaged
run directories through the CLI, each ending with an allowed exit code and a message, nothing else.
Fixed seed (derandomized) and bounded examples, so the suite stays fast and repeatable."""

import copy
import json
import shutil

import pytest
from click.testing import CliRunner
from helpers import BM25, run_dir_of, write_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragaudit.cli.commands import main

FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.sampled_from(["\ud800", "\x00", "NaN", "", "[1]", "<script>"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def fresh(tmp_path):
    """A new folder per hypothesis example (tmp_path is shared by all examples of a test)."""
    import tempfile
    from pathlib import Path

    return Path(tempfile.mkdtemp(dir=tmp_path))


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result


def assert_clean(result, allowed):
    """An allowed exit code, and no exception escaped the CLI's own error handling."""
    assert result.exit_code in allowed, (result.exit_code, result.output[-2000:])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


def _line(value) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (ValueError, TypeError):
        return str(value)


@st.composite
def mutated(draw, document: dict):
    """`document` with a few fields deleted, retyped or replaced by hostile values, at any depth."""
    doc = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 4))):
        node, path = doc, []
        while isinstance(node, (dict, list)) and node and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else list(range(len(node)))))
            path.append((node, key))
            node = node[key]
        if not path:
            continue
        parent, key = path[-1]
        action = draw(st.sampled_from(["delete", "replace", "nest"]))
        if action == "delete" and isinstance(parent, dict):
            del parent[key]
        elif action == "nest":
            parent[key] = [[[[parent[key]]]]]
        else:
            parent[key] = draw(json_values)
    return doc


def text_lines(draw, base: dict) -> str:
    kinds = st.one_of(
        mutated(base).map(_line),
        json_values.map(_line),
        st.text(max_size=60),
        st.just("[" * 2000 + "]" * 2000),
        st.just('{"qid": "a", "qid": "b"}'),
    )
    return "\n".join(draw(st.lists(kinds, min_size=1, max_size=5))) + draw(st.sampled_from(["\n", ""]))


@FUZZ
@given(data=st.data())
def test_hostile_traces(tmp_path, valid_trace, corpus_dir, data):
    tmp_path = fresh(tmp_path)
    path = tmp_path / "traces.jsonl"
    path.write_text(text_lines(data.draw, valid_trace), encoding="utf-8", errors="surrogatepass")
    assert_clean(invoke("validate", path, "--corpus", corpus_dir), {0, 1, 3})
    assert_clean(invoke("validate", path, "--format", "json"), {0, 1, 3})
    assert_clean(invoke("cite", path), {0, 3})


GOLD = {
    "qid": "K1",
    "question": "How often are hardware keys rotated?",
    "paraphrases": ["p1", "p2"],
    "doc_id": "policies",
    "section_id": "policies/security/keys",
    "anchor": {"start": 41, "end": 83, "unit": "char", "text": "Hardware keys are rotated every 12 months."},
    "expected_citations": [{"doc_id": "policies", "start": 41, "end": 83, "unit": "char"}],
    "accept": "all",
}


@FUZZ
@given(data=st.data())
def test_hostile_gold_sets(tmp_path, corpus_dir, data):
    tmp_path = fresh(tmp_path)
    path = tmp_path / "gold.jsonl"
    path.write_text(text_lines(data.draw, GOLD), encoding="utf-8", errors="surrogatepass")
    assert_clean(invoke("gold", "check", path, "--corpus", corpus_dir, "--no-distance"), {0, 1, 3})


DOCUMENT = {
    "doc_id": "a",
    "text": "# A\n\nOne sentence.\n",
    "title": "A",
    "rev": "r1",
    "sections": [{"section_id": "a", "start": 0, "end": 19}],
    "pages": [[0, 19]],
}


@FUZZ
@given(data=st.data(), as_folder=st.booleans())
def test_hostile_corpora(tmp_path, valid_trace, data, as_folder):
    tmp_path = fresh(tmp_path)
    traces = tmp_path / "traces.jsonl"
    traces.write_text(json.dumps(valid_trace) + "\n")
    if as_folder:
        corpus = tmp_path / "corpus"
        corpus.mkdir()
        for i, body in enumerate(
            data.draw(st.lists(st.one_of(st.text(max_size=200), st.binary(max_size=50)), min_size=0, max_size=3))
        ):
            target = corpus / f"doc{i}{data.draw(st.sampled_from(['.md', '.txt', '.bin']))}"
            target.write_bytes(body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass"))
    else:
        corpus = tmp_path / "corpus.jsonl"
        corpus.write_text(text_lines(data.draw, DOCUMENT), encoding="utf-8", errors="surrogatepass")
    assert_clean(invoke("validate", traces, "--corpus", corpus), {0, 1, 3})


CONFIG_VALUES = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True).map(
        lambda f: "nan" if f != f else ("inf" if f == float("inf") else "-inf" if f == float("-inf") else repr(f))
    ),
    st.sampled_from(['"x"', "[]", "[1, 1]", "{}", '"../nowhere"', "true", '["divergent", "bogus"]']),
)


@FUZZ
@given(data=st.data())
def test_hostile_configs(tmp_path, valid_trace, data):
    tmp_path = fresh(tmp_path)
    config = write_config(
        tmp_path,
        BM25 + '[[pipelines]]\nname = "tf"\nkind = "reference"\nretriever = "tfidf"\n',
        items=2,
        extra="workers = 2\n",
    )
    lines = config.read_text().splitlines()
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(lines) - 1))
        if "=" in lines[at] and data.draw(st.booleans()):
            lines[at] = lines[at].split("=")[0] + "= " + str(data.draw(CONFIG_VALUES))
        else:
            lines[at] = data.draw(st.sampled_from(["", "[gate]", "[[pipelines]]", "x = ", "k = -5", "[audit", '"']))
    config.write_text("\n".join(lines) + "\n")
    traces = tmp_path / "traces.jsonl"
    traces.write_text(json.dumps(valid_trace) + "\n")
    assert_clean(invoke("validate", traces, "--config", config), {0, 1, 2, 3})


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz-run")
    config = write_config(tmp, BM25, items=2, seeds="[1]")
    result = CliRunner().invoke(main, ["run", str(config), "--no-gate"])
    assert result.exit_code == 0, result.output
    return config, run_dir_of(result)


RUN_FILES = ("manifest.json", "report.json", "traces.jsonl")


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_damaged_run_directories(tmp_path, finished_run, data):
    tmp_path = fresh(tmp_path)
    config, source = finished_run
    run_dir = tmp_path / "run"
    shutil.copytree(source, run_dir)
    name = data.draw(st.sampled_from(RUN_FILES))
    original = (run_dir / name).read_text()
    damage = data.draw(st.sampled_from(["truncate", "array", "deep", "garbage", "mutate"]))
    if damage == "truncate":
        text = original[: data.draw(st.integers(0, max(0, len(original) - 1)))]
    elif damage == "array":
        text = "[1, 2, 3]\n"
    elif damage == "deep":
        text = "[" * 3000 + "]" * 3000
    elif damage == "garbage":
        text = data.draw(st.text(max_size=80))
    else:
        first = json.loads(original.splitlines()[0]) if name == "traces.jsonl" else json.loads(original)
        text = _line(data.draw(mutated(first)))
    (run_dir / name).write_text(text, encoding="utf-8", errors="surrogatepass")
    assert_clean(invoke("verify", run_dir), {0, 3, 5})
    assert_clean(invoke("report", run_dir, "--no-gate"), {0, 3})
    assert_clean(invoke("gate", run_dir / "report.json", "--config", config), {0, 1, 3})
    assert_clean(invoke("faults", run_dir, "--only", "stale_revision", "--out", tmp_path / "faults"), {0, 1, 3})
    assert_clean(invoke("compare", run_dir, source, "--out", tmp_path / "compared"), {0, 3})
