"""Reading runs.parquet back holds a batch of runs at a time, and finding some questions' runs
reads in full only the row groups that hold them."""

import pyarrow.parquet as pq

from ragaudit import runstore


def _stored(tmp_path, groups: int, per_group: int):
    writer = runstore.RunWriter(tmp_path / runstore.RUNS, ("coverage",))
    for g in range(groups):  # one row group per write, its own questions
        writer.write(
            runstore.record_batch(
                [
                    {
                        "pipeline": "p",
                        "qid": f"Q{g}",
                        "variant": 0,
                        "seed": n,
                        **dict.fromkeys(runstore.TEXT),
                        "errored": False,
                        "correct": n % 2 == 0,
                        "metrics": {"coverage": n / per_group},
                    }
                    for n in range(per_group)
                ],
                ("coverage",),
            )
        )
    writer.close()
    return tmp_path / runstore.RUNS


def test_runs_are_read_back_a_bounded_batch_at_a_time(tmp_path, monkeypatch):
    path = _stored(tmp_path, groups=4, per_group=5)
    monkeypatch.setattr(runstore, "READ_BATCH", 3)
    batches = list(runstore.iter_runs(path, columns=["qid", "seed"]))
    assert max(len(b) for b in batches) == 3
    assert [(r["qid"], r["seed"]) for b in batches for r in b] == [(f"Q{g}", n) for g in range(4) for n in range(5)]


def test_the_runs_of_some_questions_read_only_their_row_groups(tmp_path, monkeypatch):
    path = _stored(tmp_path, groups=4, per_group=5)
    assert pq.ParquetFile(path).num_row_groups == 4
    asked = []
    iter_batches = pq.ParquetFile.iter_batches

    def recorded(self, *args, **kwargs):
        asked.append((kwargs.get("row_groups"), kwargs.get("batch_size")))
        return iter_batches(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", recorded)
    found = runstore.runs_of(path, {("p", "Q2")}, limit=3)
    assert asked == [([2], runstore.READ_BATCH)]  # the other groups' runs are never decoded
    # its failing runs (odd seeds) and the first correct one, in plan order
    assert [(r["qid"], r["seed"]) for r in found[("p", "Q2")]] == [("Q2", 0), ("Q2", 1), ("Q2", 3)]
    asked.clear()
    assert runstore.runs_of(path, {("p", "Q9")}) == {} and asked == []
