"""Progress of long phases: timestamped lines when not on a terminal (a start, a line every few
seconds, an end), a live display on one, nothing with --quiet, short phases with --verbose,
stdout left to results, the embedding counts, and where the time went."""

import io
import re
import threading
import time

import pytest
from helpers import BM25, DEMO, STAMP, Terminal, invoke, run_dir_of, write_config

from ragaudit.checks.metrics.embed import CachedEncoder, HashingEncoder
from ragaudit.core import progress
from ragaudit.io.corpus import load_corpus
from ragaudit.pipelines.reference import ReferencePipeline

DENSE = '[[pipelines]]\nname = "dense"\nkind = "reference"\nretriever = "dense"\n'
CATEGORIES = {"loading", "model load", "gold check", "indexing", "starting", "runs", "scoring", "writing", "other"}


class CountingEncoder(HashingEncoder):
    """The hashing encoder, keeping the size of every call it gets: the texts really encoded."""

    def __init__(self, batch_size: int):
        super().__init__()
        self.batch_size = batch_size
        self.calls: list[int] = []

    def encode(self, texts):
        self.calls.append(len(texts))
        return super().encode(texts)


def unstamped(text: str) -> list[str]:
    """The lines of `text`, each checked for its timestamp and given without it."""
    lines = text.splitlines()
    assert all(re.match(STAMP + "  ", line) for line in lines), text
    return [line[22:] for line in lines]


def test_a_phase_writes_a_start_its_progress_and_an_end(shown_progress, monkeypatch):
    monkeypatch.setattr(progress, "SHOWN_AFTER_S", 0.0)
    monkeypatch.setattr(progress, "PERIOD_S", 0.0)
    out = shown_progress(io.StringIO())
    with progress.phase("embedding", total=3, unit="texts") as shown:
        for _ in range(3):
            shown.advance()
    lines = unstamped(out.getvalue())
    assert lines[0] == "embedding: started (3 texts)"
    assert [re.sub(r", [\d.,]+ texts/s.*", "", line) for line in lines[1:3]] == [
        "embedding: 1/3 texts",
        "embedding: 2/3 texts",
    ]
    assert re.search(r"1/3 texts, [\d.,]+ texts/s, ETA \d+ s$", lines[1])
    assert re.fullmatch(r"embedding: done in \d+\.\d s \(3/3 texts, [\d.,]+ texts/s\)", lines[-1])
    assert len(lines) == 4  # 3/3 is said by the end line


def test_lines_come_at_most_every_period_however_fast_the_work(shown_progress, monkeypatch):
    monkeypatch.setattr(progress, "SHOWN_AFTER_S", 0.0)
    monkeypatch.setattr(progress, "PERIOD_S", 3600.0)
    out = shown_progress(io.StringIO())
    with progress.phase("runs", total=100_000, unit="runs") as shown:
        for _ in range(100_000):
            shown.advance()
    lines = unstamped(out.getvalue())
    assert len(lines) == 2 and lines[0] == "runs: started (100,000 runs)"
    assert lines[1].startswith("runs: done in ") and "(100,000/100,000 runs" in lines[1]


def test_a_long_phase_that_counts_nothing_still_says_it_started(shown_progress, monkeypatch):
    monkeypatch.setattr(progress, "SHOWN_AFTER_S", 0.05)
    monkeypatch.setattr(progress, "TICK_S", 0.01)
    out = shown_progress(io.StringIO())
    with progress.phase("model load"):
        deadline = time.monotonic() + 60  # a bound for a stalled machine, not a timing
        while "started" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        said_inside = out.getvalue()
    assert unstamped(said_inside) == ["model load: started"]
    assert re.fullmatch(r"model load: done in \d+\.\d s", unstamped(out.getvalue())[-1])


def test_short_phases_show_only_when_verbose_and_quiet_shows_nothing(shown_progress, monkeypatch):
    monkeypatch.setattr(progress, "SHOWN_AFTER_S", 3600.0)  # every phase here is short, however busy the machine
    out = shown_progress(io.StringIO())
    with progress.phase("indexing"):
        pass
    assert out.getvalue() == ""
    verbose = shown_progress(io.StringIO(), verbose=True)
    with progress.phase("indexing"):
        progress.note("cache: 3 texts found")
    said = unstamped(verbose.getvalue())
    assert said[:2] == ["indexing: started", "cache: 3 texts found"] and len(said) == 3
    assert re.fullmatch(r"indexing: done in \d+\.\d s", said[2])
    quiet = shown_progress(io.StringIO(), quiet=True)
    with progress.phase("indexing", total=2) as shown:
        shown.advance(2)
        progress.note("not shown")
    assert quiet.getvalue() == ""


def test_a_failed_phase_says_it_stopped(shown_progress, monkeypatch):
    monkeypatch.setattr(progress, "SHOWN_AFTER_S", 0.0)
    out = shown_progress(io.StringIO())
    with pytest.raises(KeyboardInterrupt), progress.phase("runs", total=4, unit="runs") as shown:
        shown.advance()
        raise KeyboardInterrupt
    assert re.fullmatch(r"runs: stopped after \d+\.\d s \(1/4 runs, [\d.,]+ runs/s\)", unstamped(out.getvalue())[-1])


def test_a_terminal_gets_the_live_display(shown_progress, monkeypatch):
    monkeypatch.setattr(progress, "SHOWN_AFTER_S", 0.0)
    screen = shown_progress(Terminal(), ci=False)
    with progress.phase("runs", total=4, unit="runs") as shown:
        shown.advance(2)
        deadline = time.monotonic() + 60  # rich redraws 4 times a second; a bound for a stalled machine
        while "2/4 runs" not in screen.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        shown.advance(2)
    drawn = screen.getvalue()
    assert "\x1b[?25l" in drawn  # the cursor hidden while the display runs
    assert re.search(r"runs .*2/4 runs, [\d.,]+ runs/s, ETA \d+ s", drawn)  # the live row
    assert re.search(r"✓ runs  \d+\.\d s  \(4/4 runs, [\d.,]+ runs/s\)", drawn)  # the line it leaves
    assert not re.search(STAMP, drawn)


class Clock:
    """progress's clock, moved by hand: times and rates exact, however busy the machine."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def __getattr__(self, name):
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(progress, "time", clock)
    return clock


def test_time_is_booked_once_to_each_category(shown_progress, clock):
    shown_progress(io.StringIO(), quiet=True)

    def elsewhere():
        with progress.phase("on a worker thread"):
            clock.sleep(0.1)

    started = clock.monotonic()
    with progress.phase("runs"):
        clock.sleep(0.1)
        with progress.phase("indexing bm25", counts_as="indexing"):
            clock.sleep(0.1)
            with progress.phase("embedding"):  # counts as the indexing it is part of
                clock.sleep(0.1)
            with progress.phase("model load", counts_as="model load"):
                clock.sleep(0.1)
        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join()  # the main thread waits: that is its runs' time
    wall = clock.monotonic() - started
    spent = progress.time_spent()
    assert list(spent) == ["runs", "indexing", "model load"]  # the worker thread's phase books nothing
    assert spent["runs"] == pytest.approx(0.2)  # its own time and the wait, not its nested phases' (0.3 s more)
    assert spent["indexing"] == pytest.approx(0.2)
    assert spent["model load"] == pytest.approx(0.1)
    assert sum(spent.values()) == pytest.approx(wall)


def test_a_rate_leaves_out_the_setup_nested_in_it(shown_progress, monkeypatch, clock):
    monkeypatch.setattr(progress, "SHOWN_AFTER_S", 0.0)
    out = shown_progress(io.StringIO())
    with progress.phase("runs", total=20, unit="runs") as shown:
        with progress.phase("indexing", counts_as="indexing"):
            clock.sleep(0.5)
        with progress.phase("embedding queries"):  # the runs' own work: in the rate
            clock.sleep(0.1)
        shown.advance(20)
    rate = float(re.search(r"runs: done in .* runs, ([\d.]+) runs/s", out.getvalue()).group(1))
    assert rate == 200  # 20 / 0.1, not 20 / 0.6


def test_the_breakdown_names_each_category_and_the_rest(shown_progress, clock):
    shown_progress(io.StringIO(), quiet=True)
    with progress.phase("model load", counts_as="model load"):
        clock.sleep(3.14)
    with progress.phase("indexing bm25", counts_as="indexing"):
        clock.sleep(12.0)
    with progress.phase("runs"):
        clock.sleep(0.01)  # under 0.05 s: not named
    assert progress.breakdown(16.04) == "model load 3.1 s, indexing 12.0 s, other 0.9 s"


def test_embedding_reports_the_texts_the_model_encodes_batch_by_batch(shown_progress, monkeypatch, tmp_path):
    monkeypatch.setattr(progress, "SHOWN_AFTER_S", 0.0)
    monkeypatch.setattr(progress, "PERIOD_S", 0.0)
    out = shown_progress(io.StringIO())
    model = CountingEncoder(batch_size=16)
    encoder = CachedEncoder(model, tmp_path / "cache.sqlite")
    corpus = load_corpus(DEMO / "corpus")
    with progress.phase("indexing dense"):
        pipeline = ReferencePipeline("dense", corpus, retriever="dense", encoder=encoder)
    encoded = sum(model.calls)
    assert encoded > 100 and set(model.calls[:-1]) == {16}  # whole model batches
    lines = [line for line in unstamped(out.getvalue()) if line.startswith("indexing dense › embedding: ")]
    counts = [int(n) for n in re.findall(r"embedding: (\d+)/\d+ texts,", "\n".join(lines))]
    assert counts == [sum(model.calls[: i + 1]) for i in range(len(model.calls) - 1)]  # the last: the end line
    assert (
        f"({encoded}/{encoded} texts" in lines[-1]
        and lines[0] == f"indexing dense › embedding: started ({encoded} texts)"
    )
    model.calls.clear()
    out.truncate(0)
    encoder.encode([pipeline.chunks[0].text, "a text the cache has never seen"])
    assert model.calls == [1] and "(1/1 texts" in out.getvalue().splitlines()[-1]


def test_the_cli_keeps_stdout_for_results_and_says_where_the_time_went(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGAUDIT_CACHE", str(tmp_path / "cache"))  # the chunks are embedded here, not found
    config = write_config(tmp_path, BM25 + DENSE, items=2, seeds="[1]")
    verbose = invoke("--verbose", "run", config, "--no-gate")
    assert verbose.exit_code == 0, verbose.output
    said = verbose.stderr
    for line in ("runs: started (12 runs)", "runs › indexing dense › embedding: started", "scoring: done in"):
        assert re.search(STAMP + "  " + re.escape(line), said), said
    assert re.search(STAMP + r"  writing outputs › report\.html: done in \d+\.\d s\n", said)
    assert re.search(STAMP + r"  embedding cache: [\d,]+ texts asked", said)
    assert not re.search(STAMP, verbose.stdout)
    end = re.search(r"^12 runs \(12 run now, 0 resumed\) in (\d+\.\d) s, [\d.]+ runs/s \((.*)\)$", verbose.stdout, re.M)
    assert end, verbose.stdout
    spent = {name: float(s) for name, s in re.findall(r"([a-z ]+) (\d+\.\d) s(?:, |$)", end.group(2))}
    assert spent and set(spent) <= CATEGORIES
    # each figure is rounded to 0.1 s, and a category under 0.05 s is left out
    slack = 0.05 * (len(spent) + 1) + 0.05 * len(CATEGORIES - set(spent))
    assert abs(sum(spent.values()) - float(end.group(1))) <= slack
    assert verbose.stdout.rstrip().splitlines()[-1].startswith("run directory: ")
    quiet = invoke("--quiet", "run", config, "--no-gate")
    assert quiet.exit_code == 0 and not re.search(STAMP, quiet.stderr)
    assert re.search(r"^12 runs \(12 run now, 0 resumed\) in ", quiet.stdout, re.M)
    both = invoke("--quiet", "--verbose", "run", config)
    assert both.exit_code == 2 and "use --quiet or --verbose, not both" in both.stderr


def test_validate_counts_the_records_it_reads(tmp_path):
    run_dir = run_dir_of(invoke("--quiet", "run", write_config(tmp_path, BM25, items=2, seeds="[1]"), "--no-gate"))
    result = invoke("--verbose", "validate", run_dir / "traces.jsonl", "--workers", "1")
    assert re.search(STAMP + r"  validating: done in \d+\.\d s \(6 records, ", result.stderr)
    assert "validating" not in result.stdout


def test_a_pipe_outside_ci_gets_no_progress_however_long_the_phases(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "SHOWN_AFTER_S", 0.0)  # every phase counts as long: as on a busy machine
    monkeypatch.setattr(progress, "PERIOD_S", 0.0)
    config = write_config(tmp_path, BM25, items=2, seeds="[1]")
    piped = invoke("run", config, "--no-gate")  # CliRunner's stderr is a pipe, and CI is unset
    assert piped.exit_code == 0 and not re.search(STAMP, piped.stderr), piped.stderr
    monkeypatch.setenv("CI", "true")
    in_ci = invoke("run", config, "--no-gate")
    assert re.search(STAMP + r"  runs: started \(6 runs\)", in_ci.stderr)
    monkeypatch.delenv("CI")
    asked = invoke("--verbose", "run", config, "--no-gate")
    assert re.search(STAMP + r"  runs: started \(6 runs\)", asked.stderr)


def test_a_command_has_pyarrow_hand_freed_memory_back_at_once(monkeypatch):
    import gc
    import os

    monkeypatch.setenv("MIMALLOC_PURGE_DELAY", "10")
    monkeypatch.delenv("MIMALLOC_PURGE_DELAY")  # restored (unset) after the test
    threshold = gc.get_threshold()
    try:
        progress.start_command(quiet=True)
        assert os.environ["MIMALLOC_PURGE_DELAY"] == "0"  # read when pyarrow is first imported
        monkeypatch.setenv("MIMALLOC_PURGE_DELAY", "25")
        progress.start_command(quiet=True)
        assert os.environ["MIMALLOC_PURGE_DELAY"] == "25"  # a setting of the user's own stands
    finally:
        gc.set_threshold(*threshold)
        progress.close()


def test_a_command_leaves_the_runs_in_flight_to_reference_counting():
    """A run holds a few batches of parsed traces at a time, hundreds of thousands of small objects
    in no cycle, each batch freed once scored: the cyclic collector does not walk them."""
    import gc
    from collections import deque

    threshold = gc.get_threshold()
    collected: list[int] = []

    def seen(phase, info):
        if phase == "start":
            collected.append(info["generation"])

    try:
        progress.start_command(quiet=True)
        gc.collect()
        gc.callbacks.append(seen)
        in_flight: deque = deque()
        for batch in range(40):  # 40,000 objects a batch, six batches alive at a time
            in_flight.append([{"qid": f"q{batch}-{i}", "retrieved": [[i], [i]]} for i in range(10_000)])
            if len(in_flight) > 6:
                in_flight.popleft()
        assert len(in_flight) == 6
    finally:
        if seen in gc.callbacks:
            gc.callbacks.remove(seen)
        gc.set_threshold(*threshold)
        progress.close()
    assert collected == []


def test_a_slow_phase_shows_its_rate_per_minute_and_an_eta_that_does_not_jump(shown_progress, monkeypatch, clock):
    """A slow pipeline: four runs end together every two minutes, 40 in all. Its rate reads per
    minute, never 0.0 runs/s, and its ETA counts down to the same end from step to step; the rate
    over the phase so far would swing it between 16 and 35 minutes with each step."""
    monkeypatch.setattr(progress, "SHOWN_AFTER_S", 0.0)
    shown_progress(io.StringIO())
    seen: list[tuple[float, str]] = []
    with progress.phase("runs", total=40, unit="runs") as shown:
        for burst in range(9):
            for _ in range(12):  # 10 s apart, within the two minutes of a burst
                clock.sleep(10.0)
                seen.append((clock.monotonic(), shown.counted(clock.monotonic())))
            shown.advance(4)
        clock.sleep(120.0)
        shown.advance(4)
    texts = [text for _, text in seen if "runs/" in text]
    assert len(texts) == 8 * 12 and not any("runs/s" in text for text in texts), texts
    # 10 s after the first step: 4 runs in 130 s so far, the end estimated at the step, 20 min from the start
    assert texts[0] == "4/40 runs, 1.8 runs/min, ETA 17 min 50 s", texts[0]
    ends = [at + _seconds(re.search(r"ETA (.*)$", text).group(1)) for at, text in seen if "ETA" in text]
    started = seen[0][0] - 10.0
    assert all(abs(end - (started + 1200.0)) <= 1.0 for end in ends), ends  # the phase ends at 20 minutes
    assert shown.counted(clock.monotonic()) == "40/40 runs, 2.0 runs/min"


def _seconds(eta: str) -> float:
    """`18 min 00 s`, `1 h 05 min`, `45 s` in seconds."""
    words = eta.split()
    return sum(int(n) * {"h": 3600, "min": 60, "s": 1}[unit] for n, unit in zip(words[::2], words[1::2]))


def test_rates_read_per_second_minute_or_hour():
    from ragaudit.core.progress_rate import rate_text

    assert rate_text(240.4, "texts") == "240 texts/s"
    assert rate_text(1.25, "runs") == "1.2 runs/s"
    assert rate_text(0.05, "runs") == "3.0 runs/min"
    assert rate_text(1 / 1800, "runs") == "2.0 runs/h"
    assert rate_text(0.0, "runs") == "0 runs/s"


def test_the_run_summary_of_a_slow_run_says_runs_per_minute():
    from types import SimpleNamespace

    from ragaudit.outputs.render.run_text import throughput

    result = SimpleNamespace(total=5, executed=3, resumed=2)
    assert throughput(result, 90.0, "runs 90.0 s") == (
        "5 runs (3 run now, 2 resumed) in 90.0 s, 2.0 runs/min (runs 90.0 s)"
    )
