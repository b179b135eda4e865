"""Time windows of a production audit: `--window 1h` / `1d` / `7d`, and what each window adds up.

Windows are fixed-length intervals aligned to Monday 1970-01-05T00:00Z, so a `1d` window is a UTC
day, a `7d` window a week from Monday, and a `1h` window an hour of the clock. A trace falls in
the window of its `retrieved_at`; a trace without one (or with one that is not an ISO 8601 time,
or whose window does not lie within the years 1 to 9999, which ISO 8601 cannot write past) falls
in the window `undated`, which is shown last and takes no part in drift. A window is at most a
century long.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from ragaudit.checks.metrics.delta_s import ZONES
from ragaudit.core.errors import UsageError
from ragaudit.flows.auditlog.health import Tally

UNDATED = "undated"
ORIGIN = 4 * 86_400  # 1970-01-05, a Monday: weeks start on Mondays
UNITS = {"m": 60, "h": 3_600, "d": 86_400, "w": 7 * 86_400}
INDEX_FIELDS = ("index_hash", "analyzer", "embed_model")
VALUES_KEPT = 50  # distinct values of one index field remembered per window; more are only counted
ZONE_NAMES = tuple(name for name, _ in ZONES)

_DURATION = re.compile(r"([1-9][0-9]{0,5})([mhdw])")
MAX_WINDOW = 36_525 * 86_400  # a century
FIRST = -62_135_596_800  # 0001-01-01T00:00:00Z: ISO 8601 times lie in [FIRST, END)
END = 253_402_300_800  # 10000-01-01T00:00:00Z


def parse_window(text: str) -> int:
    """`1h`, `1d`, `7d`, `30m`, `2w` as seconds.

    >>> parse_window("7d")
    604800
    """
    found = _DURATION.fullmatch(text.strip())
    if not found or int(found.group(1)) * UNITS[found.group(2)] > MAX_WINDOW:
        raise UsageError(
            "The 'window' parameter must be a count and a unit m, h, d or w, such as 1h, 1d or 7d, of at most "
            f"{MAX_WINDOW // 86_400}d. Got {text!r} instead."
        )
    return int(found.group(1)) * UNITS[found.group(2)]


def parse_time(value: str | None, length: int = 0) -> float | None:
    """Seconds since the epoch of an ISO 8601 time (`Z` or an offset; a time without one is UTC),
    or None when there is no time, it cannot be read, or its window of `length` seconds does not
    lie within the years 1 to 9999 (its bounds could not be written)."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except (ValueError, TypeError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        seconds = moment.timestamp()
    except (OverflowError, ValueError):  # an offset that takes the time past the years 1 to 9999
        return None
    if not (math.isfinite(seconds) and FIRST <= seconds < END):
        return None
    if length:
        start = window_start(seconds, length)
        if start < FIRST or start + length >= END:
            return None
    return seconds


def iso(seconds: float) -> str:
    """`2026-11-22T10:00:00Z` (fractions of a second kept only when there are some)."""
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    text = moment.isoformat(timespec="microseconds" if moment.microsecond else "seconds")
    return text.replace("+00:00", "Z")


def window_start(seconds: float, length: int) -> int:
    return ORIGIN + math.floor((seconds - ORIGIN) / length) * length


def window_of(length: int) -> Callable[[str | None], str]:
    """The name of the window of `length` seconds that a trace's `retrieved_at` falls in (`undated`
    when it has none): the part of a span run key that keeps one day's runs apart from another's."""

    def name(retrieved_at: str | None) -> str:
        at = parse_time(retrieved_at, length)
        return UNDATED if at is None else iso(window_start(at, length))

    return name


@dataclass
class Window:
    """What one window of traces adds up to. `start` is None for the undated window."""

    start: int | None
    length: int
    traces: int = 0
    malformed: int = 0  # lines that were not traces (undated window only)
    errored: int = 0  # traces that errored or cite nothing: ΔS 1.0 and every segment ungrounded
    issues: Counter[str] = field(default_factory=Counter)  # by code, every severity
    errors: int = 0
    warnings: int = 0
    values: dict[str, dict[str, float | None]] = field(default_factory=lambda: {f: {} for f in INDEX_FIELDS})
    values_dropped: Counter[str] = field(default_factory=Counter)  # distinct values past VALUES_KEPT, by field
    segments: int = 0  # answer segments, and one per errored trace without segments
    grounded: int = 0
    zones: Counter[str | None] = field(default_factory=Counter)  # by ΔS zone: traces with a ΔS
    unscored: int = 0  # traces with no query to measure ΔS against
    delta_s_total: float = 0.0
    delta_s_count: int = 0
    hallucinations: int = 0  # quantities and identifiers no cited text contains
    hallucinating_traces: int = 0
    first: float | None = None
    last: float | None = None
    health: dict[str, Tally] = field(default_factory=dict)  # per pipeline (`health.py`)

    @property
    def key(self) -> str:
        return UNDATED if self.start is None else iso(self.start)

    def seen(self, name: str, value: str, at: float | None) -> None:
        """Remember `value` of index field `name`, with the earliest time it was seen here."""
        kept = self.values[name]
        if value not in kept:
            if len(kept) >= VALUES_KEPT:
                self.values_dropped[name] += 1
                return
            kept[value] = at
        elif at is not None and (kept[value] is None or at < kept[value]):  # type: ignore[operator]
            kept[value] = at

    def timed(self, at: float | None) -> None:
        if at is not None:
            self.first = at if self.first is None else min(self.first, at)
            self.last = at if self.last is None else max(self.last, at)

    def to_dict(self) -> dict[str, Any]:
        return {
            "window": self.key,
            "start": None if self.start is None else iso(self.start),
            "end": None if self.start is None else iso(self.start + self.length),
            "first_seen": None if self.first is None else iso(self.first),
            "last_seen": None if self.last is None else iso(self.last),
            "traces": self.traces,
            "malformed": self.malformed,
            "errored": self.errored,
            "issues": dict(sorted(self.issues.items())),
            "errors": self.errors,
            "warnings": self.warnings,
            "index": {
                name: {value: (None if at is None else iso(at)) for value, at in sorted(kept.items())}
                for name, kept in self.values.items()
            },
            "index_values_dropped": dict(sorted(self.values_dropped.items())),
            "segments": self.segments,
            "grounded": self.grounded,
            "grounded_rate": self.grounded / self.segments if self.segments else None,
            "zones": {name: self.zones.get(name, 0) for name in ZONE_NAMES},
            "unscored": self.unscored,
            "delta_s_mean": self.delta_s_total / self.delta_s_count if self.delta_s_count else None,
            "hallucinations": self.hallucinations,
            "hallucinating_traces": self.hallucinating_traces,
            "health": {pipeline: tally.to_dict() for pipeline, tally in sorted(self.health.items())},
        }


def drift(windows: list[Window]) -> list[dict[str, Any]]:
    """Every change of index_hash, analyzer or embed_model, between windows and within one.

    Per dated window, in time order, and per field: a value is a change when it is not a value of
    the window before (the dated window before it with traffic) and some other value came before
    it, either in the window before or earlier in this window (first seen earlier; of equal first
    times, the smaller value first). So a re-index inside one window is a change as much as one
    between windows; the first value of a field is not. Each change names the value and when it
    was first seen, and the values before it (`previous`) with theirs (`previous_first_seen`: the
    earliest time each was first seen, in this window or the one before); `within_window` says
    whether a value before it was seen in the same window, i.e. the change happened inside it."""
    out: list[dict[str, Any]] = []
    dated = [w for w in windows if w.start is not None]
    for previous, current in zip([None, *dated], dated):
        for name in INDEX_FIELDS:
            before = previous.values[name] if previous is not None else {}
            now = current.values[name]
            order = sorted(now, key=lambda value: (_time(now[value]), value))
            for i, value in enumerate(order):
                if value in before:
                    continue
                earlier = {v: now[v] for v in order[:i]}
                if not before and not earlier:
                    continue
                seen = {v: _earliest(before.get(v), earlier.get(v)) for v in {*before, *earlier}}
                at = now[value]
                out.append(
                    {
                        "field": name,
                        "value": value,
                        "previous": sorted(seen),
                        "previous_first_seen": {v: (None if t is None else iso(t)) for v, t in sorted(seen.items())},
                        "window": current.key,
                        "first_seen": None if at is None else iso(at),
                        "within_window": bool(earlier),
                    }
                )
    return out


def _time(at: float | None) -> float:
    return -math.inf if at is None else at


def _earliest(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return a if b is None else b
    return min(a, b)
