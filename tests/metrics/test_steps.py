import pytest
from helpers import ITEM

from ragaudit.checks.metrics.embed import HashingEncoder
from ragaudit.checks.metrics.evaluate import evaluate
from ragaudit.checks.metrics.steps import payload_relevance, step_attribution
from ragaudit.io.traces import parse_trace


def with_steps(valid_trace, steps):
    valid_trace["steps"] = steps
    return parse_trace(valid_trace)


def test_relevance_rule():
    assert payload_relevance(0.8, 5, None) == 0.8
    assert payload_relevance(None, 0, None) == 1.0
    assert payload_relevance(None, 3, None) == pytest.approx(0.7)
    assert payload_relevance(None, 9, None) == 0.3  # floor
    assert payload_relevance(0.8, 0, 0.5) == pytest.approx(0.4)


def test_attribution_aggregates_by_document(valid_trace):
    valid_trace["retrieved"][1]["doc_id"] = "other"
    trace = with_steps(
        valid_trace,
        [
            {"step_number": 1, "question": "a", "citations": ["pol-keys-1"], "confidence_score": 0.5},
            {"step_number": 2, "question": "b", "citations": ["pol-keys-1", "pol-pw-1"]},
        ],
    )
    result = step_attribution(trace)
    assert [(s["doc_id"], s["relevance"]) for s in result["all_sources"]] == [("policies", 0.9), ("other", 0.4)]
    assert [s["doc_id"] for s in result["primary_sources"]] == ["policies"]  # only one > 0.7
    assert result["usage_by_step"] == {1: ["policies"], 2: ["policies", "other"]}


def test_primary_sources_fall_back_to_top_three(valid_trace):
    for p in valid_trace["retrieved"]:
        p["score_norm"] = 0.2
    valid_trace["retrieved"][1]["doc_id"] = "other"
    trace = with_steps(valid_trace, [{"step_number": 1, "question": "a", "citations": ["pol-keys-1", "pol-pw-1"]}])
    assert len(step_attribution(trace)["primary_sources"]) == 2


def test_chains_get_a_lambda_state_in_the_evaluation(valid_trace, corpus):
    trace = with_steps(
        valid_trace,
        [
            {"step_number": 1, "question": "Which keys exist?", "citations": ["pol-pw-1"]},
            {"step_number": 2, "question": "Hardware keys are rotated every 12 months.", "citations": ["pol-keys-1"]},
        ],
    )
    evaluation = evaluate([trace], [ITEM], corpus, HashingEncoder())
    chain = evaluation.runs[0]["chain"]
    assert len(chain["delta_s"]) == 2 and chain["delta_s"][1] == pytest.approx(0.0, abs=1e-6)
    assert chain["states"] == ["convergent"] and chain["state"] == "convergent"
    assert evaluation.runs[0]["attribution"]["usage_by_step"] == {1: ["policies"], 2: ["policies"]}
