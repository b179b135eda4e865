"""Bounded memos for the per-run path of an audit.

The runs of one question (its seeds, variants and pipelines) retrieve mostly the same snippets and
give mostly the same answers, so what a text yields (its claims, the grams the hashing encoder
counts), or what a claim states of a key, is asked for again and again. A memo computes each once
and keeps it while it keeps coming back: at most `size` entries, the least recently used
forgotten first, so memory stays bounded however many distinct texts an audit reads; a text
longer than LONGEST characters is never a key. Every remembered value is a pure function of its
key (and of the encoder the memo belongs to), so a memo never changes a result: a cold, a warm
and an evicting memo give the same answers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Generic, Hashable, TypeVar
from weakref import WeakKeyDictionary, WeakSet

from ragaudit.core import forgetting

V = TypeVar("V")

LONGEST = 4_000  # characters: a longer text is computed each time rather than held as a key
# Entries each memo of the per-run path holds. A question's runs (its variants and seeds) arrive
# together, so what they share comes back within a few hundred entries; a text that comes back
# under the next pipeline does so a whole pipeline's questions later, which only a memo that grows
# with the audit's distinct questions would keep. SIZE keeps the first and holds memory flat.
SIZE = 1 << 13

_EVERY: WeakSet[Memo[Any]] = WeakSet()


class Memo(Generic[V]):
    """At most `size` computed values by key, least recently used forgotten first. Thread-safe."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"expected a memo size of at least 1, found {size}")
        self.size = size
        self._values: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        _EVERY.add(self)

    def get(self, key: Hashable, compute: Callable[..., V], *args: Any) -> V:
        """The value of `key`: remembered, or `compute(*args)` remembered."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                self.hits += 1
                return self._values[key]
        value = compute(*args)  # outside the lock: a value computed twice at once is the same value
        with self._lock:
            self.misses += 1
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self.size:
                self._values.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._values)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


_OWNED: WeakKeyDictionary[Any, dict[str, Memo[Any]]] = WeakKeyDictionary()
_UNOWNED: dict[str, Memo[Any]] = {}
_LOCK = threading.Lock()


def memo_of(owner: Any, name: str, size: int) -> Memo[Any]:
    """The memo `name` of `owner` (the encoder its values depend on; None for none), kept as long as
    the owner lives: batch after batch of an audit share it. An owner that cannot be weakly
    referred to gets a fresh memo each call."""
    with _LOCK:
        if owner is None:
            memos = _UNOWNED
        else:
            try:
                memos = _OWNED.setdefault(owner, {})
            except TypeError:
                return Memo(size)
        if name not in memos:
            memos[name] = Memo(size)
        return memos[name]


def every() -> list[Memo[Any]]:
    """Every memo alive."""
    return list(_EVERY)


def forget() -> None:
    """Empty every memo, and what `ragaudit.core.forgetting` holds: what follows is computed afresh."""
    for memo in every():
        memo.clear()
    forgetting.forget()
