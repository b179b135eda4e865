from adapter_helpers import INDEX, assert_spans_match, audit, errors, handbook
from helpers import Lazy

from ragaudit.adapters.openai import from_openai

# imported when a test first uses them: collecting the suite stays fast
Response = Lazy("openai.types.responses", "Response")
AnnotationFileCitation = Lazy("openai.types.responses.response_output_text", "AnnotationFileCitation")

KEYS = handbook()["key-management"].text
HARDWARE = handbook().section("key-management", "key-management/hardware-keys")
PARAGRAPHS = [p for p in KEYS[HARDWARE.start : HARDWARE.end].split("\n\n") if not p.startswith("#")]
ANSWER = (
    "Administrator hardware keys are rotated every 12 months. "
    "New keys are activated during a video call with the help desk."
)
FIRST_STOP = ANSWER.index(".") + 1


def response(results: list[dict] | None, annotations: list[dict], text: str = ANSWER) -> Response:
    """A Response as the API returns it, with `include=["file_search_call.results"]` when results are given."""
    return Response.model_validate(
        {
            "id": "resp_68c1f2a9",
            "object": "response",
            "created_at": 1763800000,
            "status": "completed",
            "model": "gpt-4.1-mini-2025-04-14",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [{"type": "file_search", "vector_store_ids": ["vs_handbook"]}],
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "temperature": 1.0,
            "top_p": 1.0,
            "output": [
                {
                    "type": "file_search_call",
                    "id": "fs_68c1f2b0",
                    "status": "completed",
                    "queries": ["admin hardware key rotation"],
                    "results": results,
                },
                {
                    "type": "message",
                    "id": "msg_68c1f2c4",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": annotations, "logprobs": []}],
                },
            ],
        }
    )


def result(text: str, score: float, file_id: str = "file-KM1", filename: str = "key-management.md", **attrs) -> dict:
    return {"file_id": file_id, "filename": filename, "score": score, "text": text, "attributes": attrs}


def cite(index: int, file_id: str = "file-KM1", filename: str = "key-management.md") -> dict:
    return {"type": "file_citation", "file_id": file_id, "filename": filename, "index": index}


def test_file_search_results_and_annotations_audit_clean():
    # a vector store holding one file per section, tagged with the corpus doc_id
    sections = [
        result(p, s, file_id="file-KMHW", filename="km-hardware-keys.txt", doc_id="key-management")
        for p, s in zip(PARAGRAPHS, (0.93, 0.71, 0.71))
    ]
    r = response(
        sections,
        [cite(FIRST_STOP, "file-KMHW", "km-hardware-keys.txt"), cite(len(ANSWER), "file-KMHW", "km-hardware-keys.txt")],
    )
    assert isinstance(r.output[1].content[0].annotations[0], AnnotationFileCitation)
    trace = from_openai(r, qid="KM-1", query="How often are admin keys rotated?", index=INDEX, sources=handbook())
    payloads = trace["retrieved"]
    assert_spans_match(payloads)
    assert [p["doc_id"] for p in payloads] == ["key-management"] * 3
    assert {p["section_id"] for p in payloads} == {"key-management/hardware-keys"}
    assert [p["score_norm"] for p in payloads] == [0.93, 0.71, 0.71]
    assert [p["k_pos"] for p in payloads] == [1, 2, 3]
    ids = sorted(p["snippet_id"] for p in payloads)
    assert trace["answer"]["text"] == ANSWER
    assert [(s["text"], sorted(s["citations"])) for s in trace["answer"]["segments"]] == [
        ("Administrator hardware keys are rotated every 12 months.", ids),
        ("New keys are activated during a video call with the help desk.", ids),
    ]
    assert audit(trace) == []


def test_default_chunking_of_a_small_file_spans_its_sections():
    # OpenAI's default chunks (800 tokens) hold a whole handbook file: a real finding for ragaudit
    r = response([result(KEYS, 0.88)], [cite(FIRST_STOP)])
    trace = from_openai(r, qid="KM-1", query="q", index=INDEX, sources=handbook())
    [p] = trace["retrieved"]
    assert p["doc_id"] == "key-management"  # from the file name
    assert p["offsets"] == {"start": 0, "end": len(KEYS), "unit": "char"}
    assert errors(audit(trace)) == [("section_mismatch", p["snippet_id"])]


def test_without_included_results_the_cited_files_dangle():
    trace = from_openai(response(None, [cite(FIRST_STOP)]), qid="KM-1", query="q", index=INDEX)
    assert trace["retrieved"] == []
    assert trace["answer"]["segments"][0]["citations"] == ["file-KM1"]
    assert ("dangling_citation", "file-KM1") in errors(audit(trace))


def test_a_chunk_not_found_verbatim_has_no_offsets():
    tidied = " ".join(KEYS.split())  # text as a file parser might return it
    r = response([result(tidied[:300], 0.8)], [cite(FIRST_STOP)])
    trace = from_openai(r, qid="KM-1", query="q", index=INDEX, sources=handbook())
    [p] = trace["retrieved"]
    assert "offsets" not in p
    # with no span, the section falls back to `_preamble`, which this document does not have
    assert set(errors(audit(trace))) == {("missing_offsets", p["snippet_id"]), ("unknown_section", p["snippet_id"])}


def test_an_annotation_cites_every_chunk_of_its_file_and_a_citation_after_the_stop_stays_put():
    results = [
        result(PARAGRAPHS[0], 0.9),
        result(PARAGRAPHS[1], 0.6, file_id="file-X", filename="x.md", doc_id="key-management"),
    ]
    r = response(results, [cite(FIRST_STOP, "file-X", "x.md")])
    trace = from_openai(r, qid="KM-1", query="q", index=INDEX, sources=handbook())
    second = trace["retrieved"][1]["snippet_id"]
    assert [s["citations"] for s in trace["answer"]["segments"]] == [[second], []]
