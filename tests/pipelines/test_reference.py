"""The reference RAG: chunks, index hash, retrievers, rerank, answerer — and every payload validates."""
from pathlib import Path

import pytest

from ragaudit.analyzers import ANALYZERS
from ragaudit.io.corpus import load_corpus
from ragaudit.io.gold import read_gold
from ragaudit.metrics.embed import HashingEncoder
from ragaudit.pipelines.base import Request
from ragaudit.pipelines.reference import ReferencePipeline
from ragaudit.pipelines.reference.chunking import chunk_corpus
from ragaudit.text import sentence_spans
from ragaudit.validate import Context, validate_trace
from ragaudit.validate.ranking import tiebreak_key

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
        assert corpus[c.doc_id].text[c.start:c.end] == c.text
        assert c.tokens == analyzer.count(c.text)
        assert c.tokens <= 20 or len(sentence_spans(c.text)) == 1  # only a lone long sentence may exceed


def test_overlap_repeats_sentences(demo):
    corpus, _ = demo
    plain = chunk_corpus(corpus, ANALYZERS["lowercase"], chunk_size=20)
    overlapped = chunk_corpus(corpus, ANALYZERS["lowercase"], chunk_size=20, overlap=1)
    assert len(overlapped) > len(plain)


def test_index_hash_depends_on_what_defines_the_index(demo):
    corpus, _ = demo
    hashes = {ReferencePipeline("p", corpus, retriever="bm25", chunk_size=size, analyzer=analyzer).index_info().index_hash
              for size in (32, 64) for analyzer in ("lowercase", "whitespace")}
    assert len(hashes) == 4
    again = ReferencePipeline("p", corpus, retriever="bm25", chunk_size=32, analyzer="lowercase").index_info()
    assert again.index_hash in hashes and again.index_hash.startswith("sha256:")


@pytest.mark.parametrize("retriever,rerank", [("bm25", None), ("tfidf", None), ("dense", None), ("hybrid", "mmr"),
                                              ("tfidf", "mmr")])
def test_every_payload_validates_against_the_corpus(demo, retriever, rerank):
    corpus, items = demo
    pipeline = ReferencePipeline("p", corpus, retriever=retriever, rerank=rerank, encoder=HashingEncoder(),
                                 temperature=0.7)
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
    from ragaudit.errors import UsageError
    corpus, _ = demo
    with pytest.raises(UsageError, match="expected retriever one of bm25, tfidf, dense, hybrid, found 'splade'"):
        ReferencePipeline("p", corpus, retriever="splade")
