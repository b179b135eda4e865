"""What `ragaudit compare` costs: its statistics from shared resamples, beside scipy called per metric.

Three synthetic systems pair every question on all the compared metrics (binary, graded and
continuous ones, with `support` missing for 1 question in 20 so that two pair counts occur); the
comparison has two pairs (the first system with each other one), like a run of three pipelines.
Each measurement runs in a fresh process, its imports done before the clock starts, and reports
the wall and CPU time (CPU time is the steadier figure on a shared machine), the peak of memory
traced while it runs (tracemalloc; numpy reports its buffers to it) and the peak RSS of the whole
process (VmHWM), which also holds the synthetic systems.

  * before: per pair and metric, scipy called on its own as compare did before its resamples were
    shared: `scipy.stats.bootstrap` (BCa, RESAMPLES resamples, a generator seeded with SEED per
    call, batched), the sign-flip tests through `permutation_test` (exact) or `monte_carlo_test`
    (RESAMPLES random patterns, seeded per call), the normal approximation above MONTE_CARLO_MAX,
    `binomtest` for outcomes, and the pairs' detectable change;
  * after: `ragaudit.decisions.comparison.compare` of the same pairs: every metric and pair of one size
    reduced against one set of draws, BCa's jackknife in closed form, no scipy.stats.
Both give the same verdicts, and their CI ends and p-values differ by Monte Carlo error alone: the
largest difference of a CI end in standard errors of the mean, and of a p-value, is printed. The
script exits 1 when a verdict differs, a CI end moves by more than 0.2 standard errors, `after`
takes more than LIMIT_CPU CPU seconds at the largest size, or its peak RSS reaches 1 GiB.

    .venv/bin/python bench/compare.py [--sizes 2000 8000] [--skip-before]
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

from ragaudit.checks.metrics.registry import METRICS
from ragaudit.core.model import Question
from ragaudit.decisions.comparison import (
    ALPHA,
    BCA_MAX,
    COMPARED,
    EXACT_MAX,
    MARGIN,
    MONTE_CARLO_MAX,
    RESAMPLES,
    SEED,
    STATES,
    System,
    batch_size,
    compare,
    detectable,
    holm,
    paired_values,
)
from ragaudit.decisions.power import Assumptions

# CPU seconds of `after` at the largest size (8,000 questions, two pairs, by default): the whole
# comparison, two sizes of resamples (`support` is missing on some questions), the pairs' values read
# from the questions and their detectable change; the resamples and tests take about 1.5 s of it
LIMIT_CPU = 3.0


def synthetic_systems(n: int, seed: int = 0) -> list[System]:
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
            "ndcg@k": base,
            "delta_s_qr": 1 - base,
            "support": base**2,
        }

    quality = rng.random(n)
    missing = rng.random(n) < 0.05

    def system(name: str, metrics: dict[str, np.ndarray]) -> System:
        states = rng.integers(0, len(STATES), size=n)
        return System(
            name,
            {
                f"q{i}": Question.from_json(
                    {
                        "pipeline": name,
                        "qid": f"q{i}",
                        "metrics": {
                            m: (None if m == "support" and missing[i] else float(v[i])) for m, v in metrics.items()
                        },
                        "lambda": {"state": STATES[states[i]]},
                        "stats": {"runs": 1},
                    },
                    f"$[{i}]",
                )
                for i in range(n)
            },
        )

    others = [np.clip(quality + rng.normal(shift, 0.1, n), 0, 1) for shift in (-0.01, 0.003)]
    return [system("reference", values(quality)), *(system(f"other{j}", values(o)) for j, o in enumerate(others))]


def scipy_ci(diffs: np.ndarray) -> list[float]:
    from scipy import stats

    if np.ptp(diffs) == 0:
        return [float(diffs[0])] * 2
    if diffs.size > BCA_MAX:
        half = stats.t.ppf(0.975, diffs.size - 1) * diffs.std(ddof=1) / np.sqrt(diffs.size)
        return [float(diffs.mean() - half), float(diffs.mean() + half)]
    ci = stats.bootstrap(
        (diffs,),
        np.mean,
        n_resamples=RESAMPLES,
        batch=batch_size(diffs.size),
        vectorized=True,
        method="BCa",
        rng=np.random.default_rng(SEED),
    ).confidence_interval
    return [float(ci.low), float(ci.high)]


def scipy_flip_p(values: np.ndarray, alternative: str) -> float:
    """The sign-flip p-value of the values' mean from scipy, the draws seeded per call."""
    from scipy import stats

    moving = values[values != 0]
    if moving.size == 0 or (alternative == "two-sided" and abs(moving.sum()) <= 1e-9 * np.abs(moving).sum()):
        return 1.0
    if moving.size == 1:
        return 1.0 if alternative == "two-sided" or moving[0] < 0 else 0.5
    if moving.size <= EXACT_MAX:
        exact = stats.permutation_test(
            (moving,), np.mean, permutation_type="samples", n_resamples=np.inf, alternative=alternative
        )
        return float(exact.pvalue)
    if moving.size > MONTE_CARLO_MAX:
        z = moving.sum() / np.sqrt(np.square(moving).sum())
        return float(2 * stats.norm.sf(abs(z)) if alternative == "two-sided" else stats.norm.sf(z))
    rng = np.random.default_rng(SEED)

    def flipped(size: tuple[int, int]) -> np.ndarray:
        rows, n = size
        words = rng.integers(0, 1 << 32, size=(rows, (n + 31) // 32), dtype=np.uint32)
        flips = np.unpackbits(words.view(np.uint8), axis=1, count=n, bitorder="little")
        return np.where(flips.view(bool), -moving, moving)

    result = stats.monte_carlo_test(
        moving,
        flipped,
        np.mean,
        n_resamples=RESAMPLES,
        batch=batch_size(moving.size),
        vectorized=True,
        alternative=alternative,
    )
    return float(result.pvalue)


def before(systems: list[System]) -> dict:
    """Each pair and metric on its own, through scipy: what compare computed before."""
    from scipy import stats

    pairs = []
    for other in systems[1:]:
        reference = systems[0]
        shared = sorted(set(reference.questions) & set(other.questions))
        metrics: dict[str, dict] = {}
        for name, (x, y) in paired_values(reference, other, shared).items():
            diffs = y - x
            better = diffs if METRICS[name].higher_is_better else -diffs
            if METRICS[name].outcome:
                up, down = int(np.sum(diffs > 0)), int(np.sum(diffs < 0))
                p = 1.0 if up + down == 0 else float(stats.binomtest(up, up + down, 0.5).pvalue)
            else:
                p = scipy_flip_p(diffs, "two-sided")
            metrics[name] = {
                "difference": float(diffs.mean()),
                "ci95": scipy_ci(diffs),
                "p_value": p,
                "noninferior": {"p_value": scipy_flip_p(better + MARGIN, "greater")},
                "higher_is_better": METRICS[name].higher_is_better,
            }
        for name, p in holm({name: m["p_value"] for name, m in metrics.items()}).items():
            m = metrics[name]
            direction = m["difference"] if m["higher_is_better"] else -m["difference"]
            m["verdict"] = "tie" if p >= ALPHA else ("better" if direction > 0 else "worse")
        detectable(reference, other, shared, Assumptions())
        pairs.append({"metrics": metrics})
    return {"pairs": pairs}


def after(systems: list[System]) -> dict:
    return compare([(systems[0], other) for other in systems[1:]])


ALGORITHMS = {"before": before, "after": after}


def measure(algorithm: str, n: int) -> dict:
    """Runs in a child process, so that its peak RSS is its own."""
    import scipy.special  # noqa: F401  both use it; `before` also imports scipy.stats
    import scipy.stats  # noqa: F401

    systems = synthetic_systems(n)
    tracemalloc.start()
    start, cpu = time.perf_counter(), time.process_time()
    result = ALGORITHMS[algorithm](systems)
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
        "metrics": [
            {
                name: {
                    "ci95": m["ci95"],
                    "p_value": m["p_value"],
                    "noninferior": m["noninferior"]["p_value"],
                    "verdict": m["verdict"],
                }
                for name, m in pair["metrics"].items()
            }
            for pair in result["pairs"]
        ],
    }


def peak_rss() -> int:
    # VmHWM belongs to this process image; ru_maxrss would carry over the parent's peak across exec.
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("peak RSS needs /proc/self/status (Linux)")


def in_child(algorithm: str, n: int) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", algorithm, str(n)], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"{algorithm} at {n} questions failed:\n{done.stderr}")
    return json.loads(done.stdout)


def agreement(old: dict, new: dict) -> tuple[float, float, bool]:
    """The largest move of a CI end in standard errors of the mean (a 95% interval's width over 3.92),
    the largest move of a p-value, and whether every verdict is the same."""
    ends, ps, same = 0.0, 0.0, True
    for a, b in zip(old["metrics"], new["metrics"], strict=True):
        for name in a:
            low, high = a[name]["ci95"]
            se = (high - low) / 3.92 or 1.0
            ends = max(ends, *(abs(u - v) / se for u, v in zip(a[name]["ci95"], b[name]["ci95"], strict=True)))
            p_moved = abs(a[name]["p_value"] - b[name]["p_value"]), abs(a[name]["noninferior"] - b[name]["noninferior"])
            ps = max(ps, *p_moved)
            same = same and a[name]["verdict"] == b[name]["verdict"]
    return ends, ps, same


def mib(size: float) -> str:
    return f"{size / 2**20:,.0f} MiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 8_000], help="paired questions")
    parser.add_argument("--skip-before", action="store_true", help="measure `after` only (no agreement check)")
    parser.add_argument("--child", nargs=2, metavar=("ALGORITHM", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child[0], int(args.child[1]))))
        return 0

    print(f"two pairs, {len(COMPARED)} metrics each; CPU seconds of the statistics (imports done before)")
    print(f"{'questions':>10} {'before CPU s':>13} {'after CPU s':>12} {'speed-up':>9} {'after peak':>11} "
          f"{'after RSS':>10} {'CI ends moved':>14} {'p moved':>8} verdicts")  # fmt: skip
    ok, largest = True, dict[str, float]()
    for n in args.sizes:
        new = in_child("after", n)
        old = None if args.skip_before else in_child("before", n)
        moved, p_moved, same = agreement(old, new) if old else (0.0, 0.0, True)
        old_cpu = f"{old['cpu']:.2f}" if old else "-"
        speed = f"{old['cpu'] / new['cpu']:.1f}x" if old else "-"
        print(
            f"{n:>10,} {old_cpu:>13} {new['cpu']:>12.2f} {speed:>9} {mib(new['traced_peak']):>11} "
            f"{mib(new['max_rss']):>10} {moved:>11.3f} SE {p_moved:>8.4f} {'the same' if same else 'DIFFERENT'}"
        )
        ok = ok and same and moved <= 0.2 and new["max_rss"] < 2**30
        largest = new if n == max(args.sizes) else largest
    fast = largest["cpu"] <= LIMIT_CPU
    print(f"after at {max(args.sizes):,} questions: {largest['cpu']:.2f} CPU s {'<=' if fast else '>'} {LIMIT_CPU}")
    return 0 if ok and fast else 1


if __name__ == "__main__":
    sys.exit(main())
