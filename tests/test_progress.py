"""Progress of long phases: timestamped lines when not on a terminal, a live bar on one, nothing
with --quiet, short phases only with --verbose, stdout left to results, and where the time went."""

import io
import re

import pytest
from helpers import BM25, invoke, write_config

from ragaudit import progress
from ragaudit.metrics.embed import CachedEncoder, HashingEncoder

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    progress.reset()
    yield
    progress.configure()
    progress.reset()


def test_lines_when_not_on_a_terminal(monkeypatch):
    monkeypatch.setattr(progress, "SHOWN_AFTER_S", 0.0)
    monkeypatch.setattr(progress, "PERIOD_S", 0.0)
    out = io.StringIO()
    progress.configure(stream=out)
    with progress.phase("embedding", total=3, unit="texts") as shown:
        for _ in range(3):
            shown.advance()
    lines = out.getvalue().splitlines()
    assert [re.sub(STAMP, "T", line) for line in lines[:3]] == [
        "T  embedding: 1/3 texts",
        "T  embedding: 2/3 texts",
        "T  embedding: 3/3 texts",
    ]
    assert re.fullmatch(STAMP + r"  embedding: done in \d+\.\d s \(3/3 texts\)", lines[-1])


def test_short_phases_say_nothing_unless_verbose_and_quiet_says_nothing():
    out = io.StringIO()
    progress.configure(stream=out)
    with progress.phase("indexing"):
        pass
    assert out.getvalue() == ""
    progress.configure(stream=out, verbose=True)
    with progress.phase("indexing"):
        pass
    assert re.search(r"indexing: started\n.*indexing: done in 0\.0 s\n", out.getvalue())
    quiet = io.StringIO()
    progress.configure(stream=quiet, quiet=True, verbose=True)
    with progress.phase("indexing", total=2) as shown:
        shown.advance(2)
    assert quiet.getvalue() == ""


def test_a_terminal_gets_a_live_bar(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(progress, "SHOWN_AFTER_S", 0.0)
    screen = Terminal()
    progress.configure(stream=screen)
    with progress.phase("runs", total=4, unit="runs") as shown:
        shown.advance(4)
    assert re.search(r"\rruns: .*\d/4 \[", screen.getvalue())
    assert not re.search(STAMP, screen.getvalue())
    monkeypatch.setenv("CI", "true")  # CI gets lines even on a terminal
    ci = Terminal()
    progress.configure(stream=ci, verbose=True)
    with progress.phase("runs", total=1) as shown:
        shown.advance()
    assert re.search(STAMP + "  runs: done", ci.getvalue())


def test_phases_of_a_name_add_up(monkeypatch):
    import time

    class Clock:
        readings = iter([0.0, 2.0, 10.0, 13.5])
        gmtime, strftime = time.gmtime, time.strftime

        def monotonic(self):
            return next(self.readings)

    monkeypatch.setattr(progress, "time", Clock())
    progress.configure(stream=io.StringIO(), quiet=True)
    with progress.phase("scoring"):
        pass
    with progress.phase("scoring"):
        pass
    assert progress.timings() == {"scoring": 5.5}
    assert progress.where_the_time_went() == "scoring 5.5 s"


def test_embedding_counts_the_texts_it_encodes(tmp_path, monkeypatch):
    out = io.StringIO()
    progress.configure(stream=out, verbose=True)
    encoder = CachedEncoder(HashingEncoder(), tmp_path / "cache.sqlite")
    texts = [f"text number {i % 700}" for i in range(1000)]  # 700 distinct
    encoder.encode(texts)
    assert re.search(r"embedding: done in \d+\.\d s \(700/700 texts\)", out.getvalue())
    encoder.encode(texts[:10] + ["one new text"])
    assert "(1/1 texts)" in out.getvalue().splitlines()[-1]


def test_the_cli_keeps_stdout_for_results_and_says_where_the_time_went(tmp_path):
    config = write_config(tmp_path, BM25, items=2, seeds="[1]")
    verbose = invoke("--verbose", "run", config, "--no-gate")
    assert re.search(STAMP + "  runs: done in", verbose.stderr)
    assert re.search(STAMP + "  writing report.html: done in", verbose.stderr)
    assert not re.search(STAMP, verbose.stdout)
    assert re.search(r"runs/s; time in .*runs \d+\.\d s", verbose.stdout)
    quiet = invoke("--quiet", "run", config, "--no-gate")
    assert not re.search(STAMP, quiet.stderr)
