"""Runs on a Dask cluster (a LocalCluster of two worker processes here) and on this machine's own
processes: the report is the local run's report, a worker that dies mid-call loses nothing, and a
cut-short run resumes on the cluster."""

import contextlib
import json
import os
import shutil
import signal
import threading
import time

import pytest
from helpers import BM25, FIXTURES, Lazy, comparable, invoke, run_dir_of, write_config

from ragaudit.auditing import executors
from ragaudit.io.traces import read_traces

distributed = Lazy("distributed")  # imported when a test first uses it: collecting stays fast

SLOW = '[[pipelines]]\nname = "slow"\nkind = "python"\nfactory = "slow_rag:make"\noptions = {delay = 0.0}\n'


def local_cluster():
    return distributed.LocalCluster(
        n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None, silence_logs=50
    )


@pytest.fixture(scope="module")
def cluster():
    with local_cluster() as local:
        yield local


@pytest.fixture
def breakable_cluster():
    """A cluster of the test's own, for a test that kills its workers: the shared one never waits
    for the nanny to bring workers back, however busy the machine."""
    local = local_cluster()
    yield local
    try:
        local.close(timeout=60)
    except (KeyError, OSError, TimeoutError):  # distributed's own bookkeeping of workers that died while it closed
        pass


def beside(tmp_path, *modules):
    """Copy fixture modules beside the config: a python pipeline's module loads from the config's
    folder, on every worker as here."""
    for name in modules:
        shutil.copy(FIXTURES / f"{name}.py", tmp_path / f"{name}.py")


def without_times(run_dir):
    """The run's traces, less the time each was retrieved at."""
    return [
        {k: v for k, v in json.loads(line).items() if k != "retrieved_at"}
        for line in (run_dir / "traces.jsonl").read_text().splitlines()
    ]


def report_of(run_dir):
    return comparable(json.loads((run_dir / "report.json").read_text()))


def test_a_dask_run_reports_exactly_what_a_local_run_does(tmp_path, cluster):
    beside(tmp_path, "slow_rag")
    config = write_config(tmp_path, BM25 + SLOW)
    local = invoke("run", config, "--no-gate", "--workers", "2")
    on_dask = invoke("run", config, "--no-gate", "--executor", "dask", "--scheduler", cluster.scheduler_address)
    assert local.exit_code == 0 and on_dask.exit_code == 0, on_dask.output
    a, b = run_dir_of(local), run_dir_of(on_dask)
    assert without_times(a) == without_times(b)
    assert report_of(a) == report_of(b)
    assert len(without_times(b)) == 2 * 6 * 3 * 2


def test_the_config_can_name_the_cluster(tmp_path, cluster):
    config = write_config(
        tmp_path,
        BM25,
        items=2,
        seeds="[1]",
        extra=f'[executor]\nkind = "dask"\nscheduler = "{cluster.scheduler_address}"\n',
    )
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    local = invoke("run", config, "--no-gate", "--executor", "local")
    assert report_of(run_dir_of(result)) == report_of(run_dir_of(local))


def test_a_worker_that_dies_mid_call_loses_no_run(tmp_path, breakable_cluster):
    cluster = breakable_cluster
    beside(tmp_path, "slow_rag", "dying_rag")
    marker = tmp_path / "die_once"
    marker.write_text("")
    pipeline = (
        '[[pipelines]]\nname = "slow"\nkind = "python"\nfactory = "dying_rag:make"\n'
        f'options = {{die_once = "{marker}"}}\n'
    )
    config = write_config(tmp_path, pipeline, items=4, seeds="[1]")
    result = invoke("run", config, "--no-gate", "--executor", "dask", "--scheduler", cluster.scheduler_address)
    assert result.exit_code == 0, result.output
    assert not marker.exists() and (tmp_path / "die_once.taken").exists()  # a worker process did die
    traces = list(read_traces(run_dir_of(result) / "traces.jsonl"))
    assert len(traces) == 4 * 3 and all(t.error is None for t in traces)


def test_a_cut_short_run_resumes_on_the_cluster(tmp_path, cluster):
    beside(tmp_path, "slow_rag")
    config = write_config(tmp_path, BM25 + SLOW, items=4)
    whole = run_dir_of(invoke("run", config, "--no-gate"))
    cut = run_dir_of(invoke("run", config, "--no-gate"))
    lines = (cut / "traces.jsonl").read_text().splitlines(keepends=True)
    (cut / "traces.jsonl").write_text("".join(lines[: len(lines) // 2 - 3]) + lines[len(lines) // 2][:40])  # torn
    result = invoke(
        "run", config, "--resume", cut, "--no-gate", "--executor", "dask", "--scheduler", cluster.scheduler_address
    )
    assert result.exit_code == 0, result.output
    assert without_times(cut) == without_times(whole)
    assert report_of(cut) == report_of(whole)


def test_processes_executor_runs_on_this_machine(tmp_path):
    config = write_config(tmp_path, BM25, items=3, seeds="[1]")
    threads = invoke("run", config, "--no-gate")
    processes = invoke("run", config, "--no-gate", "--executor", "processes", "--workers", "2")
    assert processes.exit_code == 0, processes.output
    assert report_of(run_dir_of(threads)) == report_of(run_dir_of(processes))


def test_an_unreachable_scheduler_is_a_start_error(tmp_path, monkeypatch):
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT_S", 2)  # nothing listens there: no need to wait 30 s
    config = write_config(tmp_path, BM25, items=1, seeds="[1]")
    result = invoke("run", config, "--executor", "dask", "--scheduler", "tcp://127.0.0.1:9")
    assert result.exit_code == 4
    assert "127.0.0.1:9" in result.stderr


def test_dask_needs_a_scheduler(tmp_path):
    config = write_config(tmp_path, BM25, items=1, seeds="[1]")
    result = invoke("run", config, "--executor", "dask")
    assert result.exit_code == 2 and "--scheduler" in result.stderr


def test_validate_shards_over_the_cluster_with_the_sequential_output(tmp_path, valid_trace, corpus, cluster):
    from helpers import sequential, trace_lines, write

    from ragaudit.checks.validation import Context, Validator
    from ragaudit.checks.validation.shards import check_sharded

    big = write(tmp_path / "big.jsonl", trace_lines(valid_trace, 150, seed=3), newline=b"\r\n", torn=True)
    small = [write(tmp_path / f"s{k}.jsonl", trace_lines(valid_trace, 3 + k, seed=k)) for k in range(5)]
    inputs = [small[0], big, tmp_path / "missing.jsonl", *small[1:]]
    ctx = Context(corpus=corpus)
    expected = sequential(inputs, ctx)
    assert expected["unreadable"] and expected["bad"]
    with distributed.Client(cluster) as client:
        for job_bytes in (10**6, 2_000):
            validator = Validator(ctx)
            issues = [
                i.to_dict()
                for i in check_sharded(
                    validator, inputs, workers=1, job_bytes=job_bytes, executor=executors.DaskClient(client)
                )
            ]
            assert issues == expected["issues"] and dict(validator.counts) == expected["counts"]
            assert [str(e) for e in validator.unreadable] == expected["unreadable"]


def test_validate_cli_on_the_cluster_prints_what_one_process_does(tmp_path, valid_trace, corpus_dir, cluster):
    from helpers import trace_lines, write

    path = write(tmp_path / "t.jsonl", trace_lines(valid_trace, 60, seed=5))
    local = invoke("--quiet", "validate", path, "--corpus", corpus_dir, "--workers", "1", "--format", "json")
    remote = invoke(
        "--quiet",
        "validate",
        path,
        "--corpus",
        corpus_dir,
        "--executor",
        "dask",
        "--scheduler",
        cluster.scheduler_address,
        "--format",
        "json",
    )
    assert remote.exit_code == local.exit_code == 3  # bad lines among the traces
    assert remote.output == local.output and remote.stderr == local.stderr


def test_retries_of_a_service_pipeline_apply_on_the_cluster(tmp_path, cluster):
    beside(tmp_path, "flaky_rag")
    pipeline = (
        '[[pipelines]]\nname = "svc"\nkind = "python"\nfactory = "flaky_rag:make"\nretries = 6\n'
        "retry_backoff_s = 0.01\noptions = {failures = 1}\n"
    )
    config = write_config(tmp_path, pipeline, items=2, seeds="[1]")
    result = invoke("run", config, "--no-gate", "--executor", "dask", "--scheduler", cluster.scheduler_address)
    assert result.exit_code == 0, result.output
    traces = list(read_traces(run_dir_of(result) / "traces.jsonl"))
    assert len(traces) == 2 * 3 and all(t.error is None for t in traces)
    # each worker thread's instance fails its first call of a query: every run needed a retry
    assert all(t.attempts >= 2 and t.retried[0].startswith("ConnectionError") for t in traces)


def fatal_config(tmp_path, how: str, *, policy: str = "", items: int = 3, extra: str = "", **options):
    """A python pipeline that ends its worker process whenever it is asked the query of one
    paraphrase; the config, and the (qid, variant) of the runs that kill their worker."""
    beside(tmp_path, "slow_rag", "fatal_rag")
    config = write_config(tmp_path, "", items=items, seeds="[1]", extra=extra)
    gold = [json.loads(line) for line in (tmp_path / "gold.jsonl").read_text().splitlines()]
    fatal = gold[1]["paraphrases"][0]
    config.write_text(
        config.read_text()
        + f'[[pipelines]]\nname = "svc"\nkind = "python"\nfactory = "fatal_rag:make"\n{policy}'
        + f"options = {{fatal = {json.dumps(fatal)}, how = {json.dumps(how)}{''.join(f', {k} = {v}' for k, v in options.items())}}}\n"
    )
    killers = {
        (item["qid"], variant)
        for item in gold
        for variant, text in enumerate([item["question"], *item["paraphrases"]][:3])
        if fatal in text
    }
    assert len(killers) == 1
    return config, killers


def died_and_answered(run_dir, killers, total):
    traces = list(read_traces(run_dir / "traces.jsonl"))
    assert len(traces) == total
    died = {(t.qid, t.variant) for t in traces if t.error is not None}
    assert died == killers
    errors = [t.error for t in traces if t.error]
    assert all(e.startswith("WorkerDied: the worker process running this call died") for e in errors), errors
    return traces


def test_a_call_that_kills_every_worker_is_that_runs_error_and_the_rest_go_on(tmp_path):
    config, killers = fatal_config(tmp_path, "exit")
    result = invoke("run", config, "--no-gate", "--executor", "processes", "--workers", "2")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    died_and_answered(run_dir_of(result), killers, 3 * 3)


def test_a_segfault_on_the_cluster_is_that_runs_error(tmp_path, breakable_cluster):
    cluster = breakable_cluster
    config, killers = fatal_config(tmp_path, "segfault", policy="max_in_flight = 2\n")  # one call per task
    result = invoke("run", config, "--no-gate", "--executor", "dask", "--scheduler", cluster.scheduler_address)
    assert result.exit_code == 0, result.output
    died_and_answered(run_dir_of(result), killers, 3 * 3)


HOLD_RESTARTS = """import os, time

def dask_setup(worker):  # a worker (re)started while the file is there waits here, never joining
    while os.path.exists({hold!r}):
        time.sleep(0.1)
"""


def test_a_cluster_whose_workers_never_come_back_ends_the_run_with_its_runs_kept(tmp_path):
    """Every worker of the cluster dies (a call kills each worker it is given) and none comes back
    (their nannies' restarts are held): within [executor] worker_wait_s the run stops with exit 4,
    the call that was out on the cluster is its run's error naming the lost workers, and the runs
    finished before are kept; once the cluster has workers again, --resume finishes the run."""
    hold = tmp_path / "hold"
    preload = tmp_path / "hold_restarts.py"
    preload.write_text(HOLD_RESTARTS.format(hold=str(hold)))
    local = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=2,
        processes=True,
        dashboard_address=None,
        silence_logs=50,
        preload=[str(preload)],
    )
    try:
        workers = sorted(local.scheduler_info["workers"])
        assert len(workers) == 2
        hold.write_text("")
        wait = "[executor]\nworker_wait_s = 3\n"
        config, killers = fatal_config(
            tmp_path, "exit", policy="max_in_flight = 2\n", items=6, extra=wait, delay=0.3, after=0.1
        )
        scheduler = local.scheduler_address
        started = time.monotonic()
        cut = invoke("run", config, "--no-gate", "--executor", "dask", "--scheduler", scheduler)
        took = time.monotonic() - started
        hold.unlink()  # the nannies' restarts go on: the cluster has workers again
        with distributed.Client(scheduler) as client:
            client.wait_for_workers(2, timeout=120)
        (run_dir,) = (tmp_path / "runs").iterdir()
        kept = list(read_traces(run_dir / "traces.jsonl"))
        resumed = invoke(
            "run", config, "--resume", run_dir, "--no-gate", "--executor", "dask", "--scheduler", scheduler
        )
    finally:
        hold.unlink(missing_ok=True)
        with contextlib.suppress(KeyError, OSError, TimeoutError):
            local.close(timeout=60)
    assert cut.exit_code == 4, cut.output
    assert took < 120  # without the bound, it waits for the workers forever
    lost = f"every worker of the Dask cluster at {scheduler} is gone ({', '.join(workers)}"
    assert lost in cut.stderr and "worker_wait_s" in cut.stderr and f"--resume {run_dir}" in cut.stderr
    assert "Traceback" not in cut.output
    errors = {(t.qid, t.variant): t.error for t in kept if t.error is not None}
    assert killers <= set(errors)  # the call that was out on the cluster when it was lost
    assert all(e.startswith(f"ClusterLost: {lost}") for e in errors.values()), errors
    gold = [json.loads(line) for line in (tmp_path / "gold.jsonl").read_text().splitlines()]
    assert {(gold[0]["qid"], v) for v in range(3)} <= {(t.qid, t.variant) for t in kept if t.error is None}
    assert resumed.exit_code == 0, resumed.output
    final = list(read_traces(run_dir / "traces.jsonl"))
    assert len(final) == 6 * 3 and final[: len(kept)] == kept
    assert {(t.qid, t.variant) for t in final if t.error is not None} == set(errors)


def test_a_run_with_a_call_that_kills_its_worker_resumes(tmp_path):
    config, killers = fatal_config(tmp_path, "exit", items=4)
    whole = run_dir_of(invoke("run", config, "--no-gate", "--executor", "processes", "--workers", "2"))
    cut = tmp_path / "cut"
    shutil.copytree(whole, cut)
    lines = (cut / "traces.jsonl").read_text().splitlines(keepends=True)
    (cut / "traces.jsonl").write_text("".join(lines[:2]) + lines[2][:30])  # before the killer, torn
    result = invoke("run", config, "--resume", cut, "--no-gate", "--executor", "processes", "--workers", "2")
    assert result.exit_code == 0, result.output
    died_and_answered(cut, killers, 4 * 3)
    assert without_times(cut) == without_times(whole)


def test_a_worker_process_killed_mid_run_loses_no_run(tmp_path):
    """kill -9 of a worker of `--executor processes` while it works: its calls go to its
    replacement and the run is the local run."""
    beside(tmp_path, "slow_rag")
    pipeline = '[[pipelines]]\nname = "slow"\nkind = "python"\nfactory = "slow_rag:make"\noptions = {delay = 0.05}\n'
    config = write_config(tmp_path, pipeline, items=4, seeds="[1]")
    cluster = executors.local_processes(2, config)
    killed: list = []

    def kill_one_worker():
        while not (busy := [slot.process.pid for slot in cluster.executor._slots if slot.job]):
            time.sleep(0.01)
        killed.append(busy[0])
        os.kill(busy[0], signal.SIGKILL)

    try:
        from ragaudit.io.config import load_config
        from ragaudit.pipelines import runner

        killer = threading.Thread(target=kill_one_worker, daemon=True)
        killer.start()
        result = runner.run(load_config(config), out=tmp_path / "on-processes", executor=cluster)
        killer.join(60)
    finally:
        cluster.close()
    assert killed and killed[0] not in cluster.executor.pids()
    local = run_dir_of(invoke("run", config, "--no-gate"))
    assert without_times(result.run_dir) == without_times(local)


def test_processes_without_workers_use_the_configured_count(tmp_path, monkeypatch):
    """`--executor processes` without --workers starts [audit] workers processes, the count the
    runner's threads use (it took every CPU of the machine)."""
    import ragaudit.auditing.executors

    started = []
    real = ragaudit.auditing.executors.local_processes

    def counted(workers, config_path):
        started.append(workers)
        return real(workers, config_path)

    monkeypatch.setattr(ragaudit.auditing.executors, "local_processes", counted)
    config = write_config(tmp_path, BM25, items=1, seeds="[1]", extra="workers = 3\n")
    result = invoke("run", config, "--no-gate", "--executor", "processes")
    assert result.exit_code == 0, result.output
    assert started == [3]


def test_a_replay_with_defects_reports_on_processes_what_it_does_here(tmp_path):
    """A recording whose runs have fields of the wrong type, NaN, pairs as offsets and markers
    instead of segments gives the same report, issues, traces and logs on 2 worker processes (which
    score its batches and write traces.log and rag_traces.sqlite) as on threads."""
    (tmp_path / "live").mkdir()
    recorded = run_dir_of(invoke("run", write_config(tmp_path / "live", BM25, items=3), "--no-gate"))
    runs = [json.loads(line) for line in (recorded / "traces.jsonl").read_text().splitlines()]
    runs[0]["retrieved"][0]["score_norm"] = "high"
    runs[1]["retrieved"][0]["offsets"] = [runs[1]["retrieved"][0]["offsets"]["start"], 5]
    runs[2]["variant"] = "0"
    runs[3]["answer"] = {"raw": "x", "text": "Keys rotate yearly [1]. Backups run nightly [2].", "segments": []}
    lines = [json.dumps(run) for run in runs]
    lines[4] = lines[4].replace('"seed": ', '"tokens": NaN, "seed": ')
    recording = tmp_path / "recording.jsonl"
    recording.write_text("\n".join(lines) + "\n")
    config = write_config(tmp_path, f'[[pipelines]]\nname = "bm25"\nkind = "replay"\ntraces = "{recording}"\n', items=3)
    here = invoke("run", config, "--no-gate", "--workers", "2")
    there = invoke("run", config, "--no-gate", "--executor", "processes", "--workers", "2")
    assert here.exit_code == there.exit_code == 0, there.output
    a, b = run_dir_of(here), run_dir_of(there)
    assert report_of(a)["summary"]["issues"]["by_code"].get("wrong_type", 0) >= 2
    assert report_of(a) == report_of(b)
    assert (a / "issues.jsonl").read_text() == (b / "issues.jsonl").read_text()
    assert without_times(a) == without_times(b)
    # traces.log and rag_traces.sqlite, written by a worker process there; a run the recording lacks
    # (the one whose variant is no integer) is a not-recorded error stamped with the time it was found
    assert log_of(a) == log_of(b) and (a / "traces.log").stat().st_size
    assert table_of(a) == table_of(b) and len(table_of(a)) >= len(runs)
    assert not list(b.glob(".*.tmp"))


def log_of(run_dir):
    """traces.log, less the time each run was retrieved at."""
    import re

    return re.sub(r"\bts=\S+", "ts=<time>", (run_dir / "traces.log").read_text())


def table_of(run_dir):
    """rag_traces.sqlite's rows, less the time each run was retrieved at."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(run_dir / "rag_traces.sqlite")) as db:
        cursor = db.execute("SELECT * FROM rag_traces")
        at = [c[0] for c in cursor.description].index("ts")
        return [row[:at] + row[at + 1 :] for row in cursor.fetchall()]


def test_a_run_with_the_hashing_encoder_writes_no_embedding_cache_and_the_same_report(tmp_path, monkeypatch):
    """The hashing encoder's vectors stay in memory (the cache file would cost more than it saves):
    a run writes no embeddings.sqlite, in this process or in worker processes, and its report is
    the report of a run that keeps them in the file (`[embedder] cache = true`)."""
    monkeypatch.setenv("RAGAUDIT_CACHE", str(tmp_path / "cache"))
    config = write_config(tmp_path, BM25, items=3)
    plain = invoke("run", config, "--no-gate", "--executor", "processes", "--workers", "2")
    assert plain.exit_code == 0, plain.output
    assert not (tmp_path / "cache" / "embeddings.sqlite").exists()
    config.write_text(config.read_text().replace("[embedder]\n", "[embedder]\ncache = true\n", 1))
    kept = invoke("run", config, "--no-gate")
    assert kept.exit_code == 0, kept.output
    assert (tmp_path / "cache" / "embeddings.sqlite").is_file()
    assert report_of(run_dir_of(plain)) == report_of(run_dir_of(kept))


@pytest.mark.parametrize("executor", ["local", "processes"])
def test_an_embedding_cache_that_cannot_be_written_is_a_warning_and_the_report_is_the_same(
    tmp_path, monkeypatch, executor
):
    """Where the vectors are encoded (this process, or worker processes), a cache folder that
    cannot be made costs the run its cache, not its figures: the warning names the file (the
    hashing encoder's vectors kept in the cache file, as a model's are)."""
    config = write_config(tmp_path, BM25, items=3)
    config.write_text(config.read_text().replace("[embedder]\n", "[embedder]\ncache = true\n", 1))
    assert "cache = true" in config.read_text()
    cached = invoke("run", config, "--no-gate")
    blocked = tmp_path / "a-file"
    blocked.write_text("where the cache folder should be")
    monkeypatch.setenv("RAGAUDIT_CACHE", str(blocked / "cache"))
    uncached = invoke("run", config, "--no-gate", "--executor", executor, "--workers", "2")
    assert cached.exit_code == uncached.exit_code == 0, uncached.output
    assert report_of(run_dir_of(cached)) == report_of(run_dir_of(uncached))
    said = [line for line in uncached.stderr.splitlines() if line.startswith("warning: embedding cache")]
    assert said == [
        f"warning: embedding cache {blocked / 'cache' / 'embeddings.sqlite'} is not used in this run: "
        f"{blocked / 'cache'}: Not a directory"
    ], uncached.stderr
    assert "Traceback" not in uncached.stderr


class _EndsAsTheSliceEnds:
    """A Dask future whose first timed wait runs out just as it finishes: the wait raises
    TimeoutError, and the future is done with its result by the time anyone looks."""

    def __init__(self):
        self.finished = False
        self.released = False

    def result(self, timeout=None):
        if timeout is not None and not self.finished:
            self.finished = True
            raise TimeoutError(f"timed out after {timeout} s.")
        return "the trace"

    def done(self):
        return self.finished

    def release(self):
        self.released = True


def test_a_task_that_ends_as_a_look_at_the_cluster_times_out_is_read_not_reported_as_timed_out():
    from ragaudit.auditing.dask_tasks import DaskTask

    class NoWatch:
        def check(self):
            raise AssertionError("a finished task needs no look at the cluster")

    future = _EndsAsTheSliceEnds()
    assert DaskTask(future, NoWatch()).result() == "the trace"
    assert future.released
