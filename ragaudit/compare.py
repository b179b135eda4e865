"""Comparison of retriever configurations (systems) over the same questions.

A system is one pipeline of one run. Every system is compared with the first (the reference),
question by question: per metric the means, the paired difference with a seeded bootstrap 95%
CI, a paired sign-flip permutation p-value, Holm-adjusted across the metrics of that pair,
win/tie/loss by question within a tolerance, and the λ state transitions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ragaudit.metrics.registry import METRICS

COMPARED = ("citation_match", "coverage", "correct", "citation_precision", "citation_recall", "recall@k", "mrr",
            "ndcg@10", "delta_s_qr", "support")
STATES = ("convergent", "recursive", "chaotic", "divergent")
SEED = 20261122
RESAMPLES = 10_000


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


def bootstrap_ci(diffs: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    idx = rng.integers(0, len(diffs), size=(RESAMPLES, len(diffs)))
    means = diffs[idx].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def permutation_p(diffs: np.ndarray, rng: np.random.Generator) -> float:
    """Two-sided paired permutation test by random sign flips, with the +1 correction."""
    observed = abs(diffs.mean())
    signs = rng.choice((-1.0, 1.0), size=(RESAMPLES, len(diffs)))
    flipped = np.abs((signs * diffs).mean(axis=1))
    return float((np.sum(flipped >= observed - 1e-12) + 1) / (RESAMPLES + 1))


def holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm–Bonferroni adjusted p-values (monotone, capped at 1)."""
    order = sorted(p_values, key=lambda k: p_values[k])
    adjusted, running = {}, 0.0
    for i, name in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * p_values[name]))
        adjusted[name] = running
    return adjusted


def compare_pair(reference: System, other: System, *, tolerance: float = 0.01) -> dict:
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
        low, high = bootstrap_ci(diffs, rng)
        raw_p[name] = permutation_p(diffs, rng) if np.any(diffs != 0) else 1.0
        metrics[name] = {
            "mean_reference": float(a.mean()), "mean_other": float(b.mean()), "difference": float(diffs.mean()),
            "ci95": [low, high], "p_value": raw_p[name], "questions": len(pairs),
            "higher_is_better": METRICS[name].higher_is_better,
            "wins": int(np.sum(better > tolerance)), "ties": int(np.sum(np.abs(better) <= tolerance)),
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
    return {"reference": reference.name, "other": other.name, "questions": len(shared), "tolerance": tolerance,
            "metrics": metrics, "lambda_transitions": transitions}


def compare(systems: list[System], *, tolerance: float = 0.01) -> dict:
    if len(systems) < 2:
        from ragaudit.errors import UsageError
        raise UsageError(f"compare needs at least two systems, found {len(systems)}")
    reference = systems[0]
    return {
        "schema_version": "ragaudit.compare/1",
        "systems": [s.name for s in systems],
        "means": {s.name: {name: _mean([q["metrics"].get(name) for q in s.questions.values()]) for name in COMPARED}
                  for s in systems},
        "comparisons": [compare_pair(reference, other, tolerance=tolerance) for other in systems[1:]],
    }


def _mean(values) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None
