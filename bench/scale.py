"""Benchmark `ragaudit run` at scale: a replay audit of up to a million runs on one machine, and
the same run fanned out over a Dask LocalCluster.

Workloads are built here, from the demo: its three pipelines run once over the handbook (two
paraphrases, two seeds, the hashing encoder, so no model cost: 960 runs), and their traces are
copied into replay recordings, one per pipeline, two ways:

    distinct N   N runs over distinct questions: N / 960 perturbed copies of the corpus and gold
                 set (distinct doc ids, texts, qids and questions: bench/distinct.py), what a month of
                 production traffic or a big gold set looks like
    repeated N   N runs over the demo's 80 questions, copied under more and more seeds

Each audit runs as `ragaudit run` in a process of its own, timed from the outside (wall clock and
CPU seconds: on a shared machine the CPU figure is the one to compare) with its peak RSS, beside a
bare orjson parse of the same recordings (the floor any replay audit stands on).
Targets: ≥ 2,500 runs/s, ≤ 2 GiB at 1M runs, ≤ 40× a bare parse, peak RSS ≤ 1.3× from 24k to 96k runs.

The smallest distinct replay runs again, on 2 threads and on 2 worker processes (`--executor
processes`), its embedding vectors cached by then (those of a model; the hashing encoder keeps
none on disk): time, CPU, memory, identical reports; the largest runs again on 2 worker processes,
both cores at work, measured against the targets too.

    processes    2 worker threads vs `--executor processes` with 2 processes, identical reports: the
                 reference bm25 pipeline on a corpus `--copies` times the handbook, and a python
                 pipeline that computes `--busy-ms` a call
    dask         an I/O-bound python pipeline (sleeps `--sleep` s a call) on a LocalCluster of
                 1 and 2 worker processes vs local threads: identical reports, speedup per worker

    python bench/scale.py [--sizes 10000,100000,1000000] [--workloads distinct,repeated]
                          [--copies 100] [--reference-seeds 4] [--dask-runs 480] [--sleep 0.05] [--out DIR]

10M runs need about 10 × the 1M recording and run directory on disk: the script says whether the
disk has room and runs it only when asked (`--sizes ...,10000000`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from measure import measure

ROOT = Path(__file__).resolve().parents[1]
GOLD = ROOT / "gold_sets" / "handbook"
CLI = Path(sys.executable).with_name("ragaudit")
TARGET_RATE = 2_500.0
TARGET_RSS_MB = 2_048.0
TARGET_PARSE = 40.0
TARGET_GROWTH = 1.3  # peak RSS from 24k to 96k runs of distinct questions


DEMO_HASHING = """[audit]
gold = "{gold}/gold.jsonl"
corpus = "{gold}/corpus"
paraphrases = 2
seeds = [1, 2]
out = "{out}"
workers = 2
[embedder]
model = "hashing"
[metrics]
k = 5
[[pipelines]]
name = "bm25-k5"
kind = "reference"
retriever = "bm25"
k = 5
[[pipelines]]
name = "dense-k5"
kind = "reference"
retriever = "dense"
k = 5
[[pipelines]]
name = "hybrid-mmr-k5"
kind = "reference"
retriever = "hybrid"
rerank = "mmr"
temperature = 0.3
k = 5
"""
PER_COPY = 80 * 3 * 2 * 2  # questions × pipelines × paraphrases × seeds


def demo_traces(work: Path, env: dict) -> Path:
    """The demo's pipelines over the handbook, hashing encoder: 960 runs."""
    out = work / "demo"
    config = work / "demo.toml"
    config.write_text(DEMO_HASHING.format(gold=GOLD, out=out))
    subprocess.run(
        [str(CLI), "run", str(config), "--no-gate"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return next(out.glob("*/traces.jsonl"))


def repeated(traces: Path, seeds: int, out: Path) -> dict[str, Path]:
    """The demo's runs under seeds 1..`seeds` (its two seeds copied in turn), one recording per
    pipeline, over the handbook's corpus and gold set."""
    out.mkdir(parents=True, exist_ok=True)
    lines = [orjson.loads(line) for line in open(traces, "rb")]
    pipelines = list(dict.fromkeys(t["config"] for t in lines))
    files = {name: open(out / f"{name}.jsonl", "wb") for name in pipelines}
    try:
        for seed in range(1, seeds + 1):
            mine = 1 + (seed - 1) % 2
            for trace in lines:
                if trace["seed"] == mine:
                    files[trace["config"]].write(orjson.dumps({**trace, "seed": seed}) + b"\n")
    finally:
        for f in files.values():
            f.close()
    return {name: out / f"{name}.jsonl" for name in pipelines}


def replay_config(work: Path, recordings: dict[str, Path], gold: Path, seeds: int) -> Path:
    pipelines = "".join(
        f'[[pipelines]]\nname = "{name}"\nkind = "replay"\ntraces = "{path}"\n' for name, path in recordings.items()
    )
    config = work / "replay.toml"
    config.write_text(f"""[audit]
gold = "{gold / "gold.jsonl"}"
corpus = "{gold / "corpus"}"
paraphrases = 2
seeds = {list(range(1, seeds + 1))}
out = "{work / "runs"}"
workers = 2
[embedder]
model = "hashing"
[metrics]
k = 5

{pipelines}""")
    return config


def children_cpu() -> float:
    """CPU seconds of the waited-for child processes so far: on a shared machine, what a command
    cost regardless of what else runs."""
    times = os.times()
    return times.children_user + times.children_system


def bare_parse(recordings: dict[str, Path]) -> tuple[float, float]:
    """(seconds, CPU seconds) to read and orjson-parse every line of the recordings, in a process
    of its own."""
    code = (
        "import orjson, sys, time\nt = time.perf_counter()\n"
        "for f in sys.argv[1:]:\n    for line in open(f, 'rb'):\n        orjson.loads(line)\n"
        "print(time.perf_counter() - t)"
    )
    started = children_cpu()
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, recordings.values())], capture_output=True, text=True, check=True
    )
    return float(done.stdout), children_cpu() - started


def disk_free_gb(path: Path) -> float:
    return shutil.disk_usage(path).free / 1e9


def page_seconds(page: Path) -> tuple[float, float] | None:
    """(seconds until report.html has loaded, seconds for one sort of its question table) in
    headless Chromium, or None without Debian's chromium and chromedriver."""
    chromium, driver_path = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
    if not (chromium.exists() and driver_path.exists()):
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    profile = tempfile.TemporaryDirectory()
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        f"--user-data-dir={profile.name}",
    ):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(executable_path=str(driver_path)), options=options)
    try:
        started = time.perf_counter()
        browser.get(page.as_uri())  # returns once the load event has fired
        loaded = time.perf_counter() - started
        sort = browser.execute_script("""
            const t0 = performance.now();
            document.querySelector('#qtable thead button[data-col="6"]').click();
            return (performance.now() - t0) / 1000;""")
        return loaded, float(sort)
    finally:
        browser.quit()
        profile.cleanup()


def replay(work: Path, env: dict, traces: Path, sizes: list[int], workload: str) -> list[dict]:
    from distinct import build

    rows = []
    for size in sizes:
        copies = max(1, round(size / PER_COPY))
        data = work / f"{workload}-{size}"
        if workload == "distinct":
            recordings, gold, seeds = build(copies, traces, data), data, 2
        else:
            recordings, gold, seeds = repeated(traces, 2 * copies, data), GOLD, 2 * copies
        runs = copies * PER_COPY
        questions = copies * 80 if workload == "distinct" else 80
        recorded = sum(p.stat().st_size for p in recordings.values())
        parse, parse_cpu = bare_parse(recordings)
        config = replay_config(data, recordings, gold, seeds)
        started = children_cpu()
        seconds, peak_mb, tree_mb, code = measure([str(CLI), "run", str(config), "--no-gate"], env=env, ok=(0,))
        cpu = children_cpu() - started
        run_dir = max((d for d in (data / "runs").iterdir() if d.is_dir()), key=lambda p: p.stat().st_mtime)
        sizes_mb = {
            name: (run_dir / name).stat().st_size / 1e6
            for name in ("report.json", "report.html", "runs.parquet", "traces.jsonl")
        }
        rows.append(
            {
                "runs": runs,
                "questions": questions,
                "seconds": seconds,
                "rate": runs / seconds,
                "peak_mb": peak_mb,
                "parse": parse,
                "cpu": cpu,
                "parse_cpu": parse_cpu,
                "bytes_per_run": recorded / runs,
                **sizes_mb,
            }
        )
        print(
            f"  {workload:8} {runs:>9,} runs {questions:>7,} q  {seconds:7.1f} s  {runs / seconds:7,.0f} runs/s  "
            f"CPU {cpu:7.1f} s ({runs / cpu:6,.0f} runs/CPU s)  peak RSS {peak_mb:6.0f} MB  "
            f"bare parse {parse:6.2f} s ({seconds / parse:5.1f}x), CPU {parse_cpu:5.2f} s ({cpu / parse_cpu:5.1f}x)  "
            f"report.json {sizes_mb['report.json']:5.1f} MB  report.html {sizes_mb['report.html']:5.1f} MB  "
            f"runs.parquet {sizes_mb['runs.parquet']:6.1f} MB",
            flush=True,
        )
        if workload == "distinct" and size in (sizes[0], sizes[-1]):
            # the smallest on 2 threads beside 2 processes; the largest on 2 processes, both cores at work
            on = ("2 threads", "2 processes") if size == sizes[0] else ("2 processes",)
            rows[-1]["processes"] = replay_on_processes(config, data, env, runs, parse, on)
        if size == sizes[-1] and (timed := page_seconds(run_dir / "report.html")) is not None:
            print(
                f"  {'':>9}       report.html in headless Chromium: loaded in {timed[0]:.2f} s, "
                f"a sort of the question table {timed[1]:.3f} s (target: open in < 3 s)",
                flush=True,
            )
        shutil.rmtree(data)
    return rows


def replay_on_processes(
    config: Path, data: Path, env: dict, runs: int, parse: float, on: tuple[str, ...]
) -> dict[str, float]:
    """The same replay again (a model's embedding vectors now cached), on 2 threads and/or on 2 worker
    processes (`--executor processes`), as `on` says: time (and its ratio to the bare parse's,
    `parse` seconds), CPU of every process, and whether the reports are the same. Returns the
    seconds each took."""
    reports, took = {}, {}
    ways = {"2 threads": [], "2 processes": ["--executor", "processes"]}
    for label, extra in ((label, ways[label]) for label in on):
        started = children_cpu()
        seconds, peak_mb, tree_mb, _ = measure(
            [str(CLI), "run", str(config), "--no-gate", "--workers", "2", *extra], env=env, ok=(0,)
        )
        cpu = children_cpu() - started
        run_dir = max((d for d in (data / "runs").iterdir() if d.is_dir()), key=lambda p: p.stat().st_mtime)
        report = json.loads((run_dir / "report.json").read_text())
        report.pop("meta")
        reports[label] = report
        took[label] = seconds
        print(
            f"  {'':>9}       again, {label:11}: {seconds:6.1f} s  {runs / seconds:7,.0f} runs/s  "
            f"({seconds / parse:5.1f}x the bare parse)  CPU {cpu:6.1f} s  "
            f"peak RSS {peak_mb:5.0f} MB (all processes {tree_mb:5.0f} MB)",
            flush=True,
        )
    if len(reports) > 1:
        print(f"  {'':>9}       reports identical: {reports['2 threads'] == reports['2 processes']}", flush=True)
    return took


def summary(rows: list[dict]) -> None:
    biggest, smallest = rows[-1], rows[0]
    print(
        f"  at {biggest['runs']:,} runs: {biggest['rate']:,.0f} runs/s = {biggest['rate'] / TARGET_RATE:.2f}x "
        f"the {TARGET_RATE:,.0f} target; peak RSS {biggest['peak_mb']:,.0f} MB = "
        f"{biggest['peak_mb'] / TARGET_RSS_MB:.2f}x the {TARGET_RSS_MB:,.0f} MB cap; "
        f"{biggest['seconds'] / biggest['parse']:.1f}x a bare parse (target {TARGET_PARSE:.0f}x); "
        f"on CPU time {biggest['runs'] / biggest['cpu']:,.0f} runs/s, {biggest['cpu'] / biggest['parse_cpu']:.1f}x a bare parse"
    )
    if "processes" in biggest and "2 processes" in biggest["processes"]:
        seconds = biggest["processes"]["2 processes"]
        print(
            f"  at {biggest['runs']:,} runs on 2 worker processes: {biggest['runs'] / seconds:,.0f} runs/s = "
            f"{biggest['runs'] / seconds / TARGET_RATE:.2f}x the {TARGET_RATE:,.0f} target; "
            f"{seconds / biggest['parse']:.1f}x a bare parse (target {TARGET_PARSE:.0f}x)"
        )
    if len(rows) > 1:
        print(
            f"  memory across sizes: {smallest['peak_mb']:,.0f} MB at {smallest['runs']:,} runs, "
            f"{biggest['peak_mb']:,.0f} MB at {biggest['runs']:,} "
            f"({biggest['peak_mb'] / smallest['peak_mb']:.2f}x for {biggest['runs'] / smallest['runs']:,.0f}x the runs; "
            f"target {TARGET_GROWTH:.1f}x from 24k to 96k runs)"
        )


def processes_vs_threads(work: Path, env: dict, copies: int, seeds: int, busy_ms: float) -> None:
    """End to end on 2 threads and on 2 processes: the reference bm25 pipeline over a large corpus,
    and a python pipeline that computes for `busy_ms` a call in pure Python (which threads, holding
    the GIL by turns, cannot run side by side)."""
    from reference import build_corpus

    corpus = build_corpus(work / f"corpus-x{copies}", copies)
    (work / "busy_rag.py").write_text(BUSY)
    pipelines = {
        f"reference bm25, {copies}x corpus": (
            corpus,
            '[[pipelines]]\nname = "bm25"\nkind = "reference"\nretriever = "bm25"\nanalyzer = "lowercase+ascii_fold"\n',
        ),
        f"python, {busy_ms:g} ms CPU a call": (
            GOLD / "corpus",
            '[[pipelines]]\nname = "busy"\nkind = "python"\n'
            f'factory = "busy_rag:make"\noptions = {{busy_ms = {busy_ms}}}\n',
        ),
    }
    runs = 80 * 3 * seeds
    for title, (corpus_path, pipeline) in pipelines.items():
        config = work / "cpu.toml"
        config.write_text(f"""[audit]
gold = "{GOLD / "gold.jsonl"}"
corpus = "{corpus_path}"
paraphrases = 3
seeds = {list(range(1, seeds + 1))}
out = "{work / "cpu-runs"}"
[embedder]
model = "all-MiniLM-L6-v2"
{pipeline}""")
        reports, seconds_of = {}, {}
        for label, extra in (("2 threads", []), ("2 processes", ["--executor", "processes"])):
            seconds, peak_mb, tree_mb, _ = measure(
                [str(CLI), "run", str(config), "--no-gate", "--workers", "2", *extra], env=env, ok=(0,)
            )
            run_dir = max((d for d in (work / "cpu-runs").iterdir() if d.is_dir()), key=lambda p: p.stat().st_mtime)
            report = json.loads((run_dir / "report.json").read_text())
            report.pop("meta")
            reports[label], seconds_of[label] = report, seconds
            print(
                f"  {title:32} {label:12} {runs:,} runs  {seconds:6.1f} s  {runs / seconds:7.1f} runs/s  "
                f"peak RSS {peak_mb:,.0f} MB (all processes {tree_mb:,.0f} MB)",
                flush=True,
            )
        print(
            f"  {title:32} processes / threads speed: {seconds_of['2 threads'] / seconds_of['2 processes']:.2f}x, "
            f"reports identical: {reports['2 threads'] == reports['2 processes']}"
        )


BUSY = '''"""A pipeline bound by computation in Python: it works `busy_ms` per call, then cites the
first chunk of the corpus' first document."""
import time


class Busy:
    def __init__(self, busy_ms):
        self.busy_s = busy_ms / 1000.0

    def index_info(self):
        return {"index_hash": "sha256:busy", "analyzer": "lowercase", "embed_model": "none", "store": "busy"}

    def run(self, query, *, seed, k):
        end, n = time.thread_time() + self.busy_s, 0
        while time.thread_time() < end:
            n += sum(i * i for i in range(200))
        return {"retrieved": [], "answer": {"text": f"{len(query)} {seed} {n > 0}"}}


def make(busy_ms=10.0):
    return Busy(busy_ms)
'''


def dask_speedup(work: Path, env: dict, runs: int, sleep: float) -> list[dict]:
    """A pipeline that waits `sleep` s a call: local threads, then a LocalCluster of 1 and 2 workers
    (one thread each, so the cluster's parallelism is its worker count)."""
    from distributed import LocalCluster

    (work / "sleepy_rag.py").write_text(SLEEPY)
    items = 80
    seeds = max(1, runs // (items * 3))
    config = work / "sleepy.toml"
    config.write_text(f"""[audit]
gold = "{GOLD / "gold.jsonl"}"
corpus = "{GOLD / "corpus"}"
paraphrases = 3
seeds = {list(range(1, seeds + 1))}
out = "{work / "sleepy-runs"}"
[embedder]
model = "all-MiniLM-L6-v2"
[[pipelines]]
name = "sleepy"
kind = "python"
factory = "sleepy_rag:make"
options = {{sleep = {sleep}}}
""")
    total = items * 3 * seeds
    rows, reports = [], {}
    for label, workers in (("local, 1 worker thread", 0), ("dask, 1 worker", 1), ("dask, 2 workers", 2)):
        if workers == 0:
            command, cluster = [str(CLI), "run", str(config), "--no-gate", "--workers", "1"], None
        else:
            cluster = LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50
            )
            command = [
                str(CLI),
                "run",
                str(config),
                "--no-gate",
                "--executor",
                "dask",
                "--scheduler",
                cluster.scheduler_address,
            ]
        try:
            seconds, peak_mb, _, _ = measure(command, env=env, ok=(0,))
        finally:
            if cluster is not None:
                cluster.close()
        run_dir = max((d for d in (work / "sleepy-runs").iterdir() if d.is_dir()), key=lambda p: p.stat().st_mtime)
        report = json.loads((run_dir / "report.json").read_text())
        report.pop("meta")
        reports[label] = report
        rows.append({"label": label, "workers": workers, "seconds": seconds, "rate": total / seconds})
        print(f"  {label:24} {total:,} runs  {seconds:6.1f} s  {total / seconds:6.1f} runs/s", flush=True)
    same = all(r == reports["local, 1 worker thread"] for r in reports.values())
    print(f"  reports identical to the local run: {same}")
    one, two = rows[1]["seconds"], rows[2]["seconds"]
    print(f"  speedup of 2 workers over 1: {one / two:.2f}x (linear: 2.00x)")
    return rows


SLEEPY = '''"""A pipeline bound by waiting: it answers from the question's gold section after sleeping."""
import time


class Sleepy:
    def __init__(self, sleep):
        self.sleep = sleep

    def index_info(self):
        return {"index_hash": "sha256:sleepy", "analyzer": "lowercase", "embed_model": "none", "store": "sleepy"}

    def run(self, query, *, seed, k):
        time.sleep(self.sleep)
        return {"retrieved": [], "answer": {"text": "I do not know."}}


def make(sleep=0.2):
    return Sleepy(sleep)
'''


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    ap.add_argument("--sizes", default="10000,100000,1000000", help="replay audit sizes, in runs")
    ap.add_argument("--workloads", default="distinct,repeated", help="distinct and/or repeated questions")
    ap.add_argument("--copies", type=int, default=100, help="corpus size for the processes section, in handbooks")
    ap.add_argument("--reference-seeds", type=int, default=4, help="seeds of the processes section (0: skip)")
    ap.add_argument("--busy-ms", type=float, default=10.0, help="CPU time a call of the CPU-bound python pipeline")
    ap.add_argument("--dask-runs", type=int, default=480, help="runs of the I/O-bound pipeline (0: skip)")
    ap.add_argument("--sleep", type=float, default=0.05, help="seconds the I/O-bound pipeline waits a call")
    ap.add_argument("--out", type=Path, help="work in DIR (default: a removed temp dir)")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    work = args.out or Path(tempfile.mkdtemp(prefix="ragaudit-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "CI": "1",
        "RAGAUDIT_CACHE": os.environ.get("RAGAUDIT_CACHE") or str(work / "cache"),
    }
    try:
        started = time.perf_counter()
        traces = demo_traces(work, env)
        print(f"demo run: {time.perf_counter() - started:.1f} s, {PER_COPY:,} runs")
        rows: list[dict] = []
        for workload in args.workloads.split(","):
            print(f"\nreplay audit, {workload} questions, hashing encoder ({os.cpu_count()} CPUs):")
            rows = replay(work, env, traces, sizes, workload)
            summary(rows)
        per_run = rows[-1]["bytes_per_run"] + 2 * 1_000  # the recording, the run's traces.jsonl, its tables
        need = 10_000_000 * per_run / 1e9
        if 10_000_000 not in sizes:
            print(
                f"  10M runs: not run here (about {need:,.0f} GB of disk for the recording and the run, "
                f"{disk_free_gb(work):,.0f} GB free); add 10000000 to --sizes to run it"
            )
        if args.reference_seeds:
            print("\nCPU-bound pipelines, threads vs processes (end to end):")
            processes_vs_threads(work, env, args.copies, args.reference_seeds, args.busy_ms)
        if args.dask_runs:
            print(f"\nDask LocalCluster vs local, an I/O-bound pipeline ({args.sleep} s a call):")
            dask_speedup(work, env, args.dask_runs, args.sleep)
    finally:
        if not args.out:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
