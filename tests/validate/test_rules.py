"""Every trace code: one case where it fires (and nothing else does), and silence on a valid trace."""

import copy

import pytest
from helpers import MUTATIONS, PASSWORDS_SENTENCE, POLICIES

from ragaudit.checks.validation import CODES, RULES, Context, validate_trace, validate_traces
from ragaudit.core.analyzers import ANALYZERS
from ragaudit.core.types import REQUIRED_PAYLOAD_FIELDS
from ragaudit.io.traces import parse_trace


def codes_of(trace: dict, corpus=None, **ctx) -> list[str]:
    parsed = parse_trace(trace, file="t.jsonl", line=1)
    return sorted(i.code for i in validate_trace(parsed, Context(corpus=corpus, **ctx)))


def drop(field, i=0):
    return lambda t: t["retrieved"][i].pop(field)


def setp(field, value, i=0):
    return lambda t: t["retrieved"][i].__setitem__(field, value)


def both(*changes):
    def apply(t):
        for change in changes:
            change(t)

    return apply


def token_span(sentence: str) -> dict:
    """The token offsets of `sentence` in the POLICIES document under the `lowercase` analyzer."""
    spans = ANALYZERS["lowercase"].spans(POLICIES)
    start = POLICIES.index(sentence)
    first = next(i for i, (a, _) in enumerate(spans) if a == start)
    count = ANALYZERS["lowercase"].count(sentence)
    return {"start": first, "end": first + count, "unit": "token"}


def set_answer(**fields):
    return lambda t: t["answer"].update(fields)


CASES = {
    "wrong_type": [setp("doc_id", 7), setp("score_norm", "high"), lambda t: t.__setitem__("variant", "0")],
    "pipeline_error": [lambda t: t.update(error="timeout after 30 s", retrieved=[], answer=None)],
    "empty_citations": [lambda t: t.update(retrieved=[], answer=None)],
    **{f"missing_{f}": [drop(f, 1)] for f in REQUIRED_PAYLOAD_FIELDS if f not in ("tokens", "offsets")},
    "missing_tokens": [drop("tokens")],
    "missing_offsets": [drop("offsets")],
    "bad_offsets": [
        setp("offsets", [10, 5]),
        setp("offsets", {"start": -1, "end": 3, "unit": "char"}),
        setp("offsets", {"start": 1.5, "end": 3, "unit": "char"}),
        setp("offsets", {"start": 1, "end": 3, "unit": "word"}),
    ],
    "mixed_offset_units": [lambda t: t["retrieved"][1].update(offsets=token_span(PASSWORDS_SENTENCE), text=None)],
    "cross_section_reuse": [lambda t: t["answer"]["segments"][0].__setitem__("citations", ["pol-keys-1", "pol-pw-1"])],
    "analyzer_mismatch": [lambda t: t["index"].__setitem__("analyzer", "whitespace")],
    "mismatch_index_hash": [lambda t: t["index"].__setitem__("index_hash", "sha256:fff")],
    "embed_model_mismatch": [lambda t: t["index"].__setitem__("embed_model", "bge-small:cls")],
    "rev_mismatch": [setp("rev", "000000000000")],
    "missing_score": [both(drop("score_norm"), drop("score_raw"))],
    "missing_k_pos": [drop("k_pos")],
    "missing_k_final": [both(setp("rerank_score", 0.8), setp("rerank_score", 0.5, 1))],
    "score_out_of_range": [setp("score_norm", 1.2), setp("score_norm", -0.01)],
    "tiebreak_violation": [lambda t: t["retrieved"].reverse() or [p.update(score_norm=0.5) for p in t["retrieved"]]],
    "rank_mismatch": [both(setp("k_final", 2), setp("k_final", 1, 1))],
    "dangling_citation": [
        lambda t: t["answer"]["segments"][0].__setitem__("citations", ["nope-1"]),
        lambda t: t.__setitem__("steps", [{"step_number": 1, "question": "q", "citations": ["nope-2"]}]),
    ],
    "cite_after_answer": [
        set_answer(raw='{"answer": "Every 12 months.", "citations": ["pol-keys-1"]}'),
        set_answer(raw=None, text="Keys rotate every 12 months. Admins keep two. [pol-keys-1]"),
    ],
    "unknown_document": [setp("doc_id", "policies-old")],
    "unknown_section": [setp("section_id", "policies/security/tokens")],
    "span_out_of_bounds": [
        lambda t: t["retrieved"][0].update(offsets={"start": 10, "end": 100000, "unit": "char"}, text=None)
    ],
    "span_text_mismatch": [setp("text", "Hardware keys are rotated every 24 months.")],
    "section_mismatch": [setp("section_id", "policies/security/passwords")],
    "missing_live_index": [lambda t: t.pop("index")],
    "tokens_mismatch": [setp("tokens", 3)],
    "duplicate_snippet": [setp("snippet_id", "pol-keys-1", 1)],
    "uncited_segment": [
        lambda t: t["answer"]["segments"].append({"seg": 2, "text": "They are kept in a safe.", "citations": []})
    ],
}
# Codes that cannot arise from a parsed trace object: they are about the line itself.
LINE_CODES = {"malformed_record"}


def test_every_trace_code_has_a_case():
    trace_codes = {c for c, k in CODES.items() if k.family == "trace"}
    assert trace_codes - LINE_CODES == set(CASES)


def test_every_code_has_a_rule():
    emitted = {code for r in RULES for code in r.codes}
    assert emitted == {c for c, k in CODES.items() if k.family == "trace"} - LINE_CODES


def test_valid_trace_is_silent(valid_trace, corpus):
    assert codes_of(valid_trace, corpus) == []
    assert codes_of(valid_trace) == []


@pytest.mark.parametrize("code,index", [(c, i) for c, changes in CASES.items() for i in range(len(changes))])
def test_code_fires_alone(code, index, mutate, corpus):
    trace = mutate(CASES[code][index])
    assert sorted(set(codes_of(trace, corpus))) == [code]


def test_wrong_type_names_path_expected_and_found(mutate):
    trace = mutate(setp("doc_id", 7))
    [found] = validate_trace(parse_trace(trace, file="t.jsonl", line=4))
    assert (found.path, found.message, found.file, found.line) == (
        "$.retrieved[0].doc_id",
        "expected string, found number 7",
        "t.jsonl",
        4,
    )


def test_corpus_rules_need_a_corpus(mutate):
    assert codes_of(mutate(setp("doc_id", "policies-old"))) == []


def test_text_mismatch_message_shows_both_texts(mutate, corpus):
    trace = mutate(setp("text", "Hardware keys are rotated every 24 months."))
    [found] = validate_trace(parse_trace(trace), Context(corpus=corpus))
    assert "'Hardware keys are rotated every 12 months.'" in found.message
    assert "24 months" in found.message and found.path == "$.retrieved[0].text"


def test_text_mismatch_late_in_long_texts_shows_where_they_differ(tmp_path, mutate):
    from ragaudit.io.corpus import load_corpus

    words = " ".join(f"w{i:03d}" for i in range(60))  # 299 chars: w000 w001 ... w059
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"doc_id": "policies", "text": "%s"}\n' % words, encoding="utf-8")
    corpus = load_corpus(path)
    changed = words[:201] + "X" + words[202:]  # w040 starts at char 200
    assert words[200:204] == "w040" and changed[200:204] == "wX40"

    def change(t):
        p = t["retrieved"][0]
        t["retrieved"] = [p]
        p.update(section_id="_preamble", text=changed, offsets={"start": 0, "end": len(words), "unit": "char"})

    [found] = [
        i for i in validate_trace(parse_trace(mutate(change)), Context(corpus=corpus)) if i.code == "span_text_mismatch"
    ]
    assert found.message == (
        "expected text == document slice [0, 299), found a difference at char 201 of the slice (document char 201): "
        f"slice ...{words[177:225]!r}..., text ...{changed[177:225]!r}..."
    )
    assert "slice ...'35 w036 w037 w038 w039 w040 w041" in found.message and "w039 wX40 w041" in found.message


def test_text_mismatch_of_different_lengths_says_so():
    from ragaudit.checks.validation.corpus import text_difference

    assert text_difference("abc", "abcd", 7) == (
        "expected text == document slice [7, 10), found a difference at char 3 of the slice (document char 10): "
        "slice 'abc', text 'abcd'; the slice has 3 chars, the text 4"
    )


@pytest.mark.parametrize("step", [1, 3, 4096])
def test_the_first_difference_is_found_slice_by_slice(step):
    """A long payload's text is compared with its slice of the document a slice at a time, in C;
    only the slice that differs is read character by character."""
    from ragaudit.checks.validation.corpus import first_difference

    def naive(a: str, b: str) -> int:
        return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))

    text = "".join(chr(97 + (i * 7) % 26) for i in range(10_000))
    for a, b in [
        (text, text),
        (text, text[:-1]),
        (text[:5], text),
        (text, text[:6_000] + "#" + text[6_001:]),
        (text, "#" + text[1:]),
        ("", text),
        (text[:4_096], text[:4_096] + "x"),
    ]:
        assert first_difference(a, b, step) == naive(a, b) == first_difference(b, a, step)


def test_pipeline_error_aborts_other_checks(mutate, corpus):
    trace = mutate(lambda t: t.update(error="crashed"))
    assert codes_of(trace, corpus) == ["pipeline_error"]


def test_cross_section_allowed_by_config_or_whitelist(mutate, corpus):
    trace = mutate(CASES["cross_section_reuse"][0])
    assert codes_of(trace, corpus, allow_cross_section=True) == []
    group = frozenset({"policies/security/keys", "policies/security/passwords"})
    assert codes_of(trace, corpus, cross_section_whitelist=(group,)) == []
    other = frozenset({"policies/security/keys", "team/on-call/paging"})
    assert codes_of(trace, corpus, cross_section_whitelist=(other,)) == ["cross_section_reuse"]


def test_list_offsets_take_the_trace_unit(valid_trace, corpus):
    start, end = valid_trace["retrieved"][0]["offsets"]["start"], valid_trace["retrieved"][0]["offsets"]["end"]
    for p in valid_trace["retrieved"]:
        p["offsets"] = [p["offsets"]["start"], p["offsets"]["end"]]
    parsed = parse_trace(valid_trace)
    assert parsed.retrieved[0].span.start == start and parsed.retrieved[0].span.end == end
    assert codes_of(valid_trace, corpus) == []


def test_token_offsets_checked_against_the_document(valid_trace, corpus):
    from ragaudit.core.analyzers import ANALYZERS

    doc = corpus["policies"]
    spans = ANALYZERS["lowercase"].spans(doc.text)
    for p in valid_trace["retrieved"]:
        s, e = p["offsets"]["start"], p["offsets"]["end"]
        first = next(i for i, (a, _) in enumerate(spans) if a == s)
        last = next(i for i, (_, b) in enumerate(spans) if b == e - 1)  # the sentence ends with "."
        p["offsets"] = {"start": first, "end": last + 1, "unit": "token"}
        p["text"] = doc.text[spans[first][0] : spans[last][1]]
        p["tokens"] = last + 1 - first
    assert codes_of(valid_trace, corpus) == []
    valid_trace["retrieved"][0]["offsets"]["end"] = len(spans) + 3
    valid_trace["retrieved"][0]["tokens"] = len(spans) + 3 - valid_trace["retrieved"][0]["offsets"]["start"]
    assert codes_of(valid_trace, corpus) == ["span_out_of_bounds"]


def test_tie_in_order_is_silent(mutate, corpus):
    trace = mutate(lambda t: [p.update(score_norm=0.5, score_raw=5.0) for p in t["retrieved"]])
    assert codes_of(trace, corpus) == []


def test_primary_score_prefers_rerank_when_every_payload_has_one(mutate, corpus):
    # equal score_norm, out of order; but rerank scores differ, so there is no tie
    trace = mutate(
        lambda t: (
            t["retrieved"].reverse(),
            [p.update(score_norm=0.5, k_pos=i + 1) for i, p in enumerate(t["retrieved"])],
            [p.update(rerank_score=r, k_final=i + 1) for i, (p, r) in enumerate(zip(t["retrieved"], (0.9, 0.2)))],
        )
    )
    assert codes_of(trace, corpus) == []


def test_inline_markers_are_not_late(mutate, corpus):
    trace = mutate(set_answer(raw=None, text="Keys rotate every 12 months [pol-keys-1]. Admins keep two [pol-keys-1]."))
    assert codes_of(trace, corpus) == []


def test_answer_only_citations_count_against_empty(mutate):
    trace = mutate(lambda t: t.update(retrieved=[]))
    # the answer cites a snippet, so the run is not empty; the citation dangles
    assert codes_of(trace) == ["dangling_citation"]


def test_span_derived_traces_are_asked_for_the_live_index_only_when_the_user_asks(valid_trace, tmp_path):
    """Spans seldom record the live index: a replay pipeline with a span format (or every trace,
    read from spans) warns missing_live_index only with [audit] live_index or --live-index."""
    from helpers import write_config

    from ragaudit.io.config import load_config

    del valid_trace["index"]
    pipelines = (
        '[[pipelines]]\nname = "prod"\nkind = "replay"\ntraces = "s.jsonl"\nformat = "otlp"\n'
        '[[pipelines]]\nname = "rec"\nkind = "replay"\ntraces = "t.jsonl"\n'
    )
    config = load_config(write_config(tmp_path, pipelines))
    asked = load_config(write_config(tmp_path, pipelines, extra="live_index = true\n"))

    def warned(ctx: Context, pipeline: str) -> bool:
        trace = parse_trace(dict(valid_trace, config=pipeline), file="t.jsonl", line=1)
        return "missing_live_index" in [i.code for i in validate_trace(trace, ctx)]

    assert not warned(Context.of(config, None), "prod") and warned(Context.of(config, None), "rec")
    assert warned(Context.of(asked, None), "prod") and warned(Context.of(config, None, live_index=True), "prod")
    assert not warned(Context.of(None, None, spans=True), "rec")
    assert warned(Context.of(None, None, spans=True, live_index=True), "rec") and warned(Context.of(None, None), "rec")


@pytest.mark.parametrize("with_corpus", [True, False])
def test_a_batch_is_validated_as_its_traces_one_by_one(valid_trace, corpus, with_corpus):
    traces = []
    for number, mutate in enumerate(MUTATIONS):
        trace = copy.deepcopy(valid_trace)
        trace["qid"] = f"Q{number}"
        mutate(trace)
        traces.append(parse_trace(trace))
    ctx = Context(corpus=corpus if with_corpus else None)
    one_by_one = [found for trace in traces for found in validate_trace(trace, ctx)]
    assert len({i.code for i in one_by_one}) > 3  # the mutations break several rules
    assert validate_traces(traces, ctx) == one_by_one
