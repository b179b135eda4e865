"""The memos of the per-run path never change a result: cold, warm or evicting, a run scores the same."""

import copy
import json
from itertools import product

import pytest
from helpers import ITEM, KEYS_SENTENCE, POLICIES

from ragaudit.checks.metrics import memo
from ragaudit.checks.metrics.embed import HashingEncoder
from ragaudit.checks.metrics.evaluate import Settings, same_scores, score_runs
from ragaudit.checks.metrics.support import SupportScorer
from ragaudit.core.types import Anchor, GoldItem, Span
from ragaudit.io.traces import parse_trace

ADMINS = "Administrators keep two registered keys."
KEYS_AT = POLICIES.index(KEYS_SENTENCE)
ADMINS_AT = POLICIES.index(ADMINS)
# a second question over the same section: the same claims judged against another key
ADMIN_ITEM = GoldItem(
    "SEC-ADMIN-1",
    "How many registered keys must administrators keep?",
    "policies",
    "policies/security/keys",
    Anchor(Span(ADMINS_AT, ADMINS_AT + len(ADMINS)), ADMINS),
)
GOLD = {ITEM.qid: ITEM, ADMIN_ITEM.qid: ADMIN_ITEM}
SAYINGS = [
    "Hardware keys are rotated every 12 months.",
    "Hardware keys are rotated every 16 months.",  # a rival quantity: a conflict
    "Hardware keys are never rotated.",  # a negation
    "Keys rotate yearly, and administrators keep two registered keys.",
    "Administrators keep two registered keys.",
    "Administrators keep three registered keys.",
    "The cafeteria serves soup on Fridays.",
]


def runs(valid_trace) -> list:
    """Runs of both questions over the keys section: each saying, under two seeds and two
    variants, so that every text, claim and key comes back."""
    section = POLICIES[KEYS_AT : ADMINS_AT + len(ADMINS)]
    out = []
    for item, saying, variant, seed in product(GOLD.values(), SAYINGS, (0, 1), (1, 2)):
        trace = copy.deepcopy(valid_trace)
        trace["retrieved"][0].update(
            offsets={"start": KEYS_AT, "end": KEYS_AT + len(section), "unit": "char"},
            text=section,
            tokens=len(section.split()),
        )
        trace.update(qid=item.qid, query=item.question, variant=variant, seed=seed)
        trace["answer"] = {
            "text": f"{saying} [pol-keys-1]",
            "segments": [{"seg": 1, "text": saying, "citations": ["pol-keys-1"]}],
        }
        out.append(parse_trace(trace))
    return out


def scored(traces, corpus, encoder) -> str:
    """Every row and note of the runs, as text (NaN included, which never equals itself)."""
    result = score_runs(traces, GOLD, corpus, encoder, Settings(), SupportScorer(encoder))
    return json.dumps([result.runs, [n.to_dict() for n in result.notes]], sort_keys=True, default=repr)


def test_a_run_scores_the_same_with_a_cold_a_warm_and_an_evicting_memo(valid_trace, corpus, monkeypatch):
    traces = runs(valid_trace)
    encoder = HashingEncoder()
    with monkeypatch.context() as none:  # no memo at all: every value computed where it is asked for
        none.setattr(memo.Memo, "get", lambda self, key, compute, *args: compute(*args))
        unremembered = scored(traces, corpus, encoder)
    memo.forget()
    first = scored(traces, corpus, encoder)
    assert first == unremembered
    hits = {id(m): m.hits for m in memo.every()}
    warm = scored(traces, corpus, encoder)
    # the second pass is answered from the memos: the claims, their statements of the key, their closest
    # sentences; of each run scored (the seeds of a run that differ in nothing else are scored once)
    scored_runs = len({same_scores(t) for t in traces})
    assert scored_runs == len(traces) // 2
    assert sum(m.hits - hits.get(id(m), 0) for m in memo.every()) >= 3 * scored_runs
    assert warm == first
    # and one by one, as batches of one run: a question's runs recur across batches
    assert "".join(scored([t], corpus, encoder) for t in traces) == "".join(
        scored([t], corpus, HashingEncoder()) for t in traces
    )

    memo.forget()
    for m in memo.every():
        monkeypatch.setattr(m, "size", 1)  # every memo forgets all but its last value
    monkeypatch.setattr("ragaudit.checks.metrics.embed.GRAM_CODES", 1)
    evicting = scored(traces, corpus, encoder)
    assert max(len(m) for m in memo.every()) <= 1
    assert evicting == first
    assert scored(list(reversed(traces)), corpus, encoder) == scored(list(reversed(traces)), corpus, HashingEncoder())


def test_a_memo_forgets_the_least_recently_used_value_first():
    computed = []

    def square(n: int) -> int:
        computed.append(n)
        return n * n

    m: memo.Memo[int] = memo.Memo(2)
    assert [m.get(n, square, n) for n in (1, 2, 1, 3, 1, 2)] == [1, 4, 1, 9, 1, 4]
    # 1 and 2 computed; 1 used again, so 3 pushes 2 out; 1 still there; 2 computed again
    assert computed == [1, 2, 3, 2]
    assert len(m) == 2 and (m.hits, m.misses) == (2, 4)
    with pytest.raises(ValueError, match="at least 1"):
        memo.Memo(0)


def test_each_encoder_has_memos_of_its_own():
    a, b = HashingEncoder(), HashingEncoder(dim=64)
    assert memo.memo_of(a, "stated", 8) is memo.memo_of(a, "stated", 8)
    assert memo.memo_of(a, "stated", 8) is not memo.memo_of(b, "stated", 8)
    assert memo.memo_of(None, "stated", 8) is memo.memo_of(None, "stated", 8)
    unowned = (1, 2)  # no weak reference to a tuple: a memo for the one call
    assert memo.memo_of(unowned, "stated", 8) is not memo.memo_of(unowned, "stated", 8)


def test_forgetting_lets_go_of_every_text_cache_and_scores_the_same_after(valid_trace, corpus, tmp_path):
    """Once the runs are scored, `forget` empties the sentence splitter's and the claim checks' caches,
    the vectors an embedding cache holds in memory and the support scores remembered; scoring again
    gives the same rows."""
    from ragaudit.checks.metrics import keycontent, quantities
    from ragaudit.checks.metrics.embed import CachedEncoder
    from ragaudit.checks.metrics.support import Memoized
    from ragaudit.core import text

    traces = runs(valid_trace)
    encoder = CachedEncoder(HashingEncoder(), tmp_path / "vectors.sqlite")
    support = Memoized(SupportScorer(encoder))

    def rows() -> str:
        result = score_runs(traces, GOLD, corpus, encoder, Settings(), support)
        return json.dumps([result.runs, [n.to_dict() for n in result.notes]], sort_keys=True, default=repr)

    first = rows()
    cached = (
        text._line_sentences,
        text._units,
        text.names,
        text._content_stems,
        quantities._scanned,
        keycontent._words,
    )
    assert all(f.cache_info().currsize for f in cached)
    assert encoder._memory and support._memo
    memo.forget()
    assert [f.cache_info().currsize for f in cached] == [0] * len(cached)
    assert not encoder._memory and not support._memo
    assert rows() == first


def test_every_memo_of_the_per_run_path_holds_at_most_size_entries(valid_trace, corpus):
    """A question's runs share what they read within a few hundred entries; no memo grows with the
    audit's distinct questions beyond `memo.SIZE`."""
    memo.forget()
    scored(runs(valid_trace), corpus, HashingEncoder())  # every memo of the path is made by now
    assert any(len(m) for m in memo.every())
    assert max(m.size for m in memo.every()) <= memo.SIZE
