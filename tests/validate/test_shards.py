"""Validation shared out to worker processes gives exactly the output of one process: the same
issues in the same order with the same line numbers, the same counts, bad lines, unreadable
files and exit codes, wherever the cuts fall."""

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import outcome, sequential, trace_lines, write

from ragaudit.checks.validation import Context, Validator, shards
from ragaudit.checks.validation.shards import WorkerFailed, check_sharded, plan
from ragaudit.checks.validation.spool import Spool
from ragaudit.cli.commands import main
from ragaudit.core.types import Corpus, Document


def sharded(paths, ctx=None, offset_unit="char", **kw) -> dict:
    validator = Validator(ctx or Context(), offset_unit=offset_unit)
    return outcome(validator, check_sharded(validator, paths, workers=2, min_bytes=0, **kw))


def cut_kinds(data: bytes, job_bytes: int) -> set[str]:
    """Where plan's cuts of a file of `data` fall: at a line start, on a newline, mid-line."""
    parts = -(-len(data) // job_bytes)
    kinds = set()
    for cut in (len(data) * k // parts for k in range(1, parts)):
        kinds.add(
            "line start"
            if data[cut - 1 : cut] == b"\n"
            else "newline"
            if data[cut : cut + 1] == b"\n"
            else "carriage return"
            if data[cut : cut + 1] == b"\r"
            else "mid-line"
        )
    return kinds


def test_one_big_file_cut_anywhere_gives_the_sequential_output(tmp_path, valid_trace, corpus):
    lines = trace_lines(valid_trace, 120, seed=1)
    path = write(tmp_path / "t.jsonl", lines, newline=b"\r\n", torn=True, bom=True)
    data = path.read_bytes()
    ctx = Context(corpus=corpus)
    expected = sequential([path], ctx)
    assert expected["bad"] and len(expected["counts"]) > 8 and expected["issues"][-1]["line"] == 120
    sizes = [len(data) // 3, 997, 313, 101]
    kinds = set()
    for job_bytes in sizes:
        assert sharded([path], ctx, job_bytes=job_bytes) == expected, job_bytes
        kinds |= cut_kinds(data, job_bytes)
    assert kinds == {"line start", "newline", "carriage return", "mid-line"}  # every kind of cut was tried


def test_workers_read_offsets_in_the_configured_unit(tmp_path, valid_trace, corpus):
    trace = copy.deepcopy(valid_trace)
    for payload in trace["retrieved"]:
        payload["offsets"] = [payload["offsets"]["start"], payload["offsets"]["end"]]
    path = write(tmp_path / "t.jsonl", [json.dumps(trace).encode()] * 30)
    ctx = Context(corpus=corpus, allow_cross_section=True)
    expected = sequential([path], ctx, offset_unit="token")
    assert "span_out_of_bounds" in expected["counts"]  # char offsets read as token offsets run past the end
    assert expected != sequential([path], ctx)
    assert sharded([path], ctx, offset_unit="token", job_bytes=5_000) == expected


def test_many_small_files_and_unreadable_ones_give_the_sequential_output(tmp_path, valid_trace):
    paths = []
    for k in range(12):
        lines = trace_lines(valid_trace, 4 + k, seed=10 + k)
        paths.append(write(tmp_path / f"t{k}.jsonl", lines, torn=k % 3 == 0))
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "blank.jsonl").write_bytes(b"\n  \n")
    inputs = [
        *paths[:5],
        tmp_path / "missing.jsonl",
        tmp_path / "empty.jsonl",
        *paths[5:],
        tmp_path,
        tmp_path / "blank.jsonl",
        paths[0],
    ]
    expected = sequential(inputs)
    assert len(expected["unreadable"]) == 4
    for job_bytes in (10**6, 8_000, 1_500):  # all files in one job, a few a job, each cut into ranges
        assert sharded(inputs, job_bytes=job_bytes) == expected, job_bytes


def test_a_large_file_of_blank_lines_is_refused_once_and_an_empty_range_is_not(tmp_path, valid_trace):
    blank = tmp_path / "blank.jsonl"
    blank.write_bytes(b"\n \n\r\n" * 200)
    mostly = tmp_path / "mostly.jsonl"
    mostly.write_bytes(b"\n" * 3_000 + json.dumps(valid_trace).encode() + b"\n")
    expected = sequential([blank, mostly])
    assert expected["unreadable"] == [f"{blank}: expected JSON lines, found only blank lines"]
    assert expected["records"] == 1
    assert sharded([blank, mostly], job_bytes=100) == expected


def test_plan_splits_large_files_batches_small_ones_and_leaves_others_to_the_parent(tmp_path):
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"x" * 1_000)
    small = [tmp_path / f"s{k}.jsonl" for k in range(4)]
    for path in small:
        path.write_bytes(b"y" * 150)
    names = [str(small[0]), str(big), str(tmp_path / "missing"), *map(str, small[1:])]
    jobs = plan(names, workers=2, min_bytes=0, job_bytes=300)
    assert [(len(j.pieces), j.local) for j in jobs] == [
        (1, False),
        (1, False),
        (1, False),
        (1, False),
        (1, False),
        (1, True),
        (2, False),
        (1, False),
    ]
    ranges = [(p.start, p.end, p.last, p.whole) for j in jobs[1:5] for p in j.pieces]
    assert ranges == [
        (0, 250, False, False),
        (250, 500, False, False),
        (500, 750, False, False),
        (750, None, True, False),
    ]
    assert [j.index for j in jobs] == list(range(len(jobs)))
    assert plan(names, workers=1, min_bytes=0) is None
    assert plan(names, workers=2) is None  # too little to be worth starting processes


def test_a_failing_worker_stops_the_run_with_its_traceback(tmp_path, valid_trace):
    path = write(tmp_path / "t.jsonl", trace_lines(valid_trace, 20, seed=3))
    broken = Corpus({"policies": Document("policies", None, "r")})  # no text: the corpus rules fail
    validator = Validator(Context(corpus=broken))
    with pytest.raises(WorkerFailed, match="TypeError"):
        list(check_sharded(validator, [path], workers=2, min_bytes=0, job_bytes=2_000))


@pytest.fixture
def small_jobs(monkeypatch):
    """Share out even the small inputs of a test."""
    monkeypatch.setattr(shards, "MIN_BYTES", 0)
    monkeypatch.setattr(shards, "MIN_JOB_BYTES", 500)
    monkeypatch.setattr(shards, "MAX_JOB_BYTES", 2_000)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_cli_one_worker_and_two_print_the_same(tmp_path, valid_trace, corpus_dir, small_jobs, fmt):
    big = write(tmp_path / "big.jsonl", trace_lines(valid_trace, 60, seed=5), torn=True)
    small = write(tmp_path / "small.jsonl", trace_lines(valid_trace, 5, seed=6), newline=b"\r\n")
    args = [
        "validate",
        str(big),
        str(tmp_path / "missing.jsonl"),
        str(small),
        "--corpus",
        str(corpus_dir),
        "--format",
        fmt,
    ]
    # --quiet: stderr holds errors and warnings only, never progress a slow machine would add
    one = CliRunner().invoke(main, ["--quiet", *args, "--workers", "1"])
    two = CliRunner().invoke(main, ["--quiet", *args, "--workers", "2"])
    assert one.exit_code == 3 and "error: " in one.stderr
    assert (two.exit_code, two.stdout, two.stderr) == (one.exit_code, one.stdout, one.stderr)
    clean = write(tmp_path / "clean.jsonl", [json.dumps(valid_trace).encode()] * 40)
    results = [
        CliRunner().invoke(main, ["validate", str(clean), "--corpus", str(corpus_dir), "--format", fmt, "--workers", w])
        for w in ("1", "2")
    ]
    assert [r.exit_code for r in results] == [0, 0] and results[0].stdout == results[1].stdout


def test_spool_keeps_order_past_memory():
    spool = Spool(chunk=3)
    for number in range(10):
        spool.append(number)
    assert len(spool) == 10 and list(spool) == list(range(10))
    spool.append(10)
    assert list(spool) == list(range(11)) and spool
    spool.close()
    assert not Spool()


# ---- stopping ---------------------------------------------------------------------------------------


def children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.add(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found


def start_cli(tmp_path, valid_trace, stdout=subprocess.DEVNULL) -> tuple[subprocess.Popen, set[int], Path]:
    """A CLI validating a file big enough to be shared out, once its workers are at work."""
    line = json.dumps(valid_trace).encode() + b"\n"
    path = tmp_path / "big.jsonl"
    path.write_bytes(line * (3 * shards.MIN_BYTES // len(line)))
    spool_root = tmp_path / "tmp"
    spool_root.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragaudit", "--quiet", "validate", str(path), "--workers", "2", "--format", "json"],
        stdout=stdout,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(spool_root)},
    )
    deadline = time.monotonic() + 60
    # a worker opens a job's spool file as it starts the job
    while not list(spool_root.glob("ragaudit-validate-*/*.issues")):
        assert proc.poll() is None and time.monotonic() < deadline, "no worker ever started a job"
        time.sleep(0.01)
    workers = children(proc.pid)
    assert len(workers) >= 2
    return proc, workers, spool_root


def wait_gone(pids: set[int], seconds: float = 60) -> set[int]:
    deadline = time.monotonic() + seconds
    while (
        alive := {p for p in pids if os.path.exists(f"/proc/{p}") and "Z" != _state(p)}
    ) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process table from /proc")
def test_sigterm_stops_the_workers_removes_the_spool_and_exits_143(tmp_path, valid_trace):
    proc, workers, spool_root = start_cli(tmp_path, valid_trace)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143 and b"error: interrupted by SIGTERM" in stderr and b"Traceback" not in stderr
    assert not wait_gone(workers)
    assert list(spool_root.iterdir()) == []


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process table from /proc")
def test_workers_of_a_killed_parent_exit_on_their_own(tmp_path, valid_trace):
    proc, workers, _ = start_cli(tmp_path, valid_trace)
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert not wait_gone(workers)  # each finishes its job, finds the parent's pipe closed, and exits


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process table from /proc")
def test_a_worker_killed_mid_job_loses_nothing(tmp_path, valid_trace):
    """kill -9 of a worker at work: its job goes to the worker started in its place."""
    out = open(tmp_path / "out.json", "wb")
    with out:
        proc, workers, spool_root = start_cli(tmp_path, valid_trace, stdout=out)
        victim = min(pid for pid in workers if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes())
        assert proc.poll() is None
        os.kill(victim, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0 and stderr == b""
    lines = (tmp_path / "big.jsonl").read_bytes().count(b"\n")
    assert json.loads((tmp_path / "out.json").read_text()) == {"records": lines, "issues": [], "counts": {}}
    assert list(spool_root.iterdir()) == []


def test_validate_takes_its_worker_count_from_the_config(tmp_path, valid_trace, corpus_dir, small_jobs, monkeypatch):
    """--workers N, else [audit] workers when above 1, else the CPUs: this process and N - 1 others."""
    from ragaudit.core import execution

    monkeypatch.setattr(execution, "cpu_workers", lambda: 4)
    started: list[int] = []

    class Counted(shards.Processes):
        def __init__(self, workers, **kw):
            started.append(workers)
            super().__init__(workers, **kw)

    monkeypatch.setattr(shards, "Processes", Counted)
    path = write(tmp_path / "t.jsonl", trace_lines(valid_trace, 60, seed=5), torn=True)
    config = tmp_path / "audit.toml"
    config.write_text(f'[audit]\ncorpus = "{corpus_dir}"\nworkers = 3\n')
    args = ["--quiet", "validate", str(path), "--format", "json"]
    alone = CliRunner().invoke(main, args)
    assert started == [3]  # without a config, the CPUs: this process and three others
    configured = CliRunner().invoke(main, [*args, "--config", str(config)])
    assert started == [3, 2]
    asked = CliRunner().invoke(main, [*args, "--config", str(config), "--workers", "2"])
    assert started == [3, 2, 1]
    with_corpus = CliRunner().invoke(main, [*args, "--corpus", str(corpus_dir), "--workers", "1"])
    assert started == [3, 2, 1]  # one: this process alone
    assert alone.exit_code == 3 and configured.exit_code == asked.exit_code == with_corpus.exit_code == 3
    assert configured.stdout == asked.stdout == with_corpus.stdout != alone.stdout  # the corpus rules ran


def test_this_process_validates_what_no_worker_takes(tmp_path, valid_trace, monkeypatch):
    """A worker that has not started (a busy core, a slow start) costs nothing but its start: this
    process, one of the workers asked for, validates every job no worker has taken, in order."""
    started: list[float] = []

    class Asleep(shards.Processes):
        def __init__(self, workers, **kw):
            started.append(time.monotonic())
            super().__init__(workers, **{**kw, "setup": (time.sleep, (120,))})  # never ready in this test

    monkeypatch.setattr(shards, "Processes", Asleep)
    path = write(tmp_path / "t.jsonl", trace_lines(valid_trace, 60, seed=5), torn=True)
    got = sharded([path], job_bytes=2_000)
    assert started and time.monotonic() - started[0] < 60  # the 120 s start was never waited for
    assert got == sequential([path])
