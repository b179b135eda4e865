"""Hostile span exports: any value anywhere in a request, a row or an observation gives traces
and located BadLines, never a traceback, and every trace can be written as JSON."""

import copy
import json
import random

import pytest
from helpers import langfuse_observations, otlp_request, phoenix_attributes, rag_spans, span_recorder

from ragaudit.core.types import Trace
from ragaudit.io.jsonl import BadLine
from ragaudit.io.spans import read_traces
from ragaudit.io.traces import dump_trace

ODD = [None, 1, -1, 2.5, True, "", "x", "zz" * 16, "AAAAAAAAAAAAAAAAAAAAAA==", [], [1, "a"], {}, {"a": 1}]
ODD += [
    "9" * 25,
    10**19,
    10**30,
    {"stringValue": 3},
    {"intValue": "x"},
    {"arrayValue": 3},
    {"kvlistValue": {"values": [1]}},
]


@pytest.fixture(scope="module")
def spans():
    provider, exporter = span_recorder()
    document = {"id": "a", "content": "A", "score": 0.5, "metadata": {"doc_id": "d", "start_char_idx": 1}}
    for _ in range(2):
        rag_spans(provider.get_tracer("app"), "q", [document], "answer")
    return exporter.get_finished_spans()


def locations(value, trail=()):
    yield trail
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from locations(child, (*trail, key))


def mutated(value, rng: random.Random):
    value = copy.deepcopy(value)
    places = [p for p in locations(value) if p]
    for _ in range(rng.randint(1, 3)):
        place = rng.choice(places)
        holder = value
        try:
            for key in place[:-1]:
                holder = holder[key]
            holder[place[-1]] = rng.choice(ODD)
        except (KeyError, IndexError, TypeError):  # an earlier change removed the way there
            pass
    return value


def read_all(format: str, path) -> None:
    for item in read_traces(format, [path]):
        assert isinstance(item, (Trace, BadLine))
        if isinstance(item, Trace):
            dump_trace(item)
        else:
            assert item.file == str(path) and item.line >= 1 and "expected" in item.message


@pytest.mark.parametrize("format", ["otlp", "langfuse", "phoenix"])
def test_no_value_anywhere_breaks_a_reader(spans, tmp_path, format):
    if format == "otlp":
        original = otlp_request(spans)
    elif format == "langfuse":
        original = langfuse_observations(spans)
    else:
        original = [
            {"context.trace_id": f"{s.context.trace_id:032x}", "context.span_id": f"{s.context.span_id:016x}"}
            | {"parent_id": f"{s.parent.span_id:016x}" if s.parent else None, "start_time": s.start_time // 10**6}
            | {f"attributes.{k}": v for k, v in phoenix_attributes(dict(s.attributes)).items()}
            for s in spans
        ]
    rng = random.Random(format)
    path = tmp_path / "spans.json"
    for _ in range(300):
        path.write_text(json.dumps(mutated(original, rng)))
        read_all(format, path)
