"""The execution layer: threads and worker processes behind one interface, results in the order
asked, a task whose worker dies given to another, one that kills every worker it gets given up
on, and one default worker count."""

import os
import signal
import threading
import time

import exec_tasks as tasks
import pytest
from helpers import BM25, write_config

from ragaudit.core.execution import (
    DEFAULT_WORKERS,
    Processes,
    RemoteTraceback,
    Threads,
    WorkerDied,
    default_workers,
    map_ordered,
    remote_traceback,
    worker_count,
)
from ragaudit.io.config import load_config


@pytest.fixture(scope="module")
def two():
    pool = Processes(2, setup=(tasks.remember, ("ready",)))
    yield pool
    pool.close()


def test_threads_and_processes_give_results_in_the_order_of_the_items(two):
    threads = Threads(3)
    try:
        for executor in (threads, two):
            assert list(map_ordered(executor, tasks.square, range(40), ahead=3)) == [x * x for x in range(40)]
    finally:
        threads.close()


def test_the_setup_runs_once_in_each_worker_before_its_tasks(two):
    assert [two.submit(tasks.remembered).result(timeout=60) for _ in range(4)] == [["ready"]] * 4


def test_a_task_marked_without_collector_runs_without_it_and_the_next_task_has_it_again(two):
    # a batch handed to a worker is unpickled, scored and let go with no cyclic collection between
    asked = [tasks.uncollected, tasks.collecting, tasks.uncollected, tasks.collecting]
    assert [two.submit(fn, i).result(timeout=60) for i, fn in enumerate(asked)] == [False, True, False, True]
    assert getattr(tasks.uncollected, "without_collector", False) and not hasattr(tasks.collecting, "without_collector")


def test_a_worker_process_freezes_the_inputs_it_loads(tmp_path):
    from ragaudit.io.files import sha256_file

    config = write_config(tmp_path, BM25)
    one = Processes(1)
    try:
        assert one.submit(tasks.frozen).result(timeout=60) == 0
        loaded = one.submit(tasks.frozen, str(config), sha256_file(config)).result(timeout=60)
        assert loaded > 1000  # the gold set, the corpus and their sections: collections skip them
    finally:
        one.close()


def test_a_task_that_raises_brings_its_exception_and_where_it_was_raised(two):
    task = two.submit(tasks.fail, "no such rule")
    with pytest.raises(ValueError, match="no such rule") as raised:
        task.result(timeout=60)
    assert isinstance(raised.value.__cause__, RemoteTraceback)
    assert "exec_tasks.py" in remote_traceback(raised.value) and "in fail" in remote_traceback(raised.value)
    with pytest.raises(RuntimeError, match="Unpicklable: 1 and 2"):  # a class that cannot be rebuilt here
        two.submit(tasks.fail_unpicklable).result(timeout=60)
    assert two.submit(tasks.square, 7).result(timeout=60) == 49  # the worker goes on


def test_a_result_that_cannot_be_read_here_fails_its_task_and_the_pool_goes_on(two):
    with pytest.raises(RuntimeError, match=r"cannot be read here: ValueError\('this value cannot be rebuilt'\)"):
        two.submit(tasks.unreadable).result(timeout=60)
    assert list(map_ordered(two, tasks.square, range(6), ahead=2)) == [x * x for x in range(6)]


def test_a_task_whose_worker_dies_runs_again_on_a_new_worker(tmp_path):
    marker = tmp_path / "die"
    marker.write_text("")
    pool = Processes(2)
    try:
        before = set(pool.pids())
        results = list(map_ordered(pool, tasks.square, range(6), ahead=2))
        died = pool.submit(tasks.die_once, str(marker), 5)
        assert died.result(timeout=120) == 5 and (tmp_path / "die.taken").exists()
        assert len(set(pool.pids()) - before) == 1  # the dead worker was replaced, the other kept
        assert results == [x * x for x in range(6)]
        assert list(map_ordered(pool, tasks.square, range(6), ahead=2)) == results
    finally:
        pool.close()


def test_a_worker_killed_from_outside_loses_no_task(tmp_path):
    go = tmp_path / "go"
    pool = Processes(2)
    try:
        busy = [pool.submit(tasks.wait_for, str(go)) for _ in range(2)]
        deadline = time.monotonic() + 60
        while not all(slot.job for slot in pool._slots):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        victim = pool.pids()[0]
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while victim in pool.pids():  # replaced
            assert time.monotonic() < deadline
            time.sleep(0.02)
        go.write_text("")
        pids = [task.result(timeout=120) for task in busy]
        assert victim not in pids and len(set(pids)) == 2
    finally:
        pool.close()


def test_a_task_that_kills_every_worker_it_gets_is_given_up_and_the_others_go_on():
    pool = Processes(2)
    try:
        fatal = pool.submit(tasks.die_always)
        others = [pool.submit(tasks.square, x) for x in range(5)]
        with pytest.raises(WorkerDied, match="died 2 times, on as many workers") as died:
            fatal.result(timeout=120)
        assert died.value.deaths == 2
        assert [task.result(timeout=120) for task in others] == [x * x for x in range(5)]
    finally:
        pool.close()


def test_a_setup_that_fails_fails_every_task_with_its_traceback():
    pool = Processes(1, setup=(tasks.broken_setup, ()))
    try:
        with pytest.raises(OSError, match="cannot read its file") as raised:
            pool.submit(tasks.square, 2).result(timeout=60)
        assert "broken_setup" in remote_traceback(raised.value)
    finally:
        pool.close()


def test_close_ends_a_worker_held_by_a_task_that_hangs_and_cancels_the_waiting_ones(tmp_path):
    pool = Processes(1)
    hung = pool.submit(tasks.wait_for, str(tmp_path / "never"))
    waiting = pool.submit(tasks.square, 3)
    deadline = time.monotonic() + 60
    while not pool._slots[0].job:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    process = pool._slots[0].process
    started = time.monotonic()
    pool.close()
    assert time.monotonic() - started < 30 and not process.is_alive()
    assert waiting.cancelled()
    with pytest.raises(RuntimeError, match="closed"):
        hung.result(timeout=1)


def test_threads_that_hang_never_hold_a_close():
    """close() returns while a call still holds its thread, which is a daemon (it never holds the
    process's exit either) and ends once the call returns."""
    threads = Threads(1)
    release = threading.Event()
    held = threads.submit(release.wait)
    closing = threading.Thread(target=threads.close, daemon=True)
    closing.start()
    closing.join(30)
    try:
        assert not closing.is_alive()  # close() came back while the call hangs
        assert not held.done() and all(t.daemon and t.is_alive() for t in threads._threads)
    finally:
        release.set()
    assert held.result(timeout=30) is True
    for thread in threads._threads:
        thread.join(30)
        assert not thread.is_alive()  # told to end once idle, it did


def test_one_default_worker_count(tmp_path):
    assert DEFAULT_WORKERS == 1 and default_workers() == 1 and worker_count(None) == 1 and worker_count(4) == 4
    configured = load_config(write_config(tmp_path, BM25, extra="workers = 3\n"))
    assert default_workers(configured) == 3 and worker_count(None, configured) == 3 and worker_count(2, configured) == 2
    plain = tmp_path / "plain"
    plain.mkdir()
    assert default_workers(load_config(write_config(plain, BM25))) == DEFAULT_WORKERS


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process table from /proc")
def test_a_worker_busy_in_a_task_that_never_returns_ends_with_its_killed_parent(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import sys, time, exec_tasks\n"
        "from ragaudit.core.execution import Processes\n"
        "pool = Processes(1)\n"
        f"task = pool.submit(exec_tasks.wait_for, {str(tmp_path / 'never')!r})\n"
        "while not pool._slots[0].job: time.sleep(0.01)\n"
        "print(pool.pids()[0], flush=True)\n"
        "time.sleep(600)\n"
    )
    tests = str(Path(__file__).resolve().parent)
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])},
    )
    worker = int(parent.stdout.readline())
    parent.kill()
    parent.wait(60)
    deadline = time.monotonic() + 60
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(worker)


def alive(pid: int) -> bool:
    """Running: neither gone nor a zombie (an orphan's new parent may be slow to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_workers_that_die_as_they_start_fail_the_tasks_instead_of_starting_forever():
    pool = Processes(2, setup=(tasks.exit_at_setup, ()))
    try:
        with pytest.raises(RuntimeError, match=r"die as they start \(exit code 3\)"):
            pool.submit(tasks.square, 2).result(timeout=120)
        with pytest.raises(RuntimeError, match="no worker process could start"):
            pool.submit(tasks.square, 3)
    finally:
        pool.close()


def test_a_scoring_batch_whose_worker_a_pipeline_call_ended_is_scored_again():
    """A batch sent while a pipeline call ended its worker comes back scored, in order; one that the
    cluster gives up on every time is an error, never a silent gap."""
    from ragaudit.auditing.executors import RemoteScoring, remote_score

    class Given:
        def __init__(self, value, deaths):
            self.value, self.deaths = value, deaths

        def done(self):
            return True

        def result(self):
            if self.deaths:
                raise WorkerDied(self.deaths)
            return self.value

    class Cluster:
        scoring_ahead = 4

        def __init__(self, deaths):
            self.deaths, self.sent = deaths, []

        def submit(self, fn, batch, keep):
            assert fn is remote_score
            self.sent.append(batch)
            return Given(("scored", batch), self.deaths.pop(0) if self.deaths else 0)

    cluster = Cluster([1, 0, 0])  # the first batch dies once, then is scored; the second never dies
    scoring = RemoteScoring(cluster, keep=False)
    assert scoring.submit(["a"]) == [("scored", ["a"])]
    assert scoring.submit(["b"]) == [("scored", ["b"])]
    assert cluster.sent == [["a"], ["a"], ["b"]]
    doomed = RemoteScoring(Cluster([1, 1, 1]), keep=False)
    with pytest.raises(WorkerDied):
        doomed.submit(["c"])


def test_scoring_keeps_one_batch_out_per_worker(tmp_path):
    """While this process reads the next batch, each worker process of this machine has one to score
    and none waits behind it: a batch more would only hold its runs and make the end of the run
    wait for it. A cluster's workers keep as many batches as pipeline calls out."""
    from ragaudit.auditing.executors import Cluster, RemoteScoring

    class Pending:
        def __init__(self, value):
            self.value, self.finished = value, False

        def done(self):
            return self.finished

        def result(self, timeout=None):
            self.finished = True
            return self.value

    class ThreeWorkers(Processes):
        name, workers = "processes", 3

        def __init__(self):  # no processes: tasks are scored when their result is asked for
            self.tasks: list[Pending] = []

        def submit(self, fn, *args):
            self.tasks.append(Pending(args[-2]))
            return self.tasks[-1]

    config = tmp_path / "ragaudit.toml"
    config.write_text("")
    workers = ThreeWorkers()
    scoring = RemoteScoring(Cluster(workers, config), keep=False)
    out = []
    for n in range(10):
        ready = scoring.submit([n])
        out += ready
        assert sum(not task.done() for task in workers.tasks) == min(n + 1, 3)
    assert out == [[n] for n in range(7)] and scoring.drain() == [[7], [8], [9]]

    cluster = type("Threads3", (), {"name": "dask", "workers": 3})()
    assert Cluster(cluster, config).scoring_ahead == Cluster(cluster, config).in_flight == 6


def test_what_goes_down_a_workers_pipe_comes_back_equal(valid_trace, mutate):
    import dataclasses
    import pickle
    from collections.abc import Mapping
    from signal import Signals

    from ragaudit.core.types import Span
    from ragaudit.core.wire import dumps
    from ragaudit.io.traces import parse_trace

    wrong = mutate(lambda t: t["retrieved"][0].update(score_norm="high"))
    traces = [parse_trace(valid_trace), parse_trace(wrong)]
    traces.append(parse_trace({**valid_trace, "steps": [{"question": "q", "citations": ["x"]}], "error": "e"}))
    odd = tasks.Stamped(1)
    odd.stamp = "set after construction"  # a non-init field keeps what it holds
    values = [traces, odd, tasks.KeywordOnly(1, b=[2]), {"k": (1, 2.5, None, "s")}, [float("nan")]]
    back = pickle.loads(dumps(values))
    # classes of a metaclass (an ABC, an Enum) go by name, as pickle sends them
    classes = [Mapping, Signals, Signals.SIGTERM, tasks.KeywordOnly, int]
    assert pickle.loads(dumps(classes)) == classes
    assert back[:3] == values[:3] and back[3] == values[3] and str(back[4]) == "[nan]"
    assert [p.span for t in back[0] for p in t.retrieved] == [p.span for t in traces for p in t.retrieved]
    assert back[1].stamp == "set after construction" and back[2].b == [2]
    # but a payload's span, derived from its offsets, is not sent: its constructor builds it again
    moved = dataclasses.replace(traces[0].retrieved[0])
    moved.span = Span(0, 1)
    assert pickle.loads(dumps(moved)).span == traces[0].retrieved[0].span != Span(0, 1)
    assert b"Span" not in dumps(traces[0]) and b"Offsets" in dumps(traces[0])
    assert [t.field_errors for t in back[0]] == [t.field_errors for t in traces] and traces[1].field_errors
    assert pickle.loads(dumps(traces)) == pickle.loads(pickle.dumps(traces))
