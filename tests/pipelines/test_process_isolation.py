"""`isolation = "process"`: each instance of a python pipeline in a worker process of its own, so
that a library's process-wide state is not shared between instances (docs/reference.md §5)."""

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from helpers import DEMO, invoke, run_dir_of, write_config

from ragaudit.core.errors import PipelineStartError
from ragaudit.pipelines.base import Request
from ragaudit.pipelines.isolated import IsolatedPythonPipeline
from ragaudit.pipelines.python import PythonPipeline

FIXTURES = Path(__file__).parent / "fixtures"


def pipeline(isolation: str) -> str:
    return (
        f'[[pipelines]]\nname = "global"\nkind = "python"\nfactory = "global_state_rag:make"\n'
        f'isolation = "{isolation}"\ntimeout_s = 60\noptions = {{ corpus = "{DEMO / "corpus"}" }}\n'
    )


def audited(folder: Path, isolation: str) -> list[dict]:
    """The traces of 4 questions x 3 variants x 1 seed with 3 workers; the pipeline's module lies
    beside the config, as a user's does."""
    folder.mkdir()
    shutil.copy(FIXTURES / "global_state_rag.py", folder / "global_state_rag.py")
    config = write_config(folder, pipeline(isolation), items=4, seeds="[1]", extra="workers = 3")
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    lines = (run_dir_of(result) / "traces.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def right(trace: dict) -> bool:
    """The answer the pipeline gives with its own model: its best sentence, cited."""
    return trace["error"] is None and trace["answer"]["text"] == f"{trace['retrieved'][0]['text']} [1]"


def test_instances_in_a_process_each_keep_their_own_global_state(tmp_path):
    shared = audited(tmp_path / "thread", "thread")
    isolated = audited(tmp_path / "process", "process")
    assert len(shared) == len(isolated) == 12
    # one process: three instances, and the library's one model is the last one's
    assert {t["retriever_name"] for t in shared} == {f"pid-{os.getpid()}"}
    # (how many of its answers come out wrong depends on which thread takes which call: not asserted)
    # a process each: every instance keeps its model, and every answer is right
    pids = {t["retriever_name"] for t in isolated}
    assert len(pids) == 3 and f"pid-{os.getpid()}" not in pids
    assert all(right(t) for t in isolated)
    assert sorted(t["qid"] for t in isolated) == sorted(t["qid"] for t in shared)


CHATTY = """
print("loading the model")


class Chatty:
    def run(self, query, *, seed, k):
        print("answering", query)
        return {"retrieved": [], "answer": {"text": query}}


def make():
    return Chatty()
"""


@pytest.fixture
def worker(monkeypatch, tmp_path):
    (tmp_path / "chatty_rag.py").write_text(CHATTY, encoding="utf-8")
    path = os.pathsep.join([str(FIXTURES), str(tmp_path), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", path)  # for the worker processes
    monkeypatch.syspath_prepend(str(FIXTURES))  # for the in-process pipeline they are held to
    made = []

    def make(factory="toy_rag:make", options=None, timeout_s=20.0) -> IsolatedPythonPipeline:
        made.append(IsolatedPythonPipeline("mine", factory, options, timeout_s=timeout_s))
        return made[-1]

    yield make
    for p in made:
        p.close()


def request(query: str, qid="Q1") -> Request:
    return Request(qid=qid, variant=0, seed=1, query=query, k=3)


def test_the_worker_answers_as_the_object_does_in_process(worker):
    p = worker(options={"prefix": "> "})
    in_process = PythonPipeline("mine", "toy_rag:make", {"prefix": "> "})
    assert p.index_info() == in_process.index_info()  # said when the process is ready
    for query in ("How often?", "explode", "not a trace", "again"):
        mine, theirs = p.run(request(query)), in_process.run(request(query))
        assert (mine.qid, mine.config, mine.error, mine.index) == (
            theirs.qid,
            theirs.config,
            theirs.error,
            theirs.index,
        )
        assert mine.answer == theirs.answer
    assert p.run(request("explode")).error == "RuntimeError: index shard 2 is offline"


def test_what_user_code_prints_goes_to_stderr_not_into_the_answers(worker):
    p = worker("chatty_rag:make")
    assert [p.run(request(q, qid=q)).answer.text for q in ("one", "two")] == ["one", "two"]
    deadline = time.monotonic() + 30  # stderr is read by a thread of its own: it may come a moment after the answer
    while "answering two" not in p._child.stderr_tail and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "loading the model" in p._child.stderr_tail and "answering two" in p._child.stderr_tail


@pytest.mark.parametrize(
    "factory, message",
    [
        ("toy_rag:make_broken", "failed when called with options []: ConnectionError: vector store at localhost:6333"),
        ("toy_rag:nowhere", "module 'toy_rag' has no attribute 'nowhere'"),
        ("toy_rag:make_without_run", "must return an object with run(query, *, seed, k), found object without run"),
    ],
)
def test_a_factory_that_fails_in_its_process_cannot_start(worker, factory, message):
    with pytest.raises(PipelineStartError, match="pipeline 'mine': ") as failed:
        worker(factory)
    assert message in str(failed.value)


def test_a_run_that_times_out_kills_its_process_and_the_next_gets_a_new_one(worker):
    p = worker("hostile_rag:make", timeout_s=1.0)
    first = p.pid
    slow = p.run(request("hang", qid="SLOW"))
    assert slow.error.startswith("run() timed out after 1 s; its process was killed")
    after = p.run(request("fine", qid="NEXT"))
    assert after.error is None and after.answer.text == "fine" and p.pid != first


@pytest.mark.parametrize(
    "raises, warning",
    [
        ("exit", "pipeline 'mine': close() raised SystemExit: 3"),
        ("error", "pipeline 'mine': close() raised OSError: index file is locked"),
        (None, None),
    ],
)
def test_what_close_raises_in_the_process_is_the_warning_it_is_in_process(worker, raises, warning):
    p = worker("hostile_rag:make", options={"close_raises": raises})
    assert p.run(request("fine")).error is None
    assert p.close() == warning
    assert p.close() is None
    assert p.run(request("late")).error == "pipeline 'mine' is closed"


def test_the_corpus_a_probe_points_at_reaches_the_factory_in_its_process(monkeypatch, tmp_path):
    # probe_rag:crashing opens only the corpus it was told is real: the path must cross the process
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")]))
    real, copy = DEMO / "corpus", tmp_path / "copy"
    shutil.copytree(real, copy)
    options = {"real": str(real)}
    same = IsolatedPythonPipeline("p", "probe_rag:crashing", options, timeout_s=60, corpus_path=str(real))
    try:
        assert same.run(request("How often are administrator hardware keys rotated?")).error is None
    finally:
        same.close()
    with pytest.raises(PipelineStartError, match=f"cannot open the vector store for {copy}"):
        IsolatedPythonPipeline("p", "probe_rag:crashing", options, timeout_s=60, corpus_path=str(copy))
