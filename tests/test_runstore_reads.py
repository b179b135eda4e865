"""Reading runs.parquet back holds a batch of runs at a time, and finding some questions' runs
reads in full only the row groups that hold them."""

import pyarrow.parquet as pq

from ragaudit.checks import runstore


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


def _snippet(n: int, **changed) -> runstore.Snippet:
    fields = {
        "snippet_id": f"s{n}",
        "doc_id": f"doc{n % 3}",
        "section_id": f"doc{n % 3}/sec{n % 2}",
        "rev": "rev-" + "ab"[n % 2],
        "start": n,
        "end": n + 40,
        "unit": "char",
        "text": f"snippet {n} text",
        "before": f"before {n}",
        "after": f"after {n}",
    }
    return runstore.Snippet(**{**fields, **changed})


def test_the_snippet_store_keeps_the_first_of_each_snippet_whole_and_only_where_it_is_in_memory(tmp_path):
    for path in (tmp_path / "snippets.sqlite", None):
        store = runstore.SnippetStore(path)
        odd = _snippet(
            0, text='lone \ud800 surrogate, quote " and ünïcode', start=None, end=None, unit=None, before=None
        )
        first = {f"r{n}": _snippet(n) for n in range(1, 1200)} | {"r0": odd}
        store.add(first)
        store.add({"r1": _snippet(99, text="a later copy"), "r1200": _snippet(1200, section_id=None, rev=None)})
        assert len(store) == 1201 and "r1200" in store and "r9999" not in store
        shown = store.get(["r9999", "r0", "r1", "r1", *[f"r{n}" for n in range(600, 1201)]])
        assert set(shown) == {"r0", "r1", *[f"r{n}" for n in range(600, 1201)]}  # more than one read of 500
        assert shown["r0"] == odd and shown["r1"] == _snippet(1) and shown["r700"] == _snippet(700)
        assert shown["r0"].to_json()["offsets"] is None and shown["r1"].to_json()["context"] == {
            "before": "before 1",
            "after": "after 1",
        }
        places = store.places()
        assert places["r1"] == ("doc1/sec1", "rev-b") and places["r1200"] == (None, None)
        assert places["r4"] == ("doc1/sec0", "rev-a") and places["r4"][0] is places["r10"][0]  # one string each
        store.close()
    assert (tmp_path / "snippets.sqlite").stat().st_size > 1200 * 40  # the texts are on disk


def test_a_snippet_file_that_cannot_be_made_is_an_input_output_error_naming_it(tmp_path):
    import pytest

    with pytest.raises(OSError, match="cannot create the audit's snippets: unable to open") as raised:
        runstore.SnippetStore(tmp_path)  # a folder
    assert raised.value.filename == str(tmp_path)
