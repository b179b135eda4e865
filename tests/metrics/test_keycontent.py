"""The gold anchor's key content, and whether a claim states it or conflicts with it."""

import numpy as np
import pytest
from helpers import ROOT

from ragaudit.checks.metrics.keycontent import WordVectors, clauses, closest_to_anchor, key_content, stated

ANCHOR = "Administrator hardware keys are rotated every 12 months by the Security team."
QUESTION = "How often must administrator hardware keys be rotated?"


def test_the_key_is_what_the_anchor_adds_to_the_question():
    key = key_content(ANCHOR, QUESTION)
    assert [m.surface for m in key.mentions] == ["12 months"]
    assert set(key.names) == {"security"}  # capitalised inside the sentence: a name
    assert "team" in key.forms and "rotated" not in key.forms and "keys" not in key.forms


def test_a_reference_answer_picks_the_part_of_the_anchor_that_answers():
    key = key_content(ANCHOR, QUESTION, "Every 12 months.")
    assert [m.surface for m in key.mentions] == ["12 months"] and key.words == () and key.names == ()
    # a reference answer that shares nothing with the anchor leaves the anchor's own key
    assert key_content(ANCHOR, QUESTION, "Regularly.") == key_content(ANCHOR, QUESTION)
    # "yearly" is a period of 12 months: it shares the anchor's quantity
    assert [m.key for m in key_content(ANCHOR, QUESTION, "Yearly.").mentions] == ["1 year"]


def test_recall_and_precision():
    key = key_content(ANCHOR, QUESTION)
    exact = stated("Administrator hardware keys are rotated every 12 months by the Security team.", key)
    assert exact.share == 1.0 and exact.drawn == 1.0 and exact.missing == () and exact.conflicts == ()
    partial = stated("They are rotated every 12 months.", key)
    assert partial.missing == ("security", "team") and partial.share == pytest.approx(1 / 3)
    # the words of the claim beyond the question all come from the anchor
    assert partial.drawn == 1.0
    other = stated("Lost keys must be reported to the help desk within 4 hours.", key)
    assert other.share == 0.0 and other.drawn == 0.0


def test_precision_is_the_best_clause_so_a_merged_neighbour_sentence_costs_nothing():
    key = key_content(ANCHOR, QUESTION)
    merged = "The Security team rotates them every 12 months, and lost keys are reported within 4 hours."
    assert clauses(merged)[1:] == [
        "The Security team rotates them every 12 months",
        "lost keys are reported within 4 hours.",
    ]
    assert stated(merged, key).drawn == 1.0
    # a relative clause after a comma is a statement of its own too ("X, which Y")
    related = "The Security team rotates them every 12 months, which is common in the industry."
    assert clauses(related)[1:] == ["The Security team rotates them every 12 months", "is common in the industry."]
    assert stated(related, key).drawn == 1.0


def test_a_quantity_the_question_holds_is_not_the_claims_own_content():
    # SQuAD's traveling salesman question names "the 15 largest cities"; an answer that restates the
    # 15 and invents an operation on the anchor's 2000 draws 1 of its 3 own items from the anchor
    # (2000 kilometres; not calculated, dividing), not 2 of 4
    anchor = (
        "For example, the decision version of the traveling salesman problem asks whether there is a route of "
        "at most 2000 kilometres passing through all of Germany's 15 largest cities."
    )
    question = (
        "By how many kilometers does the traveling salesman problem seek to classify a route between the 15 "
        "largest cities in Germany?"
    )
    key = key_content(anchor, question, "2000")
    invented = stated("There is a route that can be calculated by dividing 2000 kilometres by 15.", key)
    assert invented.share == 1.0
    assert invented.drawn == pytest.approx(1 / 3)
    assert set(invented.added) == {"calculated", "dividing"}
    # the same claim without the operation draws all its own content from the anchor
    assert stated("There is a route of at most 2000 kilometres through the 15 cities.", key).drawn == 1.0


def test_numbers_match_by_value_and_unit_names_and_words_by_stem():
    key = key_content("Passwords must have at least fourteen characters.", "How long must passwords be?")
    assert stated("A password needs 14 characters at least.", key).missing == ()


def test_similar_words_match_through_the_embedding_model():
    class Two:  # "promptly" and "quickly" alike, everything else orthogonal
        model_id = "two"

        def encode(self, texts):
            out = np.zeros((len(texts), len(texts) + 2), dtype=np.float32)
            for i, t in enumerate(texts):
                out[i, 0 if t in ("promptly", "quickly") else i + 2] = 1.0
            return out

    key = key_content("Lost keys are reported promptly.", "How are lost keys reported?")
    vectors = WordVectors(Two())
    vectors.prepare(["promptly", "quickly", "reported"])
    assert stated("Lost keys are reported quickly.", key).missing == ("promptly",)
    assert stated("Lost keys are reported quickly.", key, vectors).missing == ()


def test_a_rival_quantity_of_the_same_unit_conflicts():
    key = key_content(ANCHOR, QUESTION)
    assert stated("Administrator hardware keys are rotated every 14 months.", key).conflicts == ("14 months",)
    # another unit is another fact, not a rival value
    assert stated("Administrator hardware keys are rotated within 14 days.", key).conflicts == ()
    # a claim closer to another sentence of its cited text states that sentence's fact: no conflict
    assert stated("Standard keys are replaced every 36 months.", key, about=False).conflicts == ()


def test_closest_to_anchor():
    cited = "Standard keys are replaced every 36 months. " + ANCHOR
    assert closest_to_anchor("Administrator keys are rotated every 14 months.", ANCHOR, [cited])
    assert not closest_to_anchor("Standard keys are replaced every 36 months.", ANCHOR, [cited])


def test_a_negated_statement_contradicts_but_a_comparison_does_not():
    from ragaudit.checks.metrics.contradiction import contradiction

    anchor = "SMS codes are accepted as a second factor."
    assert contradiction("SMS codes are not accepted as a second factor.", [anchor]).kind == "negation"
    assert contradiction("SMS codes are accepted as a second factor.", [anchor]) is None
    assert contradiction("Keys are rotated no later than 12 months.", ["Keys are rotated within 12 months."]) is None


def test_claims_weighed_against_one_cited_text_read_it_once(monkeypatch):
    """Whether a claim is the anchor's statement reads every sentence of its cited texts: their
    words are read once per text, not once per claim."""
    from helpers import RegexReads

    from ragaudit.checks.metrics import keycontent
    from ragaudit.core import text

    reads = RegexReads(monkeypatch, text)
    cited = " ".join(f"Clause {i} says hardware keys are rotated every {i} months." for i in range(400))
    claims = [f"Hardware keys are rotated every {i} weeks." for i in range(20)]

    def read(claims: list[str]) -> int:
        for cached in (keycontent._statements, text._line_sentences):
            cached.cache_clear()  # read here, not remembered from another test
        before = reads.chars
        for claim in claims:
            closest_to_anchor(claim, ANCHOR, [cited])
        return reads.chars - before

    one, twenty = read(claims[:1]), read(claims)
    assert one > 2 * len(cited)  # the cited text is read whole ...
    assert twenty - one <= 19 * 100 * len(claims[0])  # ... once: each further claim reads itself


def test_a_period_in_words_against_another_in_the_anchor_conflicts():
    # a real recorded answer (bench/data/llm, SmolLM2 over the handbook): "According to passage [1],
    # a manager is required to perform annual access reviews, which is a requirement for all
    # employees." where the anchor says managers review access every quarter
    anchor = "Managers review the application access of their direct reports every quarter."
    question = "Who reviews the application access of direct reports, and how often?"
    claim = "According to passage [1], a manager is required to perform annual access reviews."
    recorded = (ROOT / "bench" / "data" / "llm" / "handbook-smollm2-according-sampled.jsonl").read_text(
        encoding="utf-8"
    )
    assert claim.rstrip(".") in recorded
    key = key_content(anchor, question, "Managers, every quarter.")
    assert stated(claim, key).conflicts == ("annual",)
    assert stated("Managers review it every three months.", key).conflicts == ()
