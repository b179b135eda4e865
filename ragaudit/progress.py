"""What ragaudit is doing, and where the time went.

Library code wraps each phase that may take a while in `phase(name, total)` and calls
`advance(n)` as it goes; it never prints. The CLI chooses once (`configure`) how phases show on
stderr:

* on a terminal: a live progress bar per phase (tqdm), gone when the phase ends;
* elsewhere (a pipe, CI): plain timestamped lines, `2026-11-24T16:40:01Z  embedding: 1200/3400`:
  one when a phase has run for a second, one every PERIOD_S seconds while it runs, one when it
  ends — a phase shorter than a second says nothing, so logs are not flooded;
* `quiet`: nothing; `verbose`: lines for short phases too.

Every phase's time is summed by name (`timings()`), for the "where the time went" line.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import IO, Any, Iterator

PERIOD_S = 10.0  # between progress lines of a long phase, when not on a terminal
SHOWN_AFTER_S = 1.0

_lock = threading.Lock()
_settings: dict[str, Any] = {"quiet": False, "verbose": False, "stream": None}
_timings: dict[str, float] = {}


def configure(*, quiet: bool = False, verbose: bool = False, stream: IO[str] | None = None) -> None:
    _settings.update(quiet=quiet, verbose=verbose, stream=stream)


def reset() -> None:
    """Forget the phases timed so far (a new command)."""
    with _lock:
        _timings.clear()


def timings() -> dict[str, float]:
    """Seconds per phase name, in the order the phases first ran."""
    with _lock:
        return dict(_timings)


def where_the_time_went(names: list[str] | None = None) -> str:
    """`model load 3.1 s, indexing 12.0 s, ...` for the phases that took a tenth of a second or more."""
    spent = timings()
    shown = [(n, s) for n, s in spent.items() if (names is None or n in names) and s >= 0.1]
    return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in shown)


def _stream() -> IO[str]:
    stream: IO[str] = _settings["stream"] or sys.stderr
    return stream


def _live(stream: IO[str]) -> bool:
    return hasattr(stream, "isatty") and stream.isatty() and not os.environ.get("CI")


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Phase:
    """One running phase; `advance(n)` counts work done."""

    def __init__(self, name: str, total: int | None, unit: str):
        self.name, self.total, self.unit = name, total, unit
        self.done = 0
        self.started = time.monotonic()
        self._said = 0.0  # when the last line was written (0: none yet)
        self._bar = None
        stream = _stream()
        self._silent = _settings["quiet"]
        if not self._silent and _live(stream):
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=name, unit=unit or "it", file=stream, leave=False, delay=SHOWN_AFTER_S)
        elif not self._silent and _settings["verbose"]:
            self._line("started")

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self._silent:
            return
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.monotonic()
        running = now - self.started
        if running >= SHOWN_AFTER_S and (not self._said or now - self._said >= PERIOD_S):
            self._line(self._count())

    def _count(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.done:,}/{self.total:,}{unit}" if self.total is not None else f"{self.done:,}{unit}"

    def _line(self, text: str) -> None:
        self._said = time.monotonic()
        stream = _stream()
        stream.write(f"{_stamp()}  {self.name}: {text}\n")
        stream.flush()

    def end(self) -> None:
        seconds = time.monotonic() - self.started
        with _lock:
            _timings[self.name] = _timings.get(self.name, 0.0) + seconds
        if self._bar is not None:
            self._bar.close()
        elif not self._silent and (seconds >= SHOWN_AFTER_S or _settings["verbose"]):
            counted = f" ({self._count()})" if self.done else ""
            self._line(f"done in {seconds:.1f} s{counted}")


@contextmanager
def phase(name: str, total: int | None = None, unit: str = "") -> Iterator[Phase]:
    """Time and show a phase; phases of the same name add up in `timings()`."""
    running = Phase(name, total, unit)
    try:
        yield running
    finally:
        running.end()
