"""The worst examples of a production audit, kept in bounded memory however many traces stream by.

Each kind keeps its `limit` worst entries in a heap: a new entry goes in only when it is worse than
the least bad one kept, which then goes out. Ties go to the earlier record, so the lists depend
only on the input, never on batch sizes. An example's details are built only when some list takes
it, and shared by every list that does.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable

KINDS = {
    "delta_s": "highest ΔS(query, cited text)",
    "support": "lowest support of an answer segment by its cited texts",
    "hallucinations": "most quantities and identifiers that no cited text contains",
    "errors": "most error-severity validation issues",
}
LIMIT = 20  # entries per kind


class Worst:
    """The `limit` entries with the highest rank. A rank is a tuple whose first item is how bad
    the entry is; the rest orders ties (and must make every rank distinct)."""

    def __init__(self, limit: int = LIMIT):
        if limit < 0:
            raise ValueError(f"The 'limit' parameter must be an int in [0, inf). Got {limit!r} instead.")
        self.limit = limit
        self._heap: list[tuple[tuple[Any, ...], dict[str, Any], dict[str, Any]]] = []

    def wants(self, rank: tuple[Any, ...]) -> bool:
        return len(self._heap) < self.limit or (self.limit > 0 and rank > self._heap[0][0])

    def add(self, rank: tuple[Any, ...], entry: dict[str, Any], example: dict[str, Any]) -> None:
        if not self.wants(rank):
            return
        item = (rank, entry, example)
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, item)
        else:
            heapq.heapreplace(self._heap, item)

    def __len__(self) -> int:
        return len(self._heap)

    def ranked(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(entry, example) pairs, worst first."""
        return [(entry, example) for _, entry, example in sorted(self._heap, key=lambda item: item[0], reverse=True)]


class WorstExamples:
    """One bounded list per kind of `KINDS`, and the examples they point to."""

    def __init__(self, limit: int = LIMIT):
        self.lists = {kind: Worst(limit) for kind in KINDS}

    def offer(
        self, candidates: list[tuple[str, tuple[Any, ...], dict[str, Any]]], example: Callable[[], dict[str, Any]]
    ) -> None:
        """`candidates` are (kind, rank, entry) of one record; `example()` builds its details,
        called at most once and only when some list takes a candidate."""
        built: dict[str, Any] | None = None
        for kind, rank, entry in candidates:
            if self.lists[kind].wants(rank):
                built = built if built is not None else example()
                self.lists[kind].add(rank, {**entry, "example": built["id"]}, built)

    def size(self) -> int:
        """Entries held, over every list: never more than the limit times the kinds."""
        return sum(len(w) for w in self.lists.values())

    def to_dict(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """(the lists, worst first, each entry naming its example by id; the examples, in input order)."""
        lists: dict[str, list[dict[str, Any]]] = {}
        examples: dict[str, dict[str, Any]] = {}
        for kind, worst in self.lists.items():
            lists[kind] = []
            for entry, example in worst.ranked():
                lists[kind].append(entry)
                examples[example["id"]] = example
        return lists, sorted(examples.values(), key=lambda example: example["record"])
