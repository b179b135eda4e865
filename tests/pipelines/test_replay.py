from ragaudit.io.traces import dump_trace
from ragaudit.pipelines.base import Request
from ragaudit.pipelines.replay import ReplayPipeline


def request(qid: str) -> Request:
    return Request(qid=qid, variant=0, seed=1, query="q", k=3)


def test_a_recording_with_a_lone_surrogate_or_nan_replays_writably(tmp_path):
    # Both are valid JSON as Python reads it; neither may break the traces file of the run.
    recorded = tmp_path / "traces.jsonl"
    recorded.write_text(
        '{"qid": "S", "variant": 0, "seed": 1, "answer": {"text": "bad \\ud800 text"}, "retrieved": []}\n'
        '{"qid": "N", "variant": 0, "seed": 1, "retrieved": [{"doc_id": "d", "score_norm": NaN, "score_raw": -Infinity}]}\n',
        encoding="utf-8",
    )
    pipeline = ReplayPipeline("prod-log", recorded)
    surrogate, nan = list(pipeline.recorded())
    assert surrogate.error is None and surrogate.answer.text == "bad \ufffd text" and surrogate.config == "prod-log"
    dump_trace(surrogate).encode("utf-8")
    dump_trace(nan).encode("utf-8")
    assert nan.retrieved[0].score_norm is None and nan.retrieved[0].score_raw is None  # dropped, reported as wrong_type
    assert {e.path for e in nan.field_errors} >= {"$.retrieved[0].score_norm", "$.retrieved[0].score_raw"}
    missing = pipeline.run(request("X"))
    assert missing.error.startswith("no recorded run for qid 'X'") and not missing.retrieved
    assert pipeline.close() is None
