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
    if runs_path is None or not Path(runs_path).is_file():
        return NoiseFloor.unknown(f"no runs.parquet beside the report{'' if runs_path is None else f' ({runs_path})'}")
    import pyarrow.compute as pc
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
    frame = table.filter(pc.equal(table.column("pipeline"), pipeline)).to_pandas()
    seeds = tuple(sorted(int(s) for s in frame["seed"].unique()))
    if len(seeds) < 2:
        return NoiseFloor.unknown(
            f"{'one seed' if seeds else 'no runs'}: no seed-to-seed spread to measure (run with two seeds or more)"
        )
    values = frame[columns]
    # identical under every seed: one distinct value (NaN counts as a value) per question and variant
    same = bool((frame.groupby(["qid", "variant"])[columns].nunique(dropna=False) <= 1).all().all())
    if same:
        return NoiseFloor("deterministic", seeds, {c[2:]: 0.0 for c in columns})
    by_seed = values.groupby(frame["seed"]).mean()  # NaN (a run without the metric) left out
    floors = {c[2:]: float(by_seed[c].max() - by_seed[c].min()) for c in columns if by_seed[c].notna().any()}
    return NoiseFloor("sampling", seeds, floors)
