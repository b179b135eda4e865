from functools import cache

import pytest
from adapter_helpers import (
    INDEX,
    assert_spans_match,
    audit,
    canned_llm,
    errors,
    handbook,
    sentences,
    words,
)
from helpers import Lazy

from ragaudit.adapters.common import make_trace
from ragaudit.adapters.llamaindex import from_llamaindex, from_llamaindex_response

# imported when a test first uses them: collecting the suite stays fast
Document = Lazy("llama_index.core", "Document")
VectorStoreIndex = Lazy("llama_index.core", "VectorStoreIndex")
MockEmbedding = Lazy("llama_index.core.embeddings", "MockEmbedding")
IngestionPipeline = Lazy("llama_index.core.ingestion", "IngestionPipeline")
MarkdownNodeParser = Lazy("llama_index.core.node_parser", "MarkdownNodeParser")
SentenceSplitter = Lazy("llama_index.core.node_parser", "SentenceSplitter")
CitationQueryEngine = Lazy("llama_index.core.query_engine", "CitationQueryEngine")
MetadataMode = Lazy("llama_index.core.schema", "MetadataMode")
NodeWithScore = Lazy("llama_index.core.schema", "NodeWithScore")
TextNode = Lazy("llama_index.core.schema", "TextNode")


@pytest.fixture(autouse=True)
def local_tokenizer():
    """LlamaIndex counts tokens with tiktoken unless given a tokenizer; use whitespace words."""
    import llama_index.core

    before = llama_index.core.global_tokenizer
    llama_index.core.set_global_tokenizer(words)
    yield
    llama_index.core.global_tokenizer = before


def documents() -> list[Document]:
    return [Document(text=d.text, id_=d.doc_id) for d in handbook().documents.values()]


def splitter(chunk_size: int) -> SentenceSplitter:
    return SentenceSplitter(chunk_size=chunk_size, chunk_overlap=0, tokenizer=words, chunking_tokenizer_fn=sentences)


@cache
def fixed_retriever() -> type:
    """A retriever that returns the nodes it was given (a class of LlamaIndex's, made on first use)."""
    from llama_index.core.retrievers import BaseRetriever

    class FixedRetriever(BaseRetriever):
        def __init__(self, results):
            self.results = results
            super().__init__()

        def _retrieve(self, query_bundle):
            return list(self.results)

    return FixedRetriever


def crosses_a_heading(doc_id: str, start: int, end: int) -> bool:
    return any(start < s.start < end for s in handbook()[doc_id].sections)


def test_sentence_splitter_nodes_keep_their_offsets():
    nodes = splitter(60).get_nodes_from_documents(documents())
    scored = [NodeWithScore(node=n, score=0.5) for n in nodes]
    payloads = from_llamaindex(scored, index=INDEX, sources=handbook(), score_kind="cosine")
    assert len(payloads) == len(nodes) > 30
    assert_spans_match(payloads)
    by_id = {p["snippet_id"]: p for p in payloads}
    for n in nodes:
        assert by_id[n.node_id]["offsets"]["start"] == n.start_char_idx
        assert by_id[n.node_id]["doc_id"] == n.ref_doc_id
    # chunks that run over a heading really leave their section: exactly those are reported
    reported = {
        c for code, c in errors(audit(make_trace("LI-1", "q", payloads, index=INDEX))) if code == "section_mismatch"
    }
    assert reported == {n.node_id for n in nodes if crosses_a_heading(n.ref_doc_id, n.start_char_idx, n.end_char_idx)}
    assert {code for code, _ in errors(audit(make_trace("LI-1", "q", payloads, index=INDEX)))} <= {"section_mismatch"}


def test_vector_index_results_with_tied_scores_keep_the_retriever_order():
    nodes = MarkdownNodeParser().get_nodes_from_documents(documents())
    index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
    results = index.as_retriever(similarity_top_k=6).retrieve("How often are backups tested?")
    assert len({round(r.score, 9) for r in results}) == 1  # a constant embedding ties every score
    payloads = from_llamaindex(results, index=INDEX, sources=handbook(), score_kind="cosine")
    assert [p["snippet_id"] for p in payloads] == [r.node.node_id for r in results]
    assert [p["k_pos"] for p in payloads] == list(range(1, 7))
    issues = audit(make_trace("LI-2", "q", payloads, index=INDEX))
    keys = [(p["section_id"], p["snippet_id"]) for p in payloads]
    assert errors(issues) == []
    assert [i.code for i in issues] == ["tiebreak_violation"] * sum(a > b for a, b in zip(keys, keys[1:]))


def citation_engine(nodes, answer: str) -> CitationQueryEngine:
    return CitationQueryEngine(retriever=fixed_retriever()(nodes), llm=canned_llm(answer), text_splitter=splitter(20))


def engine_trace(nodes, answer: str) -> dict:
    """The trace of a citation engine over `nodes` that answers `answer` to the question "q"."""
    return from_llamaindex_response(
        citation_engine(nodes, answer).query("q"),
        qid="KM-1",
        query="q",
        index=INDEX,
        sources=handbook(),
        score_kind="cosine",
    )


def section_nodes(*sections: tuple[str, str]) -> list[NodeWithScore]:
    """The MarkdownNodeParser nodes of these (doc_id, section_id), scored in falling order."""
    nodes = MarkdownNodeParser().get_nodes_from_documents(documents())
    chosen = []
    for score, (doc_id, section_id) in zip((0.82, 0.64, 0.51), sections):
        section = next(s for s in handbook()[doc_id].sections if s.section_id == section_id)
        node = next(n for n in nodes if n.ref_doc_id == doc_id and n.start_char_idx == section.start)
        chosen.append(NodeWithScore(node=node, score=score))
    return chosen


ANSWER = (
    "Every administrator gets two YubiKey 5 hardware keys, rotated every 12 months [1]. "
    "Keys are only shipped to the registered home address [2]."
)


def test_citation_query_engine_response_audits_clean():
    retrieved = section_nodes(("key-management", "key-management/hardware-keys"))
    response = citation_engine(retrieved, ANSWER).query("How often are admin keys rotated?")
    assert len(response.source_nodes) >= 2
    assert all(n.node.text.startswith(f"Source {k}:\n") for k, n in enumerate(response.source_nodes, 1))

    trace = from_llamaindex_response(
        response,
        qid="KM-1",
        query="How often are admin keys rotated?",
        index=INDEX,
        sources=handbook(),
        score_kind="cosine",
    )
    payloads = trace["retrieved"]
    assert_spans_match(payloads)
    parent = retrieved[0].node
    for p in payloads:
        assert parent.start_char_idx <= p["offsets"]["start"] < p["offsets"]["end"] <= parent.end_char_idx
        assert p["snippet_id"] == f"key-management:{p['offsets']['start']}-{p['offsets']['end']}"
    assert len({p["snippet_id"] for p in payloads}) == len(payloads)
    source = {
        k: f"key-management:{s}-{e}"
        for k, (s, e) in enumerate(
            [
                (p["offsets"]["start"], p["offsets"]["end"])
                for p in sorted(payloads, key=lambda p: p["offsets"]["start"])
            ],
            1,
        )
    }
    assert trace["answer"]["text"] == ANSWER
    assert trace["answer"]["segments"] == [
        {
            "seg": 1,
            "text": "Every administrator gets two YubiKey 5 hardware keys, rotated every 12 months [1].",
            "citations": [source[1]],
        },
        {"seg": 2, "text": "Keys are only shipped to the registered home address [2].", "citations": [source[2]]},
    ]
    assert audit(trace) == []

    again = engine_trace(retrieved, ANSWER)
    assert [p["snippet_id"] for p in again["retrieved"]] == [p["snippet_id"] for p in payloads]


def test_source_numbers_are_read_with_the_one_marker_grammar():
    retrieved = section_nodes(("key-management", "key-management/hardware-keys"))
    answer = "Admin keys are rotated every 12 months [1; 2]. Keys ship [see below] to the home address [ 2 ]."
    trace = engine_trace(retrieved, answer)
    first, second = sorted(trace["retrieved"], key=lambda p: p["offsets"]["start"])[:2]
    assert trace["answer"]["segments"] == [
        {
            "seg": 1,
            "text": "Admin keys are rotated every 12 months [1; 2].",
            "citations": [first["snippet_id"], second["snippet_id"]],
        },
        {"seg": 2, "text": "Keys ship [see below] to the home address [ 2 ].", "citations": [second["snippet_id"]]},
    ]


def legacy_citation_nodes(nodes: list[NodeWithScore], text_splitter) -> list[NodeWithScore]:
    """What CitationQueryEngine did before it dropped the copied id and offsets: every
    "Source k" node is a copy of its parent, with the parent's id and offsets."""
    out = []
    for scored in nodes:
        for chunk in text_splitter.split_text(scored.node.get_content(metadata_mode=MetadataMode.NONE)):
            copy = TextNode.model_validate(scored.node.model_dump())
            copy.set_content(f"Source {len(out) + 1}:\n{chunk}\n")
            out.append(NodeWithScore(node=copy, score=scored.score))
    return out


def test_legacy_source_nodes_get_their_own_ids_and_offsets():
    retrieved = section_nodes(
        ("backups", "backups-and-disaster-recovery/restore-testing"), ("key-management", "key-management/hardware-keys")
    )
    legacy = legacy_citation_nodes(retrieved, splitter(20))
    assert len({n.node.node_id for n in legacy}) == 2 < len(legacy)  # ids repeat within a parent
    payloads = from_llamaindex(legacy, index=INDEX, sources=handbook(), score_kind="cosine")
    assert_spans_match(payloads)
    assert len({p["snippet_id"] for p in payloads}) == len(payloads)
    assert all(
        p["offsets"] != {"start": n.node.start_char_idx, "end": n.node.end_char_idx, "unit": "char"}
        for p, n in zip(payloads, legacy)
    )
    assert errors(audit(make_trace("LI-3", "q", payloads, index=INDEX))) == []
    assert [f"Source {k}:\n{p['text']}\n" for k, p in enumerate(payloads, start=1)] == [  # Source k stays k
        n.node.get_content() for n in legacy
    ]

    # without the source text the parent's offsets are not passed off as the chunk's
    blind = from_llamaindex(legacy, index=INDEX, score_kind="cosine")
    assert all("offsets" not in p for p in blind)
    assert len({p["snippet_id"] for p in blind}) == len(blind)


def test_chained_parsers_give_parent_relative_offsets_which_ragaudit_reports():
    nodes = IngestionPipeline(transformations=[MarkdownNodeParser(), splitter(40)]).run(documents=documents())
    placed = [n for n in nodes if n.start_char_idx is not None]
    payloads = from_llamaindex(nodes, index=INDEX, sources=handbook())
    mismatched = {
        c for code, c in errors(audit(make_trace("LI-4", "q", payloads, index=INDEX))) if code == "span_text_mismatch"
    }
    wrong = {n.node_id for n in placed if handbook()[n.ref_doc_id].text[n.start_char_idx : n.end_char_idx] != n.text}
    assert wrong and mismatched == wrong
    # nodes the parser could not place are found in the source instead
    unplaced = {n.node_id for n in nodes if n.start_char_idx is None}
    assert unplaced
    assert_spans_match([p for p in payloads if p["snippet_id"] in unplaced])


def test_reader_metadata_names_the_document(tmp_path):
    node = TextNode(text="Backups are encrypted.", metadata={"file_path": "/data/handbook/backups.md"})
    [p] = from_llamaindex([node], index=INDEX)
    assert p["doc_id"] == "backups" and p["source_url"] == "file:///data/handbook/backups.md"
    assert "score_raw" not in p


def test_a_marker_naming_a_document_cites_its_best_ranked_source_and_an_unknown_name_stays():
    """Beside source numbers, a marker may name a snippet or a document, read as for any answer; a
    bracketed word that names nothing retrieved and holds no digit is text."""
    retrieved = section_nodes(("key-management", "key-management/hardware-keys"))
    answer = "Admin keys are rotated every 12 months [key-management]. Keys ship home [faq-2]. See [handbook-faq]."
    trace = engine_trace(retrieved, answer)
    best = trace["retrieved"][0]["snippet_id"]
    assert [s["citations"] for s in trace["answer"]["segments"]] == [[best], ["faq-2"], []]
