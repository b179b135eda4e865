"""The runner end to end: every pipeline kind, resume after a real kill, worker-count independence,
and replaying a run's traces reproduces its metrics."""

import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner
from helpers import (
    BM25,
    DEMO,
    FIXTURES,
    LENIENT,
    STAMP,
    TFIDF,
    Terminal,
    comparable,
    count_corpus_loads,
    invoke,
    run_dir_of,
    stalling,
    write_config,
)

from ragaudit.cli.commands import main
from ragaudit.io.traces import read_traces


def test_reference_run_writes_every_output(tmp_path):
    config = write_config(tmp_path, BM25 + TFIDF)
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    run_dir = run_dir_of(result)
    names = {p.name for p in run_dir.iterdir()}
    assert names >= {
        "traces.jsonl",
        "issues.jsonl",
        "manifest.json",
        "report.json",
        "report.html",
        "traces.log",
        "rag_traces.sqlite",
        "junit.xml",
        "summary.md",
        "compare.json",
        "compare.html",
        "questions.parquet",
    }
    traces = list(read_traces(run_dir / "traces.jsonl"))
    assert len(traces) == 2 * 6 * 3 * 2
    assert (run_dir / "issues.jsonl").read_text() == ""  # every payload of the reference pipeline validates
    assert "runs/s" in result.output


def test_worker_count_does_not_change_the_report(tmp_path):
    config = write_config(tmp_path, BM25 + TFIDF)
    one = run_dir_of(invoke("run", config, "--no-gate", "--workers", "1"))
    four = run_dir_of(invoke("run", config, "--no-gate", "--workers", "4"))
    a = json.loads((one / "report.json").read_text())
    b = json.loads((four / "report.json").read_text())
    assert comparable(a) == comparable(b)


def test_report_rebuilds_identically(tmp_path):
    config = write_config(tmp_path, BM25)
    run_dir = run_dir_of(invoke("run", config, "--no-gate"))
    before = {name: (run_dir / name).read_bytes() for name in ("issues.jsonl", "traces.log", "junit.xml", "summary.md")}
    report = json.loads((run_dir / "report.json").read_text())
    rebuilt = invoke("report", run_dir, "--no-gate")
    assert rebuilt.exit_code == 0
    assert comparable(json.loads((run_dir / "report.json").read_text())) == comparable(report)
    assert {name: (run_dir / name).read_bytes() for name in before} == before


def test_replaying_the_traces_reproduces_the_metrics(tmp_path):
    config = write_config(tmp_path, BM25)
    first = run_dir_of(invoke("run", config, "--no-gate"))
    replay = write_config(
        tmp_path, f'[[pipelines]]\nname = "bm25"\nkind = "replay"\ntraces = "{first / "traces.jsonl"}"\n'
    )
    second = run_dir_of(invoke("run", replay, "--no-gate"))
    a = json.loads((first / "report.json").read_text())
    b = json.loads((second / "report.json").read_text())
    assert a["summary"]["pipelines"] == b["summary"]["pipelines"]
    assert [q["metrics"] for q in a["questions"]] == [q["metrics"] for q in b["questions"]]


def test_replay_reports_missing_runs_and_invents_none(tmp_path):
    config = write_config(tmp_path, BM25, seeds="[1]")
    first = run_dir_of(invoke("run", config, "--no-gate"))
    replay = write_config(
        tmp_path, f'[[pipelines]]\nname = "old"\nkind = "replay"\ntraces = "{first / "traces.jsonl"}"\n', seeds="[1, 9]"
    )
    second = run_dir_of(invoke("run", replay, "--no-gate"))
    traces = list(read_traces(second / "traces.jsonl"))
    missing = [t for t in traces if t.seed == 9]
    assert len(missing) == 18 and all(
        t.error.startswith("no recorded run for qid") and not t.retrieved for t in missing
    )
    issues = [json.loads(line) for line in (second / "issues.jsonl").read_text().splitlines()]
    assert {i["code"] for i in issues} == {"pipeline_error"} and len(issues) == 18


def test_python_and_command_pipelines_in_one_run(tmp_path):
    pipelines = (
        f'[[pipelines]]\nname = "py"\nkind = "python"\nfactory = "slow_rag:make"\noptions = {{delay = 0.0}}\n'
        f'[[pipelines]]\nname = "cmd"\nkind = "command"\n'
        f'command = ["{sys.executable}", "{FIXTURES / "jsonl_rag.py"}"]\ntimeout_s = 10\n'
    )
    config = write_config(tmp_path, pipelines, items=3, seeds="[1]")
    env_path = str(FIXTURES)
    sys.path.insert(0, env_path)
    try:
        result = invoke("run", config, "--no-gate", "--workers", "2")
    finally:
        sys.path.remove(env_path)
    assert result.exit_code == 0, result.output
    traces = list(read_traces(run_dir_of(result) / "traces.jsonl"))
    assert {t.config for t in traces} == {"py", "cmd"} and len(traces) == 2 * 3 * 3
    assert all(t.error is None for t in traces)


def test_a_python_or_command_pipeline_is_shown_as_itself(tmp_path):
    """Its label names the store and model its index reported, and its options are the ones its
    kind takes: nothing of the reference pipeline (retriever, analyzer, chunk_size, temperature)."""
    pipelines = (
        '[[pipelines]]\nname = "py"\nkind = "python"\nfactory = "slow_rag:make"\nk = 3\noptions = {delay = 0.0}\n'
        f'[[pipelines]]\nname = "cmd"\nkind = "command"\n'
        f'command = ["{sys.executable}", "{FIXTURES / "jsonl_rag.py"}"]\ntimeout_s = 10\n'
    )
    config = write_config(tmp_path, pipelines, items=1, seeds="[1]")
    sys.path.insert(0, str(FIXTURES))
    try:
        result = invoke("run", config, "--no-gate")
    finally:
        sys.path.remove(str(FIXTURES))
    assert result.exit_code == 0, result.output
    run_dir = run_dir_of(result)
    pipes = json.loads((run_dir / "report.json").read_text())["pipelines"]
    remote = {"k", "timeout_s", "retries", "retry_backoff_s", "cache"}
    assert set(pipes["py"]["options"]) == remote | {"factory", "options", "isolation", "code"}
    assert pipes["py"]["options"]["options"] == {"delay": 0.0} and pipes["py"]["options"]["k"] == 3
    assert set(pipes["cmd"]["options"]) == remote | {"command", "code"}
    page = (run_dir / "report.html").read_text()
    assert "python · slow · none · k=3 ·" in page and "command · echo · none · k=5 ·" in page
    assert "bm25" not in page


def test_unstartable_command_pipeline_exits_4(tmp_path):
    config = write_config(tmp_path, '[[pipelines]]\nname = "gone"\nkind = "command"\ncommand = ["/nonexistent/rag"]\n')
    result = CliRunner().invoke(main, ["run", str(config)])
    assert result.exit_code == 4
    assert "/nonexistent/rag" in result.stderr


def test_resume_after_kill_loses_and_duplicates_nothing(tmp_path):
    go = tmp_path / "go"  # absent: the runs of the first 3 questions answer, the rest wait
    config = write_config(tmp_path, stalling(answered=3, go=go), items=10)
    env = {**os.environ, "PYTHONPATH": str(FIXTURES), "CI": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "ragaudit", "run", str(config), "--workers", "2", "--no-gate"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    runs = tmp_path / "runs"
    deadline = time.monotonic() + 120  # a bound for a stalled machine, not a timing
    traces_file = None
    while time.monotonic() < deadline and child.poll() is None:
        found = list(runs.glob("*/traces.jsonl")) if runs.exists() else []
        if found and found[0].stat().st_size > 0 and len(found[0].read_text().splitlines()) >= 3 * 3 * 2:
            traces_file = found[0]
            break
        time.sleep(0.02)
    assert traces_file is not None, child.stderr.read() if child.poll() is not None else "no traces appeared"
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert len(traces_file.read_text().splitlines()) == 3 * 3 * 2  # exactly the runs that could finish
    with open(traces_file, "ab") as torn:  # a kill in the middle of writing a line
        torn.write('{"qid": "q-torn", "answer": "Ключ'.encode())
    go.write_text("")
    sys.path.insert(0, str(FIXTURES))
    try:
        result = invoke("run", config, "--resume", traces_file.parent, "--no-gate", "--workers", "2")
    finally:
        sys.path.remove(str(FIXTURES))
    assert result.exit_code == 0, result.output
    keys = [(t.config, t.qid, t.variant, t.seed) for t in read_traces(traces_file)]
    assert len(keys) == 10 * 3 * 2 and len(set(keys)) == len(keys)
    assert "resumed" in result.output
    # the digest kept while writing is the file's: the runs before the kill, without the torn line, and after
    manifest = json.loads((traces_file.parent / "manifest.json").read_text())
    assert manifest["traces_sha256"] == hashlib.sha256(traces_file.read_bytes()).hexdigest()


def test_the_traces_are_hashed_as_they_are_written_not_read_again(tmp_path, monkeypatch):
    from ragaudit.io import files
    from ragaudit.pipelines import runner

    def no_traces(path, **kwargs):
        assert Path(path).name != "traces.jsonl", "traces.jsonl read again to hash it"
        return files.sha256_file(path, **kwargs)

    monkeypatch.setattr(runner, "sha256_file", no_traces)
    result = invoke("run", write_config(tmp_path, BM25, items=3, seeds="[1]"), "--no-gate")
    assert result.exit_code == 0, result.output
    run_dir = run_dir_of(result)
    recorded = json.loads((run_dir / "manifest.json").read_text())["traces_sha256"]
    assert recorded == hashlib.sha256((run_dir / "traces.jsonl").read_bytes()).hexdigest()
    assert invoke("verify", run_dir).exit_code == 0


def test_a_digested_append_hashes_what_the_file_held_and_every_write(tmp_path):
    from ragaudit.io.files import DigestedAppend

    path = tmp_path / "traces.jsonl"
    with DigestedAppend(path) as out:  # a new file
        out.write('{"a": "Schlüssel"}\n')
        out.flush()
        assert out.hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()
    before = path.read_text() + "x" * (3 << 20)  # more than one block of reading
    path.write_text(before)
    with DigestedAppend(path) as out:
        out.write("鍵\n")
    assert path.read_text() == before + "鍵\n"
    assert out.hexdigest() == hashlib.sha256((before + "鍵\n").encode()).hexdigest()
    # lines of a few KB go to the file a megabyte at a time, and all of them once flushed
    lines = [f'{{"n": {n}, "text": "{"Schlüssel " * 500}"}}\n' for n in range(250)]
    with DigestedAppend(path) as out:
        for line in lines[:50]:  # about 250 KB: far more than a default buffer
            out.write(line)
        assert path.read_text() == before + "鍵\n"
        for line in lines[50:]:
            out.write(line)
        assert len(path.read_bytes()) > len((before + "鍵\n").encode())  # past a megabyte: written
        out.flush()
        assert path.read_text() == before + "鍵\n" + "".join(lines)
        assert out.hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()


def test_run_progress_is_live_on_a_terminal_and_plain_lines_elsewhere(tmp_path, monkeypatch, shown_progress):
    from ragaudit.core import progress
    from ragaudit.io.config import load_config
    from ragaudit.pipelines import runner

    config = load_config(write_config(tmp_path, BM25, items=2, seeds="[1]"))  # 2 questions x 3 variants
    monkeypatch.setattr(progress, "SHOWN_AFTER_S", 0.0)
    screen = shown_progress(Terminal(), ci=False)
    runner.run(config, out=tmp_path / "terminal")
    drawn = screen.getvalue()
    assert "\x1b[" in drawn  # drawn with terminal control codes
    assert re.search(r"✓ runs  \d+\.\d s  \(6/6 runs, [\d.,]+ runs/s\)", drawn)
    assert not re.search(STAMP, drawn)
    ci = shown_progress(Terminal())  # CI gets plain lines even on a terminal
    runner.run(config, out=tmp_path / "ci")
    assert "\x1b[" not in ci.getvalue()
    assert re.search(STAMP + r"  runs: started \(6 runs\)\n", ci.getvalue())
    assert re.search(STAMP + r"  runs: done in \d+\.\d s \(6/6 runs, [\d.,]+ runs/s\)\n", ci.getvalue())
    piped = shown_progress(io.StringIO(), ci=False)  # a pipe outside CI: nothing, however long a phase
    runner.run(config, out=tmp_path / "piped")
    assert piped.getvalue() == ""
    asked = shown_progress(io.StringIO(), ci=False, verbose=True)  # unless asked
    runner.run(config, out=tmp_path / "asked")
    assert re.search(STAMP + r"  runs: done in", asked.getvalue())


def test_run_rechecks_the_gold_set_first(tmp_path):
    config = write_config(tmp_path, BM25, items=3, seeds="[1]")
    gold = tmp_path / "gold.jsonl"
    lines = gold.read_text().splitlines()
    first = json.loads(lines[0])
    first["anchor"]["text"] = first["anchor"]["text"].replace("14", "16")  # the corpus moved on
    gold.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    result = invoke("run", config)
    assert result.exit_code == 3 and "gold_anchor_text_mismatch" in result.stderr
    assert not (tmp_path / "runs").exists()  # nothing was scored against the stale anchor
    result = invoke("run", config, "--no-gold-check", "--no-gate")
    assert result.exit_code == 0, result.output
    report = json.loads((run_dir_of(result) / "report.json").read_text())
    assert [f["code"] for f in report["gold_check"] if f["severity"] == "error"] == ["gold_anchor_text_mismatch"]
    assert report["summary"]["gold_check"]["errors"] == 1 and report["meta"]["gold_checked"] is False
    gold.write_text("\n".join([lines[0], lines[0], *lines[1:]]) + "\n")
    result = invoke("run", config, "--no-gold-check")
    assert result.exit_code == 3 and "gold_duplicate_qid" in result.stderr


def test_a_resumed_run_keeps_the_index_of_every_pipeline(tmp_path):
    """A run killed while its second pipeline waits, resumed: the first pipeline, done before the
    kill and not started again, keeps its index in the manifest and the report."""
    for name in ("slow_rag", "waiting_rag"):
        shutil.copy(FIXTURES / f"{name}.py", tmp_path / f"{name}.py")
    go = tmp_path / "go"
    config = write_config(
        tmp_path,
        '[[pipelines]]\nname = "py"\nkind = "python"\nfactory = "slow_rag:make"\noptions = {delay = 0.0}\n'
        f'[[pipelines]]\nname = "waits"\nkind = "python"\nfactory = "waiting_rag:make"\noptions = {{go = "{go}"}}\n',
        items=2,
        seeds="[1]",
    )
    child = subprocess.Popen(
        [sys.executable, "-m", "ragaudit", "run", str(config), "--no-gate"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    runs, deadline = tmp_path / "runs", time.monotonic() + 120
    traces = None
    while time.monotonic() < deadline and child.poll() is None:
        found = list(runs.glob("*/traces.jsonl")) if runs.exists() else []
        if found and len(found[0].read_text().splitlines()) == 2 * 3:  # py's runs; waits waits
            traces = found[0]
            break
        time.sleep(0.05)
    child.kill()
    _, err = child.communicate()
    assert traces is not None, err.decode()
    assert "index" not in json.loads((traces.parent / "manifest.json").read_text())  # killed: never finished
    go.write_text("")
    result = invoke("run", config, "--resume", traces.parent, "--no-gate")
    assert result.exit_code == 0, result.output
    slow = {"index_hash": "sha256:slow", "analyzer": "lowercase", "embed_model": "none", "store": "slow"}
    waiting = {"index_hash": "sha256:waiting", "analyzer": "lowercase", "embed_model": "none", "store": "waiting"}
    manifest = json.loads((traces.parent / "manifest.json").read_text())
    assert manifest["index"] == {"py": slow, "waits": waiting}
    report = json.loads((traces.parent / "report.json").read_text())
    assert report["meta"]["index"] == {"py": slow, "waits": waiting}
    assert {p: q["index"] for p, q in report["pipelines"].items()} == {"py": slow, "waits": waiting}


def test_a_run_against_a_baseline_loads_the_corpus_once(tmp_path, monkeypatch):
    import ragaudit.flows.app  # noqa: F401  (every module of a run imported, so each is watched)
    import ragaudit.pipelines.inputs  # noqa: F401

    config = write_config(tmp_path, BM25, items=2, seeds="[1]", extra=LENIENT)
    first = invoke("run", config)
    assert first.exit_code == 0, first.output
    loads = count_corpus_loads(monkeypatch)
    for baseline in (run_dir_of(first) / "report.json", "last-pass"):
        loads.clear()
        result = invoke("run", config, "--baseline", baseline)
        assert result.exit_code == 0, result.output
        report = json.loads((run_dir_of(result) / "report.json").read_text())
        assert "regressions" in {c["name"] for c in report["gate"]["checks"]}  # compared with the baseline
        assert loads == [DEMO / "corpus"]
