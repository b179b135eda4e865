import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import RegexReads, shared_path

from ragaudit.checks.metrics import support
from ragaudit.checks.metrics.embed import HashingEncoder
from ragaudit.checks.metrics.support import (
    FEATURES,
    SupportScorer,
    clean,
    feature_rows,
    load_params,
    support_score,
    support_scores,
    texts_to_encode,
)
from ragaudit.core import text

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
    pairs = [
        (KEYS, KEYS_EVIDENCE),
        (KEYS, []),
        (KEYS, ["", "  "]),
        ("[3]", KEYS_EVIDENCE),
        ("The cafeteria serves soup on Fridays.", KEYS_EVIDENCE),
    ]
    scores = scorer.score_many(pairs)
    assert scores.shape == (5,) and np.all((scores >= 0) & (scores <= 1))
    assert scores[1] == scores[2] == scores[3] == 0.0
    assert scores[0] > scores[4]
    assert scorer.score(KEYS, KEYS_EVIDENCE) == pytest.approx(scores[0])


def test_score_many_encodes_each_distinct_text_once_longest_first():
    encoder = CountingEncoder()
    scorer = SupportScorer(encoder)
    long_evidence = [" ".join(f"Clause {i} says keys are rotated every {i} months." for i in range(1, 9))]
    pairs = [
        (KEYS, KEYS_EVIDENCE),
        (KEYS, KEYS_EVIDENCE),
        ("Keys rotate yearly.", KEYS_EVIDENCE),
        ("Keys rotate every 3 months.", long_evidence),
        (KEYS, []),
    ]
    scorer.score_many(pairs)
    (sent,) = encoder.calls
    assert len(sent) == len(set(sent))
    assert [len(t) for t in sent] == sorted((len(t) for t in sent), reverse=True)
    assert sent == texts_to_encode(pairs)
    # what is sent is exactly what the features read: every segment, passage, sentence and chunk
    assert {KEYS, "Keys rotate yearly.", clean(long_evidence[0])} <= set(sent)
    assert {" ".join(long_evidence[0].split()[:24])} <= set(sent)


def test_number_recall_reads_units_and_identifiers():
    rows = feature_rows(
        [
            ("Keys rotate every 12 weeks.", ["Keys rotate every 12 days."]),
            ("FIDO2 keys rotate every 12 days.", ["FIDO7 keys rotate every 12 days."]),
            ("FIDO2 keys rotate every twelve days.", ["FIDO2 keys rotate every 12 days."]),
        ],
        HashingEncoder(),
    )
    assert [r["number_recall"] for r in rows] == [0.0, 0.5, 1.0]


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
    assert support_scores([(KEYS, []), ("", KEYS_EVIDENCE), ("[3]", [" "])]) == [0.0, 0.0, 0.0]
    assert support_scores([]) == []


# ---------------------------------------------------------------- shipped parameters


def test_shipped_params_match_the_code():
    params = load_params()
    assert params["encoder"] == "all-MiniLM-L6-v2"
    assert set(params["features"]) <= set(FEATURES)
    assert len(params["features"]) == len(params["mean"]) == len(params["scale"]) == len(params["weights"])
    assert all(w >= 0 for w in params["weights"]) and params["slope"] > 0  # monotone in every feature
    assert params["training"]["folds"] >= 5 and 0.5 < params["training"]["nested_cv_auroc"] <= 1
    assert params["training"]["choice"].startswith("leave-one-field-out")
    assert 0.5 < params["training"]["field_cv"]["claim_weighted_auroc"] <= 1


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


def test_leave_one_field_out_tests_each_field_on_a_model_trained_without_it():
    bench = _bench()
    y = np.array([1, 0, 1, 0, 1, 1, 0, 1, 1])
    fields = np.array(["a"] * 4 + ["b"] * 3 + ["c"] * 2)
    fixed = np.array([0.9, 0.1, 0.4, 0.6, 0.8, 0.3, 0.5, 0.2, 0.7])

    def scores(train, test):
        assert not set(fields[train]) & set(fields[test]) and len(train) + len(test) == len(y)
        return fixed[test]

    per_field = bench.field_aurocs(scores, y, fields, np.arange(len(y)))
    # a: positives 0.9, 0.4 against negatives 0.1, 0.6 win 3 of 4 pairs; b: 0.8, 0.3 against 0.5 win 1 of 2;
    # c has no negative, so no AUROC
    assert per_field == {"a": (4, 0.75), "b": (3, 0.5)}
    assert bench.summarise(per_field) == pytest.approx(((4 * 0.75 + 3 * 0.5) / 7, 0.625))


@pytest.mark.shared
def test_expertqa_claims_carry_their_field():
    claims = _bench().load_claims(shared_path("expertqa", "rand_val.jsonl"))
    fields = {c.field for c in claims}
    assert len(fields) == 24 and "Healthcare / Medicine" in fields and "unknown" not in fields


def test_label_check_counts_disagreeing_labels():
    F = {
        "word_recall": np.array([1.0, 0.95, 0.9, 0.5, 1.0]),
        "bigram_recall": np.array([0.9, 0.7, 0.8, 0.1, 0.9]),
        "number_recall": np.array([1.0, 1.0, 1.0, 1.0, 0.5]),
        "cos_max": np.array([0.9, 0.8, 0.35, 0.2, 0.3]),
    }
    y = np.array([1, 0, 0, 1, 0])
    copied, unrelated = _bench().label_check(F, y)
    assert ": 3, of which 2 labelled Partial/Incomplete (67%; 60% of all claims)" in copied
    assert ": 3, of which 1 labelled Complete (33%)" in unrelated


@pytest.mark.shared
def test_expertqa_claims_are_read_as_documented():
    bench = _bench()
    claims = bench.load_claims(shared_path("expertqa", "rand_val.jsonl"))
    assert len(claims) == 741 and sum(c.label for c in claims) == 534
    assert all(
        c.passages and not any(p.startswith("[") and "http" in p.split("\n")[0] for p in c.passages) for c in claims
    )


# ---------------------------------------------------------------- the real model


@pytest.mark.model
def test_real_model_prefers_the_supported_claim():
    scorer = SupportScorer()
    evidence = [
        "Hardware security keys must be rotated every 12 months. Administrators keep two registered "
        "keys. Lost keys are reported to the service desk within one day."
    ]
    supported, unrelated = scorer.score_many(
        [
            ("Hardware keys are rotated every 12 months [1].", evidence),
            ("The cafeteria serves tomato soup on Fridays [1].", evidence),
        ]
    )
    assert supported > 0.5 > unrelated
    wrong_number, unknown_name = scorer.score_many(
        [
            ("Hardware keys are rotated every 6 months [1].", evidence),
            ("Hardware keys are rotated every 12 months by Microsoft [1].", evidence),
        ]
    )
    assert wrong_number < supported and unknown_name < supported
    assert support.support_score("Hardware keys are rotated every 12 months [1].", evidence) == pytest.approx(supported)
    assert support.support_scores(
        [
            ("Hardware keys are rotated every 12 months [1].", evidence),
            ("Hardware keys are rotated every 6 months [1].", evidence),
        ]
    ) == pytest.approx([supported, wrong_number])


def test_segments_citing_one_text_read_it_once(monkeypatch):
    """The features of a segment read its cited texts' words, bigrams and windows: worked out once
    per cited texts, however many segments of an answer cite them, not once per segment."""
    reads = RegexReads(monkeypatch, text)
    evidence = [" ".join(f"Clause {i} says hardware keys are rotated every {i} months." for i in range(400))]
    segments = [f"Hardware keys are rotated every {i} months by the team." for i in range(20)]

    def read(pairs) -> int:
        for cached in (support._evidence, text._line_sentences, text._units, text.names):
            cached.cache_clear()  # read here, not remembered from another test
        before = reads.chars
        feature_rows(pairs, HashingEncoder())
        return reads.chars - before

    one = read([(segments[0], evidence)])
    twenty = read([(s, evidence) for s in segments])
    assert one > 10 * len(evidence[0])  # the evidence is read whole ...
    assert twenty - one <= 19 * 100 * len(segments[0])  # ... once: each further segment reads itself
