from dataclasses import replace

import pytest
from adapter_helpers import (
    INDEX,
    assert_spans_match,
    audit,
    errors,
    handbook,
    sentences,
)
from helpers import Lazy

from ragaudit.adapters.common import make_trace
from ragaudit.adapters.haystack import from_haystack
from ragaudit.io.corpus import markdown_sections

# imported when a test first uses them: collecting the suite stays fast
Document = Lazy("haystack", "Document")
DocumentSplitter = Lazy("haystack.components.preprocessors", "DocumentSplitter")
InMemoryBM25Retriever = Lazy("haystack.components.retrievers.in_memory", "InMemoryBM25Retriever")
InMemoryDocumentStore = Lazy("haystack.document_stores.in_memory", "InMemoryDocumentStore")


def documents() -> list[Document]:
    return [Document(content=d.text, meta={"doc_id": d.doc_id}) for d in handbook().documents.values()]


def split(splitter: DocumentSplitter) -> list[Document]:
    if hasattr(splitter, "warm_up"):
        splitter.warm_up()
    return splitter.run(documents=documents())["documents"]


def passages() -> list[Document]:
    return split(DocumentSplitter(split_by="passage", split_length=1, split_overlap=0))


def test_every_split_maps_to_its_corpus_span():
    splits = passages()
    payloads = from_haystack(splits, index=INDEX, sources=handbook())
    assert len(payloads) == len(splits) > 100
    assert_spans_match(payloads)
    for d, p in zip(splits, payloads):
        assert (p["snippet_id"], p["offsets"]["start"], p["page"]) == (d.id, d.meta["split_idx_start"], 1)


def test_section_splits_take_their_whole_document_offsets_from_meta():
    """Split section by section as docs/production.md does, `split_idx_start` counts from the
    section's start; the whole-document `meta["offsets"]` the recipe stores are what count."""
    corpus = handbook()
    sections = [
        Document(
            content=doc.text[s.start : s.end],
            meta={"doc_id": doc.doc_id, "section_id": s.section_id, "section_start": s.start},
        )
        for doc in corpus.documents.values()
        for s in doc.sections
    ]
    splits = DocumentSplitter(split_by="passage", split_length=1).run(documents=sections)["documents"]
    for d in splits:
        start = d.meta.pop("section_start") + d.meta["split_idx_start"]
        d.meta["offsets"] = {"start": start, "end": start + len(d.content), "unit": "char"}
    payloads = from_haystack(splits, index=INDEX, sources=corpus)
    assert_spans_match(payloads)
    assert [p["offsets"] for p in payloads] == [d.meta["offsets"] for d in splits]
    assert sum(d.meta["split_idx_start"] != d.meta["offsets"]["start"] for d in splits) > len(splits) / 2
    assert errors(audit(make_trace("HS-0", "q", payloads, index=INDEX))) == [
        ("missing_score", p["snippet_id"]) for p in payloads
    ]
    tokens = Document(
        content="Backups.", meta={"doc_id": "backups", "offsets": {"start": 0, "end": 2, "unit": "token"}}
    )
    with pytest.raises(ValueError, match=r"expected meta\['offsets'\] as \{start, end, unit: 'char'\}, found"):
        from_haystack([tokens], index=INDEX)


def test_equal_bm25_scores_keep_the_retriever_order():
    """The order the retriever gives, ties included, is the order a prompt numbers `[1]`, `[2]`, …"""
    store = InMemoryDocumentStore()
    store.write_documents(passages())
    results = InMemoryBM25Retriever(store, top_k=5).run(query="How long are weekly database backups retained?")
    found = results["documents"]
    assert any(a.score == b.score for a, b in zip(found, found[1:]))  # the query ties
    payloads = from_haystack(found, index=INDEX, sources=handbook(), score_kind="raw")
    assert [(p["snippet_id"], p["k_pos"]) for p in payloads] == [(d.id, k) for k, d in enumerate(found, start=1)]


@pytest.mark.parametrize("scale, kind", [(True, "similarity"), (False, "raw")])
def test_bm25_results_audit_clean(scale, kind):
    store = InMemoryDocumentStore()
    store.write_documents(passages())
    retriever = InMemoryBM25Retriever(store, top_k=5, scale_score=scale)
    results = retriever.run(query="How often are administrator hardware keys rotated?")["documents"]
    payloads = from_haystack(results, index=INDEX, sources=handbook(), score_kind=kind)
    assert payloads[0]["section_id"] == "key-management/hardware-keys"
    assert [p["score_raw"] for p in payloads] == [d.score for d in results]
    assert all(("score_norm" in p) == scale for p in payloads)
    cited = payloads[0]["snippet_id"]
    trace = make_trace(
        "HS-1",
        "q",
        payloads,
        answer_text=f"Every 12 months [{cited}].",
        segments=[{"seg": 1, "text": "Every 12 months.", "citations": [cited]}],
        index=INDEX,
    )
    assert audit(trace) == []


def test_sentence_splits_from_a_local_splitting_function():
    # split_by="sentence" would fetch NLTK data; a splitting function does the same job offline
    splits = split(DocumentSplitter(split_by="function", splitting_function=sentences))
    payloads = from_haystack(splits, index=INDEX, sources=handbook())
    assert_spans_match(payloads)
    assert errors(audit(make_trace("HS-2", "q", payloads, index=INDEX))) == [
        ("missing_score", p["snippet_id"]) for p in payloads
    ]


def normalised_sections(text: str) -> list[str]:
    """A splitting function that tidies whitespace: its splits are no longer in the source."""
    return [" ".join(text[s.start : s.end].split()) for s in markdown_sections(text)]


def test_rewritten_splits_get_a_fallback_offset_that_ragaudit_reports():
    splits = [
        replace(d, score=0.5)  # only the offsets are under test
        for d in split(DocumentSplitter(split_by="function", splitting_function=normalised_sections))
    ]
    payloads = from_haystack(
        splits, index=INDEX, sources=handbook(), score_kind="similarity", doc_id=lambda d: d.meta["doc_id"]
    )
    issues = audit(make_trace("HS-3", "q", payloads, index=INDEX))
    mismatched = {c for code, c in errors(issues) if code == "span_text_mismatch"}
    assert mismatched == {
        p["snippet_id"]
        for p in payloads
        if handbook()[p["doc_id"]].text[p["offsets"]["start"] : p["offsets"]["end"]] != p["text"]
    }
    assert mismatched


def test_converter_metadata_names_the_document():
    doc = Document(
        content="Backups are encrypted.", meta={"file_path": "/srv/handbook/backups.md", "page_number": 3}, score=0.7
    )
    [p] = from_haystack([doc], index=INDEX, score_kind="similarity")
    assert (p["doc_id"], p["page"], p["source_url"]) == ("backups", 3, "file:///srv/handbook/backups.md")


def test_without_any_url_the_source_url_names_the_document_and_section():
    texts = {doc_id: doc.text for doc_id, doc in handbook().documents.items()}  # no URLs in a text mapping
    splits = passages()
    payloads = from_haystack(splits, index=INDEX, sources=texts)
    assert payloads and all(p["source_url"] == f"urn:ragaudit:doc:{p['doc_id']}#{p['section_id']}" for p in payloads)
    assert "missing_source_url" not in {
        code for code, _ in errors(audit(make_trace("HS-4", "q", payloads, index=INDEX)))
    }
    [bare] = from_haystack([Document(content="Backups are encrypted.", meta={"doc_id": "ops/back ups"})], index=INDEX)
    assert bare["source_url"] == "urn:ragaudit:doc:ops/back%20ups#_preamble"


def test_a_fetched_page_keeps_its_url():
    doc = Document(
        content="Backups are encrypted.",
        meta={"doc_id": "backups", "url": "https://wiki.example.com/backups", "file_path": "/srv/handbook/backups.md"},
    )
    [p] = from_haystack([doc], index=INDEX)
    assert p["source_url"] == "https://wiki.example.com/backups"
