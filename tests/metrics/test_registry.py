"""Properties every registered run metric shares (in the manner of scikit-learn's test_common)."""

import copy
import random

import pytest
from helpers import ITEM

from ragaudit.io.traces import parse_trace
from ragaudit.metrics.citation import RunView
from ragaudit.metrics.registry import METRICS, RUN_METRICS

# metrics of the cited set only: the order of the retrieved list must not change them
ORDER_INVARIANT = {"coverage", "citation_match", "citation_precision", "citation_recall"}


def run_of(trace):
    return RunView(parse_trace(trace), ITEM, None, 5, 30)


def variants(valid_trace):
    """A spread of runs: perfect, decoy-cited, shuffled, partial, empty, no answer."""
    out = [copy.deepcopy(valid_trace)]
    t = copy.deepcopy(valid_trace)
    t["answer"]["segments"][0]["citations"] = ["pol-pw-1"]
    out.append(t)
    t = copy.deepcopy(valid_trace)
    t["retrieved"].reverse()
    out.append(t)
    t = copy.deepcopy(valid_trace)
    t["retrieved"][0]["offsets"]["start"] += 15
    out.append(t)
    t = copy.deepcopy(valid_trace)
    t.update(retrieved=[], answer=None)
    out.append(t)
    t = copy.deepcopy(valid_trace)
    del t["answer"]
    out.append(t)
    return out


def test_every_metric_is_documented():
    assert all(m.description and m.level in ("run", "claim", "question") for m in METRICS.values())
    assert {m.name for m in RUN_METRICS} >= {"coverage", "citation_match", "hit@k", "recall@k", "mrr", "ndcg@10"}


@pytest.mark.parametrize("metric", RUN_METRICS, ids=str)
def test_bounded(metric, valid_trace):
    for trace in variants(valid_trace):
        value = metric.compute(run_of(trace))
        assert value is None or metric.bounds[0] <= value <= metric.bounds[1]


@pytest.mark.parametrize("metric", RUN_METRICS, ids=str)
def test_perfect_input_scores_best(metric, valid_trace):
    assert metric.compute(run_of(valid_trace)) == 1.0


@pytest.mark.parametrize("metric", [m for m in RUN_METRICS if m.name in ORDER_INVARIANT], ids=str)
def test_order_invariant(metric, valid_trace):
    rng = random.Random(7)
    for trace in variants(valid_trace):
        shuffled = copy.deepcopy(trace)
        rng.shuffle(shuffled["retrieved"])
        assert metric.compute(run_of(trace)) == metric.compute(run_of(shuffled))
