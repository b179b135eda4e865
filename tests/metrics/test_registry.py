"""Properties every registered metric shares (in the manner of scikit-learn's test_common): its compute
is called on typed input, its value lies in its declared range, its direction holds on a better and a
worse input built by hand, its name is documented, and the evaluation computes exactly the registry."""

import copy
import random
import re

import pytest
from helpers import ITEM, ROOT

from ragaudit.checks.metrics.aggregate import QuestionRuns
from ragaudit.checks.metrics.citation import RunView
from ragaudit.checks.metrics.claims import Claim
from ragaudit.checks.metrics.computes import ScoredRun
from ragaudit.checks.metrics.correct import Verdict
from ragaudit.checks.metrics.grounding import Judged
from ragaudit.checks.metrics.registry import METRICS, RUN_METRICS, labels
from ragaudit.io.traces import parse_trace

# metrics of the cited set only: the order of the retrieved list must not change them
ORDER_INVARIANT = {"coverage", "citation_match", "citation_precision", "citation_recall"}
OF_THE_VIEW = ("coverage", "citation_match", "citation_precision", "citation_recall", "hit@k", "recall@k", "mrr")
OF_THE_VIEW += ("ndcg@k",)
DISTANCES = ("delta_s_qr", "delta_s_gold", "delta_s_excess", "delta_s_topk", "delta_s_ra")


def run_of(trace, *, k=5, distances=None, claims=(), verdict=None) -> ScoredRun:
    return ScoredRun(RunView(parse_trace(trace), ITEM, None, k, 30), distances or {}, tuple(claims), verdict)


def judged(*, supported: bool, support: float, hallucinated=()) -> Judged:
    claim = Claim(1, 1, "Hardware keys are rotated every 12 months.", ("pol-keys-1",), "marker")
    return Judged(claim, "supported" if supported else "unsupported", support, tuple(hallucinated))


def better_run(valid_trace) -> ScoredRun:
    """The gold cited and ranked first, close to the question, its claim supported and correct."""
    return run_of(
        valid_trace,
        k=1,
        distances=dict.fromkeys(DISTANCES, 0.1),
        claims=[judged(supported=True, support=0.9)],
        verdict=Verdict(True, "", anchor_support=0.9, key_share=1.0),
    )


def worse_run(valid_trace) -> ScoredRun:
    """The decoy ranked first and cited, far from the question, its claim unsupported and wrong."""
    t = copy.deepcopy(valid_trace)
    t["retrieved"].reverse()
    t["answer"]["segments"][0]["citations"] = ["pol-pw-1"]
    return run_of(
        t,
        k=1,
        distances=dict.fromkeys(DISTANCES, 0.7),
        claims=[judged(supported=False, support=0.2, hallucinated=("42",))],
        verdict=Verdict(False, "", anchor_support=0.1, key_share=0.2),
    )


def better_question() -> QuestionRuns:
    """Two correct runs citing the same section, with the same ΔS."""
    cited = {("policies", "keys")}
    return QuestionRuns(runs=2, correct=2, common=frozenset(cited), cited=set(cited), max_delta_s=0.3, min_delta_s=0.3)


def worse_question() -> QuestionRuns:
    """Two wrong runs citing different sections, far apart in ΔS."""
    cited = {("policies", "keys"), ("policies", "passwords")}
    return QuestionRuns(runs=2, correct=0, common=frozenset(), cited=cited, max_delta_s=0.8, min_delta_s=0.2)


def value(metric, subject):
    if metric.level == "question":
        return metric.compute(question=subject)
    if metric.level == "probe":  # a probe's outcomes: follows / keeps_old / other (ragaudit probe)
        return metric.compute(probe=subject)
    return metric.compute(run=subject)


def better_probe() -> list[str]:
    """Every probe run follows its edited source."""
    return ["follows", "follows", "follows"]


def worse_probe() -> list[str]:
    """The probe runs keep the old fact, or state neither."""
    return ["keeps_old", "other", "follows"]


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


def subjects(metric, valid_trace):
    if metric.level == "probe":
        return [better_probe(), worse_probe(), ["keeps_old"], ["other"], []]
    if metric.level == "question":
        return [better_question(), worse_question(), QuestionRuns()]
    spread = [run_of(t, distances=dict.fromkeys(DISTANCES, 0.5)) for t in variants(valid_trace)]
    return [better_run(valid_trace), worse_run(valid_trace), *spread]


def in_range(metric, got) -> bool:
    if metric.states:
        return got in metric.states
    return got is None or metric.bounds[0] <= got <= metric.bounds[1]


@pytest.mark.parametrize("metric", METRICS.values(), ids=str)
def test_value_lies_in_its_range(metric, valid_trace):
    for subject in subjects(metric, valid_trace):
        got = value(metric, subject)
        assert in_range(metric, got), (metric.name, got)


@pytest.mark.parametrize("metric", METRICS.values(), ids=str)
def test_direction_holds_on_a_better_and_a_worse_input(metric, valid_trace):
    if metric.level == "question":
        better, worse = value(metric, better_question()), value(metric, worse_question())
    elif metric.level == "probe":
        better, worse = value(metric, better_probe()), value(metric, worse_probe())
    else:
        better, worse = value(metric, better_run(valid_trace)), value(metric, worse_run(valid_trace))
    if metric.states:
        assert metric.states.index(better) > metric.states.index(worse)
    elif metric.higher_is_better:
        assert better > worse
    else:
        assert better < worse


@pytest.mark.parametrize("metric", METRICS.values(), ids=str)
def test_is_documented(metric):
    reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    assert metric.description and metric.level in ("run", "claim", "question", "probe")
    assert re.search(rf"^\| `{re.escape(metric.name)}` \|", reference, re.M), metric.name


@pytest.mark.parametrize("metric", RUN_METRICS, ids=str)
def test_a_failed_run_scores_its_worst(metric, valid_trace):
    """An errored run scores 0 on a rate and 1.0 on a distance, whatever it holds: no mean rises
    because runs failed (the gold's ΔS, a property of the question, and the anchor's agreement aside)."""
    t = copy.deepcopy(valid_trace)
    t["error"] = "timeout"
    got = metric.compute(run=run_of(t, distances=dict.fromkeys(DISTANCES, 0.2)))
    if metric.name == "delta_s_gold":
        assert got == 0.2
    elif metric.name in ("anchor_support", "key_content"):
        assert got is None
    elif metric.name == "hallucinations":
        assert got == 0.0
    else:
        assert got == (0.0 if metric.higher_is_better else 1.0)


@pytest.mark.parametrize("name", OF_THE_VIEW)
def test_perfect_input_scores_best(name, valid_trace):
    assert METRICS[name].compute(run=run_of(valid_trace)) == 1.0


@pytest.mark.parametrize("name", sorted(ORDER_INVARIANT))
def test_order_invariant(name, valid_trace):
    rng = random.Random(7)
    for trace in variants(valid_trace):
        shuffled = copy.deepcopy(trace)
        rng.shuffle(shuffled["retrieved"])
        assert METRICS[name].compute(run=run_of(trace)) == METRICS[name].compute(run=run_of(shuffled))


def test_ndcg_follows_k_unless_its_own_cutoff_is_set(valid_trace):
    """The gold at rank 2: cut at 1 it is missed, cut at 2 it counts 1/log2(3)."""
    t = copy.deepcopy(valid_trace)
    t["retrieved"].reverse()
    trace = parse_trace(t)
    ndcg = METRICS["ndcg@k"].compute
    assert ndcg(run=ScoredRun(RunView(trace, ITEM, None, 1, 30))) == 0.0
    assert ndcg(run=ScoredRun(RunView(trace, ITEM, None, 2, 30))) == pytest.approx(1 / 1.584962500721156)
    assert ndcg(run=ScoredRun(RunView(trace, ITEM, None, 1, 30, 2))) == pytest.approx(1 / 1.584962500721156)


def test_labels_show_the_cutoff():
    assert labels({"k": 3, "ndcg_k": None})["hit@k"] == "hit@3"
    assert labels({"k": 3, "ndcg_k": None})["ndcg@k"] == "ndcg@3"
    assert labels({"k": 3, "ndcg_k": 10})["ndcg@k"] == "ndcg@10"
    assert labels({"k": 3, "ndcg_k": 10})["recall@k"] == "recall@3"
    assert labels({"k": 5})["ndcg@k"] == "ndcg@10"  # a report written when ndcg was fixed at 10
    assert labels({"k": 3})["mrr"] == "mrr"


def test_a_report_of_ndcg_at_10_loads_under_the_present_key():
    """Reports written when ndcg was fixed at 10 stored `ndcg@10`: they load as `ndcg@k`, labelled ndcg@10."""
    from ragaudit.core.model import PipelineSummary

    summary = PipelineSummary.from_json({"runs": 1, "questions": 1, "metrics": {"ndcg@10": 0.5, "mrr": 1.0}}, "$")
    assert summary.metrics == {"ndcg@k": 0.5, "mrr": 1.0}
    assert labels({"k": 5, "match_tolerance": 30})["ndcg@k"] == "ndcg@10"


def test_a_run_is_failed_as_its_trace_says_however_often_its_metrics_ask(valid_trace):
    from ragaudit.checks.metrics.computes import errored

    for trace in (valid_trace, {**valid_trace, "error": "timeout"}, {**valid_trace, "retrieved": [], "answer": None}):
        run = run_of(trace)
        once = errored(run.view.trace)
        assert [run.failed, run.failed] == [once, once]  # remembered, never changed
        scores = {m.name: m.compute(run=run_of(trace)) for m in RUN_METRICS}
        assert {m.name: m.compute(run=run) for m in RUN_METRICS} == scores  # asked again on one run: the same
        if once:
            assert scores["coverage"] == 0.0 and scores["delta_s_qr"] == 1.0
