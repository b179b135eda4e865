"""Real, externally authored spans: every SQuAD 2.0 answer span validates against its paragraph,
and each corruption gives exactly the expected code."""

import json

import pytest
from helpers import shared_path

from ragaudit.checks.validation import Context, validate_trace
from ragaudit.core.analyzers import ANALYZERS
from ragaudit.io.corpus import load_corpus
from ragaudit.io.traces import parse_trace

SPAN_CODES = {
    "unknown_document",
    "unknown_section",
    "span_out_of_bounds",
    "span_text_mismatch",
    "section_mismatch",
    "rev_mismatch",
    "bad_offsets",
}


@pytest.fixture(scope="module")
def squad(tmp_path_factory):
    """A corpus.jsonl with one document per article, one section per paragraph; and every answer span."""
    data = json.loads(shared_path("squad", "small.json").read_text(encoding="utf-8"))
    lines, answers = [], []
    for a, article in enumerate(data["data"]):
        doc_id = f"squad/{a}"
        text, sections = "", []
        for p, paragraph in enumerate(article["paragraphs"]):
            start = len(text)
            text += paragraph["context"]
            sections.append({"section_id": f"p{p}", "start": start, "end": len(text)})
            for qa in paragraph["qas"]:
                for answer in qa["answers"]:
                    answers.append((doc_id, f"p{p}", start + answer["answer_start"], answer["text"], qa["id"]))
            text += "\n\n"
        lines.append(json.dumps({"doc_id": doc_id, "text": text, "title": article["title"], "sections": sections}))
    path = tmp_path_factory.mktemp("squad") / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load_corpus(path), answers


def payload_trace(corpus, doc_id, section_id, start, text, qid, n):
    return {
        "qid": qid,
        "variant": 0,
        "seed": 0,
        "index": {"index_hash": "h", "analyzer": "lowercase", "embed_model": "m"},
        "retrieved": [
            {
                "doc_id": doc_id,
                "section_id": section_id,
                "snippet_id": f"s{n}",
                "source_url": "u",
                "offsets": [start, start + len(text)],
                "tokens": ANALYZERS["lowercase"].count(text),
                "index_hash": "h",
                "embed_model": "m",
                "analyzer": "lowercase",
                "rev": corpus[doc_id].rev,
                "score_norm": 1.0,
                "k_pos": 1,
                "text": text,
            }
        ],
    }


def span_codes(corpus, trace):
    return sorted({i.code for i in validate_trace(parse_trace(trace), Context(corpus=corpus))} & SPAN_CODES)


def test_every_answer_span_validates(squad):
    corpus, answers = squad
    assert len(answers) > 800
    ctx = Context(corpus=corpus)
    found = [(a, validate_trace(parse_trace(payload_trace(corpus, *a, n)), ctx)) for n, a in enumerate(answers)]
    assert [f for f in found if f[1]] == []


CORRUPTIONS = {
    "shift offsets": (
        lambda t: t["retrieved"][0].update(
            offsets=[t["retrieved"][0]["offsets"][0] + 1, t["retrieved"][0]["offsets"][1] + 1]
        ),
        ["span_text_mismatch"],
    ),
    "change text": (lambda t: t["retrieved"][0].update(text=t["retrieved"][0]["text"] + "x"), ["span_text_mismatch"]),
    "stale rev": (lambda t: t["retrieved"][0].update(rev="0123456789ab"), ["rev_mismatch"]),
    "unknown section": (lambda t: t["retrieved"][0].update(section_id="p999"), ["unknown_section"]),
    "neighbour section": (
        lambda t: t["retrieved"][0].update(section_id="p1" if t["retrieved"][0]["section_id"] != "p1" else "p2"),
        ["section_mismatch"],
    ),
    "past the end": (lambda t: t["retrieved"][0].update(offsets=[10**7, 10**7 + 5], text=None), ["span_out_of_bounds"]),
    "unknown document": (lambda t: t["retrieved"][0].update(doc_id="squad/99"), ["unknown_document"]),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_corruption_gives_exactly_the_expected_code(squad, name):
    corpus, answers = squad
    change, expected = CORRUPTIONS[name]
    # a sample across both articles, every 25th answer
    for n, answer in list(enumerate(answers))[::25]:
        trace = payload_trace(corpus, *answer, n)
        change(trace)
        assert span_codes(corpus, trace) == expected, answer
