"""Adapters: project the outputs of real RAG stacks into ragaudit payloads, traces and audits.

The public names (the stacks' own libraries are imported only by the adapter that needs them, when
it is called):

    from ragaudit.adapters import IndexInfo, load_corpus, make_trace, from_langchain, Trace

`load_corpus` reads a corpus folder or corpus.jsonl exactly as an audit does; `count_tokens(text,
analyzer)` and `revision(text)` give a payload's `tokens` and `rev` as the validator checks them.
"""

from ragaudit.adapters.anthropic import from_anthropic as from_anthropic
from ragaudit.adapters.common import Hit as Hit
from ragaudit.adapters.common import IndexInfo as IndexInfo
from ragaudit.adapters.common import build_payloads as build_payloads
from ragaudit.adapters.common import count_tokens as count_tokens
from ragaudit.adapters.common import make_trace as make_trace
from ragaudit.adapters.graphrag import load_index as load_index
from ragaudit.adapters.graphrag import trace_answer as trace_answer
from ragaudit.adapters.graphrag.render import marked_answer as marked_answer
from ragaudit.adapters.haystack import from_haystack as from_haystack
from ragaudit.adapters.langchain import from_langchain as from_langchain
from ragaudit.adapters.llamaindex import from_llamaindex as from_llamaindex
from ragaudit.adapters.llamaindex import from_llamaindex_response as from_llamaindex_response
from ragaudit.adapters.openai import from_openai as from_openai
from ragaudit.core.types import LiveIndex as LiveIndex
from ragaudit.core.types import Trace as Trace
from ragaudit.io.corpus import load_corpus as load_corpus
from ragaudit.io.corpus import revision as revision

__all__ = [
    "Hit",
    "IndexInfo",
    "LiveIndex",
    "Trace",
    "build_payloads",
    "count_tokens",
    "from_anthropic",
    "from_haystack",
    "from_langchain",
    "from_llamaindex",
    "from_llamaindex_response",
    "from_openai",
    "load_corpus",
    "load_index",
    "make_trace",
    "marked_answer",
    "revision",
    "trace_answer",
]


def __dir__() -> list[str]:
    return list(__all__)
