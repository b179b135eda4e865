"""A question row's metric means, held compactly: a report holds one per question of every
pipeline (a quarter of a million at a million runs), so they are the bulk of its memory.

`Means` is a read-only mapping, name -> mean or None, equal to the dict it was built from and in
its order. Rows with the same metric names share one name index; the values are one array of
doubles and the absent ones a bit mask: about 340 bytes a row of 20 metrics, against the 880 of a
dict of floats.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping
from typing import TypeVar

_T = TypeVar("_T")

_INDEXES: dict[tuple[str, ...], dict[str, int]] = {}  # names in order -> their positions, shared


class Means(Mapping[str, "float | None"]):
    __slots__ = ("_index", "_values", "_absent")

    def __init__(self, pairs: Mapping[str, float | None] | Iterable[tuple[str, float | None]] = ()):
        listed = list(pairs.items() if isinstance(pairs, Mapping) else pairs)
        names = tuple(name for name, _ in listed)
        index = _INDEXES.get(names)
        if index is None:
            index = _INDEXES.setdefault(names, {name: i for i, name in enumerate(names)})
        self._index = index
        self._values = array("d", [0.0 if value is None else value for _, value in listed])
        self._absent = sum(1 << i for i, (_, value) in enumerate(listed) if value is None)

    def __getitem__(self, name: str) -> float | None:
        i = self._index[name]
        return None if self._absent >> i & 1 else self._values[i]

    # Mapping's, without its exception for an absent name
    def get(self, name: str, default: _T | None = None) -> float | _T | None:
        i = self._index.get(name)
        if i is None:
            return default
        return None if self._absent >> i & 1 else self._values[i]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        return f"Means({dict(self)!r})"

    def __reduce__(self) -> tuple[type[Means], tuple[list[tuple[str, float | None]]]]:
        return (Means, (list(self.items()),))
