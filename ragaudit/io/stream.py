"""Reading a run's stored traces as a stream: one trace in memory at a time."""

from __future__ import annotations

import os
from typing import Iterable, Iterator

from ragaudit.core.errors import InputError
from ragaudit.core.markers import ALL_FORMS
from ragaudit.core.types import Trace
from ragaudit.io.jsonl import BadLine
from ragaudit.io.traces import read_traces


def stream_trace_file(
    path: str | os.PathLike[str], *, offset_unit: str = "char", markers: frozenset[str] = ALL_FORMS
) -> Iterator[Trace]:
    """The traces of a file that must be whole (a run directory's `traces.jsonl`), one at a time.
    A line that is not a trace is an input error naming every such line: after the first one no
    trace is handed on (nothing should be built from a damaged file), but every line is read so
    the error lists them all."""
    return whole(read_traces(path, offset_unit=offset_unit, markers=markers))


def read_trace_file(
    path: str | os.PathLike[str], *, offset_unit: str = "char", markers: frozenset[str] = ALL_FORMS
) -> list[Trace]:
    """Every trace of a file that must be whole; a line that is not a trace is an input error
    naming every such line."""
    return list(stream_trace_file(path, offset_unit=offset_unit, markers=markers))


def whole(items: Iterable[Trace | BadLine]) -> Iterator[Trace]:
    """The traces of a recording that must be whole: after the first BadLine no trace is handed
    on, and the end raises InputError naming every one."""
    bad: list[BadLine] = []
    for item in items:
        if isinstance(item, BadLine):
            bad.append(item)
        elif not bad:
            yield item
    if bad:
        raise InputError([b.problem for b in bad])
