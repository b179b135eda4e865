"""What `ragaudit compare` costs at scale, the blockwise resampling against the one-shot one it replaced.

Two synthetic systems pair every question on all ten compared metrics (binary, graded and continuous
ones, with `support` missing for 1 question in 20 so that two pair counts occur). Each measurement runs
in a fresh process and reports the wall and CPU time of `compare_pair` (CPU time is the steadier
figure on a shared machine), the peak of memory traced while it runs (tracemalloc; numpy reports its
buffers to it) and the peak RSS of the whole process (VmHWM), which also holds the synthetic systems.

  * chunked: `ragaudit.compare.compare_pair`, at --questions (default 100,000).
  * one-shot: the previous algorithm, re-implemented below as the reference: one (RESAMPLES, n) draw
    per metric for the bootstrap and one for the sign flips. At 100,000 questions it needs about
    16 GB, so it runs at the --reference sizes and its time and memory are extrapolated linearly to
    --questions (both are linear in n: R·n draws, 16 bytes each alive at the peak).
  * equality: at --mid questions, where the one-shot algorithm fits, both results must be equal
    as Python objects, every float bit for bit. The script exits 1 when they are not.

    .venv/bin/python bench/compare.py [--questions 100000] [--mid 5000] [--reference 1000 2000 4000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from ragaudit.compare import (
    COMPARED,
    RESAMPLES,
    SEED,
    STATES,
    System,
    compare_pair,
    holm,
)
from ragaudit.metrics.registry import METRICS


def synthetic_systems(n: int, seed: int = 0) -> tuple[System, System]:
    rng = np.random.default_rng(seed)

    def values(base: np.ndarray) -> dict[str, np.ndarray]:
        graded = np.round(base * 4) / 4
        return {
            "citation_match": (base > 0.2).astype(float),
            "coverage": (base > 0.25).astype(float),
            "correct": (base > 0.3).astype(float),
            "citation_precision": graded,
            "citation_recall": graded,
            "recall@k": (base > 0.15).astype(float),
            "mrr": 1 / np.ceil(1 + 4 * (1 - base)),
            "ndcg@10": base,
            "delta_s_qr": 1 - base,
            "support": base**2,
        }

    quality = rng.random(n)
    reference = values(quality)
    other = values(np.clip(quality + rng.normal(-0.01, 0.1, n), 0, 1))
    missing = rng.random(n) < 0.05
    states = rng.integers(0, len(STATES), size=(2, n))

    def system(name: str, metrics: dict[str, np.ndarray], row: int) -> System:
        return System(
            name,
            {
                f"q{i}": {
                    "qid": f"q{i}",
                    "metrics": {
                        m: (None if m == "support" and missing[i] else float(v[i])) for m, v in metrics.items()
                    },
                    "lambda": {"state": STATES[states[row, i]]},
                }
                for i in range(n)
            },
        )

    return system("reference", reference, 0), system("other", other, 1)


def reference_bootstrap_ci(diffs: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    idx = rng.integers(0, len(diffs), size=(RESAMPLES, len(diffs)))
    means = diffs[idx].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def reference_permutation_p(diffs: np.ndarray, rng: np.random.Generator) -> float:
    observed = abs(diffs.mean())
    signs = rng.choice((-1.0, 1.0), size=(RESAMPLES, len(diffs)))
    flipped = np.abs((signs * diffs).mean(axis=1))
    return float((np.sum(flipped >= observed - 1e-12) + 1) / (RESAMPLES + 1))


def reference_compare_pair(reference: System, other: System, *, tolerance: float = 0.01) -> dict:
    """compare_pair as it was: a fresh generator and one-shot resampling per metric."""
    shared = sorted(set(reference.questions) & set(other.questions))
    metrics: dict[str, dict] = {}
    raw_p: dict[str, float] = {}
    for name in COMPARED:
        pairs = [(reference.questions[q]["metrics"].get(name), other.questions[q]["metrics"].get(name)) for q in shared]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        if not pairs:
            continue
        a = np.array([p[0] for p in pairs], dtype=float)
        b = np.array([p[1] for p in pairs], dtype=float)
        diffs = b - a
        rng = np.random.default_rng(SEED)
        better = diffs if METRICS[name].higher_is_better else -diffs
        low, high = reference_bootstrap_ci(diffs, rng)
        raw_p[name] = reference_permutation_p(diffs, rng) if np.any(diffs != 0) else 1.0
        metrics[name] = {
            "mean_reference": float(a.mean()),
            "mean_other": float(b.mean()),
            "difference": float(diffs.mean()),
            "ci95": [low, high],
            "p_value": raw_p[name],
            "questions": len(pairs),
            "higher_is_better": METRICS[name].higher_is_better,
            "wins": int(np.sum(better > tolerance)),
            "ties": int(np.sum(np.abs(better) <= tolerance)),
            "losses": int(np.sum(better < -tolerance)),
        }
    for name, p in holm(raw_p).items():
        metrics[name]["p_holm"] = p
        m = metrics[name]
        direction = m["difference"] if m["higher_is_better"] else -m["difference"]
        m["verdict"] = "tie" if p >= 0.05 else ("better" if direction > 0 else "worse")
    transitions = {s: {t: 0 for t in STATES} for s in STATES}
    for q in shared:
        transitions[reference.questions[q]["lambda"]["state"]][other.questions[q]["lambda"]["state"]] += 1
    return {
        "reference": reference.name,
        "other": other.name,
        "questions": len(shared),
        "tolerance": tolerance,
        "metrics": metrics,
        "lambda_transitions": transitions,
    }


ALGORITHMS = {"chunked": compare_pair, "one-shot": reference_compare_pair}


def measure(algorithm: str, n: int) -> dict:
    """Runs in a child process, so that its peak RSS is its own."""
    reference, other = synthetic_systems(n)
    tracemalloc.start()
    start, cpu = time.perf_counter(), time.process_time()
    result = ALGORITHMS[algorithm](reference, other)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "algorithm": algorithm,
        "questions": n,
        "seconds": seconds,
        "cpu": cpu,
        "traced_peak": peak,
        "max_rss": peak_rss(),
        "verdicts": {name: m["verdict"] for name, m in result["metrics"].items()},
    }


def peak_rss() -> int:
    # VmHWM belongs to this process image; ru_maxrss would carry over the parent's peak across exec.
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("peak RSS needs /proc/self/status (Linux)")


def equal_at(n: int) -> bool:
    reference, other = synthetic_systems(n)
    return compare_pair(reference, other) == reference_compare_pair(reference, other)


def in_child(algorithm: str, n: int) -> dict | bool:
    done = subprocess.run(
        [sys.executable, __file__, "--child", algorithm, str(n)], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"{algorithm} at {n} questions failed:\n{done.stderr}")
    return json.loads(done.stdout)


def extrapolate(points: list[dict], key: str, n: int) -> float:
    slope, intercept = np.polyfit([p["questions"] for p in points], [p[key] for p in points], 1)
    return float(slope * n + intercept)


def mib(size: float) -> str:
    return f"{size / 2**20:,.0f} MiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=100_000)
    parser.add_argument("--mid", type=int, default=5_000, help="questions for the equality check")
    parser.add_argument(
        "--reference",
        type=int,
        nargs="+",
        default=[1_000, 2_000, 4_000],
        help="questions at which the one-shot algorithm runs, to extrapolate from",
    )
    parser.add_argument("--child", nargs=2, metavar=("ALGORITHM", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        algorithm, n = args.child[0], int(args.child[1])
        print(json.dumps(equal_at(n) if algorithm == "equal" else measure(algorithm, n)))
        return 0

    equal = in_child("equal", args.mid)
    print(
        f"equality at {args.mid:,} paired questions, all {len(COMPARED)} metrics: "
        f"{'identical (every float bit for bit)' if equal else 'DIFFERENT'}"
    )

    print(
        f"{'algorithm':<10} {'questions':>10} {'wall s':>8} {'CPU s':>8} {'traced peak':>12} {'process peak RSS':>17}"
    )

    def line(row: dict, note: str = "") -> None:
        rss = mib(row["max_rss"]) if "max_rss" in row else ""
        print(
            f"{row['algorithm']:<10} {row['questions']:>10,} {row['seconds']:>8.1f} {row['cpu']:>8.1f} "
            f"{mib(row['traced_peak']):>12} {rss:>17}{note}"
        )

    one_shot = [in_child("one-shot", n) for n in args.reference]
    for row in one_shot:
        line(row)
    line(
        {
            "algorithm": "one-shot",
            "questions": args.questions,
            **{key: extrapolate(one_shot, key, args.questions) for key in ("seconds", "cpu", "traced_peak")},
        },
        "  (extrapolated)",
    )
    chunked = in_child("chunked", args.questions)
    line(chunked)
    print(f"verdicts at {args.questions:,}: {chunked['verdicts']}")
    within = chunked["max_rss"] < 2**30
    print(f"peak RSS at {args.questions:,} questions {'<' if within else '>='} 1 GiB")
    return 0 if equal and within else 1


if __name__ == "__main__":
    sys.exit(main())
