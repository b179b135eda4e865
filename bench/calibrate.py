"""Benchmark `ragaudit calibrate` side by side with one `ragaudit run` of the same gold set.

Both commands run as processes of their own on the same config, timed from the outside: wall
time and CPU time (user + system of the process and its children, from the kernel), first on an
empty embedding cache of their own (cold: every text embedded, as on a first calibration), then
again on that cache (warm). What each audits is counted from the config: a run audits each
pipeline's runs (questions × variants × seeds); calibrate audits the oracle's runs once for the
oracle and once for each fault class, controls included, and scores each distinct run once.

    python bench/calibrate.py [--config configs/default.toml] [--repeat R]

The machine's load average is printed before and after: on a shared machine, repeat and read it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(command: list[str], cache: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children) of one run of `command`."""
    env = {**os.environ, "RAGAUDIT_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):  # 1: a run whose gate failed, which is still a run
        sys.exit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def audited(config_path: Path) -> tuple[int, int]:
    """(runs one `run` audits, runs `calibrate` audits) for this config."""
    from ragaudit.flows.calibrating import AUDITS
    from ragaudit.io.config import load_config
    from ragaudit.io.gold import read_gold

    config = load_config(config_path)
    assert config.audit.gold is not None, f"{config_path}: no gold set"
    items, _ = read_gold(config.audit.gold)
    per_pipeline = sum(len(item.variants[: config.audit.paraphrases]) for item in items) * len(config.audit.seeds)
    return per_pipeline * len(config.pipelines), per_pipeline * AUDITS


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "default.toml")
    ap.add_argument("--repeat", type=int, default=1, help="cold and warm measures per command; the fastest is kept")
    args = ap.parse_args()
    runs, calibrated = audited(args.config)
    print(f"{os.cpu_count()} CPUs, load average before {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"config {args.config}: one run audits {runs:,} runs; calibrate audits {calibrated:,} (the oracle's runs")
    print("once for the oracle and once for each fault class, each distinct run scored once)\n")
    print(f"{'command':<12} {'cache':<6} {'wall s':>8} {'CPU s':>8} {'runs audited':>13}")
    work = Path(tempfile.mkdtemp(prefix="ragaudit-bench-calibrate-"))
    cpu: dict[tuple[str, str], float] = {}
    try:
        commands = {
            "run": ["--quiet", "run", str(args.config), "--out", str(work / "runs"), "--no-gate"],
            "calibrate": ["--quiet", "calibrate", str(args.config), "--out", str(work / "calibration.json")],
        }
        for name, tail in commands.items():
            best: dict[str, tuple[float, float]] = {}
            for _ in range(args.repeat):
                cache = work / f"cache-{name}"
                shutil.rmtree(cache, ignore_errors=True)
                (work / "calibration.json").unlink(missing_ok=True)
                for state in ("cold", "warm"):
                    (work / "calibration.json").unlink(missing_ok=True)
                    measured = timed([sys.executable, "-m", "ragaudit", *tail], cache)
                    if state not in best or measured[1] < best[state][1]:
                        best[state] = measured
            for state, (wall, seconds) in best.items():
                cpu[name, state] = seconds
                count = runs if name == "run" else calibrated
                print(f"{name:<12} {state:<6} {wall:>8.1f} {seconds:>8.1f} {count:>13,}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nload average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for state in ("cold", "warm"):
        print(f"calibrate / run, CPU, {state} cache: {cpu['calibrate', state] / cpu['run', state]:.2f}")
    print("(CPU: user + system seconds of the command's processes; wall includes waiting on a busy machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
