"""Adapters: project the outputs of real RAG stacks into ragaudit payloads, traces and audits.

The public names, each loaded when first used (the stacks' own libraries are imported only by
the adapter that needs them; type checkers read them from `__init__.pyi`):

    from ragaudit.adapters import IndexInfo, load_corpus, make_trace, from_langchain, Trace

`load_corpus` reads a corpus folder or corpus.jsonl exactly as an audit does; `count_tokens(text,
analyzer)` and `revision(text)` give a payload's `tokens` and `rev` as the validator checks them.
"""

from __future__ import annotations

from importlib import import_module

_WHERE = {
    "IndexInfo": "ragaudit.adapters.common",
    "Hit": "ragaudit.adapters.common",
    "build_payloads": "ragaudit.adapters.common",
    "make_trace": "ragaudit.adapters.common",
    "count_tokens": "ragaudit.adapters.common",
    "load_corpus": "ragaudit.io.corpus",
    "revision": "ragaudit.io.corpus",
    "Trace": "ragaudit.core.types",
    "LiveIndex": "ragaudit.core.types",
    "from_langchain": "ragaudit.adapters.langchain",
    "from_llamaindex": "ragaudit.adapters.llamaindex",
    "from_llamaindex_response": "ragaudit.adapters.llamaindex",
    "from_haystack": "ragaudit.adapters.haystack",
    "from_anthropic": "ragaudit.adapters.anthropic",
    "from_openai": "ragaudit.adapters.openai",
    "load_index": "ragaudit.adapters.graphrag",
    "trace_answer": "ragaudit.adapters.graphrag",
    "marked_answer": "ragaudit.adapters.graphrag.render",
}
__all__ = sorted(_WHERE)


def __dir__() -> list[str]:
    return list(__all__)


def __getattr__(name: str) -> object:
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'ragaudit.adapters' has no attribute {name!r}")
