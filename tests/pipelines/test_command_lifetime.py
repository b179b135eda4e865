"""Command children die with ragaudit, however it dies, and `kill()` ends them at once; odd JSON on
their stdout (lone surrogates, NaN) stays inside the run."""

import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ragaudit.io.traces import dump_trace
from ragaudit.pipelines.base import Request
from ragaudit.pipelines.command import CommandPipeline

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups and SIGKILL are POSIX")

FAMILY = Path(__file__).parent / "fixtures" / "hanging_family.py"


def request(qid="Q1", query="q") -> Request:
    return Request(qid=qid, variant=0, seed=1, query=query, k=3)


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie nobody has reaped yet counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return not Path("/proc").is_dir()


def wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def family_pids(pid_file: Path) -> tuple[int, int]:
    assert wait_until(pid_file.exists, 60), "the child never wrote its pids"
    child, grandchild = map(int, pid_file.read_text().split())
    return child, grandchild


@pytest.fixture
def family(tmp_path):
    """A command pipeline whose child hangs with a grandchild; both are SIGKILLed afterwards whatever happens."""
    made = []

    def make(**options) -> tuple[CommandPipeline, int, int]:
        pid_file = tmp_path / f"pids-{len(made)}"
        pipeline = CommandPipeline("hung", [sys.executable, str(FAMILY), str(pid_file)], **options)
        child, grandchild = family_pids(pid_file)
        made.append((pipeline, child, grandchild))
        return pipeline, child, grandchild

    yield make
    for pipeline, child, grandchild in made:
        for pid in (child, grandchild):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        pipeline.close()


def test_kill_ends_the_child_and_its_children_at_once(family, monkeypatch):
    monkeypatch.setattr("ragaudit.pipelines.command.CLOSE_GRACE_S", 60.0)
    pipeline, child, grandchild = family()
    assert pipeline.pid == child and alive(child) and alive(grandchild)
    began = time.monotonic()
    pipeline.kill()
    assert time.monotonic() - began < 30  # it signals and returns; it does not give the child a grace (60 s)
    assert wait_until(lambda: not alive(child) and not alive(grandchild), 60)
    pipeline.kill()  # again: nothing new, no error
    assert pipeline.killed
    assert pipeline.run(request("LATER")).error == "pipeline 'hung' was killed"
    assert pipeline.close() is None


@pytest.mark.parametrize("how", ["thread", "signal handler"])
def test_kill_ends_a_run_in_flight_as_an_error_that_says_so(family, how):
    if how == "signal handler" and threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers run in the main thread")
    pipeline, child, grandchild = family(timeout_s=30, max_start_failures=1)
    sent = threading.Event()  # the request is out: the run is in flight, however long that took
    send = pipeline._send
    pipeline._send = lambda to, request: (send(to, request), sent.set())[0]
    if how == "thread":
        trigger = threading.Thread(target=lambda: (sent.wait(60), pipeline.kill()))
    else:
        previous = signal.signal(signal.SIGUSR1, lambda signum, frame: pipeline.kill())
        # to the main thread itself: a signal sent to the process may land on another thread
        trigger = threading.Thread(
            target=lambda: (sent.wait(60), signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1))
        )
    trigger.start()
    try:
        began = time.monotonic()
        trace = pipeline.run(request("INFLIGHT"))  # the child never answers; only kill() ends this
    finally:
        trigger.join()
        if how == "signal handler":
            signal.signal(signal.SIGUSR1, previous)
    assert time.monotonic() - began < 20  # not the 30 s timeout
    # Not a start failure (max_start_failures=1 would have raised): the child died of kill().
    assert trace.qid == "INFLIGHT" and trace.error.endswith("was killed before answering: pipeline 'hung' was stopped")
    assert wait_until(lambda: not alive(child) and not alive(grandchild), 60)


# A stand-in for ragaudit: starts command pipelines, each child with a grandchild, and waits to be
# killed. With "--lose-watcher" the helper that outlives it is killed between the two pipelines.
OWNER = """
import sys, time
from ragaudit.pipelines import command
family, *pid_files = sys.argv[1:]
lose_watcher = pid_files[0] == "--lose-watcher"
for n, pid_file in enumerate(pid_files[lose_watcher:]):
    if n == 1 and lose_watcher:
        command._watcher._process.kill()
        command._watcher._process.wait()
    pipeline = command.CommandPipeline("hung", [sys.executable, family, pid_file])
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("lose_watcher", [False, True], ids=["watcher", "watcher-restarted"])
def test_children_die_when_ragaudit_is_killed_with_sigkill(tmp_path, lose_watcher):
    pid_files = [tmp_path / "pids-1", tmp_path / "pids-2"]
    arguments = [str(FAMILY), *(["--lose-watcher"] if lose_watcher else []), *map(str, pid_files)]
    owner = subprocess.Popen([sys.executable, "-c", OWNER, *arguments], stdout=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        assert owner.stdout.readline().strip() == "ready"
        for pid_file in pid_files:
            pids.extend(family_pids(pid_file))
        assert all(map(alive, pids))
        owner.kill()  # SIGKILL: no handler, no atexit, no finally runs in the owner
        owner.wait(timeout=60)
        assert wait_until(lambda: not any(map(alive, pids)), 60), [pid for pid in pids if alive(pid)]
    finally:
        owner.kill()
        owner.wait()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_close_reports_a_failure_instead_of_raising(family, monkeypatch):
    pipeline, child, grandchild = family()

    def broken_stop(self, grace_s):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("ragaudit.pipelines.command._Child.stop", broken_stop)
    assert pipeline.close() == (
        "pipeline 'hung': closing " + pipeline.shown + " failed: OSError: [Errno 5] Input/output error"
    )
    assert wait_until(lambda: not alive(child) and not alive(grandchild), 60)
    assert pipeline.close() is None


def echo(line: str) -> list[str]:
    """A child answering every request with `line` (JSON text), whatever the request."""
    code = f"import sys\nfor _ in sys.stdin: print({line!r}, flush=True)"
    return [sys.executable, "-c", code]


def test_a_lone_surrogate_on_stdout_is_replaced_and_the_trace_stays_writable():
    line = '{"answer": {"text": "bad \\ud800 text"}, "retriever_name": "\\udc00"}'
    with CommandPipeline("svc", echo(line), timeout_s=10) as pipeline:
        first, second = pipeline.run(request("Q1")), pipeline.run(request("Q2"))
    for trace in (first, second):
        assert trace.error is None and trace.answer.text == "bad \ufffd text" and trace.retriever_name == "\ufffd"
        dump_trace(trace).encode("utf-8")
    assert (first.qid, second.qid) == ("Q1", "Q2")


def test_nan_and_infinity_on_stdout_do_not_break_the_run():
    payload = (
        '{"doc_id": "d", "section_id": "s", "snippet_id": "x", "source_url": "u", "offsets": [0, 1], '
        '"tokens": 1, "index_hash": "h", "embed_model": "e", "analyzer": "a", "rev": "r", '
        '"score_norm": NaN, "score_raw": Infinity, "k_pos": 1}'
    )
    with CommandPipeline("svc", echo('{"retrieved": [%s], "variant": -Infinity}' % payload), timeout_s=10) as pipeline:
        trace = pipeline.run(request("Q1"))
        again = pipeline.run(request("Q2"))
    assert (trace.qid, trace.variant, again.qid) == ("Q1", 0, "Q2")
    dump_trace(trace).encode("utf-8")
    p = trace.retrieved[0] if trace.retrieved else None
    # The trace reader decides whether a non-finite score is kept or reported as a wrong type.
    assert p is None or p.score_norm is None or math.isnan(p.score_norm)
