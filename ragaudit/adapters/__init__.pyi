"""The names `ragaudit.adapters` serves, as type checkers see them: each is loaded when first used
(see `_WHERE` in `ragaudit/adapters/__init__.py`, which this stub follows)."""

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
