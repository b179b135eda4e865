"""A question row's metric means: a compact read-only mapping that reads as the dict it replaces."""

import math
import pickle
import tracemalloc

import pytest

from ragaudit.core.means import Means
from ragaudit.core.model import Lambda, Question, QuestionStats

NAMES = [f"metric_{i}" for i in range(20)]


def means_dict(i: int) -> dict:
    return {name: (None if (i + k) % 7 == 0 else (i * 31 + k) / 97) for k, name in enumerate(NAMES)}


def test_means_read_as_the_dict_they_were_built_from():
    plain = {"coverage": 0.5, "delta_s": None, "correct": 1.0, "odd": float("nan"), "zero": 0.0}
    means = Means(plain)
    assert list(means) == list(plain) and len(means) == 5
    assert means["delta_s"] is None and means["zero"] == 0.0 and math.isnan(means["odd"])
    assert means.get("absent") is None and means.get("absent", 3) == 3 and "coverage" in means
    assert means.get("delta_s", 3) is None and means.get("zero", 3) == 0.0 and means.get("coverage") == 0.5
    with pytest.raises(KeyError):
        means["absent"]
    assert {k: v for k, v in means.items() if k != "odd"} == {k: v for k, v in plain.items() if k != "odd"}
    assert Means([("b", 2.0), ("a", None)]) == {"b": 2.0, "a": None} and Means() == {}
    again = pickle.loads(pickle.dumps(means))
    assert list(again.items())[:3] == list(plain.items())[:3] and math.isnan(again["odd"])


def test_a_question_holds_its_means_compactly_and_writes_them_as_a_dict():
    row = Question(
        pipeline="p",
        qid="q",
        doc_id=None,
        section_id=None,
        question=None,
        errored=0,
        correct=1,
        lam=Lambda("convergent", "→", 0.9, 0.0),
        metrics=means_dict(3),
        stats=QuestionStats(runs=1, correct=1),
    )
    assert isinstance(row.metrics, Means) and row.metrics == means_dict(3)
    written = row.to_json()["metrics"]
    assert type(written) is dict and list(written.items()) == list(means_dict(3).items())


def test_rows_of_the_same_metrics_share_their_names_and_hold_under_half_the_dicts_bytes():
    def held(make) -> float:
        """Bytes a row holds: the growth from 2,000 rows to 4,000 (the interpreter's free lists of
        tuples and floats hold a constant that cancels out)."""
        tracemalloc.start()
        kept = [make(means_dict(i)) for i in range(2_000)]
        first = tracemalloc.get_traced_memory()[0]
        kept += [make(means_dict(i)) for i in range(2_000, 4_000)]
        size = (tracemalloc.get_traced_memory()[0] - first) / 2_000
        tracemalloc.stop()
        return size

    rows = [Means(means_dict(i)) for i in range(3)]
    assert rows[0]._index is rows[1]._index is rows[2]._index
    # the dicts' floats and tables against one array of doubles a row
    assert held(Means) < held(dict) / 2.2
