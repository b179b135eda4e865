"""Why ragaudit keeps its own process pool (`ragaudit.core.execution.Processes`) rather than the
standard library's `concurrent.futures.ProcessPoolExecutor`: the same work, side by side, on the
two things a pipeline's worker does in production that the pool must survive.

* **a call that ends its process** (a native crash, `os._exit`, the OOM killer): how many of the
  other tasks still finish, and whether the pool takes a new task afterwards;
* **a call that never returns**: whether the program can close the pool and exit, and how long
  that takes (bounded here by `--bound` seconds).

    .venv/bin/python bench/process_pool.py [--tasks 40] [--workers 2] [--bound 20]

Target: every task but the crashing one finishes, the pool goes on taking tasks, and a hung call
keeps no program from exiting; the printed rows say where each pool stands.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def square(x: int) -> int:
    time.sleep(0.05)
    return x * x


def crash(x: int) -> int:
    os._exit(139)  # what a segfault in native code looks like to the parent


def hang(x: int) -> int:
    time.sleep(3600)
    return x


def _ours(workers: int):
    from ragaudit.core.execution import Processes

    return Processes(workers, name="bench-worker")


def _theirs(workers: int):
    import multiprocessing

    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))


def _close(pool) -> None:
    if hasattr(pool, "shutdown"):
        pool.shutdown(wait=False, cancel_futures=True)
    else:
        pool.close()


def crashing(make, tasks: int, workers: int) -> tuple[int, int, str]:
    """Tasks finished and lost when one of them ends its process, and whether a new task then runs."""
    pool = make(workers)
    try:
        futures = [pool.submit(crash if i == tasks // 2 else square, i) for i in range(tasks)]
        done = lost = 0
        for f in futures:
            try:
                f.result(timeout=120)
                done += 1
            except Exception:
                lost += 1
        try:
            after = "yes" if pool.submit(square, 3).result(timeout=120) == 9 else "wrong result"
        except Exception as exc:
            after = f"no ({type(exc).__name__})"
        return done, lost, after
    finally:
        _close(pool)


_HUNG = """
import sys, time
sys.path.insert(0, {bench!r}); sys.path.insert(0, {root!r})
import process_pool as b
pool = b.{maker}(1)
pool.submit(b.hang, 1)
time.sleep(2)
b._close(pool)
"""


def hung(maker: str, bound: float) -> str:
    """How long a program that submitted a call that never returns takes to close its pool and exit."""
    code = _HUNG.format(bench=str(ROOT / "bench"), root=str(ROOT), maker=maker)
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        child.wait(timeout=bound)
        return f"exits in {time.perf_counter() - start:.1f} s"
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, 9)
        child.wait()
        return f"still running after {bound:g} s (killed)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--bound", type=float, default=20.0)
    args = parser.parse_args(argv)
    pools = (("ragaudit Processes", _ours, "_ours"), ("ProcessPoolExecutor", _theirs, "_theirs"))
    print(f"{args.tasks} tasks on {args.workers} workers; task {args.tasks // 2} ends its process")
    print(f"{'pool':<21} {'finished':>8} {'lost':>5}  {'takes a task after':<28} a call that never returns")
    for name, make, maker in pools:
        done, lost, after = crashing(make, args.tasks, args.workers)
        print(f"{name:<21} {done:>8} {lost:>5}  {after:<28} {hung(maker, args.bound)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
