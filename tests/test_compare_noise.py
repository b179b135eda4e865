"""The noise floor of a pipeline read from runs.parquet: the spread of its per-seed means, computed
without pandas (an extra that the core install does not have)."""

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragaudit.decisions.noise import noise_floor, noise_floors


def write_runs(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def random_runs(seed):
    """Two pipelines, three seeds, two variants of 30 questions; a metric missing on some runs, and
    one that the second pipeline never has."""
    rng = np.random.default_rng(seed)
    rows = []
    for pipeline in ("p", "q"):
        for qid in range(30):
            for variant in (0, 1):
                for run_seed in (3, 1, 2):
                    support = None if rng.random() < 0.2 else float(rng.random())
                    rows.append(
                        {
                            "pipeline": pipeline,
                            "qid": f"q{qid}",
                            "variant": variant,
                            "seed": run_seed,
                            "m.citation_match": float(rng.random() < 0.6),
                            "m.support": support,
                            "m.mrr": float(rng.random()) if pipeline == "p" else None,
                        }
                    )
    return rows


def by_hand(rows, pipeline, metric):
    """max − min over the seeds of the mean of the runs that have the metric (None: no seed has it)."""
    means = []
    for run_seed in sorted({r["seed"] for r in rows}):
        kept = [r[f"m.{metric}"] for r in rows if r["pipeline"] == pipeline and r["seed"] == run_seed]
        kept = [v for v in kept if v is not None]
        if kept:
            means.append(sum(kept) / len(kept))
    return max(means) - min(means) if means else None


def test_the_floor_is_the_spread_of_the_per_seed_means(tmp_path):
    rows = random_runs(0)
    path = write_runs(tmp_path / "runs.parquet", rows)
    for pipeline in ("p", "q"):
        found = noise_floor(path, pipeline, ["citation_match", "support", "mrr", "ndcg@k"])
        assert (found.state, found.seeds) == ("sampling", (1, 2, 3))
        expected = {m: by_hand(rows, pipeline, m) for m in ("citation_match", "support", "mrr")}
        assert found.floors == pytest.approx({m: v for m, v in expected.items() if v is not None}, rel=1e-12)
        assert ("mrr" in found.floors) == (pipeline == "p")
    # one read for every pipeline gives each its own floor; a pipeline without runs has none to measure
    every = noise_floors(path, ["p", "q", "r"], ["citation_match", "support", "mrr"])
    assert every["p"] == noise_floor(path, "p", ["citation_match", "support", "mrr"])
    assert every["q"] == noise_floor(path, "q", ["citation_match", "support", "mrr"])
    assert every["r"].state == "unknown" and "no runs" in every["r"].note


def test_the_same_runs_under_every_seed_are_deterministic_missing_values_included(tmp_path):
    rows = random_runs(1)
    for r in rows:  # every seed repeats seed 1's run of the question and variant
        twin = next(
            t
            for t in rows
            if (t["pipeline"], t["qid"], t["variant"], t["seed"]) == (r["pipeline"], r["qid"], r["variant"], 1)
        )
        r.update({k: v for k, v in twin.items() if k.startswith("m.")})
    path = write_runs(tmp_path / "runs.parquet", rows)
    assert noise_floor(path, "p", ["citation_match", "support"]).state == "deterministic"
    # one run without a metric that its twins have is a difference
    moved = next(r for r in rows if r["pipeline"] == "p" and r["seed"] == 2 and r["m.support"] is not None)
    moved["m.support"] = None
    path = write_runs(tmp_path / "runs.parquet", rows)
    assert noise_floor(path, "p", ["citation_match", "support"]).state == "sampling"


NO_PANDAS = """
import importlib.abc, sys

class NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "pandas":
            raise ModuleNotFoundError(f"No module named {name!r}")

sys.meta_path.insert(0, NoPandas())
from ragaudit.decisions.noise import noise_floor, noise_floors
found = noise_floor(sys.argv[1], "p", ["citation_match"])
print(found.state, round(found.floors["citation_match"], 12))
"""


def test_the_floor_needs_no_pandas(tmp_path):
    rows = random_runs(2)
    path = write_runs(tmp_path / "runs.parquet", rows)
    done = subprocess.run([sys.executable, "-c", NO_PANDAS, str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["sampling", str(round(by_hand(rows, "p", "citation_match"), 12))]
