import shutil
from pathlib import Path

import pytest
from helpers import Lazy, shared_path

from ragaudit.adapters.graphrag import load_index, trace_answer
from ragaudit.core.errors import InputError

pd = Lazy("pandas")  # imported when a test first uses it: collecting stays fast

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "graphrag"


def shared(*parts: str) -> Path:
    return shared_path("graphrag", *parts)


# ---------------------------------------------------------------- layouts


@pytest.mark.parametrize("layout", ["v0", "v1", "v2", "v3"])
def test_each_layout_is_detected_and_keyed_by_its_citation_ids(layout):
    index = load_index(FIXTURES / layout)
    assert index.layout == layout and index.missing == ()
    assert [u.id for u in index.text_units] == ["tu-a", "tu-b", "tu-c"]
    assert {k: sorted(v) for k, v in index.records.items()} == {
        "Entities": [0, 1, 2],
        "Relationships": [0],
        "Reports": [0, 1],
        "Claims": [1] if layout in ("v1", "v2") else [0],
    }
    assert index.records["Entities"][2].title == "BOB CRATCHIT"
    assert [d.title for d in index.documents.values()] == ["alpha.txt", "beta.txt"]


@pytest.mark.parametrize("layout", ["v0", "v1", "v2", "v3"])
def test_a_community_without_text_units_resolves_through_its_entities(layout):
    reports = load_index(FIXTURES / layout).records["Reports"]
    assert (reports[0].via, reports[0].text_unit_ids) == ("community", ("tu-a", "tu-b"))
    assert (reports[1].via, reports[1].text_unit_ids) == ("community entities", ("tu-c",))


def test_v1_and_v2_human_readable_ids_are_positions_plus_one_and_sources_use_positions():
    for layout in ("v1", "v2"):
        index = load_index(FIXTURES / layout)
        assert [(u.position, u.human_readable_id) for u in index.text_units] == [(0, 1), (1, 2), (2, 3)]
        (source,) = trace_answer(index, "x [Data: Sources (0)]").sources
        assert source.units[0].id == "tu-a"


def test_a_page_is_taken_from_document_metadata_or_a_text_unit_prefix(tmp_path):
    assert load_index(FIXTURES / "v3").documents["doc-1"].page == 3
    shutil.copytree(FIXTURES / "v3", tmp_path / "out")
    units = pd.read_parquet(tmp_path / "out" / "text_units.parquet")
    units.loc[2, "text"] = "title: beta.txt.\npage: 7.\nBob Cratchit earned fifteen shillings a week."
    units.to_parquet(tmp_path / "out" / "text_units.parquet", index=False)
    assert [u.page for u in load_index(tmp_path / "out").text_units] == [None, None, 7]


def test_the_output_subfolder_is_found(tmp_path):
    shutil.copytree(FIXTURES / "v2", tmp_path / "project" / "output")
    index = load_index(tmp_path / "project")
    assert index.path == tmp_path / "project" / "output" and index.layout == "v2"


def test_absent_tables_are_named_and_their_citations_dangle(tmp_path):
    shutil.copytree(FIXTURES / "v3", tmp_path / "out")
    (tmp_path / "out" / "covariates.parquet").unlink()
    index = load_index(tmp_path / "out")
    assert index.missing == ("covariates",)
    (claim,) = trace_answer(index, "x [Data: Claims (0)]").sources
    assert claim.reason == "missing_table"


# ---------------------------------------------------------------- unreadable input


def test_a_missing_folder_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="expected a GraphRAG output folder, found nothing"):
        load_index(tmp_path / "nope")


def test_a_folder_without_tables_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="found none"):
        load_index(tmp_path)


def test_a_corrupt_table_is_an_input_error_naming_the_file(tmp_path):
    shutil.copytree(FIXTURES / "v3", tmp_path / "out")
    (tmp_path / "out" / "entities.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError) as caught:
        load_index(tmp_path / "out")
    assert caught.value.problems[0].file.endswith("entities.parquet")


def test_a_table_without_its_id_column_is_an_input_error(tmp_path):
    shutil.copytree(FIXTURES / "v3", tmp_path / "out")
    pd.DataFrame({"text": ["x"]}).to_parquet(tmp_path / "out" / "text_units.parquet")
    with pytest.raises(InputError, match="expected column"):
        load_index(tmp_path / "out")


# ---------------------------------------------------------------- the real outputs


@pytest.mark.shared
def test_operation_dulce_is_a_v1_layout():
    # graphrag 2.0.0 shipped these example tables unchanged from 1.x: create_final_* names and
    # text-unit human_readable_id = position + 1.
    index = load_index(shared("v2-operation-dulce"))
    assert index.layout == "v1" and index.missing == () and index.notes == []
    assert len(index.text_units) == 38 and len(index.documents) == 2
    assert {k: len(v) for k, v in index.records.items()} == {
        "Entities": 373,
        "Relationships": 812,
        "Claims": 178,
        "Reports": 72,
    }
    assert [u.human_readable_id for u in index.text_units] == list(range(1, 39))
    assert index.records["Reports"][65].title == "Galactic Orchestra and Interstellar Duet"
    assert {d.title for d in index.documents.values()} == {
        "dulce.txt",
        "Behind the Tech_Episode 29_Collier_Bloomberg_Transcript.txt",
    }


@pytest.mark.shared
def test_christmas_carol_is_a_v3_layout():
    index = load_index(shared("v3-christmas-carol"))
    assert index.layout == "v3" and index.missing == ()
    assert len(index.text_units) == 42
    assert {k: len(v) for k, v in index.records.items()} == {
        "Entities": 529,
        "Relationships": 978,
        "Claims": 406,
        "Reports": 122,
    }
    assert [u.human_readable_id for u in index.text_units] == list(range(42))
    assert [d.title for d in index.documents.values()] == ["a-christmas-carol.txt"]
    assert all(u.document_ids == (next(iter(index.documents)),) for u in index.text_units)


@pytest.mark.shared
def test_operation_dulce_renamed_to_the_v2_layout_loads_the_same(tmp_path):
    for table in shared("v2-operation-dulce").glob("create_final_*.parquet"):
        shutil.copy(table, tmp_path / table.name.removeprefix("create_final_"))
    v2, v1 = load_index(tmp_path), load_index(shared("v2-operation-dulce"))
    assert v2.layout == "v2"
    assert v2.records == v1.records and v2.text_units == v1.text_units and v2.documents == v1.documents


@pytest.mark.shared
def test_christmas_carol_adapted_to_v1_still_cites_sources_by_position(tmp_path):
    """v3 tables renamed to create_final_* with v1's text-unit numbering (position + 1)."""
    source = shared("v3-christmas-carol")
    for table in source.glob("*.parquet"):
        frame = pd.read_parquet(table)
        if table.stem == "text_units":
            frame["human_readable_id"] = range(1, len(frame) + 1)
            frame["document_ids"] = frame.pop("document_id").map(lambda d: [d])
        frame.to_parquet(tmp_path / f"create_final_{table.name}", index=False)
    index = load_index(tmp_path)
    assert index.layout == "v1"
    original = load_index(source)
    trace = trace_answer(index, "x [Data: Sources (0, 41)]")
    assert [s.units[0].id for s in trace.sources] == [original.text_units[0].id, original.text_units[41].id]
    assert [s.units[0].human_readable_id for s in trace.sources] == [1, 42]
    assert trace_answer(index, "x [Data: Sources (42)]").sources[0].reason == "unknown_id"
