"""The evaluation of whole runs: errored runs count, anchor agreement decides correctness, λ by
section-level css, accept = "any" items, both ΔS readings and the unit_mismatch note."""

import copy
import dataclasses
import json

import numpy as np
import pytest
from helpers import KEYS_SENTENCE, POLICIES, RegexReads

from ragaudit.checks.metrics import memo
from ragaudit.checks.metrics.embed import HashingEncoder
from ragaudit.checks.metrics.evaluate import Settings, evaluate, score_runs
from ragaudit.checks.metrics.registry import DISTANCES, RATES
from ragaudit.checks.metrics.support import SupportScorer
from ragaudit.core.types import Anchor, ExpectedCitation, GoldItem, Span
from ragaudit.io.traces import parse_trace

ENCODER = HashingEncoder()
ADMINS = "Administrators keep two registered keys."
SEV1 = "A SEV1 page must be acknowledged within 5 minutes."
KEYS_AT = POLICIES.index(KEYS_SENTENCE)
ITEM = GoldItem(
    "SEC-KEYS-1",
    "How often are hardware keys rotated?",
    "policies",
    "policies/security/keys",
    Anchor(Span(KEYS_AT, KEYS_AT + len(KEYS_SENTENCE)), KEYS_SENTENCE),
    paraphrases=("What is the rotation period for hardware keys?", "When are hardware keys replaced?"),
)


def run(valid_trace, variant=0, seed=1, **changes):
    trace = copy.deepcopy(valid_trace)
    trace.update(variant=variant, seed=seed, query=ITEM.variants[variant], **changes)
    return parse_trace(trace)


def answered(valid_trace, sentence, **kw):
    """The valid trace with its answer stating `sentence`, citing the whole keys section."""
    trace = copy.deepcopy(valid_trace)
    section = POLICIES[KEYS_AT : POLICIES.index(ADMINS) + len(ADMINS)]
    trace["retrieved"][0].update(
        offsets={"start": KEYS_AT, "end": KEYS_AT + len(section), "unit": "char"},
        text=section,
        tokens=len(section.split()),
    )
    trace["answer"] = {
        "text": f"{sentence} [pol-keys-1]",
        "segments": [{"seg": 1, "text": sentence, "citations": ["pol-keys-1"]}],
    }
    return run(trace, **kw)


def evaluated(traces, corpus, item=ITEM, **settings):
    return evaluate(traces, [item], corpus, ENCODER, Settings(**settings), support=SupportScorer(ENCODER))


def every_run(valid_trace, sentence):
    return [answered(valid_trace, sentence, variant=v, seed=s) for v in range(3) for s in (1, 2)]


def test_a_stable_pipeline_is_convergent(valid_trace, corpus):
    ev = evaluated(every_run(valid_trace, KEYS_SENTENCE), corpus)
    question = ev.questions[0]
    assert question.lam.state == "convergent" and question.lam.css == 1.0
    assert all(r["correct"] for r in ev.runs) and "states it" in ev.runs[0]["why"]


def test_the_right_chunk_with_the_wrong_sentence_is_not_correct(valid_trace, corpus):
    ev = evaluated(every_run(valid_trace, ADMINS), corpus)
    assert all(r["metrics"]["citation_match"] == 1.0 for r in ev.runs)  # the citation alone looks right
    assert not any(r["correct"] for r in ev.runs)
    assert ev.questions[0].lam.state == "chaotic"
    assert "no claim states the gold anchor" in ev.runs[0]["why"] and "it lacks 12 months" in ev.runs[0]["why"]


def test_an_answer_with_a_changed_number_is_not_correct_and_hallucinates(valid_trace, corpus):
    ev = evaluated([answered(valid_trace, "Hardware keys are rotated every 16 months.")], corpus)
    r = ev.runs[0]
    assert not r["correct"] and "16 months" in r["why"]
    assert r["metrics"]["hallucinations"] == 1.0 and r["claims"][0]["hallucinated"] == ["16 months"]
    assert r["claims"][0]["anchor"] == "conflicts" and r["claims"][0]["conflicts"] == ["16 months"]


def test_errored_runs_lower_every_rate(valid_trace, corpus):
    good = every_run(valid_trace, KEYS_SENTENCE)[:2]
    failed = [
        run(valid_trace, variant=1, error="TimeoutError: no answer in 30 s", retrieved=[], answer=None),
        run(valid_trace, variant=2, retrieved=[], answer=None),
    ]  # empty citations count as failed too
    clean = evaluated(good, corpus).pipelines["bm25-k5"]
    mixed = evaluated(good + failed, corpus)
    worse = mixed.pipelines["bm25-k5"]
    assert worse.runs == 4 and worse.errored == 2
    for name in RATES:
        assert worse.metrics[name] == pytest.approx(clean.metrics[name] / 2), name
    assert worse.citation_match_rate == 0.5
    assert worse.metrics["delta_s_qr"] == pytest.approx((clean.metrics["delta_s_qr"] * 2 + 2.0) / 4)
    for name in set(DISTANCES) - {"delta_s_gold"}:  # the registry's distances: 1.0 for a failed run
        assert worse.metrics[name] == pytest.approx((clean.metrics[name] * 2 + 2.0) / 4), name
    # but the gold's reads only the question (each variant's own), so a failed run is scored on it
    assert {r["metrics"]["delta_s_gold"] < 1.0 for r in mixed.runs if r["errored"]} == {True}
    assert mixed.questions[0].lam.state == "divergent"
    assert [r["why"].split(":")[0] for r in mixed.runs if r["errored"]] == ["errored", "no citations"]


def test_delta_s_readings(valid_trace, corpus):
    trace = copy.deepcopy(valid_trace)
    trace["answer"]["segments"][0]["citations"] = ["pol-keys-1", "pol-pw-1"]
    trace = parse_trace(trace)
    texts = [p.text for p in trace.retrieved]
    q, *cited = ENCODER.encode([trace.query, *texts])
    joined = ENCODER.encode(["\n\n".join(texts)])[0]
    nearest = evaluate([trace], [ITEM], corpus, ENCODER, Settings(delta_s_reading="nearest")).runs[0]["metrics"]
    join = evaluate([trace], [ITEM], corpus, ENCODER, Settings(delta_s_reading="join")).runs[0]["metrics"]
    assert nearest["delta_s_qr"] == pytest.approx(min(1 - float(c @ q) for c in cited), abs=1e-6)
    assert join["delta_s_qr"] == pytest.approx(1 - float(joined @ q), abs=1e-6)
    assert nearest["delta_s_topk"] == join["delta_s_topk"] == pytest.approx(1 - float(joined @ q), abs=1e-6)


def test_accept_any_matches_one_alternative(valid_trace, corpus):
    on_call = corpus["team/on-call"].text
    sev1 = Span(on_call.index(SEV1), on_call.index(SEV1) + len(SEV1))
    item = GoldItem(
        ITEM.qid,
        "What must happen fast?",
        "policies",
        "policies/security/keys",
        ITEM.anchor,
        expected_citations=(
            ExpectedCitation("policies", ITEM.anchor.span),
            ExpectedCitation("team/on-call", sev1, section_id="on-call/paging"),
        ),
        accept="any",
    )
    trace = copy.deepcopy(valid_trace)
    trace["retrieved"][0].update(
        doc_id="team/on-call",
        section_id="on-call/paging",
        snippet_id="oc-1",
        offsets={"start": sev1.start, "end": sev1.end, "unit": "char"},
        text=SEV1,
        rev=corpus["team/on-call"].rev,
    )
    trace["answer"] = {"text": SEV1, "segments": [{"seg": 1, "text": SEV1, "citations": ["oc-1"]}]}
    trace["query"] = "Which hardware keys must be rotated, and which page acknowledged?"
    r = evaluated([parse_trace(trace)], corpus, item).runs[0]
    m = r["metrics"]
    assert (m["coverage"], m["citation_match"], m["citation_recall"], m["recall@k"]) == (1.0, 1.0, 1.0, 1.0)
    assert r["correct"]  # judged against the text of the alternative it matched
    # and its ΔS against that alternative's: citing it exactly lies no farther than the gold, though
    # the other alternative lies nearer the question
    q, sev1_vec, keys_vec = ENCODER.encode([trace["query"], SEV1, KEYS_SENTENCE])
    assert 1 - float(keys_vec @ q) < 1 - float(sev1_vec @ q)
    assert m["delta_s_gold"] == pytest.approx(1 - float(sev1_vec @ q), abs=1e-6)
    assert m["delta_s_excess"] == 0.0
    m = evaluated([parse_trace(trace)], corpus, dataclasses.replace(item, accept="all")).runs[0]["metrics"]
    assert (m["coverage"], m["citation_recall"]) == (pytest.approx(len(SEV1) / (len(SEV1) + len(KEYS_SENTENCE))), 0.5)


def test_unreconcilable_units_give_null_coverage_and_a_note(valid_trace, corpus):
    trace = copy.deepcopy(valid_trace)
    trace["retrieved"][0].update(offsets={"start": 3, "end": 9, "unit": "token"}, analyzer="custom-bpe")
    trace["index"]["analyzer"] = "custom-bpe"
    trace["retrieved"][1]["analyzer"] = "custom-bpe"
    ev = evaluated([parse_trace(trace)], corpus)
    assert ev.runs[0]["metrics"]["coverage"] is None
    assert [n.code for n in ev.notes] == ["unit_mismatch"] and ev.notes[0].severity == "warning"


def test_errored_runs_score_distance_one_in_every_reading(valid_trace, corpus):
    failed = run(valid_trace, error="boom", retrieved=[], answer=None)
    for reading in ("nearest", "join"):
        m = evaluate([failed], [ITEM], corpus, ENCODER, Settings(delta_s_reading=reading)).runs[0]["metrics"]
        assert m["delta_s_qr"] == m["delta_s_topk"] == m["delta_s_ra"] == 1.0
        assert not np.isnan(m["delta_s_qr"])


def test_a_neighbouring_sentence_merged_in_is_another_fact_not_a_fault(valid_trace, corpus):
    merged = f"{KEYS_SENTENCE.rstrip('.')}, and administrators keep two registered keys."
    ev = evaluated([answered(valid_trace, merged)], corpus)
    r = ev.runs[0]
    assert r["correct"] and r["metrics"]["fully_grounded"] == 1.0, r["why"]
    assert r["claims"][0]["anchor"] == "states" and r["stated_sections"] == [("policies", "policies/security/keys")]


def test_an_added_claim_its_cited_text_does_not_hold_is_ungrounded_but_the_run_stays_correct(valid_trace, corpus):
    ev = evaluated([answered(valid_trace, f"{KEYS_SENTENCE} Lost keys must be reported to the help desk.")], corpus)
    r = ev.runs[0]
    assert r["correct"] and [c["grounding"] for c in r["claims"]] == ["supported", "unsupported"]
    assert r["metrics"]["grounded"] == 0.5 and r["metrics"]["fully_grounded"] == 0.0
    assert ev.questions[0].stats.ungrounded == 1


def test_a_quantity_the_question_gives_is_no_hallucination(valid_trace, corpus):
    trace = answered(valid_trace, "Keys held for 3 years are rotated every 12 months.")
    asked = dataclasses.replace(trace, query="Keys held for 3 years: how often are they rotated?")
    assert evaluated([trace], corpus).runs[0]["claims"][0]["hallucinated"] == ["3 years"]
    assert evaluated([asked], corpus).runs[0]["claims"][0]["hallucinated"] == []


def test_delta_s_excess_compares_statements_with_statements(valid_trace, corpus):
    right = answered(valid_trace, KEYS_SENTENCE)  # cites a chunk holding the gold sentence
    r = evaluated([right], corpus).runs[0]["metrics"]
    assert r["delta_s_excess"] == 0.0 and r["delta_s_gold"] == pytest.approx(
        1 - float(np.prod(ENCODER.encode([right.query, KEYS_SENTENCE]), axis=0).sum()), abs=1e-6
    )
    wrong = copy.deepcopy(valid_trace)
    wrong["answer"]["segments"][0]["citations"] = ["pol-pw-1"]
    wrong["answer"]["text"] = "Passwords are rotated every 90 days [pol-pw-1]."
    w = parse_trace(wrong)
    texts = {p.snippet_id: p.text for p in w.retrieved}
    q, cited, gold = ENCODER.encode([w.query, texts["pol-pw-1"], KEYS_SENTENCE])
    m = evaluated([w], corpus).runs[0]["metrics"]
    assert m["delta_s_excess"] == pytest.approx(max(0.0, (1 - float(cited @ q)) - (1 - float(gold @ q))), abs=1e-6)


def test_a_text_past_the_cap_is_scored_on_its_prefix_and_noted(valid_trace, corpus):
    from ragaudit.checks.metrics.delta_s import SCORED_CHARS

    sentence = "Passwords are rotated every 90 days by the security team. "  # 58 characters
    long = sentence * (2 * SCORED_CHARS // len(sentence))
    assert long[SCORED_CHARS - 1 : SCORED_CHARS + 1].isalpha()  # the limit falls inside a word ...
    expected = long[: long.rindex(" ", 0, SCORED_CHARS)]  # ... so the cut goes back to the space before it

    def with_text(text):
        trace = copy.deepcopy(valid_trace)
        trace["retrieved"][0]["text"] = text
        return parse_trace(trace)

    whole, scored = evaluated([with_text(long)], corpus), evaluated([with_text(expected)], corpus)
    assert whole.runs[0]["metrics"] == scored.runs[0]["metrics"]
    assert [n.code for n in whole.notes] == ["text_truncated"] and not scored.notes
    note = whole.notes[0]
    assert (note.severity, note.path, note.citation) == ("warning", "$.retrieved[0].text", "pol-keys-1")
    assert f"found {len(long):,}" in note.message and f"first {len(expected):,}" in note.message


def test_no_metric_reads_more_of_a_payload_than_the_cap(valid_trace, corpus, monkeypatch):
    """Scoring a payload of three times the cap: the splitter, the word and quantity readers and
    pysbd are never given more than SCORED_CHARS characters at once, and no text past the cap
    reaches the encoder."""
    from ragaudit.checks.metrics import quantities
    from ragaudit.checks.metrics.delta_s import SCORED_CHARS
    from ragaudit.core import text

    for cached in (text._line_sentences, text._units, text.names, quantities._scanned, quantities._covered_by):
        cached.cache_clear()  # read here, not remembered from another test
    readers = [RegexReads(monkeypatch, text), RegexReads(monkeypatch, quantities)]
    given: list[int] = []
    segmenter = text._segmenter()
    monkeypatch.setattr(text, "_segmenter", lambda: _Counting(segmenter, given))
    encoded: list[str] = []
    encoder = HashingEncoder()
    original = encoder.encode
    monkeypatch.setattr(encoder, "encode", lambda texts, **kw: encoded.extend(texts) or original(texts, **kw))

    sentence = "Hardware keys are rotated every 12 months by the security team, e.g. by Dr. Smith. "  # pysbd reads it
    past = "Zebras graze the savanna at 5 am. "
    trace = copy.deepcopy(valid_trace)
    trace["retrieved"][0]["text"] = sentence * (SCORED_CHARS // len(sentence) + 1) + past * (
        2 * SCORED_CHARS // len(past)
    )
    scored = evaluate([parse_trace(trace)], [ITEM], corpus, encoder, Settings(), support=SupportScorer(encoder))
    assert [n.code for n in scored.notes] == ["text_truncated"]
    assert sum(given) >= 0.99 * SCORED_CHARS  # the prefix is read (but the spaces between blocks) ...
    assert max(r.longest for r in readers) <= SCORED_CHARS and max(given) <= SCORED_CHARS  # ... nothing longer
    assert any("Hardware keys" in t for t in encoded) and not any("Zebra" in t for t in encoded)  # nor past it


class _Counting:
    def __init__(self, segmenter, given: list[int]):
        self.segmenter, self.given = segmenter, given

    def processor(self, block: str):
        self.given.append(len(block))
        return self.segmenter.processor(block)


def test_each_run_takes_the_smallest_of_its_distances_whatever_comes_first(monkeypatch):
    from ragaudit.checks.metrics import delta_s

    given = {}  # (query, text) -> distance, NaN among them (a text the encoder gives no direction)

    def pairs(encoder, left, right):
        return np.array([given[(q, t)] for q, t in zip(left, right)])

    monkeypatch.setattr(delta_s, "delta_s_pairs", pairs)
    rng = np.random.default_rng(7)
    queries = [f"q{i}" for i in range(40)]
    cited = [[f"c{i}-{j} says a thing." for j in range(int(rng.integers(0, 4)))] for i in range(40)]
    golds = [[f"g{i}-{j} says a thing." for j in range(int(rng.integers(0, 3)))] for i in range(40)]
    for q, texts, gold in zip(queries, cited, golds):
        for t in [*texts, *gold, "\n\n".join(texts), "top"]:
            given[(q, t)] = float("nan") if rng.random() < 0.2 else float(rng.choice([0.0, 0.25, rng.random()]))
    out = delta_s.delta_s_runs(None, queries, cited, ["top"] * 40, [None] * 40, golds)

    def smallest(values, start):  # one distance after another, as a reader would take them
        best = start
        for d in values:
            best = d if np.isnan(best) else min(best, d)
        return best

    for i, q in enumerate(queries):
        assert np.array_equal(out["delta_s_qr"][i], smallest([given[(q, t)] for t in cited[i]], 1.0), equal_nan=True)
        gold = smallest([given[(q, t)] for t in golds[i]], float("nan"))
        assert np.array_equal(out["delta_s_gold"][i], gold, equal_nan=True)


def _scored_alone(trace, corpus):
    """A run scored in a batch of its own, with nothing remembered from another run."""
    memo.forget()
    return score_runs([trace], {ITEM.qid: ITEM}, corpus, HashingEncoder(), Settings(), SupportScorer(HashingEncoder()))


def test_runs_that_differ_only_where_and_when_they_ran_are_scored_once_and_keep_their_own_seed(
    valid_trace, corpus, monkeypatch
):
    from ragaudit.checks.metrics import delta_s
    from ragaudit.checks.metrics import evaluate as evaluating

    long = "Passwords are rotated every 90 days by the security team. " * (2 * delta_s.SCORED_CHARS // 58)
    base = answered(valid_trace, "Hardware keys are rotated every 12 months.")
    base = dataclasses.replace(base, retrieved=(dataclasses.replace(base.retrieved[0]), *base.retrieved[1:]))
    base.retrieved[1].text = long  # a note on every run: each under its own seed
    seeds = [
        dataclasses.replace(base, seed=s, file="rec.jsonl", line=s, retrieved_at=f"2026-11-2{s}T10:00:00Z")
        for s in (2, 3)
    ]
    rival = answered(valid_trace, "Hardware keys are rotated every 16 months.")
    rival.retrieved[1].text = long
    moved = copy.copy(base.retrieved[0])
    moved.score_norm = 0.5  # any field of a payload counts
    shifted = dataclasses.replace(base, seed=4, retrieved=(moved, *base.retrieved[1:]))
    traces = [base, *seeds, rival, shifted]

    judged = []
    original = evaluating.judge
    monkeypatch.setattr(
        evaluating, "judge", lambda view, *a, **kw: judged.append(view.trace) or original(view, *a, **kw)
    )
    memo.forget()
    batch = score_runs(traces, {ITEM.qid: ITEM}, corpus, ENCODER, Settings(), SupportScorer(ENCODER))
    assert judged == [base, rival, shifted]  # the two other seeds of `base` are scored with it

    monkeypatch.setattr(evaluating, "judge", original)
    alone = [_scored_alone(t, corpus) for t in traces]
    as_text = lambda value: json.dumps(value, sort_keys=True, default=repr)  # noqa: E731 - NaN included
    assert [as_text(r) for r in batch.runs] == [as_text(a.runs[0]) for a in alone]
    assert [r["seed"] for r in batch.runs] == [1, 2, 3, 1, 4]
    assert batch.runs[0]["claims"] != batch.runs[3]["claims"]
    notes = lambda scored: sorted(as_text(n.to_dict()) for n in scored.notes)  # noqa: E731
    assert notes(batch) == sorted(n for a in alone for n in notes(a))
    assert sorted((n.seed, n.line) for n in batch.notes) == [(1, None), (1, None), (2, 2), (3, 3), (4, None)]


def test_a_scoring_key_reads_every_field_but_where_and_when_the_run_ran(valid_trace):
    from ragaudit.checks.metrics.evaluate import WHERE_AND_WHEN, same_scores
    from ragaudit.core.types import Payload, Trace

    trace = parse_trace(valid_trace)
    key = same_scores(trace)
    assert key is not None and same_scores(parse_trace(copy.deepcopy(valid_trace))) == key
    for name in WHERE_AND_WHEN:
        assert same_scores(dataclasses.replace(trace, **{name: 7})) == key, name
    for f in dataclasses.fields(Trace):  # a field added to traces is read unless it says where or when
        if f.name not in (*WHERE_AND_WHEN, "retrieved"):
            assert same_scores(dataclasses.replace(trace, **{f.name: (object(),)})) != key, f.name
    assert same_scores(dataclasses.replace(trace, retrieved=trace.retrieved[:1])) != key
    for f in dataclasses.fields(Payload):
        if f.name != "span":  # given by the offsets
            payload = copy.copy(trace.retrieved[1])
            setattr(payload, f.name, {"x": 1} if f.name == "window" else object())
            assert same_scores(dataclasses.replace(trace, retrieved=(trace.retrieved[0], payload))) != key, f.name


def test_a_run_with_a_value_that_cannot_be_compared_is_scored_alone(valid_trace, corpus, monkeypatch):
    from ragaudit.checks.metrics import evaluate as evaluating
    from ragaudit.checks.metrics.evaluate import same_scores

    odd = copy.deepcopy(valid_trace)
    odd["retrieved"][0]["offsets"]["start"] = [1]  # refused by validation, still scored
    odd["retrieved"][1]["window"] = {"before": float("nan")}
    traces = [run(odd, seed=s) for s in (1, 2)]
    assert same_scores(traces[0]) is None
    judged = []
    original = evaluating.judge
    monkeypatch.setattr(
        evaluating, "judge", lambda view, *a, **kw: judged.append(view.trace) or original(view, *a, **kw)
    )
    scored = score_runs(traces, {ITEM.qid: ITEM}, corpus, ENCODER, Settings(), SupportScorer(ENCODER))
    assert judged == traces and [r["seed"] for r in scored.runs] == [1, 2]


@pytest.mark.parametrize(
    ("cited", "why"),
    [
        (["ghost-1"], "the answer cites ghost-1, which was not retrieved"),
        (["ghost-1", "ghost-2"], "the answer cites ghost-1 and ghost-2, which were not retrieved"),
        (
            [f"ghost-{i}" for i in range(1, 11)],
            "the answer cites ghost-1, ghost-2, ghost-3 and 7 more, which were not retrieved",
        ),
    ],
)
def test_a_run_citing_what_it_did_not_retrieve_names_a_few_and_counts_the_rest(valid_trace, corpus, cited, why):
    trace = copy.deepcopy(valid_trace)
    trace["answer"] = {
        "text": " ".join(f"{KEYS_SENTENCE} [{c}]" for c in cited),
        "segments": [{"seg": i, "text": KEYS_SENTENCE, "citations": [c]} for i, c in enumerate(cited, start=1)],
    }
    ev = evaluated([run(trace)], corpus)
    assert not ev.runs[0]["correct"] and ev.runs[0]["why"] == why
