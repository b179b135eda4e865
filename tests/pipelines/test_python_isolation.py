"""A python pipeline's user code cannot end ragaudit: exits, interrupts, hangs, close() failures,
odd index objects and unwritable strings all stay inside the run they happen in (docs/reference.md §5)."""

import math
import signal
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ragaudit.adapters.common import IndexInfo
from ragaudit.core.errors import PipelineStartError, UsageError
from ragaudit.core.types import LiveIndex
from ragaudit.io.traces import dump_trace
from ragaudit.pipelines.base import Request
from ragaudit.pipelines.python import PythonPipeline

FIXTURES = Path(__file__).parent / "fixtures"
TIMEOUT = 0.5


@pytest.fixture(autouse=True)
def fixtures_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURES))


@pytest.fixture
def hostile():
    """A pipeline on the hostile fixture; anything it leaves hanging is released afterwards."""
    made = []

    def make(timeout_s=TIMEOUT, **options) -> PythonPipeline:
        pipeline = PythonPipeline("mine", "hostile_rag:make", options, timeout_s=timeout_s)
        made.append(pipeline)
        return pipeline

    yield make
    for pipeline in made:
        pipeline.target.release.set()


def request(query: str, qid="Q1") -> Request:
    return Request(qid=qid, variant=0, seed=1, query=query, k=3)


@pytest.mark.parametrize("query, message", [("exit", "SystemExit: 0"), ("interrupt", "KeyboardInterrupt")])
def test_exit_and_interrupt_inside_run_are_that_runs_error(hostile, query, message):
    pipeline = hostile()
    trace = pipeline.run(request(query, qid="BAD"))
    assert (trace.qid, trace.config, trace.error) == ("BAD", "mine", message)
    after = pipeline.run(request("fine", qid="NEXT"))
    assert after.error is None and after.answer.text == "fine"


def test_a_real_ctrl_c_while_waiting_for_user_code_is_not_swallowed(hostile):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    pipeline = hostile(timeout_s=30)
    # A shell without job control starts background jobs with SIGINT ignored, and Python keeps it
    # so: ctrl-C gets its usual meaning here, whatever the suite was started from. The signal goes to
    # the main thread itself: one sent to the process may land on another thread, and then the
    # main thread's wait only ends at its timeout.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    # Ctrl-C once the call is inside the user's code (and ragaudit waits for it), whenever that is
    timer = threading.Thread(target=_interrupt_once_inside, args=(pipeline.target,))
    timer.start()
    began = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            pipeline.run(request("hang"))
    finally:
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - began < 25  # not after the 30 s timeout: at once


def _interrupt_once_inside(target) -> None:
    deadline = time.monotonic() + 60
    while not target.inside and time.monotonic() < deadline:
        time.sleep(0.01)
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


def test_a_factory_that_exits_cannot_start():
    with pytest.raises(PipelineStartError) as caught:
        PythonPipeline("mine", "hostile_rag:make_exiting")
    assert str(caught.value) == (
        "pipeline 'mine': factory 'hostile_rag:make_exiting' failed when called with options []: SystemExit: 2"
    )


@pytest.mark.parametrize(
    "raises, warning",
    [
        ("exit", "pipeline 'mine': close() raised SystemExit: 3"),
        ("interrupt", "pipeline 'mine': close() raised KeyboardInterrupt"),
        ("error", "pipeline 'mine': close() raised OSError: index file is locked"),
        (None, None),
    ],
)
def test_close_never_raises_and_returns_what_went_wrong(hostile, raises, warning):
    pipeline = hostile(close_raises=raises)
    assert pipeline.run(request("fine")).error is None
    assert pipeline.close() == warning
    assert pipeline.close() is None
    assert pipeline.run(request("late")).error == "pipeline 'mine' is closed"


def test_a_close_that_hangs_is_given_up_after_the_timeout(hostile):
    pipeline = hostile(close_raises="hang")  # close() never returns until released
    began = time.monotonic()
    warning = pipeline.close()
    assert time.monotonic() - began < 20  # it stopped waiting; the close is still hanging
    assert not pipeline.target.release.is_set()
    assert warning == (
        "pipeline 'mine': close() timed out after 0.5 s; the call was abandoned and may still be running"
    )


def test_a_slow_run_times_out_and_the_next_run_waits_for_it_then_goes_on(hostile):
    pipeline = hostile(timeout_s=2)
    slow = pipeline.run(request("hang", qid="SLOW"))  # returns only once released
    assert slow.qid == "SLOW" and slow.error == (
        "run() timed out after 2 s; the call was abandoned and may still be running"
    )
    assert pipeline.target.inside == 1  # it stopped waiting before the call returned
    pipeline.target.release.set()  # the abandoned call ends now, inside the next run's budget
    nxt = pipeline.run(request("fine", qid="NEXT"))
    assert nxt.error is None and nxt.answer.text == "fine"
    assert pipeline.target.finished == ["hang", "fine"]
    assert pipeline.target.most_inside == 1  # never two calls inside the user's object at once


def test_a_run_that_never_returns_costs_each_later_run_one_timeout(hostile):
    pipeline = hostile()
    assert "timed out after 0.5 s" in pipeline.run(request("hang")).error
    for qid in ("A", "B"):
        began = time.monotonic()
        trace = pipeline.run(request("fine", qid=qid))
        assert time.monotonic() - began < 20  # one timeout, not the hung call's whole life
        assert trace.qid == qid and trace.error == (
            "run() timed out after 0.5 s waiting for an earlier call that timed out and is still running"
        )
    assert pipeline.target.most_inside == 1
    pipeline.target.release.set()
    deadline = time.monotonic() + 60  # a bound for a stalled machine, not a timing
    while pipeline.target.inside and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pipeline.run(request("fine", qid="C")).error is None


def test_index_info_does_not_wait_for_a_hung_call(hostile):
    pipeline = hostile(timeout_s=60, index={"index_hash": "sha256:h", "analyzer": "lowercase"})
    assert pipeline.run(request("fine")).index == LiveIndex("sha256:h", "lowercase")
    hung = threading.Thread(target=pipeline.run, args=(request("hang"),))
    hung.start()
    deadline = time.monotonic() + 60
    while not pipeline.target.inside and time.monotonic() < deadline:
        time.sleep(0.01)
    began = time.monotonic()
    assert pipeline.index_info() == LiveIndex("sha256:h", "lowercase")
    assert time.monotonic() - began < 30  # waiting would take the hung call's 60 s timeout
    pipeline.target.release.set()
    hung.join()


@pytest.mark.parametrize("timeout_s", [0, -1, float("nan"), "30", True])
def test_timeout_s_must_be_a_positive_number(timeout_s):
    with pytest.raises(UsageError, match=r"pipeline 'mine': the 'timeout_s' parameter must be a number > 0"):
        PythonPipeline("mine", "hostile_rag:make", timeout_s=timeout_s)


@pytest.mark.parametrize(
    "index",
    [
        IndexInfo(index_hash="sha256:a", analyzer="lowercase", embed_model="minilm", store="faiss"),
        LiveIndex("sha256:a", "lowercase", "minilm", "faiss"),
        SimpleNamespace(index_hash="sha256:a", analyzer="lowercase", embed_model="minilm", store="faiss"),
        {"index_hash": "sha256:a", "analyzer": "lowercase", "embed_model": "minilm", "store": "faiss"},
    ],
    ids=["adapters-IndexInfo", "LiveIndex", "any-object", "dict"],
)
def test_index_info_accepts_every_documented_shape(index):
    pipeline = PythonPipeline("mine", "toy_rag:make", {"index": index})
    expected = LiveIndex(index_hash="sha256:a", analyzer="lowercase", embed_model="minilm", store="faiss")
    assert pipeline.index_info() == expected
    assert type(pipeline.index_info()) is LiveIndex
    trace = pipeline.run(request("q"))
    assert trace.error is None and trace.index == expected


def test_an_object_missing_one_index_attribute_is_refused():
    index = SimpleNamespace(index_hash="sha256:a", analyzer="lowercase", embed_model="minilm")
    trace = PythonPipeline("mine", "toy_rag:make", {"index": index}).run(request("q"))
    assert trace.error.startswith("TypeError: index_info() must return None, a dict")
    assert trace.error.endswith("found SimpleNamespace")


def writable(trace) -> str:
    return dump_trace(trace).encode("utf-8").decode("utf-8")


def test_lone_surrogates_in_the_output_become_replacement_characters(hostile):
    trace = hostile().run(request("surrogate"))
    assert trace.error is None
    assert trace.answer.text == "bad \ufffd text"  # one code point for one: offsets stay put
    assert trace.retrieved[0].text == "\ufffdx"
    assert '"bad \ufffd text"' in writable(trace)


def test_lone_surrogates_in_an_exception_or_the_index_stay_writable(hostile):
    failed = hostile().run(request("surrogate error"))
    assert failed.error == "ValueError: cannot decode \ufffd"
    writable(failed)
    indexed = hostile(index="surrogate").run(request("fine"))
    assert indexed.index.index_hash == "sha256:\ufffd"
    writable(indexed)


def test_nan_and_infinity_in_the_output_do_not_break_the_run(hostile):
    trace = hostile().run(request("nan"))
    assert trace.qid == "Q1"
    line = writable(trace)
    p = trace.retrieved[0] if trace.retrieved else None
    # The trace reader decides whether a non-finite score is kept or reported as a wrong type.
    assert p is None or p.score_norm is None or math.isnan(p.score_norm)
    assert "Q1" in line
