"""What ragaudit is doing, and where the time went.

Library code wraps each phase that may take a while in `phase(name, total)` and counts its work
with `advance(n)`; it never prints. The command line chooses once (`configure`) how phases show,
always on stderr, so that stdout carries only results:

* on a terminal (and `CI` unset): a live display (rich), one row per running phase with its
  bar, count, rate, ETA and elapsed time; a phase that took a second or more leaves a line;
* in CI (`CI` set): timestamped lines such as
  `2026-11-24T16:40:01Z  indexing dense-k5 › embedding: 1,200/3,400 texts, 240 texts/s, ETA 9 s`,
  a start line once a phase has run for a second, a progress line at most every PERIOD_S
  seconds while its count moves, and an end line; a phase under a second says nothing;
* elsewhere (a pipe, a log file, `CI` unset): nothing, so what a script reads from stderr never
  depends on how fast the machine was; verbose asks for the timestamped lines there too;
* quiet: nothing; verbose: short phases too. Unconfigured (ragaudit used as a library): nothing.

Time: each phase's seconds are booked to its category (`counts_as`, else that of the phase it
runs in, else its own name), less the time of the phases nested in it, so the categories add up
to at most the wall time (`time_spent`, `breakdown`). Only the main thread books time: a phase
on a worker thread shows, but its time is part of what the main thread was doing meanwhile.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable, Iterator

from ragaudit.core.progress_rate import Eta, rate_text

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.progress import Progress

PERIOD_S = 5.0  # between two progress lines of one phase, when not on a terminal
SHOWN_AFTER_S = 1.0  # a phase shorter than this shows only with verbose
TICK_S = 0.25  # how often running phases are looked at
ARROW = " › "  # between a phase and the phase it runs in
YOUNG_OBJECTS = 1_000_000  # net new objects between two collections of the youngest generation (start_command)

_lock = threading.RLock()
_settings: dict[str, Any] = {"quiet": True, "verbose": False, "stream": None}
_display: Any = None  # _Lines, _Live or _Nothing, made at the first phase after `configure`
_open: list[Phase] = []
_booked: dict[str, float] = {}  # category -> seconds, in the order the categories first ran
_clock = [time.monotonic()]  # when the command started
_local = threading.local()


def configure(*, quiet: bool = False, verbose: bool = False, stream: IO[str] | None = None) -> None:
    """How phases show from now on: on `stream` (default: stderr at the first phase)."""
    close()
    with _lock:
        _settings.update(quiet=quiet, verbose=verbose, stream=stream)


def reset() -> None:
    """A new command: forget the time booked so far and restart the clock."""
    with _lock:
        _booked.clear()
        _clock[0] = time.monotonic()


def start_command(*, quiet: bool = False, verbose: bool = False) -> None:
    """A `ragaudit` command begins: its progress shows as `configure` says, its clock starts, and
    the process is set up for a command that owns its terminal."""
    import gc

    configure(quiet=quiet, verbose=verbose)
    reset()
    # The command owns its terminal: the model libraries' download bars and warnings stay out of it.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    # pyarrow's allocator (mimalloc, which reads this when pyarrow is first imported) hands freed
    # pages back at once: reading runs.parquet back leaves no plateau of memory kept for reuse.
    os.environ.setdefault("MIMALLOC_PURGE_DELAY", "0")
    # Audits allocate millions of short-lived objects and few cycles. A run holds a few batches of
    # parsed traces at a time (some 300,000 objects on two workers), freed by reference counting
    # once scored; the youngest generation is collected only once the objects alive have grown by
    # more than that, so that the collector does not walk every trace once on its way (a tenth of
    # this process's time in a replay). Cycles, rare, still go within a million objects.
    gc.set_threshold(YOUNG_OBJECTS, 50, 100)


def close() -> None:
    """End every phase still open (a command that stopped early), stop the display, and show
    nothing more until configured again."""
    global _display
    with _lock:
        for left in list(_open):
            left.failed = True  # left open: the command stopped before it ended
            left.end()
        if _display is not None:
            _display.close()
        _display = None
        _settings.update(quiet=True, verbose=False, stream=None)


def elapsed() -> float:
    """Seconds since `reset`."""
    return time.monotonic() - _clock[0]


def time_spent() -> dict[str, float]:
    """Seconds per category, in the order the categories first ran."""
    with _lock:
        return dict(_booked)


def breakdown(total: float) -> str:
    """`model load 3.1 s, indexing 12.0 s, ..., other 0.4 s` out of `total` seconds."""
    spent = time_spent()
    other = total - sum(spent.values())
    if other > 0:
        spent["other"] = other
    parts = [(name, seconds) for name, seconds in spent.items() if seconds >= 0.05]
    if not parts and spent:  # a quick run: still say where most of it went
        parts = [max(spent.items(), key=lambda item: item[1])]
    return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in parts)


def note(text: str) -> None:
    """Debug detail (cache figures, the plan): shown only when verbose."""
    with _lock:
        if not _settings["verbose"] or _settings["quiet"]:
            return
        _display_for_now().note(text)


def _stack() -> list[_Frame]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


@dataclass
class _Frame:
    phase: Phase
    category: str
    started: float
    nested: float = 0.0  # seconds of the frames nested in this one


class Phase:
    """A running phase: `advance(n)` counts work done (from one thread)."""

    def __init__(
        self,
        name: str,
        total: int | None = None,
        *,
        unit: str = "",
        counts_as: str | None = None,
        count: Callable[[], int] | None = None,
        done: int = 0,
        parent: Phase | None = None,
    ):
        self.name, self.total, self.unit, self.counts_as, self.parent = name, total, unit, counts_as, parent
        self.path: str = f"{parent.path}{ARROW}{name}" if parent else name
        self.done = self.first = done  # `first`: done before it started (a resumed run), left out of rates
        self._count = count
        self.started, self.wall = time.monotonic(), time.time()
        self.seconds = 0.0  # time spent in its timed slices
        self.paused = 0.0  # of which in nested phases of other categories (indexing within runs): not in rates
        self.pausing_since: float | None = None  # when the nested phase running now started
        self.failed = self.ended = False
        self.said = 0.0  # when it last wrote a line (0: not yet)
        self.said_count = 0
        self.due = math.inf  # when advance() should have the display look at it again
        self.eta = Eta()
        self.moved = self.started  # when `advance` last counted
        self.task: Any = None  # its row in the live display

    @property
    def count(self) -> int:
        return self._count() if self._count is not None else self.done

    def advance(self, n: int = 1) -> None:
        self.done += n
        self.moved = now = time.monotonic()
        if now >= self.due:
            with _lock:
                if _display is not None:
                    _display.look(self, time.monotonic())

    @contextmanager
    def timed(self) -> Iterator[Phase]:
        """A slice of this phase's work: its time is booked (a slice within a slice counts once)."""
        stack = _stack()
        if stack and stack[-1].phase is self:
            yield self
            return
        category = self.counts_as or (stack[-1].category if stack else self.name)
        booking = threading.current_thread() is threading.main_thread()
        if booking:
            with _lock:
                _booked.setdefault(category, 0.0)
        outer = stack[-1] if stack else None
        pausing = self.parent if outer and self.parent is outer.phase and category != outer.category else None
        frame = _Frame(self, category, time.monotonic())
        if pausing is not None:
            pausing.pausing_since = frame.started
        stack.append(frame)
        try:
            yield self
        finally:
            stack.pop()
            seconds = time.monotonic() - frame.started
            self.seconds += seconds
            if outer is not None:
                outer.nested += seconds
            if pausing is not None:
                pausing.paused += seconds
                pausing.pausing_since = None
            if booking:
                with _lock:
                    _booked[category] = _booked.get(category, 0.0) + seconds - frame.nested

    def end(self) -> None:
        with _lock:
            if self.ended:
                return
            self.ended = True
            _open.remove(self)
            if _display is not None:
                _display.ended(self, time.monotonic())

    def rate(self, now: float) -> float | None:
        """Work a second: while open, over its life so far; once ended, over its timed slices;
        either way without the time of nested phases of other categories."""
        running = self.seconds if self.ended else now - self.started
        running -= self.paused + (max(0.0, now - self.pausing_since) if self.pausing_since is not None else 0.0)
        moved = self.count - self.first
        return moved / running if moved > 0 and running > 0 else None

    def counted(self, now: float) -> str:
        """`1,200/3,400 texts, 240 texts/s, ETA 9 s` (`ragaudit.core.progress_rate`: a slow phase's rate per
        minute or hour, its ETA smoothed across the steps of its count); "" when nothing was counted."""
        count, unit = self.count, self.unit or "items"
        if not count and not self.total:
            return ""
        parts = [f"{count:,}/{self.total:,} {unit}" if self.total else f"{count:,} {unit}"]
        rate = self.rate(now)
        if rate is not None:
            parts.append(rate_text(rate, unit))
            step = self.moved if self._count is None else now  # when the count last moved, as near as known
            left = None
            if self.total and not self.ended:
                left = self.eta.seconds(now, count, self.total, rate, step, self.rate(step) or rate)
            if left is not None:
                parts.append(f"ETA {_duration(left)}")
        return ", ".join(parts)


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _display_for_now() -> Any:
    """The display of the current configuration (made at first use); call with the lock held."""
    global _display
    if _display is None:
        stream = _settings["stream"] or sys.stderr
        terminal = bool(getattr(stream, "isatty", None) and stream.isatty())
        ci = bool(os.environ.get("CI"))
        if terminal and not ci:
            _display = _Live(stream, _settings["verbose"])
        elif ci or _settings["verbose"]:
            _display = _Lines(stream, _settings["verbose"])
        else:
            _display = _Nothing()
    return _display


def _shown(new: Phase) -> Phase:
    with _lock:
        _open.append(new)
        if not _settings["quiet"]:
            _display_for_now().opened(new, time.monotonic())
    return new


def start(name: str, total: int | None = None, *, unit: str = "", counts_as: str | None = None) -> Phase:
    """A phase shown until its `end()`, whose time counts only inside its `timed()` slices: for
    work done in slices between other phases (batches scored as the runs come in)."""
    return _shown(Phase(name, total, unit=unit, counts_as=counts_as))


@contextmanager
def phase(
    name: str,
    total: int | None = None,
    *,
    unit: str = "",
    counts_as: str | None = None,
    count: Callable[[], int] | None = None,
    done: int = 0,
) -> Iterator[Phase]:
    """Show and time a phase. Its time is booked under `counts_as`, else under the category of
    the phase it runs in, else under `name`. `count`, when given, is read for the progress shown
    (for loops that count anyway) instead of `advance`; `done` is work already done before (a
    resumed run), counted but left out of rates."""
    stack = _stack()
    parent = stack[-1].phase if stack else None
    shown = _shown(Phase(name, total, unit=unit, counts_as=counts_as, count=count, done=done, parent=parent))
    try:
        with shown.timed():
            yield shown
    except BaseException:
        shown.failed = True
        raise
    finally:
        shown.end()


def _stamp(at: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


class _Nothing:
    """Where progress is not wanted: a pipe or a file outside CI."""

    def opened(self, shown: Phase, now: float) -> None: ...

    def look(self, shown: Phase, now: float) -> None: ...

    def ended(self, shown: Phase, now: float) -> None: ...

    def note(self, text: str) -> None: ...

    def close(self) -> None: ...


class _Lines:
    """Timestamped lines, for logs: a ticker thread looks at the running phases, so a phase that
    counts nothing still says when it started."""

    def __init__(self, stream: IO[str], verbose: bool):
        self.stream, self.verbose = stream, verbose
        self.ticker: threading.Thread | None = None
        self.stopped = threading.Event()

    def write(self, text: str, at: float | None = None) -> None:
        try:
            self.stream.write(f"{_stamp(at)}  {text}\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr must not stop the work
            pass

    def note(self, text: str) -> None:
        self.write(text)

    def _start_line(self, shown: Phase, now: float) -> None:
        total = f" ({shown.total:,} {shown.unit or 'items'})" if shown.total else ""
        self.write(f"{shown.path}: started{total}", at=shown.wall)
        shown.said, shown.said_count = now, shown.count

    def opened(self, shown: Phase, now: float) -> None:
        self.look(shown, now)
        if self.ticker is None:
            self.ticker = threading.Thread(target=self._tick, name="ragaudit-progress", daemon=True)
            self.ticker.start()

    def look(self, shown: Phase, now: float) -> None:
        if not shown.said:
            if self.verbose or now - shown.started >= SHOWN_AFTER_S:
                self._start_line(shown, now)
        elif now - shown.said >= PERIOD_S and shown.count not in (shown.said_count, shown.total):
            self.write(f"{shown.path}: {shown.counted(now)}")
            shown.said, shown.said_count = now, shown.count
        shown.due = shown.said + PERIOD_S if shown.said else shown.started + SHOWN_AFTER_S

    def ended(self, shown: Phase, now: float) -> None:
        if not shown.said and not (self.verbose or now - shown.started >= SHOWN_AFTER_S):
            return
        if not shown.said:
            self._start_line(shown, now)
        how = "stopped after" if shown.failed else "done in"
        counted = shown.counted(now)
        self.write(f"{shown.path}: {how} {shown.seconds:.1f} s" + (f" ({counted})" if counted else ""))

    def _tick(self) -> None:
        while not self.stopped.wait(TICK_S):
            with _lock:
                now = time.monotonic()
                for shown in list(_open):
                    if now >= shown.due:
                        self.look(shown, now)

    def close(self) -> None:
        self.stopped.set()


class _Live:
    """A live display on a terminal: one row per running phase, redrawn by rich's own thread."""

    def __init__(self, stream: IO[str], verbose: bool):
        from rich.console import Console

        self.stream, self.verbose = stream, verbose
        self.console = Console(file=stream, force_terminal=True, force_interactive=True, highlight=False)
        self.progress: Any = None

    def _make(self) -> Progress:
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        display = self

        class Rows(Progress):
            def get_renderables(self) -> Iterable[RenderableType]:
                display.sync()
                return super().get_renderables()

        return Rows(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            BarColumn(bar_width=24),
            TextColumn("{task.fields[detail]}", markup=False),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
            redirect_stdout=False,  # stdout carries results, never the display
            redirect_stderr=self.stream is sys.stderr,  # other messages print above the display
            refresh_per_second=4,
        )

    def opened(self, shown: Phase, now: float) -> None:
        if self.progress is None:
            self.progress = self._make()
            self.progress.start()
        shown.task = self.progress.add_task(shown.path, total=shown.total, visible=False, detail="")

    def sync(self) -> None:
        """Bring every row up to date (rich's refresh thread calls this: it takes no lock of ours)."""
        now = time.monotonic()
        for shown in tuple(_open):
            if shown.task is not None:
                self.progress.update(
                    shown.task,
                    completed=shown.count,
                    visible=self.verbose or now - shown.started >= SHOWN_AFTER_S,
                    detail=shown.counted(now),
                )

    def look(self, shown: Phase, now: float) -> None:
        pass  # rows are redrawn by rich's thread

    def note(self, text: str) -> None:
        from rich.text import Text

        self.console.print(Text(text, style="dim"))

    def ended(self, shown: Phase, now: float) -> None:
        if shown.task is None or self.progress is None:
            return
        self.progress.remove_task(shown.task)
        if self.verbose or now - shown.started >= SHOWN_AFTER_S:
            from rich.text import Text

            counted = shown.counted(now)
            mark = "✗" if shown.failed else "✓"
            self.console.print(
                Text(f"{mark} {shown.path}  {shown.seconds:.1f} s" + (f"  ({counted})" if counted else ""), style="dim")
            )
        shown.task = None
        if not any(p.task is not None for p in _open):
            self.close()

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
