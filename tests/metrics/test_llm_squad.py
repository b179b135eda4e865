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


@pytest.mark.parametrize(
    ("key", "changed"),
    [
        # "According to passage [1], the Duke of Normandy was King William II of Normandy." where
        # passage 1 says "In 1066, Duke William II of Normandy conquered England …"
        (("according-greedy", "NORM-02", 1), "King William II of Normandy where it says Duke William II of Normandy"),
        # "… originated from the Norman mercenaries who fought against the Byzantines during the
        # Byzantine Restoration." where passage 1 says "during the period of the Comnenian Restoration"
        (("according-greedy", "NORM-11", 0), "Byzantine Restoration where it says Comnenian Restoration"),
    ],
)
def test_a_claim_that_changes_a_word_of_a_name_its_passage_writes_is_not_supported(runs, key, changed):
    run = runs[key]
    assert claim(run)["grounding"] == "unsupported"
    assert claim(run)["swaps"] == [changed]
    assert run["metrics"]["fully_grounded"] == 0


def test_a_claim_whose_answer_its_passage_never_writes_is_not_supported(runs):
    # "According to passage [1], a function problem is an example of computability theory." to "A
    # function problem is an example of what?"; passage 1 says it is a computational problem and
    # writes neither "computability" nor "theory"
    run = runs[("according-sampled", "COMP-09", 0)]
    assert claim(run)["grounding"] == "unsupported"
    assert set(claim(run)["adds"]) == {"computability", "theory"}
    assert run["metrics"]["fully_grounded"] == 0


def test_a_claim_that_restates_the_question_in_words_its_passage_lacks_is_not_supported(runs):
    # "According to passage [3], a computational problem can be described as a string over an
    # alphabet." to "… in a computational problem, what can be described as a string over an
    # alphabet?"; passage 3 (paragraph 1) speaks of neither strings nor alphabets
    run = runs[("according-sampled", "COMP-06", 1)]
    assert claim(run)["grounding"] == "unsupported"
    assert set(claim(run)["echoes"]) == {"described", "string", "alphabet"}
    assert run["metrics"]["fully_grounded"] == 0


def test_a_claim_citing_only_the_title_is_not_supported_even_in_the_questions_words(runs):
    # "According to passage [3], one of the main topics studied in computational complexity theory
    # is computational complexity theory." where passage 3 is the title line, which states nothing
    run = runs[("according-greedy", "COMP-07", 1)]
    assert claim(run)["adds"] == []
    assert claim(run)["grounding"] == "unsupported"


@pytest.mark.parametrize("variant", [0, 1])
def test_a_claim_giving_the_name_the_question_asks_for_is_supported(runs, variant):
    # "According to passage [1], the name of the count of Apulia was Robert Guiscard." (variant 1:
    # "… the count of Apulia was named Robert Guiscard.") where passage 1 says "Robert Guiscard, …
    # previously elevated to the dignity of count of Apulia …"
    run = runs[("according-greedy", "NORM-12", variant)]
    assert claim(run)["grounding"] == "supported"
    assert run["correct"] and run["metrics"]["fully_grounded"] == 1


@pytest.mark.parametrize(
    "key",
    [
        ("according-greedy", "COMP-01", 0),  # "… a branch of theoretical computer science that deals with …"
        (
            "according-greedy",
            "NORM-17",
            0,
        ),  # "Harold II died at the Battle of Hastings." ("… killing King Harold II …")
        ("according-sampled", "NORM-11", 1),  # "the Raoulii are of Norman origin." ("… of Norman mercenary origin …")
    ],
)
def test_a_claim_its_passage_says_in_other_words_stays_supported(runs, key):
    assert claim(runs[key])["grounding"] == "supported"


def test_a_claim_naming_an_actor_its_passage_does_not_name_does_not_state_the_anchor(runs):
    # "According to passage [1], Edward the Confessor married her to Ethelred II of England, but it
    # is a typical example of the attitudes of Edward." to "Who did Emma marry?" where passage 1,
    # the anchor's, tells of "the marriage of Emma … and King Ethelred II of England" and never
    # names Edward the Confessor
    run = runs[("according-sampled", "NORM-15", 0)]
    assert not run["correct"]
    assert "it names edward, confessor, which neither its cited texts nor the question name" in run["why"]


def test_a_claim_giving_the_anchors_answer_and_a_relative_clause_more_states_the_anchor(runs):
    # "According to passage [3], one of the Norman's major exports was the Normans' extensive trade
    # in fighting horsemen, which they exported to Italy, France, and England." to "What was one of
    # the Norman's major exports?" where passage 3, the anchor's, says "one of the Normans' major
    # exports was fighting horsemen": the relative clause adds a statement, it does not replace one
    run = runs[("according-greedy", "NORM-07", 1)]
    assert run["correct"]
    assert claim(run)["anchor"] == "states"


def test_a_claim_that_invents_an_operation_on_the_anchors_quantities_does_not_state_it(runs):
    # "According to passage [1], there is a route that can be calculated by dividing 2000 kilometres
    # by 15." to "By how many kilometers does the traveling salesman problem seek to classify a route
    # between the 15 largest cities in Germany?": the 15 is the question's, so of the claim's own
    # content only 2000 kilometres is the anchor's; it adds a division the passage never makes
    run = runs[("according-sampled", "COMP-05", 1)]
    assert not run["correct"]
    assert claim(run)["anchor"] == "other"
    assert "calculated" in run["why"] and "dividing" in run["why"]


def test_an_answer_two_of_squads_annotators_marked_in_another_sentence_is_correct(runs):
    # "According to passage [1], the Raouliii were descended from the Italo-Norman named Raoul, …" to
    # "What were the origins of the Raouliii family?": SQuAD's first answer is "Norman mercenary"
    # (sentence 1); two of its three annotators answered "(descended from) an Italo-Norman named
    # Raoul", in sentence 2, which the gold item lists as an alternative (accept = "any")
    run = runs[("according-sampled", "NORM-11", 0)]
    assert run["correct"]
    assert claim(run)["anchor"] == "states"
