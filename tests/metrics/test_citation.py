"""Hand-computed fixtures for each formula, and a cross-check of the retrieval metrics with ir_measures."""

import ir_measures
import pytest
from helpers import ANCHOR, ITEM, KEYS_SENTENCE, POLICIES
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_measures import RR, R, Success, nDCG

from ragaudit.checks.metrics import citation
from ragaudit.checks.metrics.citation import RunView
from ragaudit.core.types import Anchor, ExpectedCitation, GoldItem, Span
from ragaudit.io.traces import parse_trace


def view(trace: dict, item=ITEM, corpus=None, k=5, tolerance=0) -> RunView:
    return RunView(parse_trace(trace), item, corpus, k, tolerance)


def scores(run: RunView) -> dict:
    return {
        name: getattr(citation, fn)(run)
        for name, fn in (
            ("coverage", "coverage"),
            ("match", "citation_match"),
            ("precision", "citation_precision"),
            ("recall", "citation_recall"),
            ("hit", "hit_at_k"),
            ("recall@k", "recall_at_k"),
            ("mrr", "mrr"),
            ("ndcg", "ndcg_at_k"),
        )
    }


def test_perfect_run(valid_trace):
    assert scores(view(valid_trace)) == {
        k: 1.0 for k in ("coverage", "match", "precision", "recall", "hit", "recall@k", "mrr", "ndcg")
    }


def test_citing_the_decoy(valid_trace):
    valid_trace["answer"]["segments"][0]["citations"] = ["pol-pw-1"]
    got = scores(view(valid_trace))
    assert (got["coverage"], got["match"], got["precision"], got["recall"]) == (0.0, 0.0, 0.0, 0.0)
    assert got["mrr"] == 1.0  # retrieval still ranked the anchor first


def test_partial_overlap_coverage(valid_trace):
    p = valid_trace["retrieved"][0]
    p["offsets"] = {"start": ANCHOR.start + 10, "end": ANCHOR.end + 20, "unit": "char"}
    assert citation.coverage(view(valid_trace)) == pytest.approx((len(ANCHOR) - 10) / len(ANCHOR))


def test_overlapping_citations_are_not_double_counted(valid_trace):
    valid_trace["retrieved"][1].update(
        offsets={"start": ANCHOR.start, "end": ANCHOR.start + 20, "unit": "char"}, section_id="policies/security/keys"
    )
    valid_trace["answer"]["segments"][0]["citations"] = ["pol-keys-1", "pol-pw-1"]
    assert citation.coverage(view(valid_trace)) == 1.0


def test_match_needs_an_overlap_and_match_tolerance_widens_the_gold_span(valid_trace):
    p = valid_trace["retrieved"][0]
    p["offsets"] = {"start": ANCHOR.end + 2, "end": ANCHOR.end + 60, "unit": "char"}  # the next sentence
    assert citation.citation_match(view(valid_trace)) == 0.0  # by default a span must overlap the gold span
    p["offsets"] = {"start": ANCHOR.end - 1, "end": ANCHOR.end + 60, "unit": "char"}
    assert citation.citation_match(view(valid_trace)) == 1.0  # one shared character is an overlap
    p["offsets"] = {"start": ANCHOR.end + 25, "end": ANCHOR.end + 60, "unit": "char"}
    run = view(valid_trace, tolerance=30)
    assert citation.citation_match(run) == 1.0 and citation.citation_precision(run) == 0.0
    p["offsets"] = {"start": ANCHOR.end + 31, "end": ANCHOR.end + 60, "unit": "char"}
    assert citation.citation_match(view(valid_trace, tolerance=30)) == 0.0


def test_match_needs_every_citation_retrieved(valid_trace):
    valid_trace["answer"]["segments"].append({"seg": 2, "text": "x", "citations": ["ghost"]})
    assert citation.citation_match(view(valid_trace)) == 0.0


def test_match_by_expected_snippet_id(valid_trace):
    item = GoldItem(
        ITEM.qid,
        ITEM.question,
        ITEM.doc_id,
        ITEM.section_id,
        ITEM.anchor,
        expected_citations=(ExpectedCitation("policies", Span(0, 5), "pol-keys-1"),),
    )
    valid_trace["retrieved"][0]["offsets"] = {"start": 400, "end": 420, "unit": "char"}
    assert citation.citation_match(view(valid_trace, item)) == 1.0


def test_no_answer_uses_top_k(valid_trace):
    del valid_trace["answer"]
    assert citation.citation_precision(view(valid_trace)) == 0.5
    assert citation.citation_precision(view(valid_trace, k=1)) == 1.0


def test_empty_run_scores_zero(valid_trace):
    valid_trace["retrieved"] = []
    valid_trace["answer"] = None
    assert set(scores(view(valid_trace)).values()) == {0.0}


def test_rank_two_and_unretrieved_gold(valid_trace):
    valid_trace["retrieved"].reverse()
    item = GoldItem(
        ITEM.qid,
        ITEM.question,
        ITEM.doc_id,
        ITEM.section_id,
        ITEM.anchor,
        expected_citations=(ExpectedCitation("policies", ANCHOR), ExpectedCitation("team/on-call", Span(0, 10))),
    )
    got = scores(view(valid_trace, item))
    assert got["mrr"] == 0.5 and got["recall@k"] == 0.5 and got["recall"] == 0.5
    assert got["ndcg"] == pytest.approx((1 / 1.5849625007211563) / (1 + 1 / 1.5849625007211563))


def test_token_units_are_reconciled_with_the_corpus(valid_trace, corpus):
    from ragaudit.core.analyzers import ANALYZERS

    spans = ANALYZERS["lowercase"].spans(POLICIES)
    first = next(i for i, (a, _) in enumerate(spans) if a == ANCHOR.start)
    valid_trace["retrieved"][0]["offsets"] = {"start": first, "end": first + 7, "unit": "token"}  # 7 words
    valid_trace["retrieved"][1]["offsets"] = {"start": 0, "end": 1, "unit": "token"}
    run = view(valid_trace, corpus=corpus)
    assert citation.coverage(run) == pytest.approx((len(KEYS_SENTENCE) - 1) / len(KEYS_SENTENCE))  # all but "."
    assert citation.coverage(view(valid_trace)) is None  # no corpus: the units cannot be reconciled


# ---- the retrieval metrics agree with ir_measures (trec_eval) --------------------------------

spans = st.tuples(st.integers(0, 300), st.integers(1, 40)).map(lambda t: (t[0], t[0] + t[1]))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(spans, min_size=0, max_size=12),
    st.lists(spans, min_size=1, max_size=3),
    st.integers(1, 6),
    st.one_of(st.none(), st.integers(1, 12)),
)
def test_retrieval_metrics_agree_with_ir_measures(retrieved, gold_spans, k, ndcg_k):
    """hit, recall at k, nDCG at its own cutoff (k when unset) and MRR, as trec_eval computes them."""
    trace = {
        "qid": "q",
        "retrieved": [
            {"doc_id": "d", "section_id": "s", "snippet_id": f"s{i}", "offsets": list(s), "score_norm": 1.0 - i / 100}
            for i, s in enumerate(retrieved)
        ],
        "answer": None,
    }
    item = GoldItem(
        "q",
        "q",
        "d",
        "s",
        Anchor(Span(*gold_spans[0]), "x"),
        expected_citations=tuple(ExpectedCitation("d", Span(*g)) for g in gold_spans),
    )
    run = RunView(parse_trace(trace), item, None, k, 30, ndcg_k)
    rels, _ = run.relevance
    matched = {i for p in run.trace.retrieved for i in run.overlapping(p)}
    qrels = [ir_measures.Qrel("q", f"s{i}", 1) for i, r in enumerate(rels) if r]
    qrels += [ir_measures.Qrel("q", f"gold{j}", 1) for j in range(len(gold_spans)) if j not in matched]
    qrels += [ir_measures.Qrel("q", f"s{i}", 0) for i, r in enumerate(rels) if not r]
    ranking = [ir_measures.ScoredDoc("q", f"s{i}", float(len(retrieved) - i)) for i in range(len(retrieved))]
    if not any(q.relevance for q in qrels):
        return
    cutoff = ndcg_k or k
    measures = [nDCG @ cutoff, RR, R @ k, Success @ k]
    expected = ir_measures.calc_aggregate(measures, qrels, ranking) if ranking else {}
    assert citation.ndcg_at_k(run) == pytest.approx(expected.get(nDCG @ cutoff, 0.0))
    assert citation.mrr(run) == pytest.approx(expected.get(RR, 0.0))
    assert citation.recall_at_k(run) == pytest.approx(expected.get(R @ k, 0.0))
    assert citation.hit_at_k(run) == pytest.approx(expected.get(Success @ k, 0.0))
