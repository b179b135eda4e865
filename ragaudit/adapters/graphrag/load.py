"""Read a GraphRAG output folder of any layout into plain records keyed by the ids answers cite.

Layouts (file names, then columns, decide):
  v0  `create_final_*.parquet`, entities carry `name` (graphrag < 1.0)
  v1  `create_final_*.parquet`, entities carry `title` (graphrag 1.x)
  v2  `entities.parquet` … , text units carry `document_ids` (graphrag 2.x)
  v3  `entities.parquet` … , text units carry one `document_id` (graphrag 3.x)

Citation ids are the query engine's short ids: Reports (n) is the report of community n;
Entities, Relationships and Claims (n) are `human_readable_id` n; Sources (n) is the text unit
at row position n (its `human_readable_id` is n + 1 in v1 and v2, n in v3).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ragaudit.core.errors import InputError, Problem

if TYPE_CHECKING:
    from pandas import DataFrame

NAMES = (
    "documents",
    "text_units",
    "entities",
    "relationships",
    "covariates",
    "communities",
    "community_reports",
    "nodes",
)
_COLUMNS = {
    "documents": ("id", "title", "human_readable_id", "page", "page_number", "metadata", "raw_data"),
    "text_units": ("id", "text", "human_readable_id", "document_ids", "document_id", "page", "page_number", "metadata"),
    "entities": ("id", "human_readable_id", "title", "name", "text_unit_ids"),
    "relationships": ("id", "human_readable_id", "source", "target", "text_unit_ids"),
    "covariates": ("id", "human_readable_id", "subject_id", "type", "text_unit_id", "text_unit_ids"),
    "communities": ("id", "community", "raw_community", "entity_ids", "text_unit_ids"),
    "community_reports": ("id", "community", "title"),
    "nodes": ("title", "community", "source_id"),
}
_PAGE_KEYS = ("page", "page_number", "page_label")
# Text units may open with the document's metadata as `key: value.` lines (v3 `prepend_metadata`).
_PREFIX_PAGE = re.compile(r"\A(?:[a-z_]+: [^\n]*\n)*?(?:page|page_number): ([^\n]*?)\.?\n")


@dataclass(frozen=True, slots=True)
class TextUnit:
    position: int
    id: str
    text: str
    document_ids: tuple[str, ...]
    human_readable_id: int | None = None
    page: int | str | None = None


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    title: str | None
    page: int | str | None = None


@dataclass(frozen=True, slots=True)
class Record:
    """A cited report, entity, relationship or claim, and the text units it stands on.
    `via` says how they were found: `record`, `community` or `community entities`."""

    kind: str
    key: int
    id: str
    title: str
    text_unit_ids: tuple[str, ...]
    via: str = "record"


@dataclass
class GraphIndex:
    """One output folder, loaded. Tables that are absent leave their mapping empty and are named in
    `missing`; `notes` says what was inferred."""

    path: Path
    layout: str
    text_units: list[TextUnit]
    documents: dict[str, Document]
    records: dict[str, dict[int, Record]]
    missing: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.unit_position = {u.id: u.position for u in self.text_units}


def find_tables(root: Path) -> tuple[Path, dict[str, Path], bool]:
    """The folder holding the tables (the given one, or its `output`/`artifacts`), each table's
    file, and whether names carry the `create_final_` prefix. Unprefixed names win when both exist."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(
            Problem(str(root), "expected a GraphRAG output folder, found " + ("a file" if root.exists() else "nothing"))
        )
    for folder in (root, root / "output", root / "artifacts", root / "output" / "artifacts"):
        for prefix in ("", "create_final_"):
            files = {n: folder / f"{prefix}{n}.parquet" for n in NAMES}
            files = {n: f for n, f in files.items() if f.is_file()}
            if "text_units" in files:
                return folder, files, bool(prefix)
    raise InputError(
        Problem(
            str(root),
            "expected GraphRAG output tables (text_units.parquet or create_final_text_units.parquet), found none",
        )
    )


def _read(path: Path, wanted: tuple[str, ...]) -> DataFrame:
    import pyarrow.parquet as pq

    try:
        present = pq.read_schema(path).names
        return pq.read_table(path, columns=[c for c in wanted if c in present]).to_pandas()
    except (OSError, ValueError) as exc:  # pyarrow raises ArrowInvalid (a ValueError) on a corrupt file
        raise InputError(Problem(str(path), f"unreadable parquet table: {exc}")) from exc


def _require(frame: DataFrame, path: Path, *columns: str) -> None:
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        raise InputError(
            Problem(
                str(path),
                f"expected column(s) {', '.join(absent)}, found {', '.join(map(str, frame.columns)) or 'none'}",
            )
        )


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _ids(value: Any) -> tuple[str, ...]:
    """A list cell as strings; v0 stored some lists as comma-joined strings."""
    if _missing(value):
        return ()
    items = [value] if isinstance(value, str) else list(value)
    return tuple(p.strip() for item in items if not _missing(item) for p in str(item).split(",") if p.strip())


def _int(value: Any) -> int | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() else None


def _str(value: Any) -> str:
    return "" if _missing(value) else str(value)


def _page(row: dict[str, Any]) -> int | str | None:
    for key in ("page", "page_number"):
        if not _missing(row.get(key)):
            return _int(row[key]) if _int(row[key]) is not None else str(row[key])
    for holder in ("metadata", "raw_data"):
        meta = row.get(holder)
        if isinstance(meta, dict):
            for key in _PAGE_KEYS:
                if not _missing(meta.get(key)):
                    return _int(meta[key]) if _int(meta[key]) is not None else str(meta[key])
    return None


def load_index(output_dir: str | Path) -> GraphIndex:
    """Load an output folder; raises InputError when it holds no readable GraphRAG tables."""
    folder, files, prefixed = find_tables(Path(output_dir))
    frames = {name: _read(path, _COLUMNS[name]) for name, path in files.items()}
    for name, frame in frames.items():
        _require(
            frame,
            files[name],
            *{"nodes": ("title", "community"), "community_reports": ("community",)}.get(name, ("id",)),
        )
    _require(frames["text_units"], files["text_units"], "text")
    units = frames["text_units"]
    if prefixed:
        layout = (
            "v1"
            if "title" in frames.get("entities", units).columns
            or ("entities" not in frames and "human_readable_id" in units.columns)
            else "v0"
        )
    else:
        layout = "v3" if "document_id" in units.columns else "v2"
    index = GraphIndex(
        path=folder,
        layout=layout,
        text_units=_text_units(units),
        documents=_documents(frames.get("documents")),
        records={},
        missing=tuple(n for n in NAMES[:7] if n not in frames),
    )
    _link_documents(index, frames.get("documents"))
    by_title = _entity_records(index, frames.get("entities"))
    _relationship_records(index, frames.get("relationships"))
    _claim_records(index, frames.get("covariates"))
    _report_records(index, frames, by_title)
    return index


def _rows(frame: DataFrame | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [] if frame is None else frame.to_dict("records")
    return rows


def _text_units(frame: DataFrame | None) -> list[TextUnit]:
    out = []
    for position, row in enumerate(_rows(frame)):
        text = _str(row.get("text"))
        page = _page(row)
        if page is None and (found := _PREFIX_PAGE.match(text)):
            page = _int(found.group(1)) if _int(found.group(1)) is not None else found.group(1)
        docs = _ids(row.get("document_ids")) or _ids(row.get("document_id"))
        out.append(TextUnit(position, _str(row["id"]), text, docs, _int(row.get("human_readable_id")), page))
    return out


def _documents(frame: DataFrame | None) -> dict[str, Document]:
    docs: dict[str, Document] = {}
    for row in _rows(frame):
        title = _str(row.get("title")) or None
        docs.setdefault(_str(row["id"]), Document(_str(row["id"]), title, _page(row)))
    return docs


def _link_documents(index: GraphIndex, frame: DataFrame | None) -> None:
    """Text units that do not name their document get it from the documents' `text_unit_ids`."""
    if frame is None or "text_unit_ids" not in frame.columns or all(u.document_ids for u in index.text_units):
        return
    owner: dict[str, str] = {}
    for row in _rows(frame):
        for unit_id in _ids(row.get("text_unit_ids")):
            owner.setdefault(unit_id, _str(row["id"]))
    index.text_units = [
        u
        if u.document_ids or u.id not in owner
        else TextUnit(u.position, u.id, u.text, (owner[u.id],), u.human_readable_id, u.page)
        for u in index.text_units
    ]
    index.notes.append("text units linked to documents through documents.text_unit_ids")


def _keyed(
    index: GraphIndex, kind: str, frame: DataFrame | None, make: Callable[[int, dict[str, Any]], Record]
) -> None:
    """Records of one kind by `human_readable_id` (row position when a table has none)."""
    table: dict[int, Record] = {}
    has_hrid = frame is not None and "human_readable_id" in frame.columns
    if frame is not None and not has_hrid:
        index.notes.append(f"{kind}: no human_readable_id column, ids are row positions")
    duplicates = 0
    for position, row in enumerate(_rows(frame)):
        key = _int(row["human_readable_id"]) if has_hrid else position
        if key is None:
            continue
        if key in table:
            duplicates += 1
            continue
        table[key] = make(key, row)
    if duplicates:
        index.notes.append(f"{kind}: {duplicates} duplicate id(s), the first row of each kept")
    index.records[kind] = table


def _entity_records(index: GraphIndex, frame: DataFrame | None) -> dict[str, Record]:
    _keyed(
        index,
        "Entities",
        frame,
        lambda key, row: Record(
            "Entities", key, _str(row["id"]), _str(row.get("title", row.get("name"))), _ids(row.get("text_unit_ids"))
        ),
    )
    records = index.records["Entities"].values()
    return {r.title: r for r in records} | {r.id: r for r in records}


def _relationship_records(index: GraphIndex, frame: DataFrame | None) -> None:
    _keyed(
        index,
        "Relationships",
        frame,
        lambda key, row: Record(
            "Relationships",
            key,
            _str(row["id"]),
            f"{_str(row.get('source'))} -> {_str(row.get('target'))}",
            _ids(row.get("text_unit_ids")),
        ),
    )


def _claim_records(index: GraphIndex, frame: DataFrame | None) -> None:
    def title(row: dict[str, Any]) -> str:
        kind = _str(row.get("type"))
        return _str(row.get("subject_id")) + (f" ({kind})" if kind else "")

    _keyed(
        index,
        "Claims",
        frame,
        lambda key, row: Record(
            "Claims", key, _str(row["id"]), title(row), _ids(row.get("text_unit_id")) or _ids(row.get("text_unit_ids"))
        ),
    )


def _report_records(index: GraphIndex, frames: dict[str, DataFrame], entities: dict[str, Record]) -> None:
    """Reports cite their community; its text units come from `communities.text_unit_ids`, else
    from the text units of its entities (`communities.entity_ids`, or v0 `nodes` by community)."""
    members: dict[int, tuple[str, ...]] = {}
    direct: dict[int, tuple[str, ...]] = {}
    for row in _rows(frames.get("communities")):
        number = next(
            (n for n in (_int(row.get(c)) for c in ("community", "raw_community", "id")) if n is not None), None
        )
        if number is not None:
            direct.setdefault(number, _ids(row.get("text_unit_ids")))
            members.setdefault(number, _ids(row.get("entity_ids")))
    node_members: dict[int, list[str]] = {}
    for row in _rows(frames.get("nodes")):
        number = _int(row.get("community"))
        if number is not None:
            node_members.setdefault(number, []).append(_str(row["title"]))

    def units(number: int) -> tuple[tuple[str, ...], str]:
        if direct.get(number):
            return direct[number], "community"
        names = members.get(number) or node_members.get(number) or ()
        found = [u for m in names if m in entities for u in entities[m].text_unit_ids]
        return tuple(dict.fromkeys(found)), "community entities"

    def make(key: int, row: dict[str, Any]) -> Record:
        ids, via = units(key)
        return Record("Reports", key, _str(row.get("id")), _str(row.get("title")), ids, via)

    frame = frames.get("community_reports")
    if frame is not None:
        frame = frame.assign(human_readable_id=frame["community"])  # the query engine's report id
    _keyed(index, "Reports", frame, make)
