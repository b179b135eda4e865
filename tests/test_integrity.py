"""Nothing lost, nothing invented, no traceback: the run directory's lock, resume checks, stored
traces that are never rewritten, atomic outputs, verify over inputs and outputs, signals, analyzer
parity that does not depend on the worker count, and start failures that leave nothing behind."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import BM25, FIXTURES, TFIDF, invoke, run_dir_of, stalling, write_config

from ragaudit.io import rundir
from ragaudit.io.files import write_atomic
from ragaudit.io.traces import read_traces


@pytest.fixture
def fixtures_on_path():
    sys.path.insert(0, str(FIXTURES))
    yield
    sys.path.remove(str(FIXTURES))


@pytest.fixture
def finished(tmp_path):
    config = write_config(tmp_path, BM25 + TFIDF, items=3, seeds="[1]")
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    return config, run_dir_of(result)


def test_a_second_process_cannot_take_a_locked_run_directory(finished):
    config, run_dir = finished
    with rundir.locked(run_dir):
        result = invoke("run", config, "--resume", run_dir)
        assert result.exit_code == 3 and f"locked by pid {os.getpid()}" in result.stderr
        assert invoke("report", run_dir).exit_code == 3
    assert invoke("report", run_dir, "--no-gate").exit_code == 0


def test_two_concurrent_resumes_duplicate_nothing(tmp_path):
    go = tmp_path / "go"
    go.write_text("")
    config = write_config(tmp_path, stalling(answered=4, go=go), items=8)
    env = {**os.environ, "PYTHONPATH": str(FIXTURES), "CI": "1"}
    first = subprocess.run(
        [sys.executable, "-m", "ragaudit", "run", str(config), "--no-gate"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert first.returncode == 0, first.stderr
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())  # history.sqlite lies beside it
    traces = (run_dir / "traces.jsonl").read_text().splitlines()
    (run_dir / "traces.jsonl").write_text("\n".join(traces[:10]) + "\n")  # as if killed after 10 runs
    go.unlink()  # the resume that takes the run directory waits at the fifth question until told
    command = [sys.executable, "-m", "ragaudit", "run", str(config), "--resume", str(run_dir), "--no-gate"]
    children = [
        subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    deadline = time.monotonic() + 120  # a bound for a stalled machine, not a timing
    while all(c.poll() is None for c in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    [loser] = [c for c in children if c.poll() is not None]  # refused while the other holds the run
    assert loser.returncode == 3 and "locked by pid" in loser.stderr.read()
    go.write_text("")
    [winner] = [c for c in children if c is not loser]
    assert winner.wait(timeout=120) == 0, winner.stderr.read()
    keys = [(t.config, t.qid, t.variant, t.seed) for t in read_traces(run_dir / "traces.jsonl")]
    assert len(keys) == 8 * 3 * 2 and len(set(keys)) == len(keys)


def test_resume_refuses_changed_inputs_and_keeps_index_identity(finished, tmp_path):
    config, run_dir = finished
    manifest = rundir.read_manifest(run_dir)
    assert set(manifest["index"]) == {"bm25", "tfidf"}
    lines = (run_dir / "traces.jsonl").read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["config"] == "bm25"]  # tfidf runs lost, bm25 complete
    (run_dir / "traces.jsonl").write_text("\n".join(kept) + "\n")
    result = invoke("run", config, "--resume", run_dir, "--no-gate")
    assert result.exit_code == 0, result.output
    manifest = rundir.read_manifest(run_dir)
    assert set(manifest["index"]) == {"bm25", "tfidf"} and manifest["index"]["bm25"]["store"] == "bm25"
    gold = tmp_path / "gold.jsonl"
    gold.write_text(gold.read_text() + "\n")
    result = invoke("run", config, "--resume", run_dir)
    assert result.exit_code == 2 and "gold changed since the run" in result.stderr


def test_report_never_rewrites_stored_traces(finished):
    _, run_dir = finished
    traces = run_dir / "traces.jsonl"
    damaged = traces.read_bytes() + b'{"qid": \n'
    traces.write_bytes(damaged)
    result = invoke("report", run_dir)
    assert result.exit_code == 3 and "traces.jsonl:" in result.stderr
    assert traces.read_bytes() == damaged
    verify = invoke("verify", run_dir)
    assert verify.exit_code == 5 and "traces" in verify.stderr


def test_verify_names_changed_outputs_and_documents(finished, tmp_path):
    _, run_dir = finished
    assert invoke("verify", run_dir).exit_code == 0
    (run_dir / "summary.md").write_text("# ragaudit: gate passed ✅\n")
    result = invoke("verify", run_dir)
    assert result.exit_code == 5 and "output: summary.md changed" in result.stderr
    assert invoke("report", run_dir, "--no-gate").exit_code == 0 and invoke("verify", run_dir).exit_code == 0


def test_verify_names_the_changed_corpus_documents(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    from helpers import DEMO

    for path in (DEMO / "corpus").iterdir():
        (corpus / path.name).write_text(path.read_text())
    config = write_config(tmp_path, BM25, items=3, seeds="[1]")
    config.write_text(config.read_text().replace(str(DEMO / "corpus"), str(corpus)))
    run_dir = run_dir_of(invoke("run", config, "--no-gate"))
    (corpus / "backups.md").write_text((corpus / "backups.md").read_text() + "\nOne more line.\n")
    (corpus / "extra.md").write_text("# Extra\n\nNew.\n")
    result = invoke("verify", run_dir)
    assert result.exit_code == 5
    assert "documents changed backups; added extra" in result.stderr


def test_a_damaged_manifest_is_an_input_error(finished):
    _, run_dir = finished
    for content in ("{not json", "[1, 2]", '{"inputs": 3}', "[" * 5000 + "]" * 5000):
        (run_dir / "manifest.json").write_text(content)
        for command in (["verify", run_dir], ["report", run_dir], ["faults", run_dir]):
            result = invoke(*command)
            assert result.exit_code == 3, (content[:20], command[0], result.output)
            assert "manifest.json" in result.stderr and "Traceback" not in result.output


def test_a_full_disk_is_an_input_output_error_that_loses_nothing(finished, monkeypatch):
    _, run_dir = finished
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}

    def full(name, **context):  # the disk fills up once report.html has begun
        yield "<!doctype html>"
        raise OSError(28, "No space left on device", name)

    monkeypatch.setattr("ragaudit.outputs.render.html.stream", full)
    result = invoke("report", run_dir)
    assert result.exit_code == 3 and "No space left on device" in result.stderr
    after = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file() and p.name != "manifest.json"}
    assert after["traces.jsonl"] == before["traces.jsonl"] and after["report.html"] == before["report.html"]
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]


def test_an_output_that_fails_returns_only_once_compares_writer_beside_it_is_done(finished, monkeypatch):
    import threading

    from ragaudit.outputs import writing as outputs

    _, run_dir = finished
    failing, done = threading.Event(), threading.Event()
    write_comparison = outputs.write_comparison

    def full(name, **context):
        failing.set()
        raise OSError(28, "No space left on device", name)

    def late(*args, **kwargs):  # compare is still writing when report.html fails
        failing.wait(10)
        time.sleep(0.3)
        found = write_comparison(*args, **kwargs)
        done.set()
        return found

    monkeypatch.setattr("ragaudit.outputs.render.html.stream", full)
    monkeypatch.setattr(outputs, "write_comparison", late)
    result = invoke("report", run_dir)
    assert result.exit_code == 3 and "No space left on device" in result.stderr
    assert done.is_set() and not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]


def full_on(table: str):
    """`sqlite3.connect` whose databases take no more rows into `table` (a disk that is full); every
    other table and database works."""
    import sqlite3

    connect = sqlite3.connect

    class Full:
        def __init__(self, db):
            self.db = db

        def __getattr__(self, name):
            return getattr(self.db, name)

        def __enter__(self):
            return self.db.__enter__()

        def __exit__(self, *raised):
            return self.db.__exit__(*raised)

        def executemany(self, sql, rows):
            if sql.startswith(f"INSERT INTO {table} "):
                raise sqlite3.OperationalError("database or disk is full")
            return self.db.executemany(sql, rows)

    return lambda *args, **kwargs: Full(connect(*args, **kwargs))


@pytest.mark.parametrize(
    "table,said,kept",
    [
        ("snippets", "cannot keep the audit's snippets: database or disk is full", "every file"),
        ("rag_traces", "cannot write rag_traces.sqlite: database or disk is full", "rag_traces.sqlite"),
    ],
)
def test_a_database_that_fills_up_is_an_input_output_error_that_loses_nothing(finished, monkeypatch, table, said, kept):
    """While the audit keeps its snippets (before any output), or while rag_traces.sqlite is written."""
    import sqlite3

    _, run_dir = finished
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    monkeypatch.setattr(sqlite3, "connect", full_on(table))
    result = invoke("report", run_dir)
    assert result.exit_code == 3, result.output
    assert said in result.stderr and f"{table}.sqlite" in result.stderr
    assert "Traceback" not in result.stderr
    after = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    if kept == "every file":
        assert after == before
    else:
        assert after[kept] == before[kept] and after["traces.jsonl"] == before["traces.jsonl"]
    assert not [p for p in run_dir.iterdir() if p.name.startswith(".") and p.name != ".lock"]


def test_the_audit_logs_trace_table_on_a_full_disk_is_an_input_output_error_that_leaves_the_old_file(
    tmp_path, monkeypatch
):
    import sqlite3

    from ragaudit.outputs.render.trace_table import ALL_COLUMNS, TraceTable

    target = tmp_path / "rag_traces.sqlite"
    target.write_bytes(b"the table of the run before")
    monkeypatch.setattr(sqlite3, "connect", full_on("rag_traces"))
    table = TraceTable(target)
    with pytest.raises(OSError, match="cannot write rag_traces.sqlite: database or disk is full") as raised:
        table.add([dict.fromkeys(ALL_COLUMNS)])
    table.abandon()
    assert raised.value.filename == str(target) and target.read_bytes() == b"the table of the run before"
    assert [p.name for p in tmp_path.iterdir()] == ["rag_traces.sqlite"]


def test_a_trace_table_that_cannot_be_made_is_an_input_output_error_that_leaves_the_old_file(tmp_path, monkeypatch):
    import sqlite3

    from ragaudit.outputs.render.trace_table import TraceTable

    target = tmp_path / "rag_traces.sqlite"
    target.write_bytes(b"the table of the run before")

    def unopenable(*args, **kwargs):
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(sqlite3, "connect", unopenable)
    with pytest.raises(OSError, match="cannot write rag_traces.sqlite: unable to open database file") as raised:
        TraceTable(target)
    assert raised.value.filename == str(target) and target.read_bytes() == b"the table of the run before"
    assert [p.name for p in tmp_path.iterdir()] == ["rag_traces.sqlite"]


def logs_of(run_dir: Path) -> tuple[str, list]:
    """traces.log's text and rag_traces.sqlite's rows."""
    import sqlite3

    with sqlite3.connect(run_dir / "rag_traces.sqlite") as db:
        return (run_dir / "traces.log").read_text(), db.execute("SELECT * FROM rag_traces").fetchall()


class Failing:
    """Worker processes (`write_outputs(beside=...)`) whose every task fails with `error`."""

    def __init__(self, error: BaseException):
        self.error, self.tasks = error, []

    def submit(self, fn, *args):
        from concurrent.futures import Future

        self.tasks.append(fn.__name__)
        future: Future = Future()
        future.set_exception(self.error)
        return future


def test_logs_whose_worker_processes_all_died_are_written_here(finished, monkeypatch):
    from ragaudit.core.execution import WorkerDied
    from ragaudit.outputs import writing as outputs

    _, run_dir = finished
    logs = logs_of(run_dir)
    (run_dir / "traces.log").unlink()
    (run_dir / ".traces.log.k1ll3d.tmp").write_text("half a log")  # what a worker killed mid-write leaves
    dying = Failing(WorkerDied(2))
    write_outputs = outputs.write_outputs
    monkeypatch.setattr(outputs, "write_outputs", lambda *a, **k: write_outputs(*a, **k, beside=dying))
    assert invoke("report", run_dir, "--no-gate").exit_code == 0
    assert dying.tasks == ["write_log_files"] and logs_of(run_dir) == logs
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]


def test_logs_that_fail_beside_fail_the_outputs_once_compare_is_done(finished, monkeypatch):
    import threading

    from ragaudit.outputs import writing as outputs

    _, run_dir = finished
    done = threading.Event()
    write_comparison, write_outputs = outputs.write_comparison, outputs.write_outputs

    def late(*args, **kwargs):
        time.sleep(0.3)
        found = write_comparison(*args, **kwargs)
        done.set()
        return found

    monkeypatch.setattr(outputs, "write_comparison", late)
    full = Failing(OSError(28, "No space left on device", "traces.log"))
    monkeypatch.setattr(outputs, "write_outputs", lambda *a, **k: write_outputs(*a, **k, beside=full))
    result = invoke("report", run_dir)
    assert result.exit_code == 3 and "No space left on device" in result.stderr
    assert done.is_set() and not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]


class Late:
    """Worker processes whose every task runs here, in a thread, once `ready` is set and `delay`
    seconds more have passed."""

    def __init__(self, ready, delay: float, events: list):
        self.ready, self.delay, self.events = ready, delay, events

    def submit(self, fn, *args):
        import threading
        from concurrent.futures import Future

        self.events.append(fn.__name__)
        future: Future = Future()

        def run():
            self.ready.wait(30)
            time.sleep(self.delay)
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the future
                future.set_exception(exc)
            self.events.append(f"{fn.__name__} done")

        threading.Thread(target=run).start()
        return future


def test_the_logs_go_beside_before_report_json_and_a_failing_report_waits_for_them(finished, monkeypatch):
    import threading

    from ragaudit.auditing import reporting
    from ragaudit.outputs import writing as outputs

    _, run_dir = finished
    logs = logs_of(run_dir)
    events: list[str] = []
    begun = threading.Event()  # the logs are written once report.json is begun: the order is the code's
    write_report, write_outputs = reporting.write_report, outputs.write_outputs

    def recorded(*args, **kwargs):
        events.append("report.json")
        begun.set()
        return write_report(*args, **kwargs)

    monkeypatch.setattr(reporting, "write_report", recorded)
    monkeypatch.setattr(outputs, "write_outputs", lambda *a, **k: write_outputs(*a, **k, beside=Late(begun, 0, events)))
    assert invoke("report", run_dir, "--no-gate").exit_code == 0
    assert events == ["write_log_files", "report.json", "write_log_files done"]
    assert logs_of(run_dir) == logs  # the same logs, the same question states

    def full(*args, **kwargs):
        events.append("report.json")
        begun.set()
        raise OSError(28, "No space left on device", "report.json")

    events.clear()
    begun.clear()
    monkeypatch.setattr(reporting, "write_report", full)
    monkeypatch.setattr(
        outputs, "write_outputs", lambda *a, **k: write_outputs(*a, **k, beside=Late(begun, 0.3, events))
    )
    result = invoke("report", run_dir, "--no-gate")
    assert result.exit_code == 3 and "No space left on device" in result.stderr
    assert events == ["write_log_files", "report.json", "write_log_files done"]  # waited for before the exit
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]


def test_an_atomic_write_that_fails_leaves_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    target.write_text("old")
    real = type(target).write_text

    def half_then_full(self, data, **kw):  # the disk fills up half-way through the write
        real(self, data[: len(data) // 2], **kw)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(type(target), "write_text", half_then_full)
    with pytest.raises(OSError):
        write_atomic(target, "new content")
    monkeypatch.undo()
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["report.json"]


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_keeps_finished_runs_and_resume_finishes(tmp_path, signum, code):
    go = tmp_path / "go"  # absent: the runs of the first 3 questions answer, the rest wait
    config = write_config(tmp_path, stalling(answered=3, go=go), items=10)
    env = {**os.environ, "PYTHONPATH": str(FIXTURES), "CI": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "ragaudit", "run", str(config), "--workers", "2"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120  # a bound for a stalled machine, not a timing
    found = []
    while time.monotonic() < deadline and child.poll() is None:
        found = list((tmp_path / "runs").glob("*/traces.jsonl")) if (tmp_path / "runs").exists() else []
        if found and len(found[0].read_text().splitlines()) >= 3 * 3 * 2:
            break
        time.sleep(0.02)
    assert found, child.stderr.read() if child.poll() is not None else "no traces appeared"
    child.send_signal(signum)
    assert child.wait(timeout=120) == code
    stderr = child.stderr.read()
    assert "interrupted by" in stderr and "--resume" in stderr and "Traceback" not in stderr
    run_dir = found[0].parent
    assert len((run_dir / "traces.jsonl").read_text().splitlines()) == 3 * 3 * 2  # every finished run
    assert not (run_dir / "report.json").exists()
    go.write_text("")
    finish = subprocess.run(
        [sys.executable, "-m", "ragaudit", "run", str(config), "--resume", str(run_dir), "--no-gate"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert finish.returncode == 0, finish.stderr
    keys = [(t.config, t.qid, t.variant, t.seed) for t in read_traces(run_dir / "traces.jsonl")]
    assert len(keys) == 60 and len(set(keys)) == 60


def test_analyzer_parity_abort_does_not_depend_on_workers(tmp_path, fixtures_on_path):
    from parity_rag import drifts

    from ragaudit.io.gold import read_gold

    config = write_config(
        tmp_path, '[[pipelines]]\nname = "drifting"\nkind = "python"\nfactory = "parity_rag:make"\n', items=6
    )
    items, _ = read_gold(tmp_path / "gold.jsonl")
    plan = [(i.qid, v, s, q) for i in items for v, q in enumerate(i.variants[:3]) for s in (1, 2)]
    first = next(n for n, (_, _, _, q) in enumerate(plan) if drifts(q))
    assert 0 < first < len(plan) - 4  # the fixture stops part-way, with runs left that workers could start
    counts = []
    for workers in ("1", "4"):
        result = invoke("run", config, "--no-gate", "--workers", workers)
        assert result.exit_code == 0, result.output
        run_dir = run_dir_of(result)
        counts.append([(t.qid, t.variant, t.seed) for t in read_traces(run_dir / "traces.jsonl")])
        assert "aborted (analyzer parity)" in result.stderr
    assert counts[0] == counts[1] == sorted(r[:3] for r in plan[: first + 1])


def test_a_pipeline_that_cannot_start_leaves_no_run_directory(tmp_path, fixtures_on_path):
    config = write_config(
        tmp_path, '[[pipelines]]\nname = "broken"\nkind = "python"\nfactory = "toy_rag:make_broken"\n'
    )
    result = invoke("run", config)
    assert result.exit_code == 4 and "refused the connection" in result.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_factory_that_exits_is_a_start_error_not_a_pass(tmp_path, fixtures_on_path):
    config = write_config(
        tmp_path, '[[pipelines]]\nname = "quits"\nkind = "python"\nfactory = "parity_rag:make_exiting"\n'
    )
    result = invoke("run", config)
    assert result.exit_code == 4 and "SystemExit" in result.stderr


def test_sigterm_stops_hung_command_children_and_their_groups(tmp_path):
    pids = tmp_path / "pids"
    pipeline = (
        f'[[pipelines]]\nname = "hung"\nkind = "command"\n'
        f'command = ["{sys.executable}", "{FIXTURES / "hanging_family.py"}", "{pids}"]\ntimeout_s = 600\n'
    )
    config = write_config(tmp_path, pipeline, items=2, seeds="[1]")
    child = subprocess.Popen(
        [sys.executable, "-m", "ragaudit", "run", str(config)],
        cwd=tmp_path,
        env={**os.environ, "CI": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not pids.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    family = [int(p) for p in pids.read_text().split()]
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=120) == 143, child.stderr.read()
    deadline = time.monotonic() + 60  # a bound for a stalled machine, not a timing
    while time.monotonic() < deadline and any(_alive(p) for p in family):
        time.sleep(0.05)
    assert not any(_alive(p) for p in family)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def native(tmp_path, *, timeout_s: float) -> tuple[Path, Path, Path]:
    """A config of one question whose python pipeline runs in torch until `go` exists."""
    pytest.importorskip("torch")
    go, started = tmp_path / "go", tmp_path / "started"
    pipeline = (
        '[[pipelines]]\nname = "native"\nkind = "python"\nfactory = "native_rag:make"\n'
        f"timeout_s = {timeout_s}\noptions = {{go = {json.dumps(str(go))}, started = {json.dumps(str(started))}}}\n"
    )
    return write_config(tmp_path, pipeline, items=1, seeds="[1]"), go, started


def test_sigterm_while_a_python_pipeline_is_in_native_code_exits_143(tmp_path):
    """The call's thread is inside torch when the run stops: ending the interpreter under it made
    the C++ runtime abort ("terminate called without an active exception", exit 134)."""
    config, go, started = native(tmp_path, timeout_s=3600)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")]), "CI": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "ragaudit", "run", str(config), "--workers", "2"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120  # a bound for a stalled machine, not a timing
    while time.monotonic() < deadline and child.poll() is None and not started.exists():
        time.sleep(0.05)
    assert started.exists(), child.stderr.read() if child.poll() is not None else "no call started"
    time.sleep(0.5)  # well inside the matrix products
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=120) == 143, child.stderr.read()
    stderr = child.stderr.read()
    assert "interrupted by SIGTERM" in stderr and "--resume" in stderr
    assert "terminate called" not in stderr and "Traceback" not in stderr


def test_a_python_call_left_running_in_native_code_after_its_timeout_keeps_the_exit_code(tmp_path):
    config, go, started = native(tmp_path, timeout_s=1)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "ragaudit", "run", str(config)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr  # every run timed out: a failed gate, not an abort (134)
    assert "terminate called" not in done.stderr and "run directory:" in done.stdout
    traces = [json.loads(line) for line in next(tmp_path.glob("runs/*/traces.jsonl")).read_text().splitlines()]
    assert len(traces) == 3 and all("timed out" in t["error"] for t in traces)
