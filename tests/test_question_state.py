"""Per-question state is bounded and order-free: a question's accumulators leave memory once its
planned runs are in (runs come in plan order from a run), runs in another order go to a sorted
spill once too many are held, and a recording replayed in any order gives the same report as in
plan order."""

import json
import random

from helpers import BM25, TFIDF, comparable, invoke, run_dir_of, write_config

from ragaudit.auditing.audit import StreamingAudit
from ragaudit.checks.metrics import aggregate
from ragaudit.io.config import load_config
from ragaudit.io.traces import read_traces
from ragaudit.pipelines.inputs import Inputs


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
    assert len(auditor.snippet_spans) > 0  # an entry per snippet, while runs come in
    result = auditor.finish()
    assert book.released == 8 and book.held == 0
    # finished, the audit keeps nothing per snippet or per released question for the outputs' time
    assert len(auditor.snippet_spans) == 0 and not book._released
    assert not (tmp_path / "work" / "questions.spill").exists()
    assert [(q.pipeline, q.qid, q.stats.runs) for q in result.evaluation.questions] == sorted(
        (p, t.qid, per_question) for p in ("bm25", "tfidf") for t in traces[:24:per_question]
    )


def test_runs_in_any_order_leave_memory_through_a_sorted_spill(tmp_path):
    run_dir = recorded(tmp_path, items=4)
    config = load_config(tmp_path / "audit.toml")
    in_order = list(read_traces(run_dir / "traces.jsonl"))
    shuffled = list(in_order)
    random.Random(7).shuffle(shuffled)

    def audited(traces, limit, name):
        (tmp_path / name).mkdir()
        auditor = StreamingAudit(Inputs.from_config(config), tmp_path / name, batch=5)
        auditor.book.limit = limit
        most = 0
        for trace in traces:
            auditor.add(trace)
            most = max(most, auditor.book.held_runs)
        result = auditor.finish()
        assert not list((tmp_path / name).glob("questions.spill*"))  # every spill file is gone
        return auditor.book, most, result

    book, most, result = audited(shuffled, 8, "shuffled")
    assert most <= 8 and book.spilled_runs >= len(shuffled) - 8  # never more than 8 runs held
    assert book.released == 8 and book.held == 0  # each question left memory when its last run came
    plain, _, expected = audited(in_order, 10**6, "in-order")
    assert plain.spilled_runs == 0 and plain.released == 8
    assert [q.to_json() for q in result.evaluation.questions] == [q.to_json() for q in expected.evaluation.questions]
    assert {n: p.to_json() for n, p in result.evaluation.pipelines.items()} == {
        n: p.to_json() for n, p in expected.evaluation.pipelines.items()
    }


def test_a_recording_in_any_order_gives_the_same_report(tmp_path, monkeypatch):
    monkeypatch.setattr(aggregate, "HELD_RUNS", 7)  # the shuffled replays go through the sorted spill
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


def test_what_scoring_remembered_per_text_leaves_memory_before_the_question_rows(tmp_path, monkeypatch):
    """Once the last run is scored (its snippets' spans are checked then), before the question rows
    are built from the aggregates, and still after the outputs."""
    from ragaudit.checks.metrics import memo
    from ragaudit.checks.metrics.aggregate import Aggregates
    from ragaudit.checks.validation.snippets import SnippetSpans
    from ragaudit.outputs import writing as outputs

    held = []

    def memos(what: str) -> None:
        held.append((what, [(len(m), m.size) for m in memo.every() if len(m)]))

    def counting(what, original):
        def counted(*args, **kwargs):
            memos(what)
            done = original(*args, **kwargs)
            memos(f"after {what}")
            return done

        return counted

    monkeypatch.setattr(SnippetSpans, "issues", counting("scored", SnippetSpans.issues))
    monkeypatch.setattr(Aggregates, "finish", counting("rows", Aggregates.finish))
    monkeypatch.setattr(outputs, "write_outputs", counting("outputs", outputs.write_outputs))
    recorded(tmp_path, items=3)
    assert [what for what, _ in held] == ["scored", "after scored", "rows", "after rows", "outputs", "after outputs"]
    assert held[0][1] and all(found == [] for _, found in held[2:])


def test_a_recording_is_stored_in_its_own_order_as_the_reference_says(tmp_path):
    """A replay streams its recording: traces.jsonl holds the recorded runs in the recording's
    order, then the planned runs it lacks (errors) in plan order, and the reference says so."""
    from helpers import REFERENCE, markdown_table

    run_dir = recorded(tmp_path, items=3)
    lines = [line for line in (run_dir / "traces.jsonl").read_text().splitlines() if '"config":"bm25"' in line]
    planned = [(t["qid"], t["variant"], t["seed"]) for t in map(json.loads, lines)]
    random.Random(3).shuffle(lines)
    kept = lines[:-2]  # two planned runs the recording lacks
    (tmp_path / "recorded.jsonl").write_text("".join(line + "\n" for line in kept))
    config = write_config(
        tmp_path, '[[pipelines]]\nname = "bm25"\nkind = "replay"\ntraces = "recorded.jsonl"\n', items=3
    )
    stored = [json.loads(line) for line in (run_dir_of(invoke("run", config, "--no-gate")) / "traces.jsonl").open()]
    in_recording = [(t["qid"], t["variant"], t["seed"]) for t in map(json.loads, kept)]
    lacking = [key for key in planned if key not in in_recording]
    assert [(t["qid"], t["variant"], t["seed"]) for t in stored] == in_recording + lacking
    assert all(t.get("error") is None for t in stored[: len(kept)])
    assert all(t["error"].startswith("no recorded run for qid") for t in stored[len(kept) :])
    row = next(
        r for r in markdown_table(REFERENCE.read_text(encoding="utf-8"), "table: outputs") if r[0] == "`traces.jsonl`"
    )
    assert (
        "a `replay` pipeline's runs in its recording's order" in row[1] and "then the planned runs it lacks" in row[1]
    )
