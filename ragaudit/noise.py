"""The noise floor of a pipeline: how far its metrics move between seeds alone.

Each seed of a run is an A/A comparison of the pipeline with itself: same questions, same variants,
nothing changed but the seed. A pipeline that samples (a temperature, a random tie-break) gives
other runs under another seed; its floor on a metric is the largest difference between its means
under two seeds (max − min over the seeds), read from the runs in runs.parquet. A difference
between two configurations inside the larger of their floors is noise, never a win or a
regression. A pipeline whose every run is identical under every seed is deterministic: its floor
is 0. With one seed, or without runs.parquet, the floor is unknown, and said to be.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np


@dataclass(frozen=True)
class NoiseFloor:
    state: str  # "deterministic", "sampling" or "unknown"
    seeds: tuple[int, ...] = ()
    floors: dict[str, float] = field(default_factory=dict)  # metric -> max − min of the per-seed means
    note: str = ""

    @classmethod
    def unknown(cls, note: str = "no runs to measure it from") -> NoiseFloor:
        return cls("unknown", note=note)

    def floor_of(self, metric: str) -> float | None:
        if self.state == "deterministic":
            return 0.0
        return self.floors.get(metric) if self.state == "sampling" else None

    def to_dict(self) -> dict:
        return {
            "state": self.state,
            "seeds": list(self.seeds),
            "floors": dict(sorted(self.floors.items())),
            "note": self.note,
        }

    def describe(self) -> str:
        """One phrase for people: 'deterministic (floor 0)', 'samples: seeds 1, 2 move …', or why unknown."""
        if self.state == "deterministic":
            return f"deterministic: every run the same under seeds {_seeds(self.seeds)}, floor 0"
        if self.state == "sampling":
            moved = ", ".join(f"{name} {value:.3f}" for name, value in self.floors.items() if value > 0) or "nothing"
            return f"samples: seeds {_seeds(self.seeds)} move {moved}"
        return f"floor unknown ({self.note})"


def _seeds(seeds: Iterable[int]) -> str:
    return ", ".join(str(s) for s in seeds)


def noise_floor(runs_path: Path | None, pipeline: str, metrics: Iterable[str]) -> NoiseFloor:
    """The noise floor of `pipeline` on each of `metrics`, from the stored runs of its run directory."""
    return noise_floors(runs_path, [pipeline], metrics)[pipeline]


def noise_floors(runs_path: Path | None, pipelines: list[str], metrics: Iterable[str]) -> dict[str, NoiseFloor]:
    """The noise floor of each of `pipelines` (`noise_floor`), from one read of the stored runs."""
    if runs_path is None or not Path(runs_path).is_file():
        note = f"no runs.parquet beside the report{'' if runs_path is None else f' ({runs_path})'}"
        return {pipeline: NoiseFloor.unknown(note) for pipeline in pipelines}
    import pyarrow.parquet as pq

    from ragaudit.errors import InputError

    try:
        handle = pq.ParquetFile(runs_path)
        stored = set(handle.schema_arrow.names)
        columns = [f"m.{name}" for name in metrics if f"m.{name}" in stored]
        table = handle.read(columns=["pipeline", "qid", "variant", "seed", *columns])
    except (OSError, ValueError, KeyError) as exc:  # pyarrow's errors derive from these
        raise InputError(
            f"{runs_path}: expected the runs of a ragaudit run, found an unreadable file ({exc})"
        ) from None
    names = table.column("pipeline").to_numpy()
    seed = table.column("seed").to_numpy()
    variant = table.column("variant").to_numpy()
    qid = table.column("qid").combine_chunks().dictionary_encode().indices.to_numpy(zero_copy_only=False)
    # one row a run, one column a metric; a run without the metric holds NaN
    values = np.column_stack([table.column(c).to_numpy().astype(float) for c in columns] or [np.empty((len(seed), 0))])
    found = {}
    for pipeline in pipelines:
        mine = names == pipeline
        found[pipeline] = _floor(seed[mine], qid[mine], variant[mine], values[mine], columns)
    return found


def _floor(
    seed: np.ndarray, qid: np.ndarray, variant: np.ndarray, values: np.ndarray, columns: list[str]
) -> NoiseFloor:
    """One pipeline's floor from its runs: their seeds, questions (indices), variants and metric values."""
    seeds = tuple(sorted(int(s) for s in np.unique(seed)))
    if len(seeds) < 2:
        return NoiseFloor.unknown(
            f"{'one seed' if seeds else 'no runs'}: no seed-to-seed spread to measure (run with two seeds or more)"
        )
    if _same_under_every_seed(qid, variant, values):
        return NoiseFloor("deterministic", seeds, {c[2:]: 0.0 for c in columns})
    kept = ~np.isnan(values)
    per_seed = np.unique(seed, return_inverse=True)[1].reshape(-1)
    sums = np.zeros((len(seeds), len(columns)))
    counts = np.zeros((len(seeds), len(columns)))
    np.add.at(sums, per_seed, np.where(kept, values, 0.0))
    np.add.at(counts, per_seed, kept)
    floors = {}
    for j, column in enumerate(columns):
        means = sums[counts[:, j] > 0, j] / counts[counts[:, j] > 0, j]  # a seed without the metric left out
        if means.size:
            floors[column[2:]] = float(means.max() - means.min())
    return NoiseFloor("sampling", seeds, floors)


def _same_under_every_seed(qid: np.ndarray, variant: np.ndarray, values: np.ndarray) -> bool:
    """Whether every run of a question (`qid`: its index) and variant has the same value of each metric,
    under every seed (NaN, a run without the metric, counts as a value)."""
    variant = variant.astype(np.int64)
    group = qid.astype(np.int64) * (int(variant.max(initial=0)) + 1) + variant
    order = np.argsort(group, kind="stable")
    group, values = group[order], values[order]
    inside = group[1:] == group[:-1]
    equal = (values[1:] == values[:-1]) | (np.isnan(values[1:]) & np.isnan(values[:-1]))
    return bool(equal[inside].all())
