"""Every example in docs/adapters.md runs as written and its trace passes `ragaudit validate`.

Only what needs a network or a model is replaced: the LlamaIndex embedding model and LLM, and the
Anthropic and OpenAI clients, which answer with objects built by the SDKs' own types from the
request the example sends.
"""

import json
import re
from pathlib import Path

import pytest
from adapter_helpers import HANDBOOK, words
from click.testing import CliRunner

from ragaudit.cli.commands import main
from ragaudit.io.traces import parse_trace

DOC = Path(__file__).resolve().parents[2] / "docs" / "adapters.md"
ROTATED = "Administrator hardware keys are rotated every 12 months."


def examples() -> dict[str, str]:
    """The python block under each `## ` heading."""
    found = {}
    for part in re.split(r"^## ", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE)[1:]:
        title = part.splitlines()[0].strip()
        block = re.search(r"```python\n(.*?)```", part, re.DOTALL)
        if block:
            found[title] = block.group(1)
    return found


@pytest.fixture
def repo_root(tmp_path, monkeypatch):
    """A working directory where the examples' relative paths hold, so their output stays in tmp."""
    (tmp_path / "gold_sets" / "handbook").mkdir(parents=True)
    (tmp_path / "gold_sets" / "handbook" / "corpus").symlink_to(HANDBOOK, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_example(title: str, root: Path) -> list[dict]:
    exec(compile(examples()[title], f"{DOC}:{title}", "exec"), {"__name__": "__example__"})
    lines = (root / "traces.jsonl").read_text(encoding="utf-8").splitlines()
    result = CliRunner().invoke(
        main, ["validate", "traces.jsonl", "--corpus", "gold_sets/handbook/corpus", "--format", "json"]
    )
    report = json.loads(result.output)
    assert result.exit_code == 0, report
    return [json.loads(line) for line in lines]


def test_every_stack_has_an_example():
    assert set(examples()) == {
        "LangChain",
        "LlamaIndex",
        "LlamaIndex in a python pipeline",
        "Haystack",
        "Anthropic citations",
        "OpenAI file search",
        "GraphRAG",
    }


def test_langchain_example(repo_root):
    [trace] = run_example("LangChain", repo_root)
    assert [p["k_pos"] for p in trace["retrieved"]] == [1, 2, 3, 4, 5]
    read = parse_trace(trace)  # the answer's [1] cites the first result, with no segments given
    assert trace["answer"]["segments"] == [] and read.answer.citations == (trace["retrieved"][0]["snippet_id"],)


def test_haystack_example(repo_root):
    [trace] = run_example("Haystack", repo_root)
    assert trace["retrieved"][0]["doc_id"] == "key-management"


def test_llamaindex_example(repo_root, monkeypatch):
    import llama_index.core
    from adapter_helpers import canned_llm
    from llama_index.core import Settings
    from llama_index.core.embeddings import MockEmbedding

    monkeypatch.setattr(llama_index.core, "global_tokenizer", words)
    monkeypatch.setattr(Settings, "_embed_model", MockEmbedding(embed_dim=8))
    monkeypatch.setattr(Settings, "_llm", canned_llm("Keys are rotated every year [1]."))
    [trace] = run_example("LlamaIndex", repo_root)
    [segment] = trace["answer"]["segments"]
    assert segment["citations"] and set(segment["citations"]) <= {p["snippet_id"] for p in trace["retrieved"]}


def test_llamaindex_in_a_python_pipeline(repo_root, monkeypatch):
    """The pipeline gives a placeholder qid; the run's traces carry the gold set's qids, and each
    answer cites the sources its markers name."""
    import sys
    import types

    import llama_index.core
    from adapter_helpers import canned_llm
    from helpers import DEMO, run_dir_of
    from llama_index.core import Settings
    from llama_index.core.embeddings import MockEmbedding

    monkeypatch.setattr(llama_index.core, "global_tokenizer", words)
    monkeypatch.setattr(Settings, "_embed_model", MockEmbedding(embed_dim=8))
    monkeypatch.setattr(Settings, "_llm", canned_llm("Keys are rotated every year. [1]"))
    app = types.ModuleType("citation_rag")
    for title in ("LlamaIndex", "LlamaIndex in a python pipeline"):
        exec(compile(examples()[title], f"{DOC}:{title}", "exec"), app.__dict__)
    monkeypatch.setitem(sys.modules, "citation_rag", app)
    gold = repo_root / "gold.jsonl"
    gold.write_text("".join((DEMO / "gold.jsonl").read_text().splitlines(keepends=True)[:2]), encoding="utf-8")
    (repo_root / "audit.toml").write_text(
        '[audit]\ngold = "gold.jsonl"\ncorpus = "gold_sets/handbook/corpus"\nparaphrases = 1\nseeds = [1]\n'
        'out = "runs"\n\n[embedder]\nmodel = "hashing"\n\n'
        '[[pipelines]]\nname = "citation"\nkind = "python"\nfactory = "citation_rag:make_pipeline"\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(main, ["run", "audit.toml"])
    assert result.exit_code in (0, 1), result.output
    traces = [json.loads(line) for line in (run_dir_of(result) / "traces.jsonl").read_text().splitlines()]
    gold_qids = [json.loads(line)["qid"] for line in gold.read_text().splitlines()]
    assert sorted(t["qid"] for t in traces) == sorted(gold_qids)
    for trace in traces:
        assert trace["error"] is None and trace["config"] == "citation"
        [segment] = trace["answer"]["segments"]
        assert segment["citations"] and set(segment["citations"]) <= {p["snippet_id"] for p in trace["retrieved"]}


class FakeAnthropic:
    """`Anthropic().messages.create(...)`: cites the rotation sentence of the first document sent."""

    def __init__(self):
        self.messages = self

    def create(self, *, messages, **kwargs):
        from anthropic.types import Message

        document = messages[0]["content"][0]
        start = document["source"]["data"].index(ROTATED)
        citation = {
            "type": "char_location",
            "cited_text": ROTATED,
            "document_index": 0,
            "document_title": document["title"],
            "start_char_index": start,
            "end_char_index": start + len(ROTATED),
        }
        return Message.model_validate(
            {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": kwargs["model"],
                "content": [{"type": "text", "text": "Every 12 months.", "citations": [citation]}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 900, "output_tokens": 12},
            }
        )


def test_anthropic_example(repo_root, monkeypatch):
    import anthropic

    monkeypatch.setattr(anthropic, "Anthropic", FakeAnthropic)
    [trace] = run_example("Anthropic citations", repo_root)
    [cited] = trace["retrieved"]
    assert (cited["doc_id"], cited["text"], cited["score_norm"]) == ("key-management", ROTATED, 0.91)
    assert trace["answer"]["segments"][0]["citations"] == [cited["snippet_id"]]


class FakeOpenAI:
    """`OpenAI().responses.create(...)`: file search finds the rotation sentence in key-management.md."""

    def __init__(self):
        self.responses = self

    def create(self, *, model, input, tools, include):
        from openai.types.responses import Response

        assert include == ["file_search_call.results"]
        answer = "Administrator keys are rotated every 12 months."
        return Response.model_validate(
            {
                "id": "resp_01",
                "object": "response",
                "created_at": 1763800000,
                "status": "completed",
                "model": model,
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": tools,
                "error": None,
                "incomplete_details": None,
                "instructions": None,
                "metadata": {},
                "output": [
                    {
                        "type": "file_search_call",
                        "id": "fs_01",
                        "status": "completed",
                        "queries": [input],
                        "results": [
                            {
                                "file_id": "file-KM",
                                "filename": "key-management.md",
                                "score": 0.88,
                                "text": ROTATED,
                                "attributes": {},
                            }
                        ],
                    },
                    {
                        "type": "message",
                        "id": "msg_01",
                        "role": "assistant",
                        "status": "completed",
                        "content": [
                            {
                                "type": "output_text",
                                "text": answer,
                                "logprobs": [],
                                "annotations": [
                                    {
                                        "type": "file_citation",
                                        "file_id": "file-KM",
                                        "filename": "key-management.md",
                                        "index": len(answer),
                                    }
                                ],
                            }
                        ],
                    },
                ],
            }
        )


def test_openai_example(repo_root, monkeypatch):
    import openai

    monkeypatch.setattr(openai, "OpenAI", FakeOpenAI)
    [trace] = run_example("OpenAI file search", repo_root)
    [found] = trace["retrieved"]
    assert found["doc_id"] == "key-management" and "offsets" in found
    assert trace["answer"]["segments"][0]["citations"] == [found["snippet_id"]]


@pytest.mark.shared
@pytest.mark.model
def test_graphrag_example(repo_root, capsys):
    from helpers import shared_path

    (repo_root / "output").symlink_to(shared_path("graphrag", "v3-christmas-carol"), target_is_directory=True)
    exec(compile(examples()["GraphRAG"], f"{DOC}:GraphRAG", "exec"), {"__name__": "__example__"})
    printed = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"A Christmas Carol was written by Charles Dickens \[1[✓✗],2[✓✗]\]\. "
        r"This edition was illustrated by Arthur Rackham \[3[✓✗],4[✓✗],\+more\]\.",
        printed[0],
    )
    assert printed[1:] == [
        f"{n} {kind} {key} ['a-christmas-carol.txt'] "
        for n, kind, key in [(1, "Entities", 1), (2, "Sources", 0), (3, "Entities", 2), (4, "Relationships", 1)]
    ]
    written = json.loads((repo_root / "graphrag-trace.json").read_text(encoding="utf-8"))
    assert written["verified"] and len(written["sources"]) == 4
