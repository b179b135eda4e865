import os
import re
import stat
import sys
import time
from pathlib import Path

import pytest

from ragaudit.core.errors import PipelineStartError, UsageError
from ragaudit.core.types import LiveIndex, Offsets
from ragaudit.pipelines.base import Request
from ragaudit.pipelines.command import CommandPipeline

RAG = Path(__file__).parent / "fixtures" / "jsonl_rag.py"
TIMEOUT = 5.0  # a child's start and answer on a busy machine; only a child that never answers waits it out
SHORT = 0.75  # for children that never answer: the timeout is all the test waits
ECHO_INDEX = LiveIndex("sha256:echo", "lowercase", "none", "echo")


def request(qid="Q1", variant=0, seed=1, query="How often are keys rotated?", k=5) -> Request:
    return Request(qid=qid, variant=variant, seed=seed, query=query, k=k)


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie waiting for an unrelated parent to reap it counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:  # gone meanwhile, or no /proc on this system
        return not Path("/proc").is_dir()


@pytest.fixture
def start():
    """Start a command pipeline on the fixture RAG (or any command); every one is closed afterwards."""
    made = []

    def make(*flags: str, command=None, name="node-svc", **options) -> CommandPipeline:
        options.setdefault("timeout_s", TIMEOUT)
        pipeline = CommandPipeline(name, command or [sys.executable, str(RAG), *flags], **options)
        made.append(pipeline)
        return pipeline

    yield make
    for pipeline in made:
        pipeline.close()


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_good_answer_is_keyed_by_the_request(start):
    pipeline = start()
    assert pipeline.index_info() is None
    trace = pipeline.run(request("SEC-KEYS-1", variant=2, seed=7, query="rotate keys?"))
    assert trace.error is None
    assert (trace.qid, trace.variant, trace.seed, trace.query) == ("SEC-KEYS-1", 2, 7, "rotate keys?")
    assert trace.config == "node-svc" and trace.retriever_name == "echo"
    assert [p.offsets for p in trace.retrieved] == [Offsets(0, 12, "char")]
    assert trace.index == ECHO_INDEX and pipeline.index_info() == ECHO_INDEX
    assert trace.answer.text == "echo: rotate keys?"


def test_a_relative_command_runs_in_cwd(start):
    pipeline = start(command=[sys.executable, RAG.name], cwd=str(RAG.parent))
    assert pipeline.run(request()).error is None


def test_a_timeout_kills_the_child_and_the_next_request_gets_a_new_one(start):
    pipeline = start("--sleep-on", "SLOW", timeout_s=3)
    assert pipeline.run(request("Q1")).error is None
    first = pipeline.pid
    began = time.monotonic()
    trace = pipeline.run(request("SLOW", variant=1, seed=2))  # the child sleeps 60 s on it
    assert time.monotonic() - began < 30
    assert (trace.qid, trace.variant, trace.seed, trace.config) == ("SLOW", 1, 2, "node-svc")
    assert "timed out after 3 s without a trace line on stdout" in trace.error
    assert pipeline.pid is None and not alive(first)
    assert pipeline.run(request("Q3")).error is None
    assert pipeline.pid != first


def test_a_crash_is_an_error_trace_with_exit_code_and_stderr_then_a_restart(start):
    pipeline = start("--crash-on", "BOOM")
    assert pipeline.run(request("Q1")).error is None
    trace = pipeline.run(request("BOOM"))
    assert trace.qid == "BOOM"
    assert trace.error == (
        f"{sys.executable} {RAG} --crash-on BOOM stopped before answering: it exited with code 3; stderr: boom on BOOM"
    )
    after = pipeline.run(request("Q2", query="next"))
    assert after.error is None and after.answer.text == "echo: next"


def test_a_line_that_is_not_json_is_an_error_and_the_late_answer_is_not_misfiled(start):
    pipeline = start("--garbage-on", "NOISY")
    trace = pipeline.run(request("NOISY", query="first"))
    assert "expected one JSON trace per line on stdout of " in trace.error
    assert trace.error.endswith("found 'Loading model... done' (Expecting value at column 1)")
    for variant, query in enumerate(["second", "third"]):
        answer = pipeline.run(request("NEXT", variant=variant, query=query))
        assert answer.error is None and answer.answer.text == f"echo: {query}"


def test_a_second_answer_to_one_request_is_not_taken_for_the_next(start):
    pipeline = start("--answer-twice")
    for seed, query in enumerate(["a", "b", "c"]):
        trace = pipeline.run(request("Q1", seed=seed, query=query))
        assert trace.error is None and trace.answer.text == f"echo: {query}"


@pytest.mark.parametrize(
    "line,message",
    [
        ("[1, 2]", "expected a trace object, found array of 2"),
        (
            '{"retrieved": {}}',
            "pipeline output is not a trace: $.retrieved: expected retrieved to be an array of payloads, found object",
        ),
    ],
)
def test_json_that_is_not_a_trace_is_an_error_trace(start, line, message):
    pipeline = start(command=python(f"import sys\nfor _ in sys.stdin: print({line!r}, flush=True)"))
    trace = pipeline.run(request())
    assert trace.error == message and trace.config == "node-svc"
    assert pipeline.index_info() is None


def test_a_child_that_closes_stdout_but_runs_on_is_ended(start):
    pipeline = start(command=python("import os, sys, time\nsys.stdin.readline()\nos.close(1)\ntime.sleep(60)"))
    pid = pipeline.pid
    trace = pipeline.run(request())
    assert trace.error.endswith("stopped before answering: it closed its pipes but kept running, so it was ended")
    assert not alive(pid)


def test_a_child_that_does_not_read_its_input_cannot_block_the_write(start):
    pipeline = start(command=python("import time\ntime.sleep(60)"), timeout_s=SHORT)
    began = time.monotonic()
    trace = pipeline.run(request(query="x" * 1_000_000))  # far more than a pipe buffer holds
    assert "timed out after 0.75 s" in trace.error and time.monotonic() - began < 30  # not the child's 60 s


def test_a_child_that_exits_after_answering_is_replaced_quietly(start):
    pipeline = start(
        command=python("import json, sys\nr = json.loads(sys.stdin.readline())\nprint(json.dumps({'qid': r['qid']}))")
    )
    assert pipeline.run(request("Q1")).error is None
    pipeline._child.process.wait(timeout=60)
    assert pipeline.run(request("Q2")).error is None


def test_a_child_that_never_answers_cannot_start(start):
    pipeline = start("--exit-at-start", max_start_failures=3)
    for qid in ("Q1", "Q2"):
        trace = pipeline.run(request(qid))
        assert trace.qid == qid and "it exited with code 1" in trace.error
        assert trace.error.endswith("stderr: cannot load the index: /nowhere/index.faiss")
    with pytest.raises(PipelineStartError) as caught:
        pipeline.run(request("Q3"))
    message = str(caught.value)
    assert message.startswith(
        f"pipeline 'node-svc': {sys.executable} {RAG} --exit-at-start never answered; "
        "3 attempts in a row failed, the last: "
    )
    assert message.endswith("it exited with code 1; stderr: cannot load the index: /nowhere/index.faiss")
    assert caught.value.exit_code == 4
    with pytest.raises(PipelineStartError):
        pipeline.run(request("Q4"))


def test_timeouts_before_any_answer_also_count_as_start_failures(start):
    pipeline = start(command=python("import time\ntime.sleep(60)"), timeout_s=0.3, max_start_failures=2)
    assert "timed out after 0.3 s" in pipeline.run(request()).error
    with pytest.raises(PipelineStartError, match="never answered; 2 attempts in a row failed"):
        pipeline.run(request())


def test_a_missing_executable_cannot_start():
    with pytest.raises(PipelineStartError) as caught:
        CommandPipeline("node-svc", ["no-such-rag-binary", "--serve"])
    assert str(caught.value) == (
        "pipeline 'node-svc': cannot start no-such-rag-binary --serve: No such file or directory: 'no-such-rag-binary'"
    )
    assert caught.value.exit_code == 4


def test_a_file_that_is_not_executable_cannot_start(tmp_path):
    script = tmp_path / "rag.sh"
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    with pytest.raises(PipelineStartError, match=re.escape(f"cannot start {script}: Permission denied: '{script}'")):
        CommandPipeline("node-svc", [str(script)])


def test_a_missing_cwd_cannot_start(tmp_path):
    with pytest.raises(
        PipelineStartError, match="cannot start .* in " + re.escape(str(tmp_path / "gone")) + ": No such file"
    ):
        CommandPipeline("node-svc", [sys.executable, str(RAG)], cwd=str(tmp_path / "gone"))


def test_close_leaves_no_child_alive(start):
    pipeline = start()
    pipeline.run(request())
    pid = pipeline.pid
    assert alive(pid)
    pipeline.close()
    pipeline.close()
    assert not alive(pid) and pipeline.pid is None
    assert pipeline.run(request()).error == "pipeline 'node-svc' is closed"


@pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX")
def test_a_timeout_also_ends_the_processes_the_child_started(start, tmp_path):
    pids = tmp_path / "pids"
    pipeline = start(
        command=["sh", "-c", f'"{sys.executable}" "{RAG}" --sleep-on SLOW --pid-file "{pids}"; exit 0'],
        timeout_s=SHORT,
    )
    assert pipeline.run(request("SLOW")).error.startswith("sh -c")
    grandchild = int(pids.read_text().split()[0])
    deadline = time.monotonic() + 30  # a bound for a stalled machine: it sleeps 60 s unless killed
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)


def test_close_kills_a_child_that_ignores_end_of_input(start, monkeypatch):
    monkeypatch.setattr("ragaudit.pipelines.command.CLOSE_GRACE_S", 0.2)
    pipeline = start(
        command=python("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)")
    )
    pid = pipeline.pid
    pipeline.close()
    assert not alive(pid)


def test_instances_keep_their_own_children(start):
    one, two = start("--crash-on", "BOOM"), start()
    assert one.pid != two.pid
    assert "exited with code 3" in one.run(request("BOOM")).error
    assert two.run(request("BOOM")).error is None


@pytest.mark.parametrize(
    "options,message",
    [
        ({"command": []}, "the 'command' parameter must be a non-empty list of strings. Got [] instead."),
        ({"timeout_s": 0}, "the 'timeout_s' parameter must be a number > 0. Got 0 instead."),
        ({"max_start_failures": 0}, "the 'max_start_failures' parameter must be an int in [1, inf). Got 0 instead."),
    ],
)
def test_invalid_parameters_are_usage_errors(options, message):
    arguments = {"command": [sys.executable, str(RAG)], **options}
    with pytest.raises(UsageError) as caught:
        CommandPipeline("node-svc", **arguments)
    assert str(caught.value) == f"pipeline 'node-svc': {message}"
