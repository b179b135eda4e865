"""Production spans in (SPEC §10): OpenTelemetry / OpenInference spans, Phoenix span exports and
Langfuse observation exports, read as a stream and joined into ragaudit traces.

`read_traces(format, paths)` is the one way in: it yields a `Trace` per OpenTelemetry trace id
that holds a RETRIEVER span, or a `BadLine` for each defective input line (file, line, what was
expected, what was found), and reading goes on. Every trace goes through the same `parse_trace`
as a trace file, so absent payload fields are reported by the usual `missing_<field>` codes.
"""

from __future__ import annotations

import os
from typing import Iterable, Iterator

from ragaudit.io.jsonl import BadLine
from ragaudit.spans.join import DEFAULT_WINDOW, TraceJoiner
from ragaudit.types import Trace

FORMATS = ("traces", "otlp", "phoenix", "langfuse")
SPAN_FORMATS = FORMATS[1:]


class Ingest:
    """The traces of span files as an iterator, counting as it goes: `spans` read, `traces`
    yielded, `skipped` trace ids without a RETRIEVER span and `bad` defective lines."""

    def __init__(
        self,
        format: str,
        paths: Iterable[str | os.PathLike],
        *,
        config_name: str | None = None,
        window: int = DEFAULT_WINDOW,
    ):
        from ragaudit.errors import UsageError

        if format not in FORMATS:
            raise UsageError(f"expected a span format ({', '.join(FORMATS)}), found {format!r}")
        if type(window) is not int or window < 1:
            raise UsageError(f"The 'window' parameter must be an int in [1, inf). Got {window!r} instead.")
        self.format, self.paths, self.config_name = format, [os.fspath(p) for p in paths], config_name
        self.window = window
        self.spans = self.traces = self.bad = 0
        self._joiner: TraceJoiner | None = None
        self._items = self._generate()

    @property
    def skipped(self) -> int:
        return self._joiner.skipped if self._joiner is not None else 0

    def __iter__(self) -> Iterator[Trace | BadLine]:
        return self

    def __next__(self) -> Trace | BadLine:
        item = next(self._items)
        if isinstance(item, BadLine):
            self.bad += 1
        else:
            self.traces += 1
        return item

    def _generate(self) -> Iterator[Trace | BadLine]:
        if self.format == "traces":
            from ragaudit.io.traces import read_traces as read_trace_lines

            for path in self.paths:
                yield from read_trace_lines(path)
            return
        read, ends_first = _reader(self.format)
        joiner = self._joiner = TraceJoiner(config_name=self.config_name, window=self.window, flush_on_root=ends_first)
        for path in self.paths:
            for record in read(path):
                if isinstance(record, BadLine):
                    yield record
                    continue
                self.spans += 1
                ready = joiner.add(record)
                if ready:
                    yield from ready
        yield from joiner.finish()


def _reader(format: str):
    """The reader of a span format, and whether its spans come in the order they ended (so that a
    root span closes its trace)."""
    if format == "otlp":
        from ragaudit.spans.otlp import read_otlp

        return read_otlp, True
    if format == "phoenix":
        from ragaudit.spans.phoenix import read_phoenix

        return read_phoenix, False
    from ragaudit.spans.langfuse import read_langfuse

    return read_langfuse, False


def read_traces(
    format: str,
    paths: Iterable[str | os.PathLike],
    *,
    config_name: str | None = None,
    window: int = DEFAULT_WINDOW,
) -> Iterator[Trace | BadLine]:
    """The traces of `paths` in `format` ("traces": ragaudit's own JSONL; "otlp", "phoenix",
    "langfuse": production spans joined per SPEC §10, see `ragaudit.spans.join`), one at a time,
    with a BadLine for each defective line. For spans, `config_name` replaces the service name as
    each trace's `config`, and at most `window` spans of unfinished traces are held. The iterator counts
    what it read (`Ingest`). Raises UsageError for an unknown format and InputError when a file
    cannot be read."""
    return Ingest(format, paths, config_name=config_name, window=window)


__all__ = ["FORMATS", "SPAN_FORMATS", "Ingest", "read_traces"]
