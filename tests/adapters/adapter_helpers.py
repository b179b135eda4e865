"""Shared by the stack adapter tests: the handbook corpus, an index description, and an audit."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from ragaudit.adapters.common import IndexInfo
from ragaudit.checks.validation import Context, validate_trace
from ragaudit.core.types import Trace
from ragaudit.io.corpus import load_corpus
from ragaudit.io.traces import parse_trace

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


# ---- an instrumented LlamaIndex engine, for the production-span readers ------------------------


PAYLOAD_METADATA = ("doc_id", "section_id", "start_char_idx", "end_char_idx", "rev")


def handbook_nodes(fields=PAYLOAD_METADATA) -> list:
    """The handbook split by MarkdownNodeParser, one node per section, each node's metadata
    holding `fields` of its payload (computed from the corpus, not by ragaudit.io.spans); node ids
    are `doc_id#section_id`."""
    from llama_index.core import Document
    from llama_index.core.node_parser import MarkdownNodeParser

    corpus = handbook()
    documents = [Document(text=d.text, id_=d.doc_id) for d in corpus.documents.values()]
    nodes = MarkdownNodeParser().get_nodes_from_documents(documents)
    for node in nodes:
        doc = corpus[node.ref_doc_id]
        section = max((s for s in doc.sections if s.start <= node.start_char_idx), key=lambda s: s.start)
        known = {
            "doc_id": doc.doc_id,
            "section_id": section.section_id,
            "start_char_idx": node.start_char_idx,
            "end_char_idx": node.end_char_idx,
            "rev": doc.rev,
        }
        node.metadata = {k: known[k] for k in fields}
        node.id_ = f"{doc.doc_id}#{section.section_id}"
    return nodes


def keyword_retriever(nodes, top_k: int = 3):
    """A LlamaIndex retriever (no BM25, no embeddings) scoring nodes by the share of the query's
    words they hold; equal scores in (section_id, node id) order, as ragaudit's tie-break asks."""
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore

    def words_of(text: str) -> set[str]:
        return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2}

    class KeywordRetriever(BaseRetriever):
        def _retrieve(self, query_bundle):
            asked = words_of(query_bundle.query_str)
            scored = [
                (len(asked & words_of(n.text)) / (1 + len(asked)), n.metadata.get("section_id", ""), n.node_id, n)
                for n in nodes
            ]
            scored.sort(key=lambda s: (-s[0], s[1], s[2]))
            return [NodeWithScore(node=n, score=score) for score, _, _, n in scored[:top_k]]

    return KeywordRetriever()


def traced_queries(questions, answers, *, nodes=None, provider=None, run_keys=None, engine=None):
    """Each question asked of a real RetrieverQueryEngine (keyword retriever, canned LLM answering
    the matching answer) while LlamaIndexInstrumentor records spans into `provider`. With
    `run_keys`, each query runs inside a CHAIN span carrying `ragaudit.qid`/`variant`/`seed`;
    `engine(retriever, llm)` makes another engine (a CitationQueryEngine, say). Returns the
    engine's responses."""
    import llama_index.core
    from llama_index.core.query_engine import RetrieverQueryEngine
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    retriever = keyword_retriever(nodes if nodes is not None else handbook_nodes())
    tracer = provider.get_tracer("handbook-app")
    instrumentor = LlamaIndexInstrumentor()
    before = llama_index.core.global_tokenizer
    llama_index.core.set_global_tokenizer(words)  # no tiktoken download
    instrumentor.instrument(tracer_provider=provider)
    responses = []
    try:
        for i, (question, answer) in enumerate(zip(questions, answers)):
            made = (engine or RetrieverQueryEngine.from_args)(retriever, llm=canned_llm(answer))
            if run_keys is None:
                responses.append(made.query(question))
                continue
            qid, variant, seed = run_keys[i]
            attributes = {
                "openinference.span.kind": "CHAIN",
                "input.value": question,
                "ragaudit.qid": qid,
                "ragaudit.variant": variant,
                "ragaudit.seed": seed,
            }
            with tracer.start_as_current_span("handbook-rag", attributes=attributes) as span:
                response = made.query(question)
                span.set_attribute("output.value", str(response))
            responses.append(response)
    finally:
        instrumentor.uninstrument()
        llama_index.core.global_tokenizer = before
    return responses
