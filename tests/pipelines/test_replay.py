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


def test_a_replayed_run_is_its_recorded_trace_under_the_pipelines_name(tmp_path, valid_trace):
    import dataclasses
    import json

    from ragaudit.io.traces import read_traces

    wrong = {**valid_trace, "qid": "W", "config": 7, "seed": "1", "retrieved": [{"doc_id": 3}]}
    recorded = tmp_path / "traces.jsonl"
    recorded.write_text("".join(json.dumps(t) + "\n" for t in (valid_trace, {**valid_trace, "config": "x"}, wrong)))
    replayed = list(ReplayPipeline("prod-log", recorded).recorded())
    read = list(read_traces(recorded))  # as any trace file is read: its own config, its file and line
    assert [t.line for t in read] == [1, 2, 3] and read[2].field_errors
    assert replayed == [dataclasses.replace(t, config="prod-log", file=None, line=None) for t in read]
    assert [dump_trace(t) for t in replayed] == [
        dump_trace(dataclasses.replace(t, config="prod-log", file=None, line=None)) for t in read
    ]
