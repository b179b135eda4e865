"""The claim checks on a real LLM's answers over SQuAD articles (SmolLM2-135M-Instruct, recorded in
bench/data/llm by bench/smollm2.py), replayed through `ragaudit run` with the shipped defaults and
the real model over the corpus bench/corpora.py builds from ../shared/data/squad. Each case is one
recorded run; the expectations are written from its text, not read from ragaudit's output."""

import importlib.util
import json
import sys

import pytest
from helpers import ROOT, replayed_runs, shared_path

RECORDINGS = ROOT / "bench" / "data" / "llm"
PIPELINES = ("according-greedy", "according-sampled")

pytestmark = pytest.mark.model


def _corpora():
    spec = importlib.util.spec_from_file_location("corpora", ROOT / "bench" / "corpora.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["corpora"] = module  # its dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    shared_path("squad", "small.json")  # the articles the recordings answer over
    tmp = tmp_path_factory.mktemp("squad")
    built = _corpora().build("squad", tmp, 40)
    recordings = {name: RECORDINGS / f"squad-smollm2-{name}.jsonl" for name in PIPELINES}
    ignore = '[gold]\nignore = ["gold_section_item_count", "gold_anchor_far"]\n\n'
    return replayed_runs(tmp, recordings, built.gold, built.corpus.resolve(), extra=ignore)


def claim(run: dict, n: int = 1) -> dict:
    return next(c for c in run["claims"] if c["n"] == n)


@pytest.mark.parametrize("variant", [0, 1])
def test_a_claim_citing_only_the_articles_title_is_not_supported(runs, variant):
    # "According to passage [3], two fields of theoretical computer science closely mirror
    # computational complexity theory: analysis of algorithms and computability theory." where
    # passage 3 is the line "# Computational complexity theory" and nothing else
    recorded = [
        json.loads(line)
        for line in (RECORDINGS / "squad-smollm2-according-sampled.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    trace = next(t for t in recorded if t["qid"] == "COMP-03" and t["variant"] == variant)
    third = next(p for p in trace["retrieved"] if p["k_pos"] == 3)
    assert third["section_id"] == "computational-complexity-theory"  # the title, above every paragraph
    assert third["offsets"]["end"] - third["offsets"]["start"] < 40
    run = runs[("according-sampled", "COMP-03", variant)]
    assert claim(run)["grounding"] == "unsupported"
    assert {"analysis", "algorithms"} <= set(claim(run)["adds"])
    assert run["metrics"]["fully_grounded"] == 0


def test_a_claim_citing_a_paragraph_that_says_it_stays_supported(runs):
    # "According to passage [1], computational complexity theory is a branch of theoretical computer
    # science that deals with classifying computational problems according to their inherent
    # difficulty." where passage 1 says just that
    run = runs[("according-greedy", "COMP-07", 0)]
    assert claim(run, 1)["grounding"] == "supported"
    # its second claim cites the title: "This topic is also mentioned in passage [2], specifically in
    # the context of instance-based complexity theory."
    assert claim(run, 2)["grounding"] == "unsupported"
