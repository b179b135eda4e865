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
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

if TYPE_CHECKING:  # pyarrow ships no types: to mypy these are Any, named for the reader
    import pyarrow as pa
    import pyarrow.parquet as pq


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

    def to_dict(self) -> dict[str, Any]:
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
    """The noise floor of each of `pipelines` (`noise_floor`), from the stored runs: one pipeline's
    runs and one metric's values in memory at a time, so memory follows a pipeline's runs, not the
    runs × metrics of the whole file."""
    if runs_path is None or not Path(runs_path).is_file():
        note = f"no runs.parquet beside the report{'' if runs_path is None else f' ({runs_path})'}"
        return {pipeline: NoiseFloor.unknown(note) for pipeline in pipelines}
    import pyarrow.parquet as pq

    from ragaudit.core.errors import InputError

    try:
        handle = pq.ParquetFile(runs_path)
        stored = set(handle.schema_arrow.names)
        columns = [f"m.{name}" for name in metrics if f"m.{name}" in stored]
        found = {}
        for pipeline in pipelines:
            found[pipeline] = _floor(_runs_of(handle, pipeline, ["qid", "variant", "seed", *columns]), columns)
    except (OSError, ValueError, KeyError) as exc:  # pyarrow's errors derive from these
        raise InputError(
            f"{runs_path}: expected the runs of a ragaudit run, found an unreadable file ({exc})"
        ) from None
    return found


def _runs_of(handle: pq.ParquetFile, pipeline: str, columns: list[str]) -> pa.Table:
    """`columns` of the runs of `pipeline`: its runs are stored together, so only the row groups
    whose pipelines may include it are read."""
    import pyarrow as pa
    import pyarrow.compute as pc

    at = handle.schema_arrow.get_field_index("pipeline")
    groups = []
    for i in range(handle.num_row_groups):
        stats = handle.metadata.row_group(i).column(at).statistics
        if stats is None or not stats.has_min_max or stats.min <= pipeline <= stats.max:
            groups.append(i)
    if not groups:
        return pa.table({c: pa.array([], type=handle.schema_arrow.field(c).type) for c in columns})
    table = handle.read_row_groups(groups, columns=["pipeline", *columns], use_threads=False)
    return table.filter(pc.equal(table.column("pipeline"), pipeline)).drop_columns(["pipeline"])


def _floor(table: pa.Table, columns: list[str]) -> NoiseFloor:
    """One pipeline's floor from its runs (a pyarrow table: qid, variant, seed and the metric columns)."""
    seed = table.column("seed").to_numpy()
    seeds = tuple(sorted(int(s) for s in np.unique(seed)))
    if len(seeds) < 2:
        return NoiseFloor.unknown(
            f"{'one seed' if seeds else 'no runs'}: no seed-to-seed spread to measure (run with two seeds or more)"
        )
    qid = table.column("qid").combine_chunks().dictionary_encode().indices.to_numpy(zero_copy_only=False)
    variant = table.column("variant").to_numpy().astype(np.int64)
    group = qid.astype(np.int64) * (int(variant.max(initial=0)) + 1) + variant
    order = np.argsort(group, kind="stable")
    inside = group[order][1:] == group[order][:-1]
    del qid, variant, group

    def values(column: str) -> np.ndarray:  # a run without the metric holds NaN
        column_values: np.ndarray = table.column(column).to_numpy().astype(float)
        return column_values

    if all(_same_under_every_seed(values(c)[order], inside) for c in columns):
        return NoiseFloor("deterministic", seeds, {c[2:]: 0.0 for c in columns})
    per_seed = np.unique(seed, return_inverse=True)[1].reshape(-1)
    floors = {}
    for column in columns:
        found = values(column)
        kept = ~np.isnan(found)
        sums = np.bincount(per_seed, weights=np.where(kept, found, 0.0), minlength=len(seeds))
        counts = np.bincount(per_seed, weights=kept, minlength=len(seeds))
        means = sums[counts > 0] / counts[counts > 0]  # a seed without the metric left out
        if means.size:
            floors[column[2:]] = float(means.max() - means.min())
    return NoiseFloor("sampling", seeds, floors)


def _same_under_every_seed(values: np.ndarray, inside: np.ndarray) -> bool:
    """Whether every run of a question and variant has the same value of one metric under every seed:
    `values` in the order of their (question, variant) group, `inside` true where a value's group
    is the one before it (NaN, a run without the metric, counts as a value)."""
    equal = (values[1:] == values[:-1]) | (np.isnan(values[1:]) & np.isnan(values[:-1]))
    return bool(equal[inside].all())
