"""What an audit remembers of the texts it reads, let go of at once (`forget`) once its runs are
scored: the caches of the sentence splitter and the claim checks, the embedding vectors held in
memory, remembered support scores. Every remembered value is the value computed afresh, so
forgetting changes what the outputs cost, never what they say."""

from __future__ import annotations

from typing import Any, Callable, TypeVar
from weakref import WeakSet

F = TypeVar("F")

_CLEARERS: list[Callable[[], None]] = []
_OWNERS: WeakSet[Any] = WeakSet()


def on_forget(clear: Callable[[], None]) -> None:
    """Have `forget` call `clear`."""
    _CLEARERS.append(clear)


def forgotten(cached: F) -> F:
    """An `lru_cache`d function whose cache `forget` empties."""
    on_forget(cached.cache_clear)  # type: ignore[attr-defined]
    return cached


def forgets(owner: Any) -> None:
    """Have `forget` call `owner.forget()` for as long as `owner` lives (a cache of an object)."""
    _OWNERS.add(owner)


def forget() -> None:
    """Let go of everything registered here."""
    for clear in _CLEARERS:
        clear()
    for owner in list(_OWNERS):
        owner.forget()
