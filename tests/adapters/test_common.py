import subprocess
import sys

import pytest
from adapter_helpers import INDEX, audit, errors, handbook

from ragaudit.adapters.common import (
    Hit,
    build_payloads,
    check_score_kind,
    doc_id_from_path,
    locate,
    make_trace,
    normalize_score,
    rank,
    url_of,
)
from ragaudit.core.llm_citations import segments


@pytest.mark.parametrize(
    "kind, raw, expected",
    [
        ("similarity", 0.42, 0.42),
        ("cosine", -1.0, 0.0),
        ("cosine", 0.5, 0.75),
        ("cosine", 1.0, 1.0),
        ("cosine_distance", 0.0, 1.0),
        ("cosine_distance", 0.5, 0.75),
        ("cosine_distance", 2.0, 0.0),
        ("l2_distance", 0.0, 1.0),
        ("l2_distance", 1.0, 0.5),
        ("l2_distance", 3.0, 0.25),
        ("raw", 17.3, None),
    ],
)
def test_score_kinds(kind, raw, expected):
    assert normalize_score(raw, kind) == expected


def test_float_noise_at_the_bounds_is_clipped_but_real_excess_is_kept():
    assert normalize_score(1.0000001, "similarity") == 1.0
    assert normalize_score(-2e-7, "cosine_distance") == 1.0
    assert normalize_score(2.0000001, "cosine_distance") == 0.0
    # a "similarity" that is not one: kept, so ragaudit reports score_out_of_range
    assert normalize_score(1.7, "similarity") == 1.7


def test_score_kind_is_never_guessed():
    with pytest.raises(ValueError, match=r"'score_kind' parameter must be set .* Got None instead"):
        check_score_kind(None, scored=True)
    with pytest.raises(ValueError, match=r"must be one of .* Got 'dot' instead"):
        check_score_kind("dot", scored=False)
    check_score_kind(None, scored=False)


def test_locate_finds_only_a_single_occurrence():
    text = "alpha beta. gamma beta. delta"
    assert locate("gamma", text) == (12, 17)
    assert locate("beta", text) is None  # ambiguous
    assert locate("omega", text) is None
    assert locate("  ", text) is None
    assert locate("beta", text, within=(12, 23)) == (18, 22)


def test_ties_keep_the_library_order_and_k_pos_counts_from_one():
    """The library's order is the order a prompt numbered the contexts in: `[2]` must stay `z`."""
    payloads = [
        {"snippet_id": "b", "section_id": "s2", "score_norm": 0.9},
        {"snippet_id": "z", "section_id": "s1", "score_norm": 0.5},
        {"snippet_id": "a", "section_id": "s1", "score_norm": 0.5},
        {"snippet_id": "c", "section_id": "s0", "score_norm": 0.7},
    ]
    out = rank(payloads)
    assert [p["snippet_id"] for p in out] == ["b", "z", "a", "c"]
    assert [p["k_pos"] for p in out] == [1, 2, 3, 4]


def test_offsets_are_never_negative_and_recovered_from_the_source():
    corpus = handbook()
    sentence = "Administrator hardware keys are rotated every 12 months."
    start = corpus["key-management"].text.index(sentence)
    hit = Hit(sentence, "key-management", start=-1, score=0.8)
    [recovered] = build_payloads([hit], index=INDEX, sources=corpus, score_kind="similarity")
    assert recovered["offsets"] == {"start": start, "end": start + len(sentence), "unit": "char"}
    assert recovered["section_id"] == "key-management/hardware-keys"
    assert recovered["snippet_id"] == f"key-management:{start}-{start + len(sentence)}"
    assert recovered["rev"] == corpus["key-management"].rev
    [unknown] = build_payloads([hit], index=INDEX, score_kind="similarity")
    assert "offsets" not in unknown and unknown["section_id"] == "_preamble"
    assert unknown["snippet_id"].startswith("key-management#")


def test_tokens_use_the_named_analyzer_else_whitespace_words():
    hit = Hit("Keys: rotate every 12 months!", "d")
    [known] = build_payloads([hit], index=INDEX)
    assert known["tokens"] == 5
    other = type(INDEX)("h", "bert-wordpiece", "m")
    [unknown] = build_payloads([hit], index=other)
    assert unknown["tokens"] == 5 and unknown["analyzer"] == "bert-wordpiece"
    assert build_payloads([Hit("a-b c", "d")], index=INDEX)[0]["tokens"] == 3


def test_segments_attach_point_marks_to_their_sentence():
    text = "Keys rotate yearly. Passwords never rotate.\nSee the policy."
    segs = segments(text, [(len("Keys rotate yearly."), len("Keys rotate yearly."), ["k"]), (20, 43, ["p1", "p2"])])
    assert segs == [
        {"seg": 1, "text": "Keys rotate yearly.", "citations": ["k"]},
        {"seg": 2, "text": "Passwords never rotate.", "citations": ["p1", "p2"]},
        {"seg": 3, "text": "See the policy.", "citations": []},
    ]


def test_make_trace_parses_and_validates_cleanly():
    corpus = handbook()
    sentence = "Administrator hardware keys are rotated every 12 months."
    payloads = build_payloads(
        [Hit(sentence, "key-management", score=0.3)], index=INDEX, sources=corpus, score_kind="cosine_distance"
    )
    trace = make_trace(
        "KM-1",
        "How often are admin keys rotated?",
        payloads,
        answer_text=f"{sentence[:-1]} [{payloads[0]['snippet_id']}].",
        segments=[{"seg": 1, "text": sentence, "citations": [payloads[0]["snippet_id"]]}],
        index=INDEX,
        variant=1,
        seed=7,
        config="mine",
    )
    assert (trace["variant"], trace["seed"], trace["config"]) == (1, 7, "mine")
    assert payloads[0]["score_norm"] == pytest.approx(0.85) and payloads[0]["score_raw"] == 0.3
    assert audit(trace) == []
    assert "answer" not in make_trace("KM-1", None, payloads, index=INDEX)


def test_doc_ids_from_paths(tmp_path):
    (tmp_path / "team").mkdir()
    assert doc_id_from_path(str(tmp_path / "team" / "on-call.md"), str(tmp_path)) == "team/on-call"
    assert doc_id_from_path("/elsewhere/backups.md", str(tmp_path)) == "backups"
    assert doc_id_from_path("backups.md") == "backups"
    assert url_of("/srv/docs/a.md") == "file:///srv/docs/a.md"
    assert url_of("https://example.com/a") == "https://example.com/a"
    assert url_of("docs/a.md") is None


def test_missing_fields_are_left_for_ragaudit_to_report():
    payloads = build_payloads(
        [Hit("free text not in any document", "nowhere", score=1.0)], index=INDEX, score_kind="similarity"
    )
    codes = {code for code, _ in errors(audit(make_trace("Q", "q", payloads, index=INDEX)))}
    assert codes == {"missing_offsets", "missing_rev", "unknown_document"}


def test_ragaudit_imports_without_the_stack_libraries():
    blocked = ["langchain_core", "langchain_text_splitters", "llama_index", "haystack", "anthropic", "openai"]
    code = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None\n"
        "import ragaudit.cli.commands\n"
        "from ragaudit.adapters import common, langchain, llamaindex, haystack, anthropic, openai\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_text_mapping_places_hits_as_the_corpus_does():
    corpus = handbook()
    sentence = "Administrator hardware keys are rotated every 12 months."
    hits = [Hit(sentence, "key-management", start=-1), Hit("not in the text", "key-management")]
    from_corpus = build_payloads(hits, index=INDEX, sources=corpus)
    from_texts = build_payloads(hits, index=INDEX, sources={"key-management": corpus["key-management"].text})
    assert "offsets" in from_texts[0] and "offsets" not in from_texts[1]
    assert [{k: v for k, v in p.items() if k != "source_url"} for p in from_corpus] == [
        {k: v for k, v in p.items() if k != "source_url"} for p in from_texts
    ]
    assert [p["source_url"] for p in from_texts] == [
        "urn:ragaudit:doc:key-management#key-management/hardware-keys",
        "urn:ragaudit:doc:key-management#_preamble",
    ]


def test_make_trace_records_when_it_was_made_unless_told():
    from datetime import datetime, timedelta, timezone

    before = datetime.now(timezone.utc).replace(microsecond=0)
    stamp = make_trace("Q", "q", [], index=INDEX)["retrieved_at"]
    after = datetime.now(timezone.utc)
    parsed = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert before <= parsed <= after + timedelta(seconds=1)
    assert make_trace("Q", "q", [], retrieved_at="2026-11-22T10:00:00Z")["retrieved_at"] == "2026-11-22T10:00:00Z"


def test_a_hit_without_document_or_url_gets_none():
    [p] = build_payloads([Hit("orphan text", None)], index=INDEX)
    assert "source_url" not in p and "doc_id" not in p
