import pytest
from adapter_helpers import HANDBOOK, INDEX, assert_spans_match, audit, errors, handbook
from helpers import Lazy

from ragaudit.adapters.common import make_trace
from ragaudit.adapters.langchain import from_langchain

# imported when a test first uses them: collecting the suite stays fast
Document = Lazy("langchain_core.documents", "Document")
DeterministicFakeEmbedding = Lazy("langchain_core.embeddings", "DeterministicFakeEmbedding")
InMemoryVectorStore = Lazy("langchain_core.vectorstores", "InMemoryVectorStore")
Language = Lazy("langchain_text_splitters", "Language")
RecursiveCharacterTextSplitter = Lazy("langchain_text_splitters", "RecursiveCharacterTextSplitter")


def loaded() -> list[Document]:
    """The handbook as LangChain's TextLoader gives it: one Document per file, `source` = its path."""
    return [
        Document(page_content=p.read_text(encoding="utf-8"), metadata={"source": str(p)})
        for p in sorted(HANDBOOK.glob("*.md"))
    ]


def markdown_chunks() -> list[Document]:
    splitter = RecursiveCharacterTextSplitter.from_language(
        Language.MARKDOWN, chunk_size=200, chunk_overlap=0, add_start_index=True
    )
    return splitter.split_documents(loaded())


def test_every_chunk_maps_to_its_corpus_span():
    chunks = markdown_chunks()
    payloads = from_langchain(chunks, index=INDEX, sources=handbook())
    assert len(payloads) == len(chunks) > 100
    assert all("offsets" in p for p in payloads)
    assert_spans_match(payloads)
    for chunk, p in zip(chunks, payloads):
        assert p["offsets"]["start"] == chunk.metadata["start_index"]
        section = handbook().section(p["doc_id"], p["section_id"])
        assert section.start <= p["offsets"]["start"] < p["offsets"]["end"] <= section.end
        assert p["source_url"].endswith(f"{p['doc_id']}.md#{p['section_id']}")


def test_vector_store_results_audit_clean():
    chunks = markdown_chunks()
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(chunks, ids=[f"hb-{i:04d}" for i in range(len(chunks))])
    query = chunks[40].page_content  # the fake embedding only matches identical text
    results = store.similarity_search_with_score(query, k=5)
    payloads = from_langchain(results, index=INDEX, sources=handbook(), score_kind="cosine")
    assert payloads[0]["text"] == query and payloads[0]["snippet_id"] == "hb-0040"
    assert [p["k_pos"] for p in payloads] == [1, 2, 3, 4, 5]
    assert all(0.0 <= p["score_norm"] <= 1.0 for p in payloads)
    assert [p["score_raw"] for p in payloads] == [score for _, score in results]
    cited = payloads[0]["snippet_id"]
    trace = make_trace(
        "LC-1",
        query,
        payloads,
        answer_text=f"As the handbook says [{cited}].",
        segments=[{"seg": 1, "text": "As the handbook says.", "citations": [cited]}],
        index=INDEX,
    )
    assert errors(audit(trace)) == []


def regex_separator_chunks(source_docs):
    # keep_separator=False makes the splitter join pieces with the separator *pattern* itself, so
    # merged chunks are not in the source; the splitter's running offset then also loses chunks
    # that are. Both get start_index -1.
    splitter = RecursiveCharacterTextSplitter(
        separators=[r"\n\s*\n", " "],
        is_separator_regex=True,
        keep_separator=False,
        chunk_size=250,
        chunk_overlap=0,
        add_start_index=True,
    )
    return splitter.split_documents(source_docs)


def test_start_index_minus_one_is_recovered_from_the_source_or_left_missing():
    docs = loaded()
    texts = {d.metadata["source"]: d.page_content for d in docs}
    chunks = regex_separator_chunks(docs)
    lost = [c for c in chunks if c.metadata["start_index"] == -1]
    verbatim = [c for c in lost if texts[c.metadata["source"]].count(c.page_content) == 1]
    garbled = [c for c in lost if c.page_content not in texts[c.metadata["source"]]]
    assert verbatim and garbled  # the real splitter produces both kinds

    payloads = from_langchain(chunks, index=INDEX, sources=handbook())
    assert all(p["offsets"]["start"] >= 0 for p in payloads if "offsets" in p)
    assert_spans_match(payloads)
    by_text = {p["text"]: p for p in payloads}
    for chunk in verbatim:
        start = texts[chunk.metadata["source"]].index(chunk.page_content)
        assert by_text[chunk.page_content]["offsets"]["start"] == start
    assert all("offsets" not in by_text[c.page_content] for c in garbled)
    reported = [
        cited
        for code, cited in errors(audit(make_trace("LC-2", "q", payloads, index=INDEX)))
        if code == "missing_offsets"
    ]
    assert reported == [p["snippet_id"] for p in payloads if "offsets" not in p]

    # without the source text nothing can be recovered, and nothing negative is emitted
    blind = from_langchain(chunks, index=INDEX)
    assert {p["text"] for p in blind if "offsets" not in p} == {c.page_content for c in lost}


def test_ambiguous_chunk_is_not_placed():
    source = str(HANDBOOK / "key-management.md")
    chunk = Document(page_content="hardware key", metadata={"source": source, "start_index": -1})
    [p] = from_langchain([chunk], index=INDEX, sources=handbook())
    assert "offsets" not in p


def test_distance_scores_are_converted_by_the_named_rule():
    chunks = markdown_chunks()[:3]
    faiss_like = list(zip(chunks, [0.25, 0.5, 1.5]))  # FAISS / Chroma: smaller is closer
    l2 = from_langchain(faiss_like, index=INDEX, sources=handbook(), score_kind="l2_distance")
    assert [p["score_norm"] for p in l2] == [0.8, pytest.approx(2 / 3), 0.4]
    cosine = from_langchain(faiss_like, index=INDEX, sources=handbook(), score_kind="cosine_distance")
    assert [p["score_norm"] for p in cosine] == [0.875, 0.75, 0.25]
    with pytest.raises(ValueError, match="score_kind"):
        from_langchain(faiss_like, index=INDEX, sources=handbook())


def test_relevance_scores_are_similarities():
    chunks = markdown_chunks()[:2]
    payloads = from_langchain(list(zip(chunks, [0.91, 0.34])), index=INDEX, sources=handbook(), score_kind="similarity")
    assert [p["score_norm"] for p in payloads] == [0.91, 0.34]
    assert errors(audit(make_trace("LC-3", "q", payloads, index=INDEX))) == []


def test_metadata_overrides_and_pdf_pages():
    chunk = Document(
        page_content="Some text",
        id="chunk-7",
        metadata={"doc_id": "backups", "section_id": "custom", "page": 0, "rev": "abc"},
    )
    [p] = from_langchain([chunk], index=INDEX)
    assert (p["doc_id"], p["snippet_id"], p["section_id"], p["page"], p["rev"]) == (
        "backups",
        "chunk-7",
        "custom",
        1,
        "abc",
    )
    [q] = from_langchain([chunk], index=INDEX, doc_id=lambda d: "vendor-management")
    assert q["doc_id"] == "vendor-management"
