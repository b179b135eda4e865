"""The claim checks on a real LLM's answers: SmolLM2-135M-Instruct over the handbook, as recorded in
bench/data/llm (bench/smollm2.py), replayed through `ragaudit run` with the shipped defaults and
the real model. Each case is one recorded run, with what a person reading it sees (the blind labels
beside the recordings say the same); the expectations are written from the run's text, not read
from ragaudit's output."""

import pytest
from helpers import DEMO, ROOT, replayed_runs

RECORDINGS = ROOT / "bench" / "data" / "llm"
PIPELINES = ("cite-greedy", "quote-sampled", "according-greedy")

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """Every replayed run of the handbook recordings by (pipeline, qid, variant), as report.json has it."""
    recordings = {name: RECORDINGS / f"handbook-smollm2-{name}.jsonl" for name in PIPELINES}
    return replayed_runs(tmp_path_factory.mktemp("llm"), recordings, DEMO / "gold.jsonl", DEMO / "corpus")


def claim(run: dict, n: int = 1) -> dict:
    return next(c for c in run["claims"] if c["n"] == n)


def test_a_claim_that_negates_its_cited_passage_is_contradicted_and_the_run_not_correct(runs):
    # "The Head of Customer Support does not join the SEV1 bridge until the incident is resolved [1]."
    # where passage 1 says the bridge stays open until the incident is resolved, and the Head of
    # Customer Support joins it within 15 minutes
    run = runs[("quote-sampled", "INC-SEV1-4", 0)]
    assert claim(run)["grounding"] == "contradicted" and claim(run)["contradicts"] == "negates it"
    assert not run["correct"]
    assert "contradicts the gold anchor: negates it" in run["why"]


def test_a_changed_quantity_contradicts_the_gold_anchor_and_the_why_says_so(runs):
    # "According to passage [1], the key encryption keys for the customer database are rotated
    # every 365 days." where the anchor says every 180 days
    run = runs[("according-greedy", "KEYS-ENC-2", 0)]
    assert not run["correct"]
    assert run["why"].endswith("contradicts the gold anchor: says 365 days where it says 180 days")
    assert claim(run)["grounding"] == "contradicted"


def test_a_fact_taken_from_an_uncited_passage_is_misattributed(runs):
    # "A disk usage alert must link to a runbook in the alert description [3]." where only passage
    # 2 says "Every paging alert must link to a runbook in the alert description."; passage 3 is
    # the on-call rotation's pages per week
    run = runs[("quote-sampled", "MON-ALERT-3", 0)]
    first = claim(run)
    assert first["grounding"] == "misattributed"
    assert {"link", "runbook"} <= set(first["lacks"])
    assert first["attributed"] == [run["spans"][1]["snippet_id"]]
    assert run["metrics"]["fully_grounded"] == 0


def test_a_claim_mixing_an_uncited_passage_with_its_own_is_not_supported(runs):
    # "Daily database backups are retained for 30 days [3]." cites the log retention passage (30
    # days of application logs); daily database backups are passage 1's, kept 35 days there
    run = runs[("cite-greedy", "BK-RET-2", 0)]
    assert claim(run)["grounding"] == "unsupported"
    assert set(claim(run)["lacks"]) >= {"Daily", "database", "backups"}


def test_a_neighbouring_passage_of_the_gold_section_is_no_citation_match(runs):
    # "A long-running SEV2 incident gets promoted to SEV1 [3]." cites the passage that ends two
    # characters before the anchor ("… after 4 hours is automatically upgraded to SEV1.")
    run = runs[("quote-sampled", "INC-SEV2-4", 1)]
    assert run["metrics"]["citation_match"] == 0
    assert run["why"].startswith("cites the gold section but not the gold span")


@pytest.mark.parametrize(
    "key",
    [
        (
            "cite-greedy",
            "BK-RT-1",
            0,
        ),  # "… is tested every quarter [1]." (the anchor adds: in an isolated staging account)
        ("cite-greedy", "KEYS-ENC-4", 0),  # "… kept in a disabled state for 7 years [1]." (… so archived data …)
        ("quote-sampled", "VULN-PATCH-1", 0),  # "Within 7 days [1]." to "Within how many days must …?"
    ],
)
def test_an_answer_that_gives_what_the_question_asks_is_correct_and_supported(runs, key):
    run = runs[key]
    assert run["correct"], run["why"]
    assert run["metrics"]["fully_grounded"] == 1


def test_the_why_of_another_fact_names_what_the_claim_lacks(runs):
    # "According to passage [1], multi-factor authentication is mandatory for every workforce
    # account, including contractor accounts." to a question on contractors' second factors
    not_correct = [r for r in runs.values() if "states another fact" in r["why"]]
    assert not_correct
    for run in not_correct:
        reason = run["why"].split("states another fact", 1)[1]
        assert reason.startswith(": ") and any(
            bar in reason for bar in ("it lacks", "it adds", "it states none of", "it names", "anchor support")
        ), run["why"]


def test_an_acronym_its_cited_passage_does_not_write_is_hallucinated(runs):
    # "According to passage [3], the PM of the IT team performs privileged access to production,
    # AWS administrator roles, and the customer database." — passage 3 never writes AWS
    run = runs[("according-greedy", "AR-PRIV-2", 0)]
    assert "AWS" in claim(run)["hallucinated"]
    assert claim(run)["grounding"] != "supported"
