"""Shared by the stack adapter tests: the handbook corpus, an index description, and an audit."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from ragaudit.adapters.common import IndexInfo
from ragaudit.io.corpus import load_corpus
from ragaudit.io.traces import parse_trace
from ragaudit.types import Trace
from ragaudit.validate import Context, validate_trace

HANDBOOK = Path(__file__).resolve().parents[2] / "gold_sets" / "handbook" / "corpus"
INDEX = IndexInfo(
    index_hash="sha256:0f3a9c", analyzer="lowercase+ascii_fold", embed_model="fake-embedding:64", store="memory"
)


@cache
def handbook():
    return load_corpus(HANDBOOK)


def audit(trace: dict, corpus=None) -> list:
    """Every issue ragaudit finds in the trace, after checking it parses cleanly."""
    parsed = parse_trace(trace)
    assert isinstance(parsed, Trace), parsed
    assert parsed.field_errors == ()
    return validate_trace(parsed, Context(corpus=corpus if corpus is not None else handbook()))


def errors(issues) -> list[tuple[str, str | None]]:
    return [(i.code, i.citation) for i in issues if i.severity == "error"]


def sentences(text: str) -> list[str]:
    """A local sentence splitter, so no library fetches NLTK or tiktoken data at test time.
    The pieces cover the text exactly, as the libraries' own splitters do."""
    return re.findall(r".+?(?:[.!?](?:\s+|$)|\n+|$)", text, re.DOTALL)


def words(text: str) -> list[str]:
    return text.split()


def assert_spans_match(payloads, corpus=None) -> None:
    """Every payload with offsets holds exactly the corpus slice it claims."""
    corpus = corpus if corpus is not None else handbook()
    for p in payloads:
        if "offsets" in p:
            o = p["offsets"]
            assert 0 <= o["start"] < o["end"], p
            assert corpus[p["doc_id"]].text[o["start"] : o["end"]] == p["text"], p["snippet_id"]


_CANNED_LLM = []


def canned_llm(answer: str):
    """A LlamaIndex LLM that answers every prompt with `answer`: the engine runs for real, only
    the model is fixed (llama_index is imported only when asked for)."""
    if not _CANNED_LLM:
        from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
        from llama_index.core.llms.callbacks import llm_completion_callback

        class CannedLLM(CustomLLM):
            answer: str = ""

            @property
            def metadata(self) -> LLMMetadata:
                return LLMMetadata(context_window=4096, num_output=256)

            @llm_completion_callback()
            def complete(self, prompt, formatted=False, **kwargs):
                return CompletionResponse(text=self.answer)

            @llm_completion_callback()
            def stream_complete(self, prompt, formatted=False, **kwargs):
                yield CompletionResponse(text=self.answer, delta=self.answer)

        _CANNED_LLM.append(CannedLLM)
    return _CANNED_LLM[0](answer=answer)
