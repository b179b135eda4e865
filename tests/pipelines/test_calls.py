"""Pipelines that call services: retries with backoff (kept in the trace), a rate limit, a cap on
calls in flight, and the opt-in answer cache that makes an unchanged re-run free."""

import json
import sys
import time

import pytest
from helpers import FIXTURES, invoke, run_dir_of, write_config

from ragaudit.core.types import Trace
from ragaudit.io.traces import read_traces
from ragaudit.pipelines.base import Request
from ragaudit.pipelines.calls import CallPolicy, RateLimiter


@pytest.fixture
def fixtures_on_path():
    sys.path.insert(0, str(FIXTURES))
    yield
    sys.path.remove(str(FIXTURES))


def flaky(tmp_path, *, options: str = "", **policy):
    """A config with the flaky pipeline; `options` go to its factory, `policy` to the pipeline."""
    keys = "".join(f"{k} = {json.dumps(v)}\n" for k, v in policy.items())  # JSON scalars are TOML scalars
    pipeline = (
        f'[[pipelines]]\nname = "svc"\nkind = "python"\nfactory = "flaky_rag:make"\n{keys}options = {{{options}}}\n'
    )
    return write_config(tmp_path, pipeline, items=2, seeds="[1]")


def test_retries_with_backoff_are_kept_in_the_trace():
    calls = []

    def run(request):
        calls.append(time.monotonic())
        error = "ConnectionError: busy" if len(calls) < 3 else None
        return Trace(request.qid, request.variant, request.seed, config="svc", error=error)

    policy = CallPolicy("svc", "python", {"retries": 3, "retry_backoff_s": 0.05})
    trace = policy.call(run, Request("q", 0, 1, "query", 5))
    assert trace.error is None and trace.attempts == 3 and trace.retried == ("ConnectionError: busy",) * 2
    gaps = [b - a for a, b in zip(calls, calls[1:])]
    assert gaps[0] >= 0.05 and gaps[1] >= 0.10  # backoff doubles, jitter only adds
    give_up = CallPolicy("svc", "python", {"retries": 1, "retry_backoff_s": 0.01})
    calls.clear()
    trace = give_up.call(run, Request("q", 0, 1, "query", 5))
    assert trace.error == "ConnectionError: busy" and trace.attempts == 2 and len(calls) == 2


def test_the_rate_limit_spaces_calls():
    limiter = RateLimiter(20.0)
    started = time.monotonic()
    for _ in range(11):
        limiter.wait()
    assert time.monotonic() - started >= 0.5 - 1e-3


def test_retried_runs_are_recorded_end_to_end(tmp_path, fixtures_on_path):
    config = flaky(tmp_path, retries=2, retry_backoff_s=0.01, options="failures = 1")
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    traces = list(read_traces(run_dir_of(result) / "traces.jsonl"))
    assert traces and all(t.error is None and t.attempts == 2 for t in traces)
    assert all(t.retried[0].startswith("ConnectionError: service unavailable") for t in traces)


def test_max_in_flight_caps_concurrent_calls(tmp_path, fixtures_on_path):
    import flaky_rag

    flaky_rag.FlakyRag.most_in_flight = 0
    config = flaky(tmp_path, max_in_flight=1, options="delay = 0.02")
    assert invoke("run", config, "--no-gate", "--workers", "4").exit_code == 0
    assert flaky_rag.FlakyRag.most_in_flight == 1
    flaky_rag.FlakyRag.most_in_flight = 0
    config = flaky(tmp_path, options="delay = 0.02, meet = 2")  # without the cap, two calls meet
    assert invoke("run", config, "--no-gate", "--workers", "4").exit_code == 0
    assert flaky_rag.FlakyRag.most_in_flight > 1


def test_the_answer_cache_makes_an_unchanged_rerun_free(tmp_path, fixtures_on_path, monkeypatch):
    from flaky_rag import calls

    monkeypatch.setenv("RAGAUDIT_CACHE", str(tmp_path / "cache"))
    log = tmp_path / "calls.tsv"
    config = flaky(tmp_path, cache=True, options=f'calls = "{log}"')
    first = run_dir_of(invoke("run", config, "--no-gate"))
    made = calls(log)
    assert made == 2 * 3  # two questions, three variants, one seed
    second = run_dir_of(invoke("run", config, "--no-gate"))
    assert calls(log) == made  # nothing was called again
    a = [(t.qid, t.variant, t.answer.text) for t in read_traces(first / "traces.jsonl")]
    b = [(t.qid, t.variant, t.answer.text) for t in read_traces(second / "traces.jsonl")]
    assert a == b
    changed = flaky(tmp_path, cache=True, options=f'calls = "{log}", delay = 0.0')  # another configuration
    run_dir_of(invoke("run", changed, "--no-gate"))
    assert calls(log) == 2 * made
