import json
from functools import cache

import pytest
from adapter_helpers import INDEX, assert_spans_match, audit, errors, handbook
from helpers import Lazy

from ragaudit.adapters.anthropic import from_anthropic
from ragaudit.io.corpus import load_corpus

# imported when a test first uses them: collecting the suite stays fast
Message = Lazy("anthropic.types", "Message")
TextBlock = Lazy("anthropic.types", "TextBlock")

KEYS = handbook()["key-management"].text
BACKUPS = handbook()["backups"].text
HARDWARE = handbook().section("key-management", "key-management/hardware-keys")
EXCERPT = KEYS[HARDWARE.start : HARDWARE.end]  # a retrieved passage sent as its own document
PARAGRAPHS = BACKUPS.split("\n\n")
ROTATED = "Administrator hardware keys are rotated every 12 months."
SHIPPED = "Hardware keys are shipped only to the employee's registered home address."
SNAPSHOT = next(i for i, p in enumerate(PARAGRAPHS) if p.startswith("Production PostgreSQL"))


def text_document(text: str, title: str) -> dict:
    return {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": text},
        "title": title,
        "citations": {"enabled": True},
    }


DOCUMENTS = [
    text_document(KEYS, "key-management"),
    text_document(EXCERPT, "key-management"),
    {
        "type": "document",
        "title": "backups",
        "citations": {"enabled": True},
        "source": {"type": "content", "content": [{"type": "text", "text": p} for p in PARAGRAPHS]},
    },
]


def char(text: str, doc: int, within: str) -> dict:
    start = within.index(text)
    return {
        "type": "char_location",
        "cited_text": text,
        "document_index": doc,
        "document_title": DOCUMENTS[doc]["title"],
        "start_char_index": start,
        "end_char_index": start + len(text),
    }


def message(content: list[dict]) -> Message:
    """A Message as the API returns it: the JSON body validated by the SDK's own types."""
    body = {
        "id": "msg_01XbN5gq2R7v",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 2412, "output_tokens": 96},
    }
    return Message.model_validate(json.loads(json.dumps(body)))


@cache
def answer() -> Message:
    """The answer with every kind of citation, built once."""
    return message(
        [
            {"type": "thinking", "thinking": "The key policy covers this.", "signature": "EqQBCkgIARABGAIiQL"},
            {"type": "text", "text": "Per the key policy, "},
            {
                "type": "text",
                "text": "admin hardware keys are rotated every 12 months",
                "citations": [char(ROTATED, 0, KEYS)],
            },
            {"type": "text", "text": ". "},
            {
                "type": "text",
                "text": "New keys only go to the registered home address.",
                "citations": [char(SHIPPED, 1, EXCERPT)],
            },
            {
                "type": "text",
                "text": " Databases are snapshotted every 6 hours.",
                "citations": [
                    {
                        "type": "content_block_location",
                        "cited_text": PARAGRAPHS[SNAPSHOT],
                        "document_index": 2,
                        "document_title": "backups",
                        "start_block_index": SNAPSHOT,
                        "end_block_index": SNAPSHOT + 1,
                    }
                ],
            },
        ]
    )


def test_sdk_types_carry_the_citations():
    cited = [b for b in answer().content if isinstance(b, TextBlock) and b.citations]
    assert [type(b.citations[0]).__name__ for b in cited] == [
        "CitationCharLocation",
        "CitationCharLocation",
        "CitationContentBlockLocation",
    ]


def test_char_and_block_citations_audit_clean():
    trace = from_anthropic(
        answer(),
        DOCUMENTS,
        qid="KM-1",
        query="How often are admin keys rotated?",
        index=INDEX,
        sources=handbook(),
        scores=[0.91, 0.77, 0.52],
        score_kind="similarity",
    )
    payloads = trace["retrieved"]
    assert_spans_match(payloads)
    rotated, shipped, snapshot = payloads
    assert rotated["offsets"]["start"] == KEYS.index(ROTATED)
    assert shipped["offsets"]["start"] == KEYS.index(SHIPPED)  # shifted from the excerpt
    assert snapshot["offsets"]["start"] == BACKUPS.index(PARAGRAPHS[SNAPSHOT])
    assert [p["section_id"] for p in payloads] == [
        "key-management/hardware-keys",
        "key-management/hardware-keys",
        "backups-and-disaster-recovery/backup-schedule",
    ]
    assert [p["score_norm"] for p in payloads] == [0.91, 0.77, 0.52]
    assert trace["answer"]["text"].startswith("Per the key policy, admin hardware keys")
    assert trace["answer"]["segments"] == [
        {
            "seg": 1,
            "text": "Per the key policy, admin hardware keys are rotated every 12 months.",
            "citations": [rotated["snippet_id"]],
        },
        {"seg": 2, "text": "New keys only go to the registered home address.", "citations": [shipped["snippet_id"]]},
        {"seg": 3, "text": "Databases are snapshotted every 6 hours.", "citations": [snapshot["snippet_id"]]},
    ]
    assert audit(trace) == []


def test_without_sources_offsets_refer_to_the_text_sent():
    trace = from_anthropic(
        answer(), DOCUMENTS, qid="KM-1", query="q", index=INDEX, scores=[0.91, 0.77, 0.52], score_kind="similarity"
    )
    rotated, shipped, snapshot = trace["retrieved"]
    assert rotated["offsets"]["start"] == KEYS.index(ROTATED)
    assert rotated["section_id"] == "key-management/hardware-keys"  # from the full text sent
    assert shipped["offsets"]["start"] == EXCERPT.index(SHIPPED)  # the excerpt's own offsets
    assert "offsets" not in snapshot and snapshot["snippet_id"] == f"backups:block{SNAPSHOT}-{SNAPSHOT + 1}"
    found = set(errors(audit(trace)))
    assert ("span_text_mismatch", shipped["snippet_id"]) in found
    assert ("rev_mismatch", shipped["snippet_id"]) in found
    assert ("missing_offsets", snapshot["snippet_id"]) in found
    assert not any(
        cited == rotated["snippet_id"] and code.startswith(("span", "rev", "section")) for code, cited in found
    )


def test_documents_are_not_scored_unless_you_say_how():
    trace = from_anthropic(answer(), DOCUMENTS, qid="KM-1", query="q", index=INDEX, sources=handbook())
    assert {code for code, _ in errors(audit(trace))} == {"missing_score"}
    with pytest.raises(ValueError, match="score_kind"):
        from_anthropic(answer(), DOCUMENTS, qid="KM-1", query="q", index=INDEX, scores=[1, 1, 1])


@pytest.fixture
def paged_corpus(tmp_path):
    """The security policy as a PDF's text: a corpus.jsonl whose pages are its top-level parts."""
    doc = handbook()["security-policy"]
    cuts = [s.start for s in doc.sections if s.section_id.count("/") == 1] + [len(doc.text)]
    cuts[0] = 0
    pages = [[a, b] for a, b in zip(cuts, cuts[1:])]
    path = tmp_path / "corpus.jsonl"
    line = {
        "doc_id": "security-policy",
        "text": doc.text,
        "pages": pages,
        "source_url": "https://handbook.example.com/security-policy.pdf",
    }
    path.write_text(json.dumps(line) + "\n")
    return load_corpus(path), pages


def pdf_answer(citations: list[dict]) -> Message:
    return message([{"type": "text", "text": "Passwords need 14 characters.", "citations": citations}])


PDF = [
    {
        "type": "document",
        "title": "security-policy",
        "citations": {"enabled": True},
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjcKJcOkw7zDtsOf"},
    }
]


def page(cited: str, first: int, stop: int) -> dict:
    return {
        "type": "page_location",
        "cited_text": cited,
        "document_index": 0,
        "document_title": "security-policy",
        "start_page_number": first,
        "end_page_number": stop,
    }


def test_page_citations_map_to_chars_with_a_paged_corpus(paged_corpus):
    corpus, pages = paged_corpus
    text = corpus["security-policy"].text
    sentence = "Workforce passwords must be at least 14 characters long."
    number = next(n for n, (a, b) in enumerate(pages, 1) if a <= text.index(sentence) < b)
    extracted = sentence.replace("14 characters", "14\ncharacters")  # PDF text rarely matches exactly
    trace = from_anthropic(
        pdf_answer([page(sentence, number, number + 1), page(extracted, number, number + 2)]),
        PDF,
        qid="SEC-1",
        query="q",
        index=INDEX,
        sources=corpus,
        scores=[0.8],
        score_kind="similarity",
    )
    whole, tight = sorted(trace["retrieved"], key=lambda p: len(p["text"]), reverse=True)
    assert tight["offsets"]["start"] == text.index(sentence) and tight["page"] == number
    assert (whole["offsets"]["start"], whole["offsets"]["end"]) == (pages[number - 1][0], pages[number][1])
    assert_spans_match(trace["retrieved"], corpus)
    assert whole["source_url"] == "https://handbook.example.com/security-policy.pdf#_preamble"
    assert audit(trace, corpus) == []


def test_page_citations_without_pages_keep_the_page_only():
    trace = from_anthropic(
        pdf_answer([page("Workforce passwords must be long.", 2, 3)]),
        PDF,
        qid="SEC-1",
        query="q",
        index=INDEX,
        scores=[0.8],
        score_kind="similarity",
    )
    [p] = trace["retrieved"]
    assert p["page"] == 2 and "offsets" not in p and p["snippet_id"] == "security-policy:page2-3"
    assert ("missing_offsets", p["snippet_id"]) in errors(audit(trace))


def test_other_citation_types_are_not_projected():
    web = {
        "type": "web_search_result_location",
        "cited_text": "Keys rotate yearly.",
        "url": "https://example.com",
        "title": "Example",
        "encrypted_index": "EqgfCioIARgBIiQ3",
    }
    trace = from_anthropic(
        message([{"type": "text", "text": "Keys rotate yearly.", "citations": [web]}]),
        DOCUMENTS,
        qid="Q",
        query="q",
        index=INDEX,
    )
    assert trace["retrieved"] == []
    assert trace["answer"]["segments"] == [{"seg": 1, "text": "Keys rotate yearly.", "citations": []}]
