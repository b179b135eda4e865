"""What `ragaudit compare` costs at scale, with scipy's statistics batched against scipy unbatched.

Two synthetic systems pair every question on all ten compared metrics (binary, graded and continuous
ones, with `support` missing for 1 question in 20 so that two pair counts occur). Each measurement runs
in a fresh process and reports the wall and CPU time (CPU time is the steadier figure on a shared
machine), the peak of memory traced while it runs (tracemalloc; numpy reports its buffers to it) and
the peak RSS of the whole process (VmHWM), which also holds the synthetic systems.

  * batched: `ragaudit.comparison.compare_pair` at --questions (default 100,000): per metric the CI
    (BCa up to BCA_MAX questions, whose jackknife is O(questions²) time; the Student t interval
    above), the two-sided p-value (exact sign test for per-run 0/1 outcomes; sign-flip permutation
    otherwise: exact, then MONTE_CARLO_MAX random sign patterns, then the normal approximation), the
    non-inferiority test, and the pair's detectable change. The script exits 1 when it takes more
    than 30 s or its peak RSS reaches 1 GiB.
  * unbatched: the same CIs and p-values from scipy called without `batch=` on each metric's paired
    differences, at the --reference sizes, and the memory its arrays take at --questions (BCa's
    jackknife holds a questions × questions array). Its time is the batched one's: the same
    arithmetic.
  * equality: at --mid questions both must give every CI and p-value bit for bit. The script exits 1
    when they do not.
  * permutation_test: scipy's own randomized paired test (`permutation_type="samples"`) on one
    metric at the --permutation sizes, its time extrapolated quadratically to --questions (with
    batches bounded in bytes there are questions/batch of them, each a Python loop over the
    questions): why the randomized test runs through `scipy.stats.monte_carlo_test`.
  * --same-verdicts: also run compare_pair at --questions with BCa and randomized sign flips at
    every size (about six minutes at 100,000 questions), and exit 1 unless every verdict is the same.

    .venv/bin/python bench/compare.py [--questions 100000] [--mid 2000] [--reference 500 1000 2000]
                                      [--permutation 1000 2000 4000] [--same-verdicts]
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
from scipy import stats

import ragaudit.comparison as compare_module
from ragaudit.comparison import (
    BCA_MAX,
    COMPARED,
    EXACT_MAX,
    MONTE_CARLO_MAX,
    RESAMPLES,
    SEED,
    STATES,
    System,
    batch_size,
    compare_pair,
)
from ragaudit.metrics.registry import METRICS
from ragaudit.model import Question

LIMIT_SECONDS = 30


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
            "ndcg@k": base,
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
                f"q{i}": Question.from_json(
                    {
                        "pipeline": name,
                        "qid": f"q{i}",
                        "metrics": {
                            m: (None if m == "support" and missing[i] else float(v[i])) for m, v in metrics.items()
                        },
                        "lambda": {"state": STATES[states[row, i]]},
                        "stats": {"runs": 1},
                    },
                    f"$[{i}]",
                )
                for i in range(n)
            },
        )

    return system("reference", reference, 0), system("other", other, 1)


def paired(reference: System, other: System) -> dict[str, np.ndarray]:
    """Per metric, other − reference over the questions both scored, in qid order."""
    shared = sorted(set(reference.questions) & set(other.questions))
    out = {}
    for name in COMPARED:
        pairs = [(reference.questions[q].metrics.get(name), other.questions[q].metrics.get(name)) for q in shared]
        kept = [(a, b) for a, b in pairs if a is not None and b is not None]
        if kept:
            out[name] = np.array([b for _, b in kept]) - np.array([a for a, _ in kept])
    return out


def unbatched_ci(diffs: np.ndarray) -> list[float]:
    if np.ptp(diffs) == 0:
        return [float(diffs[0])] * 2
    if diffs.size > BCA_MAX:  # the Student t interval of the mean
        half = stats.t.ppf(0.975, diffs.size - 1) * diffs.std(ddof=1) / np.sqrt(diffs.size)
        return [float(diffs.mean() - half), float(diffs.mean() + half)]
    ci = stats.bootstrap((diffs,), np.mean, n_resamples=RESAMPLES, method="BCa", rng=np.random.default_rng(SEED))
    return [float(ci.confidence_interval.low), float(ci.confidence_interval.high)]


def unbatched_p(diffs: np.ndarray, outcome: bool = False) -> float:
    if outcome:  # the exact sign test
        up, down = int(np.sum(diffs > 0)), int(np.sum(diffs < 0))
        return 1.0 if up + down == 0 else float(stats.binomtest(up, up + down, 0.5).pvalue)
    flipping = diffs[diffs != 0]
    if flipping.size < 2 or abs(flipping.sum()) <= 1e-9 * np.abs(flipping).sum():
        return 1.0  # no difference, a single one, or gains and losses that cancel
    if flipping.size > MONTE_CARLO_MAX:
        return float(2 * stats.norm.sf(abs(flipping.sum()) / np.sqrt(np.square(flipping).sum())))
    if flipping.size <= EXACT_MAX:
        exact = stats.permutation_test((flipping,), np.mean, permutation_type="samples", n_resamples=np.inf)
        return float(exact.pvalue)
    rng = np.random.default_rng(SEED)

    def null(size: tuple[int, int]) -> np.ndarray:
        signs = [np.where(rng.integers(0, 2, size=size[1], dtype=bool), -1.0, 1.0) for _ in range(size[0])]
        return flipping * np.stack(signs)

    return float(stats.monte_carlo_test(flipping, null, np.mean, n_resamples=RESAMPLES).pvalue)


def unbatched(reference: System, other: System) -> dict:
    return {
        "metrics": {
            name: {"ci95": unbatched_ci(d), "p_value": unbatched_p(d, METRICS[name].outcome)}
            for name, d in paired(reference, other).items()
        }
    }


def permutation_test(reference: System, other: System) -> dict:
    """scipy's randomized paired permutation test of the continuous metric (every difference non-zero)."""
    diffs = paired(reference, other)["ndcg@k"]
    result = stats.permutation_test(
        (diffs,),
        np.mean,
        permutation_type="samples",
        n_resamples=RESAMPLES,
        batch=batch_size(diffs.size),
        rng=np.random.default_rng(SEED),
    )
    return {"metrics": {"ndcg@k": {"p_value": float(result.pvalue)}}}


def slow(reference: System, other: System) -> dict:
    """compare_pair with BCa and randomized sign flips at every size: what the verdicts were before
    the switches above BCA_MAX and MONTE_CARLO_MAX."""
    compare_module.BCA_MAX = compare_module.MONTE_CARLO_MAX = 10**12
    return compare_pair(reference, other)


ALGORITHMS = {"batched": compare_pair, "unbatched": unbatched, "permutation_test": permutation_test, "slow": slow}


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
        "verdicts": {name: m.get("verdict") for name, m in result["metrics"].items()},
    }


def peak_rss() -> int:
    # VmHWM belongs to this process image; ru_maxrss would carry over the parent's peak across exec.
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("peak RSS needs /proc/self/status (Linux)")


def equal_at(n: int) -> bool:
    reference, other = synthetic_systems(n)
    batched = compare_pair(reference, other)["metrics"]
    expected = unbatched(reference, other)["metrics"]
    return {name: {"ci95": m["ci95"], "p_value": m["p_value"]} for name, m in batched.items()} == expected


def in_child(algorithm: str, n: int) -> dict | bool:
    done = subprocess.run(
        [sys.executable, __file__, "--child", algorithm, str(n)], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"{algorithm} at {n} questions failed:\n{done.stderr}")
    return json.loads(done.stdout)


def extrapolate(points: list[dict], key: str, n: int, degree: int = 1) -> float:
    coefficients = np.polyfit([p["questions"] for p in points], [p[key] for p in points], degree)
    return float(np.polyval(coefficients, n))


def mib(size: float) -> str:
    return f"{size / 2**20:,.0f} MiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=100_000)
    parser.add_argument("--mid", type=int, default=2_000, help="questions for the equality check")
    parser.add_argument(
        "--reference",
        type=int,
        nargs="+",
        default=[500, 1_000, 2_000],
        help="questions at which the unbatched calls run, to extrapolate from",
    )
    parser.add_argument(
        "--permutation",
        type=int,
        nargs="+",
        default=[1_000, 2_000, 4_000],
        help="questions at which scipy's permutation_test runs, to extrapolate from",
    )
    parser.add_argument(
        "--same-verdicts", action="store_true", help="also run the slow methods at --questions and compare verdicts"
    )
    parser.add_argument("--child", nargs=2, metavar=("ALGORITHM", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        algorithm, n = args.child[0], int(args.child[1])
        print(json.dumps(equal_at(n) if algorithm == "equal" else measure(algorithm, n)))
        return 0

    equal = in_child("equal", args.mid)
    print(
        f"equality at {args.mid:,} paired questions, all {len(COMPARED)} metrics, batched vs unbatched: "
        f"{'identical (every float bit for bit)' if equal else 'DIFFERENT'}"
    )
    print(
        f"{'algorithm':<17} {'questions':>10} {'wall s':>8} {'CPU s':>8} {'traced peak':>12} {'process peak RSS':>17}"
    )

    def line(row: dict, note: str = "") -> None:
        def figure(key: str, text) -> str:
            return text(row[key]) if key in row else ""

        print(
            f"{row['algorithm']:<17} {row['questions']:>10,} {figure('seconds', '{:.1f}'.format):>8} "
            f"{figure('cpu', '{:.1f}'.format):>8} {figure('traced_peak', mib):>12} {figure('max_rss', mib):>17}{note}"
        )

    def extrapolated(name: str, rows: list[dict], keys: tuple[str, ...], note: str) -> None:
        for row in rows:
            line(row)
        estimate = {key: extrapolate(rows, key, args.questions, degree=2) for key in keys}
        line({"algorithm": name, "questions": args.questions, **estimate}, f"  (extrapolated: {note})")

    for n in args.reference:
        line(in_child("unbatched", n))
    needs = (16 * RESAMPLES + 17 * args.questions) * args.questions  # scipy's index and value arrays
    print(
        f"{'unbatched':<17} {args.questions:>10,} {'':>8} {'':>8} {mib(needs):>12} {'':>17}  (the arrays scipy "
        "allocates: an index and a value per resample and question, a mask, index and value per question²)"
    )
    permutation_rows = [in_child("permutation_test", n) for n in args.permutation]
    extrapolated(
        "permutation_test",
        permutation_rows,
        ("seconds", "cpu"),
        f"one metric of {len(COMPARED)}; questions/batch batches of a Python loop over the questions",
    )
    batched = in_child("batched", args.questions)
    line(batched)
    print(f"verdicts at {args.questions:,}: {batched['verdicts']}")
    within = batched["max_rss"] < 2**30
    fast = batched["seconds"] <= LIMIT_SECONDS
    print(f"peak RSS at {args.questions:,} questions {'<' if within else '>='} 1 GiB")
    print(f"wall time at {args.questions:,} questions {'<=' if fast else '>'} {LIMIT_SECONDS} s")
    same = True
    if args.same_verdicts:
        reference = in_child("slow", args.questions)
        line(reference, "  (BCa and randomized sign flips at every size)")
        same = reference["verdicts"] == batched["verdicts"]
        print(f"verdicts {'the same' if same else 'DIFFERENT'}: {reference['verdicts']}")
    return 0 if equal and within and fast and same else 1


if __name__ == "__main__":
    sys.exit(main())
