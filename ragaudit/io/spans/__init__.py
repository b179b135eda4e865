"""Production spans in (docs/reference.md §10): OpenTelemetry / OpenInference spans, Phoenix span exports and
Langfuse observation exports, read as a stream and joined into ragaudit traces.

`read_traces(format, paths)` is the one way in: it yields a `Trace` per OpenTelemetry trace id
that holds a RETRIEVER span, or a `BadLine` for each defective input line (file, line, what was
expected, what was found) and for each trace whose run key is no key or one already taken
(`ragaudit.io.spans.join`), and reading goes on. Spans that came after their trace was written
are counted and described (`late`), for the caller to warn about. Every trace goes through the same `parse_trace`
as a trace file, so absent payload fields are reported by the usual `missing_<field>` codes.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from ragaudit.core.errors import Problem
from ragaudit.core.markers import ALL_FORMS
from ragaudit.core.types import FORMATS, INPUT_FORMATS, SPAN_FORMATS, Trace
from ragaudit.io.jsonl import BadLine
from ragaudit.io.spans.join import DEFAULT_WINDOW, LATE_SHOWN, TraceJoiner

if TYPE_CHECKING:
    from ragaudit.io.spans.record import SpanRecord

    SpanReader = Callable[[str | os.PathLike[str]], Iterator[SpanRecord | BadLine]]  # a span format's reader


class Ingest:
    """The traces of span files as an iterator, counting as it goes: `spans` read, `traces`
    yielded, `skipped` trace ids without a RETRIEVER span, `bad` defective lines, and `late`
    spans (of traces already written: left out, the first LATE_SHOWN described in `late_problems`).

    Every input must open before any is read (InputError otherwise: nothing is read). A file that
    opens but cannot be read as a whole (empty, not parquet) goes to `unreadable` and the other
    files are still read; every trace joined is yielded."""

    def __init__(
        self,
        format: str,
        paths: Iterable[str | os.PathLike[str]],
        *,
        config_name: str | None = None,
        window: int = DEFAULT_WINDOW,
        markers: frozenset[str] = ALL_FORMS,
        period: Callable[[str | None], str] | None = None,
    ):
        from ragaudit.core.errors import UsageError

        if format not in FORMATS:
            raise UsageError(f"expected a span format ({', '.join(FORMATS)}), found {format!r}")
        if type(window) is not int or window < 1:
            raise UsageError(f"The 'window' parameter must be an int in [1, inf). Got {window!r} instead.")
        self.format, self.paths, self.config_name = format, [os.fspath(p) for p in paths], config_name
        self.window, self.markers, self.period = window, markers, period
        self.spans = self.traces = self.bad = 0
        self.with_documents = self.with_answer = 0  # traces whose retrieval holds documents, that answer
        self.unreadable: list[Problem | str] = []
        self._joiner: TraceJoiner | None = None
        self._items = self._generate()

    @property
    def skipped(self) -> int:
        return self._joiner.skipped if self._joiner is not None else 0

    @property
    def late(self) -> int:
        return self._joiner.late_spans if self._joiner is not None else 0

    @property
    def late_problems(self) -> list[Problem]:
        return self._joiner.late if self._joiner is not None else []

    def __iter__(self) -> Iterator[Trace | BadLine]:
        return self

    def __next__(self) -> Trace | BadLine:
        item = next(self._items)
        if isinstance(item, BadLine):
            self.bad += 1
        else:
            self.traces += 1
            self.with_documents += bool(item.retrieved)
            self.with_answer += bool(item.answer is not None and item.answer.text)
        return item

    def _generate(self) -> Iterator[Trace | BadLine]:
        read = _reader(self.format)
        if read is None:
            from ragaudit.io.traces import read_traces as read_trace_lines

            for path in self.paths:
                yield from read_trace_lines(path, markers=self.markers)
            return
        from ragaudit.core.errors import InputError
        from ragaudit.io.jsonfiles import open_input

        for path in self.paths:  # a missing input stops the reading before it starts
            open_input(path).close()
        joiner = self._joiner = TraceJoiner(
            config_name=self.config_name, window=self.window, markers=self.markers, period=self.period
        )
        for path in self.paths:
            try:
                for record in read(path):
                    if isinstance(record, BadLine):
                        yield record
                        continue
                    self.spans += 1
                    ready = joiner.add(record)
                    if ready:
                        yield from ready
            except InputError as exc:  # this file as a whole; the traces of the others still join
                self.unreadable.extend(exc.problems)
        yield from joiner.finish()
        missing = self._nothing_usable()
        if missing:
            self.unreadable.append(Problem(", ".join(self.paths), missing))

    def _nothing_usable(self) -> str | None:
        """What the spans lack when no trace can be audited: no span at all, no retrieval, no
        retrieved document, or no answer in any trace (None when some trace has them)."""
        if self.unreadable or self.bad and not self.traces:
            return None  # already reported, line by line
        if not self.spans:
            return f"expected {self.format} spans, found none"
        if not self.traces:
            return (
                f"expected spans of a retrieval, found {self.spans} spans in {self.skipped} traces and none retrieves "
                "(an OpenInference RETRIEVER span, a GenAI retrieval span, a Haystack retriever component, a "
                "Langfuse RETRIEVER observation)"
            )
        if not self.with_documents:
            return (
                f"expected retrieved documents, found {self.traces} traces whose retrieval holds none (Haystack: "
                "content tracing off, set HAYSTACK_CONTENT_TRACING_ENABLED=true; GenAI: gen_ai.retrieval.documents is "
                "opt-in; Langfuse: the observations' output left out of the export)"
            )
        if not self.with_answer:
            return (
                f"expected an answer, found {self.traces} traces and none answers (no output.value, LLM output "
                "message, Haystack pipeline output_data or Langfuse output)"
            )
        return None


def _reader(format: str) -> SpanReader | None:
    """The reader of a span format (`ragaudit.core.types.INPUT_FORMATS`), imported when first asked for;
    None for ragaudit's own traces."""
    reader = INPUT_FORMATS[format].reader
    if reader is None:
        return None
    module, _, function = reader.partition(":")
    read: SpanReader = getattr(importlib.import_module(module), function)
    return read


def read_traces(
    format: str,
    paths: Iterable[str | os.PathLike[str]],
    *,
    config_name: str | None = None,
    window: int = DEFAULT_WINDOW,
    markers: frozenset[str] = ALL_FORMS,
    period: Callable[[str | None], str] | None = None,
) -> Ingest:
    """The traces of `paths` in `format` ("traces": ragaudit's own JSONL; "otlp", "phoenix",
    "langfuse": production spans joined per docs/reference.md §10, see `ragaudit.io.spans.join`), one at a time,
    with a BadLine for each defective line. For spans, `config_name` replaces the service name as
    each trace's `config`, and at most `window` spans of unfinished traces are held; `markers`: the
    marker forms answers cite with; `period`, given, names the period of a trace's time that its
    run key holds besides (pipeline, qid, variant, seed), as audit-log's window. The iterator counts
    what it read (`Ingest`), and keeps what it could not use: `unreadable` files and `late` spans.
    Raises UsageError for an unknown format and InputError when an input does not open (before
    anything is read)."""
    return Ingest(format, paths, config_name=config_name, window=window, markers=markers, period=period)


__all__ = ["FORMATS", "LATE_SHOWN", "SPAN_FORMATS", "Ingest", "read_traces"]
