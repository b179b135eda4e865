"""Cited ids → records → text units → documents (title, page where known).

A citation that reaches no text unit is *dangling*, with the reason as a stable code:
`unknown_kind`, `bad_id`, `missing_table`, `unknown_id` or `no_text_units`. Links that break
further down while others hold (a text unit id or document id the tables do not have) are
warnings: the citation still resolves through the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ragaudit.adapters.graphrag.load import GraphIndex, Record, TextUnit

_TABLES = {
    "Reports": "community_reports",
    "Entities": "entities",
    "Relationships": "relationships",
    "Claims": "covariates",
    "Sources": "text_units",
}
_COLUMN = {
    "Reports": "community",
    "Entities": "human_readable_id",
    "Relationships": "human_readable_id",
    "Claims": "human_readable_id",
    "Sources": "row position",
}


@dataclass(frozen=True, slots=True)
class DocumentRef:
    """A document reached by a citation, with the text units (row positions) that reached it."""

    id: str
    title: str | None
    pages: tuple[int | str, ...]
    units: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Resolution:
    """Where one cited id leads. `reason` is set when it is dangling; `warnings` list broken side links."""

    kind: str
    key: int | str
    title: str | None = None
    record_id: str | None = None
    via: str | None = None
    units: tuple[TextUnit, ...] = ()
    documents: tuple[DocumentRef, ...] = ()
    reason: str | None = None
    message: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def dangling(self) -> bool:
        return self.reason is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "id": self.key,
            "title": self.title,
            "record_id": self.record_id,
            "via": self.via,
            "dangling": self.dangling,
            "reason": self.reason,
            "message": self.message,
            "warnings": list(self.warnings),
            "text_units": [
                {
                    "position": u.position,
                    "id": u.id,
                    "human_readable_id": u.human_readable_id,
                    "document_ids": list(u.document_ids),
                    "page": u.page,
                }
                for u in self.units
            ],
            "documents": [
                {"id": d.id, "title": d.title, "pages": list(d.pages), "text_units": list(d.units)}
                for d in self.documents
            ],
        }


class Resolver:
    """Resolves (kind, id) pairs against one loaded output folder; results are cached."""

    def __init__(self, index: GraphIndex):
        self.index = index
        self._cache: dict[tuple[str, int | str], Resolution] = {}

    def resolve(self, kind: str, key: int | str, *, known: bool = True) -> Resolution:
        if (kind, key) not in self._cache:
            self._cache[kind, key] = self._resolve(kind, key, known)
        return self._cache[kind, key]

    def _resolve(self, kind: str, key: int | str, known: bool) -> Resolution:
        if not known:
            return Resolution(
                kind,
                key,
                reason="unknown_kind",
                message=f"expected one of Reports, Entities, Relationships, Claims, Sources; "
                f"found {kind or 'no kind'!r}",
            )
        if not isinstance(key, int):
            return Resolution(kind, key, reason="bad_id", message=f"expected a number, found {key!r}")
        table = _TABLES[kind]
        if kind != "Sources" and table in self.index.missing:
            return Resolution(
                kind,
                key,
                reason="missing_table",
                message=f"{kind} ({key}) cannot resolve: the folder has no {table} table",
            )
        if kind == "Sources":
            units = self.index.text_units
            if not 0 <= key < len(units):
                return Resolution(
                    kind,
                    key,
                    reason="unknown_id",
                    message=f"expected a text unit row position in 0..{len(units) - 1}, found {key}",
                )
            unit = units[key]
            return self._finish(Resolution(kind, key, f"text unit {key}", unit.id, "row position"), [unit.id])
        record: Record | None = self.index.records.get(kind, {}).get(key)
        if record is None:
            return Resolution(kind, key, reason="unknown_id", message=f"no row of {table} has {_COLUMN[kind]} {key}")
        return self._finish(
            Resolution(kind, key, record.title or None, record.id, record.via), list(record.text_unit_ids)
        )

    def _finish(self, base: Resolution, unit_ids: list[str]) -> Resolution:
        index = self.index
        positions = sorted({index.unit_position[u] for u in unit_ids if u in index.unit_position})
        warnings = [
            f"text unit {u} is not in text_units" for u in dict.fromkeys(unit_ids) if u not in index.unit_position
        ]
        units = tuple(index.text_units[p] for p in positions)
        if not units:
            what = "links to no text unit" if not unit_ids else "links only to text units missing from text_units"
            return replace(
                base, reason="no_text_units", message=f"{base.kind} ({base.key}) {what}", warnings=tuple(warnings)
            )
        documents: dict[str, tuple[list[int], list[int | str]]] = {}
        for unit in units:
            for doc_id in unit.document_ids:
                held = documents.setdefault(doc_id, ([], []))
                held[0].append(unit.position)
                if unit.page is not None and unit.page not in held[1]:
                    held[1].append(unit.page)
        refs = []
        for doc_id, (held_units, pages) in documents.items():
            doc = index.documents.get(doc_id)
            if doc is None and "documents" not in index.missing:
                warnings.append(f"document {doc_id} is not in documents")
            if doc is not None and doc.page is not None and doc.page not in pages:
                pages.append(doc.page)
            refs.append(DocumentRef(doc_id, doc.title if doc else None, tuple(pages), tuple(held_units)))
        unowned = [u.position for u in units if not u.document_ids]
        if unowned:
            warnings.append(f"text unit(s) {', '.join(map(str, unowned))} name no document")
        return replace(base, units=units, documents=tuple(refs), warnings=tuple(warnings))
