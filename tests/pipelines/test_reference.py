"""The reference RAG: chunks, index hash, retrievers, rerank, answerer — and every payload validates."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragaudit.checks.metrics.embed import HashingEncoder
from ragaudit.checks.validation import Context, validate_trace
from ragaudit.checks.validation.ranking import tiebreak_key
from ragaudit.core.analyzers import ANALYZERS
from ragaudit.core.text import sentence_spans
from ragaudit.io.corpus import load_corpus
from ragaudit.io.gold import read_gold
from ragaudit.pipelines.base import Request
from ragaudit.pipelines.reference import ReferencePipeline
from ragaudit.pipelines.reference.chunking import chunk_corpus
from ragaudit.pipelines.reference.ranking import TieBreak
from ragaudit.pipelines.reference.retrievers import BM25, Dense, Hybrid, TfIdf

DEMO = Path(__file__).resolve().parents[2] / "gold_sets" / "handbook"


@pytest.fixture(scope="module")
def demo():
    corpus = load_corpus(DEMO / "corpus")
    items, _ = read_gold(DEMO / "gold.jsonl")
    return corpus, items


def test_sentence_spans_trim_and_split():
    text = "## Title\n\nOne sentence. Two words!\n- a bullet\n"
    assert [text[a:b] for a, b in sentence_spans(text)] == ["## Title", "One sentence.", "Two words!", "- a bullet"]


def test_chunks_stay_in_their_section_and_respect_the_size(demo):
    corpus, _ = demo
    analyzer = ANALYZERS["lowercase"]
    chunks = chunk_corpus(corpus, analyzer, chunk_size=20)
    assert len({c.snippet_id for c in chunks}) == len(chunks)
    for c in chunks:
        section = corpus.section(c.doc_id, c.section_id)
        assert section.start <= c.start < c.end <= section.end
        assert corpus[c.doc_id].text[c.start : c.end] == c.text
        assert c.tokens == analyzer.count(c.text)
        assert c.tokens <= 20 or len(sentence_spans(c.text)) == 1  # only a lone long sentence may exceed


def test_overlap_repeats_sentences(demo):
    corpus, _ = demo
    plain = chunk_corpus(corpus, ANALYZERS["lowercase"], chunk_size=20)
    overlapped = chunk_corpus(corpus, ANALYZERS["lowercase"], chunk_size=20, overlap=1)
    assert len(overlapped) > len(plain)


def test_index_hash_depends_on_what_defines_the_index(demo):
    corpus, _ = demo
    hashes = {
        ReferencePipeline("p", corpus, retriever="bm25", chunk_size=size, analyzer=analyzer).index_info().index_hash
        for size in (32, 64)
        for analyzer in ("lowercase", "whitespace")
    }
    assert len(hashes) == 4
    again = ReferencePipeline("p", corpus, retriever="bm25", chunk_size=32, analyzer="lowercase").index_info()
    assert again.index_hash in hashes and again.index_hash.startswith("sha256:")


@pytest.mark.parametrize(
    "retriever,rerank", [("bm25", None), ("tfidf", None), ("dense", None), ("hybrid", "mmr"), ("tfidf", "mmr")]
)
def test_every_payload_validates_against_the_corpus(demo, retriever, rerank):
    corpus, items = demo
    pipeline = ReferencePipeline(
        "p", corpus, retriever=retriever, rerank=rerank, encoder=HashingEncoder(), temperature=0.7
    )
    ctx = Context(corpus=corpus)
    for item in items[:20]:
        for variant, query in enumerate(item.variants):
            trace = pipeline.run(Request(item.qid, variant, 3, query, 5))
            assert validate_trace(trace, ctx) == []
            scores = [p.rerank_score if rerank else p.score_norm for p in trace.retrieved]
            assert all(0.0 <= p.score_norm <= 1.0 for p in trace.retrieved)
            if not rerank:
                assert scores == sorted(scores, reverse=True)
            assert trace.answer.raw.startswith('{"citations"')


def test_ties_follow_the_spec_order(demo):
    corpus, _ = demo
    pipeline = ReferencePipeline("p", corpus, retriever="bm25", k=50)
    payloads = pipeline.retrieve("zzzz unknown words", 50)  # every score 0: one big tie
    assert [tiebreak_key(p) for p in payloads] == sorted(tiebreak_key(p) for p in payloads)


def test_bm25_finds_the_anchor_section(demo):
    corpus, items = demo
    pipeline = ReferencePipeline("p", corpus, retriever="bm25")
    found = sum(pipeline.retrieve(i.question, 5)[0].section_id == i.section_id for i in items)
    assert found / len(items) > 0.9


def test_temperature_makes_the_seed_matter_and_zero_does_not(demo):
    corpus, items = demo
    hot = ReferencePipeline("p", corpus, retriever="bm25", temperature=2.0)
    cold = ReferencePipeline("p", corpus, retriever="bm25", temperature=0.0)

    def answers(pipeline, seed):
        return [pipeline.run(Request(i.qid, 0, seed, i.question, 5)).answer.text for i in items[:30]]

    assert answers(cold, 1) == answers(cold, 2)
    assert answers(hot, 1) == answers(hot, 1)
    assert answers(hot, 1) != answers(hot, 2)


def test_bad_parameters_are_usage_errors(demo):
    from ragaudit.core.errors import UsageError

    corpus, _ = demo
    with pytest.raises(UsageError, match="expected retriever one of bm25, tfidf, dense, hybrid, found 'splade'"):
        ReferencePipeline("p", corpus, retriever="splade")


# --- Selection without a full sort: checked against a full Python sort of every chunk ------------


def full_order(scores, keys) -> list[int]:
    """Every index best first by (-score, section_id, snippet_id): the tie-break of docs/reference.md §1.4, spelled out."""
    return sorted(range(len(keys)), key=lambda i: (-scores[i], *keys[i]))


_ties = st.sampled_from([0.0, -0.0, 0.25, 0.5, 0.5000000000000001, 1.0, -1.0])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_top_k_equals_the_full_sort(data):
    n = data.draw(st.integers(1, 40), label="n")
    scores = np.array(data.draw(st.lists(_ties | st.floats(-2, 2), min_size=n, max_size=n)), dtype=np.float64)
    ids = st.sampled_from(["a", "a/b", "b", "B", "é", "a-1"])
    keys = data.draw(st.lists(st.tuples(ids, st.text("xy:0129", max_size=3)), min_size=n, max_size=n))
    k = data.draw(st.integers(1, n), label="k")
    tiebreak = TieBreak(keys)
    expected = full_order(scores, keys)
    assert tiebreak.top(scores, k).tolist() == expected[:k]
    assert tiebreak.order(scores).tolist() == expected
    assert tiebreak.ranks(scores).tolist() == [float(expected.index(i) + 1) for i in range(n)]
    assert tiebreak.top(scores.astype(np.float32), k).tolist() == full_order(scores.astype(np.float32), keys)[:k]


def test_top_k_keeps_every_tie_at_the_boundary_in_tie_break_order():
    keys = [("s", "z"), ("s", "c"), ("r", "q"), ("s", "a"), ("t", "a")]
    scores = np.array([0.9, 0.5, 0.5, 0.5, 0.5])
    # the 2nd best score, 0.5, is shared by four chunks: the first in (section, snippet) order wins
    assert TieBreak(keys).top(scores, 2).tolist() == [0, 2]
    assert TieBreak(keys).top(scores, 4).tolist() == [0, 2, 3, 1]


def _by_definition_mmr(vectors, candidates, relevance, *, k, weight=0.7):
    """MMR as defined: each round, relevance minus the largest cosine to any chosen chunk."""
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    chosen, pool = [], list(candidates)
    while pool and len(chosen) < k:
        best, best_score = None, -np.inf
        for i in pool:
            redundancy = max((float(unit[i] @ unit[j]) for j, _ in chosen), default=0.0)
            value = weight * float(relevance[i]) - (1 - weight) * redundancy
            if value > best_score:
                best, best_score = i, value
        chosen.append((best, best_score))
        pool.remove(best)
    return chosen


def _sparse_product_scores(retriever, query):
    """Scores through scikit-learn's transform and a sparse matrix product."""
    if isinstance(retriever, BM25):
        q = retriever.vectorizer.transform([query])
        q.data[:] = 1.0
        raw = np.asarray((q @ retriever.weights).todense()).ravel()
        return raw, (raw / raw.max() if raw.max() > 0 else raw)
    raw = np.asarray((retriever.matrix @ retriever.vectorizer.transform([query]).T).todense()).ravel()
    return raw, np.clip(raw, 0.0, 1.0)


def _expected_scores(pipeline, query):
    keys = [(c.section_id, c.snippet_id) for c in pipeline.chunks]
    retriever = pipeline.retriever
    if isinstance(retriever, Hybrid):
        fused = 0.0
        for part in retriever.parts:
            _, norm = _sparse_product_scores(part, query) if isinstance(part, BM25) else part.scores(query)
            order = full_order(norm, keys)
            ranks = np.empty(len(keys))
            ranks[order] = np.arange(1, len(keys) + 1)
            fused = fused + 1.0 / (60 + ranks)
        return fused, fused / (2 / 61)
    if isinstance(retriever, (BM25, TfIdf)):
        return _sparse_product_scores(retriever, query)
    return retriever.scores(query)


def _expected_retrieval(pipeline, query, k):
    """(snippet, k_pos, k_final, raw, norm, rerank) rows from a full sort of every chunk."""
    raw, norm = _expected_scores(pipeline, query)
    order = full_order(norm, [(c.section_id, c.snippet_id) for c in pipeline.chunks])
    if pipeline.rerank is None:
        return [(pipeline.chunks[i].snippet_id, r + 1, None, raw[i], norm[i], None) for r, i in enumerate(order[:k])]
    retriever, texts = pipeline.retriever, [c.text for c in pipeline.chunks]
    if isinstance(retriever, (Dense, Hybrid)):
        vectors = (retriever if isinstance(retriever, Dense) else retriever.parts[1]).matrix
    else:
        vectors = TfIdf(texts, pipeline.analyzer).matrix.toarray()
    candidates = order[: max(3 * k, 20)]
    chosen = _by_definition_mmr(vectors, candidates, norm, k=k)
    return [
        (pipeline.chunks[i].snippet_id, candidates.index(i) + 1, final, raw[i], norm[i], score)
        for final, (i, score) in enumerate(chosen, start=1)
    ]


@pytest.mark.parametrize(
    "options",
    [
        {"retriever": "bm25"},
        {"retriever": "tfidf"},
        {"retriever": "dense"},
        {"retriever": "hybrid"},
        {"retriever": "bm25", "rerank": "mmr", "chunk_size": 32},
        {"retriever": "tfidf", "rerank": "mmr"},
        {"retriever": "dense", "rerank": "mmr"},
        {"retriever": "hybrid", "rerank": "mmr", "k": 3},
    ],
    ids=lambda o: "-".join(map(str, o.values())),
)
def test_retrieval_equals_a_full_sort_of_every_chunk(demo, options):
    corpus, items = demo
    pipeline = ReferencePipeline("p", corpus, encoder=HashingEncoder(), **options)
    k = pipeline.k
    queries = [q for item in items for q in item.variants] + ["zzzz unknown words", ""]
    for query in queries:
        found = [
            (p.snippet_id, p.k_pos, p.k_final, p.score_raw, p.score_norm, p.rerank_score)
            for p in pipeline.retrieve(query, k)
        ]
        assert found == _expected_retrieval(pipeline, query, k), query  # exact floats, not approximate
    wide = [p.snippet_id for p in pipeline.retrieve("zzzz unknown words", len(pipeline.chunks) + 5)]
    assert len(wide) == len(pipeline.chunks)


def _digest(pipeline, items) -> str:
    def text(x):
        return None if x is None else f"{x:.10g}"

    h = hashlib.sha256()
    for item in items:
        for variant, query in enumerate(item.variants):
            for seed in (1, 2):
                trace = pipeline.run(Request(item.qid, variant, seed, query, 5))
                rows = [
                    [p.snippet_id, p.k_pos, p.k_final, text(p.score_raw), text(p.score_norm), text(p.rerank_score)]
                    for p in trace.retrieved
                ]
                h.update(json.dumps([rows, trace.answer.raw if trace.answer else None]).encode())
    return h.hexdigest()


@pytest.mark.parametrize(
    "options,expected",
    [
        ({"retriever": "bm25"}, "1fc6cf4b9646f9b8128e93b4472f457a7411191f3a247501f3f96e03b885f68d"),
        ({"retriever": "tfidf", "rerank": "mmr"}, "d7267ba9d3884e382b48c0f94d8e7e55bdb6c56a3e72726d6baf601f8e5004f3"),
    ],
)
def test_handbook_traces_are_those_of_the_full_sort_implementation(demo, options, expected):
    """sha256 of every run's retrieved list, scores (10 significant digits) and answer on the
    handbook, as the implementation that sorted every chunk in Python gave them. A deliberate
    change to the chunker, the analyzers, the sentence splitter or the answerer changes it too."""
    corpus, items = demo
    assert _digest(ReferencePipeline("p", corpus, temperature=0.7, **options), items) == expected
