import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_path
from hypothesis import given
from hypothesis import strategies as st

from ragaudit.metrics import support
from ragaudit.metrics.embed import HashingEncoder
from ragaudit.metrics.support import (
    FEATURES, SupportScorer, clean, feature_rows, hallucinated_numbers, load_params, normalise_number,
    support_score,
)

ROOT = Path(__file__).resolve().parents[2]
KEYS = "Hardware keys are rotated every 12 months by the security team."
KEYS_EVIDENCE = ["Policy 4.2. Hardware keys are rotated every 12 months. The security team keeps two registered keys."]


def _bench():
    if "calibrate_support" not in sys.modules:
        spec = importlib.util.spec_from_file_location("calibrate_support", ROOT / "bench" / "calibrate_support.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
        spec.loader.exec_module(module)
    return sys.modules["calibrate_support"]


# ---------------------------------------------------------------- numbers

@pytest.mark.parametrize("written, canonical", [
    ("$1,499", "1499"), ("1499", "1499"), ("1499.0", "1499"), ("1,499.00", "1499"), ("€2,000,000", "2000000"),
    ("12%", "12"), ("12 %", "12"), ("0.50", "0.5"), (".5", "0.5"), ("007", "7"), ("2019", "2019"),
    ("1.5 million", "1500000"), ("3 Billion", "3000000000"), ("21st", "21"), ("1990s", "1990"),
    ("3.10.2", "3.10.2"), ("-18", "18"),
])
def test_normalise_number(written, canonical):
    assert normalise_number(written) == canonical


def test_normalise_number_without_a_number_is_refused():
    with pytest.raises(ValueError, match="must contain a number"):
        normalise_number("twelve")


@given(st.integers(min_value=0, max_value=10**12))
def test_written_forms_of_one_integer_agree(n):
    forms = {f"{n}", f"{n:,}", f"${n:,}", f"{n}.0", f"{n:,}.00", f"{n}%", f"{n} %"}
    assert {normalise_number(f) for f in forms} == {str(n)}
    assert hallucinated_numbers(f"It was ${n:,} [2].", [f"The figure: {n}.0 in total"]) == []


@pytest.mark.parametrize("segment, cited, expected", [
    ("The laptop costs $1,499 [3].", ["Price: 1499.0 USD"], []),
    ("The laptop costs $1,499 [3].", ["Price: 1,399 USD"], ["$1,499"]),
    ("Sales grew 12% in 2019 [1][2].", ["sales grew 12 % during 2019"], []),
    ("Sales grew 12% in 2019 [1].", ["sales grew 12 % during 2018"], ["2019"]),
    ("Keys rotate yearly [pol-keys-1] [Data: Reports (7, 9)] [1, 2].", ["Keys rotate yearly."], []),
    ("Founded in 1998.", ["It was founded in the late nineties."], ["1998"]),
    ("Four of 5 experts agree.", ["four in five experts"], []),
    ("It has 4 wheels.", ["It has four wheels."], []),
    ("COVID-19 spread; H2O boils; MP3 files.", ["nothing numeric here"], []),
    ("It has 1.5 million users.", ["1,500,000 users"], []),
    ("It has 1,500,000 users.", ["1.5 million users"], []),
    ("Between 2010-2015 prices doubled.", ["from 2010 to 2015"], []),
    ("Between 2010-2015 prices doubled.", ["from 2010 to 2014"], ["2015"]),
    ("1. Rotate keys every 90 days.", ["Rotate keys every 90 days."], []),
    ("It was 42, then 42.0 again.", ["nothing"], ["42"]),
    ("Stored at -18°C for 1 year.", ["stored at −18 °C for up to one year"], []),
    ("Version 3.10.2, not 3.10.", ["3.10.2 is current"], ["3.10"]),
    ("Rotate every 90 days.", [], ["90"]),
    ("No numbers at all.", ["12 34"], []),
])
def test_hallucinated_numbers(segment, cited, expected):
    assert hallucinated_numbers(segment, cited) == expected


def test_clean_drops_markers_and_markup():
    assert clean("**Keys** are rotated [3][pol-1].\n- yearly [Data: Reports (2)]") == "Keys are rotated . yearly"


# ---------------------------------------------------------------- scorer (fake encoder)

class CountingEncoder(HashingEncoder):
    def __init__(self):
        super().__init__()
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return super().encode(texts)


def test_scores_are_probabilities_and_empty_evidence_scores_zero():
    scorer = SupportScorer(HashingEncoder())
    pairs = [(KEYS, KEYS_EVIDENCE), (KEYS, []), (KEYS, ["", "  "]), ("[3]", KEYS_EVIDENCE),
             ("The cafeteria serves soup on Fridays.", KEYS_EVIDENCE)]
    scores = scorer.score_many(pairs)
    assert scores.shape == (5,) and np.all((scores >= 0) & (scores <= 1))
    assert scores[1] == scores[2] == scores[3] == 0.0
    assert scores[0] > scores[4]
    assert scorer.score(KEYS, KEYS_EVIDENCE) == pytest.approx(scores[0])


def test_score_many_encodes_each_distinct_text_once():
    encoder = CountingEncoder()
    scorer = SupportScorer(encoder)
    scorer.score_many([(KEYS, KEYS_EVIDENCE), (KEYS, KEYS_EVIDENCE), ("Keys rotate yearly.", KEYS_EVIDENCE)])
    assert len(encoder.calls) == 1
    assert len(encoder.calls[0]) == len(set(encoder.calls[0]))


def test_nothing_is_encoded_when_every_pair_is_empty():
    encoder = CountingEncoder()
    assert SupportScorer(encoder).score_many([(KEYS, []), ("", KEYS_EVIDENCE)]).tolist() == [0.0, 0.0]
    assert encoder.calls == []


def test_order_of_cited_texts_does_not_matter():
    scorer = SupportScorer(HashingEncoder())
    cited = [*KEYS_EVIDENCE, "Passwords are rotated every 90 days. Reuse is blocked."]
    assert scorer.score(KEYS, cited) == pytest.approx(scorer.score(KEYS, cited[::-1]))


def test_every_feature_is_computed():
    (row,) = feature_rows([(KEYS, KEYS_EVIDENCE)], HashingEncoder())
    assert set(row) == set(FEATURES)
    assert row["number_recall"] == 1.0 and row["caps_recall"] == 1.0


def test_module_level_support_score_of_empty_evidence_is_zero():
    assert support_score(KEYS, []) == 0.0


# ---------------------------------------------------------------- shipped parameters

def test_shipped_params_match_the_code():
    params = load_params()
    assert params["encoder"] == "all-MiniLM-L6-v2"
    assert set(params["features"]) <= set(FEATURES)
    assert len(params["features"]) == len(params["mean"]) == len(params["scale"]) == len(params["weights"])
    assert all(w >= 0 for w in params["weights"]) and params["slope"] > 0  # monotone in every feature
    assert params["training"]["folds"] >= 5 and 0.5 < params["training"]["nested_cv_auroc"] <= 1


def test_malformed_params_are_refused(tmp_path):
    params = load_params()
    params["features"] = [*params["features"][:-1], "shoe_size"]
    path = tmp_path / "params.json"
    path.write_text(json.dumps(params))
    with pytest.raises(ValueError, match="expected features among"):
        load_params(path)


def test_calibration_folds_keep_each_question_in_one_fold():
    bench = _bench()
    groups = [f"q{i % 17}" for i in range(200)]
    folds = bench.group_folds(groups, 5, seed=0)
    assert np.array_equal(folds, bench.group_folds(groups, 5, seed=0))
    assert all(len({f for g, f in zip(groups, folds) if g == q}) == 1 for q in set(groups))
    assert set(folds) == set(range(5))


def test_calibration_comparison_tolerates_last_digit_noise():
    bench = _bench()
    assert bench._differences({"a": [1.0, 2.0], "b": "x"}, {"a": [1.00001, 2.0], "b": "x"}) == []
    assert bench._differences({"a": [1.0]}, {"a": [1.1]}) == ["$.a[0]: 1.0 != 1.1"]


def test_label_check_counts_disagreeing_labels():
    F = {"word_recall": np.array([1.0, 0.95, 0.9, 0.5, 1.0]),
         "bigram_recall": np.array([0.9, 0.7, 0.8, 0.1, 0.9]),
         "number_recall": np.array([1.0, 1.0, 1.0, 1.0, 0.5]),
         "cos_max": np.array([0.9, 0.8, 0.35, 0.2, 0.3])}
    y = np.array([1, 0, 0, 1, 0])
    copied, unrelated = _bench().label_check(F, y)
    assert ": 3, of which 2 labelled Partial/Incomplete (67%; 60% of all claims)" in copied
    assert ": 3, of which 1 labelled Complete (33%)" in unrelated


@pytest.mark.shared
def test_expertqa_claims_are_read_as_documented():
    bench = _bench()
    claims = bench.load_claims(shared_path("expertqa", "rand_val.jsonl"))
    assert len(claims) == 741 and sum(c.label for c in claims) == 534
    assert all(c.passages and not any(p.startswith("[") and "http" in p.split("\n")[0] for p in c.passages)
               for c in claims)


# ---------------------------------------------------------------- the real model

@pytest.mark.model
def test_real_model_prefers_the_supported_claim():
    scorer = SupportScorer()
    evidence = ["Hardware security keys must be rotated every 12 months. Administrators keep two registered "
                "keys. Lost keys are reported to the service desk within one day."]
    supported, unrelated = scorer.score_many([
        ("Hardware keys are rotated every 12 months [1].", evidence),
        ("The cafeteria serves tomato soup on Fridays [1].", evidence)])
    assert supported > 0.5 > unrelated
    wrong_number, unknown_name = scorer.score_many([
        ("Hardware keys are rotated every 6 months [1].", evidence),
        ("Hardware keys are rotated every 12 months by Microsoft [1].", evidence)])
    assert wrong_number < supported and unknown_name < supported
    assert support.support_score("Hardware keys are rotated every 12 months [1].", evidence) == pytest.approx(supported)
