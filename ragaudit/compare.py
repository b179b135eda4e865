"""Comparison of retriever configurations (systems) over the same questions.

A system is one pipeline of one run. Every system is compared with the first (the reference),
question by question: per metric the means, the paired difference with a seeded bootstrap 95%
CI, a paired sign-flip permutation p-value, Holm-adjusted across the metrics of that pair,
win/tie/loss by question within a tolerance, and the λ state transitions.

Memory is O(questions): the RESAMPLES × questions draws are made and consumed a block of rows at
a time. numpy's Generator fills a (rows, n) request element by element from one stream, so blocks
of rows drawn one after the other are the rows of the single (RESAMPLES, n) draw, and every
resampled mean is reduced over the same n values in the same order: the CIs and p-values are
those of the one-shot computation, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ragaudit.metrics.registry import METRICS

COMPARED = (
    "citation_match",
    "coverage",
    "correct",
    "citation_precision",
    "citation_recall",
    "recall@k",
    "mrr",
    "ndcg@10",
    "delta_s_qr",
    "support",
)
STATES = ("convergent", "recursive", "chaotic", "divergent")
SEED = 20261122
RESAMPLES = 10_000
# Working set of one block of resampled rows (its draws and the resampled values). Memory only needs
# it to be O(questions); at a few MiB it also stays in cache: at 20,000 questions a comparison ran 1.8
# times faster than with 64 MiB blocks. A block is never less than one row.
CHUNK_BYTES = 4 << 20


@dataclass(frozen=True)
class System:
    name: str
    questions: dict[str, dict]  # qid -> question record of the report


def systems_of(report: dict, label: str | None = None) -> list[System]:
    out = []
    for pipeline in report["summary"]["pipelines"]:  # in the config's order: the first is the reference
        questions = {q["qid"]: q for q in report["questions"] if q["pipeline"] == pipeline}
        out.append(System(f"{label}/{pipeline}" if label else pipeline, questions))
    return out


def _row_blocks(questions: int, chunk_rows: int | None):
    """Row counts of the successive blocks of the RESAMPLES × questions draws."""
    if chunk_rows is None:
        # Two 8-byte values per draw are alive at once: the index (or sign) and the resampled value.
        chunk_rows = max(1, CHUNK_BYTES // (16 * max(questions, 1)))
    elif isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
        raise ValueError(f"The 'chunk_rows' parameter must be an int in [1, inf). Got {chunk_rows!r} instead.")
    for start in range(0, RESAMPLES, chunk_rows):
        yield min(chunk_rows, RESAMPLES - start)


def bootstrap_means(block: np.ndarray, rng: np.random.Generator, *, chunk_rows: int | None = None) -> np.ndarray:
    """The RESAMPLES bootstrap means of every row of `block` (series × questions), shape series × RESAMPLES.

    All series are resampled with the same draws: each row is what resampling that series alone with
    `rng.integers(0, n, (RESAMPLES, n))` gives, so series whose generators are seeded alike share one draw.
    """
    series, n = block.shape
    means = np.empty((series, RESAMPLES))
    start = 0
    for rows in _row_blocks(n, chunk_rows):
        idx = rng.integers(0, n, size=(rows, n))
        # Series by series: a (rows, n) C-ordered gather, reduced along its rows as the one-shot mean was;
        # block[:, idx] would lay the result out with the series innermost and sum in another order.
        for i, row in enumerate(block):
            means[i, start : start + rows] = row[idx].mean(axis=1)
        start += rows
    return means


def sign_flip_p(block: np.ndarray, rng: np.random.Generator, *, chunk_rows: int | None = None) -> np.ndarray:
    """Two-sided paired permutation p-value of every row of `block` by the same RESAMPLES random sign flips,
    with the +1 correction."""
    series, n = block.shape
    # Per row rather than block.mean(axis=1), so the observed mean is reduced exactly as the one-shot test did.
    threshold = [abs(row.mean()) - 1e-12 for row in block]
    hits = np.zeros(series, dtype=np.int64)
    for rows in _row_blocks(n, chunk_rows):
        signs = rng.choice((-1.0, 1.0), size=(rows, n))
        for i, row in enumerate(block):
            hits[i] += np.count_nonzero(np.abs((signs * row).mean(axis=1)) >= threshold[i])
        del signs  # otherwise it is still alive while the next block's signs are drawn
    return (hits + 1) / (RESAMPLES + 1)


def _ci(means: np.ndarray) -> tuple[float, float]:
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def bootstrap_ci(diffs: np.ndarray, rng: np.random.Generator, *, chunk_rows: int | None = None) -> tuple[float, float]:
    return _ci(bootstrap_means(diffs[None, :], rng, chunk_rows=chunk_rows)[0])


def permutation_p(diffs: np.ndarray, rng: np.random.Generator, *, chunk_rows: int | None = None) -> float:
    """Two-sided paired permutation test by random sign flips, with the +1 correction."""
    return float(sign_flip_p(diffs[None, :], rng, chunk_rows=chunk_rows)[0])


def paired_tests(diffs: dict[str, np.ndarray]) -> dict[str, tuple[float, float, float]]:
    """Per metric: the bootstrap 95% CI of the mean paired difference and the sign-flip p-value (1 when
    every difference is 0), each from a generator seeded with SEED.

    The draws depend only on the seed and the number of pairs, so metrics with as many pairs are
    resampled together from one generator: the same numbers as one generator each, drawn once.
    """
    by_length: dict[int, list[str]] = {}
    for name, d in diffs.items():
        by_length.setdefault(len(d), []).append(name)
    out = {}
    for names in by_length.values():
        rng = np.random.default_rng(SEED)
        block = np.stack([diffs[name] for name in names])
        means = bootstrap_means(block, rng)
        moving = [i for i in range(len(names)) if np.any(block[i] != 0)]
        p = np.ones(len(names))
        if moving:  # the generator is past the bootstrap draws, as in a test of one metric
            p[moving] = sign_flip_p(block[moving], rng)
        for i, name in enumerate(names):
            out[name] = (*_ci(means[i]), float(p[i]))
    return out


def holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm–Bonferroni adjusted p-values (monotone, capped at 1)."""
    order = sorted(p_values, key=lambda k: p_values[k])
    adjusted, running = {}, 0.0
    for i, name in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * p_values[name]))
        adjusted[name] = running
    return adjusted


def _values(name: str, values: list) -> np.ndarray:
    try:
        out = np.array(values, dtype=float)
    except ValueError:
        out = None
    if out is None or out.ndim != 1:  # TypeError: a damaged report, which the CLI reports as such
        raise TypeError(f"metric {name}: expected one number per question")
    return out


def compare_pair(reference: System, other: System, *, tolerance: float = 0.01) -> dict:
    shared = sorted(set(reference.questions) & set(other.questions))
    paired: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in COMPARED:
        pairs = [(reference.questions[q]["metrics"].get(name), other.questions[q]["metrics"].get(name)) for q in shared]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        if pairs:
            paired[name] = (_values(name, [p[0] for p in pairs]), _values(name, [p[1] for p in pairs]))
    tests = paired_tests({name: b - a for name, (a, b) in paired.items()})
    metrics: dict[str, dict] = {}
    raw_p: dict[str, float] = {}
    for name, (a, b) in paired.items():
        diffs = b - a
        better = diffs if METRICS[name].higher_is_better else -diffs
        low, high, raw_p[name] = tests[name]
        metrics[name] = {
            "mean_reference": float(a.mean()),
            "mean_other": float(b.mean()),
            "difference": float(diffs.mean()),
            "ci95": [low, high],
            "p_value": raw_p[name],
            "questions": len(diffs),
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


def compare(systems: list[System], *, tolerance: float = 0.01) -> dict:
    if len(systems) < 2:
        from ragaudit.errors import UsageError

        raise UsageError(f"compare needs at least two systems, found {len(systems)}")
    reference = systems[0]
    return {
        "schema_version": "ragaudit.compare/1",
        "systems": [s.name for s in systems],
        "means": {
            s.name: {name: _mean([q["metrics"].get(name) for q in s.questions.values()]) for name in COMPARED}
            for s in systems
        },
        "comparisons": [compare_pair(reference, other, tolerance=tolerance) for other in systems[1:]],
    }


def _mean(values) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None
