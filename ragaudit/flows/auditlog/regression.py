"""Window over window: did answers get worse? Per pipeline, every dated window's health
(`health.py`) against the window before it and against a baseline (a window of the export, or an
earlier audit's windows pooled).

Per metric: the test fit for it (`ragaudit.decisions.twosample`: two proportions for a rate, Mann–Whitney
for a distribution), its size (after − before; a share of the earlier mean for unbounded
units) with a 95% CI, and p-values Holm-adjusted across the metrics of the comparison. The
**noise floor** of a metric is the largest movement between consecutive windows earlier in the
same export that was not itself a regression: ordinary day-to-day movement. A movement is a
**regression** when it goes the worse way, is significant (Holm p < alpha), reaches `min_effect`
and lies beyond the floor (or no floor is known yet); the same the better way is an improvement,
and any other movement is named noise, with the reason. A window with fewer than `min_traces`
traces for a metric is not compared on it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ragaudit.decisions.comparison import holm
from ragaudit.decisions.twosample import two_distributions, two_proportions
from ragaudit.flows.auditlog.health import HEALTH, Tally

QUERIES_SHOWN = 5  # queries named per regression, the ones that moved most
UNNAMED = "(unnamed)"


@dataclass(frozen=True)
class Thresholds:
    """`[audit_log]`: what a regression must reach."""

    alpha: float = 0.05
    min_effect: float = 0.02
    min_traces: int = 20


def _effect(name: str, size: float, before: float | None) -> float | None:
    """The size in the unit min_effect and the floor read: a share of `before` for relative metrics."""
    if not HEALTH[name].relative:
        return size
    return None if not before else size / abs(before)


def _worse(name: str, size: float) -> bool | None:
    better = HEALTH[name].better
    return None if better is None else (size < 0 if better == "higher" else size > 0)


def compare_tallies(
    before: Tally, after: Tally, floors: dict[str, float | None], t: Thresholds
) -> dict[str, dict[str, Any]]:
    """Per metric: before, after, size, CI, p, Holm p, floor and the verdict with its reason."""
    out: dict[str, dict[str, Any]] = {}
    raw: dict[str, float] = {}
    for name, metric in HEALTH.items():
        n_a, n_b = before.n(name), after.n(name)
        entry: dict[str, Any] = {"before": before.mean(name), "after": after.mean(name), "traces": [n_a, n_b]}
        out[name] = entry
        if min(n_a, n_b) < t.min_traces:
            entry.update(verdict="not compared", why=f"fewer than {t.min_traces} traces in a window")
            continue
        if metric.kind == "rate":
            tested = two_proportions(before.hits[name], n_a, after.hits[name], n_b)
        else:
            tested = two_distributions(before.values[name], after.values[name])
        entry.update(size=tested.size, low=tested.low, high=tested.high, p=tested.p)
        raw[name] = tested.p
    for name, p in holm(raw).items():
        entry = out[name]
        effect = _effect(name, entry["size"], entry["before"])
        floor = floors.get(name)
        entry.update(p_holm=p, effect=effect, floor=floor)
        if p >= t.alpha:
            entry.update(verdict="noise", why=f"not significant (Holm p {p:.3g} ≥ α {t.alpha})")
        elif effect is None or abs(effect) < t.min_effect:
            entry.update(verdict="noise", why=f"below the minimum effect {t.min_effect}")
        elif floor is not None and abs(effect) <= floor:
            entry.update(verdict="noise", why=f"within the noise floor {floor:.3g} of earlier windows")
        else:
            worse = _worse(name, entry["size"])
            verdict = "change" if worse is None else ("regression" if worse else "improvement")
            entry.update(verdict=verdict, why="significant, beyond the minimum effect and the noise floor")
    return out


def _moved(name: str, before: Tally, after: Tally) -> list[dict[str, Any]]:
    """The queries of `after` that pulled `name` the worse way most, each with its worst runs: the
    queries seen in both windows first, by runs × their change, then the new ones, by runs × how
    far their mean lies from the window's mean before."""
    sign = 1.0 if HEALTH[name].better == "lower" else -1.0
    overall = before.mean(name)
    rows: list[dict[str, Any]] = []
    for key, q in after.queries.items():
        mean = q.mean(name)
        if mean is None or overall is None:
            continue
        earlier = before.queries.get(key)
        reference = earlier.mean(name) if earlier is not None else None
        base = reference if reference is not None else overall
        count = int(q.sums[name][1])
        pull = sign * count * (mean - base)
        if pull > 0:
            worst = [run for _, run in q.worst.get(name, [])]
            rows.append(
                {"query": q.text, "runs": count, "before": reference, "after": mean, "pull": pull, "worst": worst}
            )
    rows.sort(key=lambda r: (r["before"] is None, -r["pull"]))
    return rows[:QUERIES_SHOWN]


def regressions(
    series: dict[str, list[tuple[str, Tally]]],
    thresholds: Thresholds,
    baseline: tuple[str, dict[str, Tally]] | None = None,
) -> dict[str, Any]:
    """`series`: per pipeline, its dated windows in time order as (window, tally). `baseline`:
    (what it is, per pipeline its tally), or None. The model's `health` part: the comparisons and
    the regressions among them."""
    comparisons: list[dict[str, Any]] = []
    found: list[dict[str, Any]] = []
    for pipeline, windows in sorted(series.items()):
        floors: dict[str, float | None] = dict.fromkeys(HEALTH)
        pairs: dict[str, int] = dict.fromkeys(HEALTH, 0)
        for i, (window, tally) in enumerate(windows):
            against: list[tuple[str, str, Tally]] = []
            if i:
                against.append(("previous", windows[i - 1][0], windows[i - 1][1]))
            if baseline is not None and pipeline in baseline[1] and window != baseline[0]:
                against.append(("baseline", baseline[0], baseline[1][pipeline]))
            step: dict[str, dict[str, Any]] | None = None
            for kind, reference, earlier in against:
                metrics = compare_tallies(earlier, tally, floors, thresholds)
                for name, m in metrics.items():
                    m["floor_pairs"] = pairs[name]
                comparisons.append(
                    {
                        "pipeline": pipeline,
                        "window": window,
                        "against": kind,
                        "reference": reference,
                        "metrics": metrics,
                    }
                )
                for name, m in metrics.items():
                    if m["verdict"] == "regression":
                        found.append(_regression(pipeline, window, kind, reference, name, m, earlier, tally))
                if kind == "previous":
                    step = metrics
            if step is not None:  # ordinary movement teaches the floor; a regression does not
                for name, m in step.items():
                    if m.get("effect") is not None and m["verdict"] != "regression":
                        floors[name] = max(floors[name] or 0.0, abs(m["effect"]))
                        pairs[name] += 1
    return {
        "metrics": {name: {k: v for k, v in asdict(m).items() if k != "name"} for name, m in HEALTH.items()},
        "thresholds": asdict(thresholds),
        "baseline": None if baseline is None else baseline[0],
        "comparisons": comparisons,
        "regressions": found,
    }


def _regression(
    pipeline: str, window: str, kind: str, reference: str, name: str, m: dict[str, Any], before: Tally, after: Tally
) -> dict[str, Any]:
    keep = ("before", "after", "size", "low", "high", "p", "p_holm", "effect", "floor", "floor_pairs", "traces")
    return {
        "pipeline": pipeline,
        "metric": name,
        "window": window,
        "against": kind,
        "reference": reference,
        **{k: m[k] for k in keep},
        "queries": _moved(name, before, after),
    }
