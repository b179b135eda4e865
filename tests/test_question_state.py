"""Per-question state is bounded and order-free: a question's accumulators leave memory once its
planned runs are in (runs come in plan order from a run), and a recording replayed in any order
gives the same report as in plan order."""

import json
import random

from helpers import BM25, TFIDF, comparable, invoke, run_dir_of, write_config

from ragaudit.auditing import StreamingAudit
from ragaudit.inputs import Inputs
from ragaudit.io.config import load_config
from ragaudit.io.traces import read_traces


def recorded(tmp_path, items=6):
    config = write_config(tmp_path, BM25 + TFIDF, items=items)
    return run_dir_of(invoke("run", config, "--no-gate"))


def test_a_question_leaves_memory_when_its_planned_runs_are_in(tmp_path):
    run_dir = recorded(tmp_path, items=4)
    config = load_config(tmp_path / "audit.toml")
    traces = list(read_traces(run_dir / "traces.jsonl"))
    per_question = 3 * 2  # paraphrases x seeds
    assert len(traces) == 2 * 4 * per_question  # pipelines x questions x runs, in plan order
    (tmp_path / "work").mkdir()
    auditor = StreamingAudit(Inputs.from_config(config), tmp_path / "work", batch=5)
    book = auditor.book
    flushed = []
    for n, trace in enumerate(traces, 1):
        auditor.add(trace)
        if n % 5 == 0:  # a batch was scored: the questions whose runs are all in are released
            flushed.append((book.released, book.held))
            assert (book.released, book.held) == (n // per_question, int(n % per_question > 0))
    assert len(flushed) == 9
    result = auditor.finish()
    assert book.released == 8 and book.held == 0
    assert not (tmp_path / "work" / "questions.spill").exists()
    assert [(q.pipeline, q.qid, q.stats.runs) for q in result.evaluation.questions] == sorted(
        (p, t.qid, per_question) for p in ("bm25", "tfidf") for t in traces[:24:per_question]
    )


def test_a_recording_in_any_order_gives_the_same_report(tmp_path):
    run_dir = recorded(tmp_path)
    lines = (run_dir / "traces.jsonl").read_text().splitlines(keepends=True)
    recording = tmp_path / "recorded.jsonl"
    replay = '[[pipelines]]\nname = "bm25"\nkind = "replay"\ntraces = "recorded.jsonl"\n'
    reports = []
    for order in range(3):
        mine = [line for line in lines if json.loads(line)["config"] == "bm25"]
        if order:
            random.Random(order).shuffle(mine)
        recording.write_text("".join(mine))
        config = write_config(tmp_path, replay)
        reports.append(json.loads((run_dir_of(invoke("run", config, "--no-gate")) / "report.json").read_text()))
    assert reports[0]["summary"]["runs"] == 6 * 3 * 2
    assert comparable(reports[1]) == comparable(reports[0])
    assert comparable(reports[2]) == comparable(reports[0])
