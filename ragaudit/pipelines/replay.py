"""The replay pipeline: recorded traces, matched to gold runs by (qid, variant, seed).

The runner streams the recording (`recorded()`), one trace in memory at a time, in the
recording's order; a planned run with no recorded trace becomes a `pipeline_error` trace saying
so (`run()`); nothing is invented. The first recording of a run wins. A line that is not a trace
is an input error naming every such line.

A recording of production spans (`format = "otlp" | "phoenix" | "langfuse"`) is joined into
traces as `ragaudit ingest` joins it (docs/reference.md §10); its runs match gold runs through the spans'
`ragaudit.qid` / `ragaudit.variant` / `ragaudit.seed` attributes.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Iterator

from ragaudit.core.errors import InputError, UsageError
from ragaudit.core.markers import ALL_FORMS
from ragaudit.core.types import LiveIndex, Trace
from ragaudit.io.stream import whole
from ragaudit.io.traces import read_traces as read_recording
from ragaudit.pipelines.base import Excluded, Request, error_trace

if TYPE_CHECKING:
    from ragaudit.io.config import PipelineConfig
    from ragaudit.pipelines.inputs import Inputs


class ReplayPipeline:
    streams = True  # the runner reads the recording as a stream instead of asking run by run

    def __init__(
        self,
        name: str,
        traces: str | os.PathLike[str],
        *,
        offset_unit: str = "char",
        markers: frozenset[str] = ALL_FORMS,
        format: str = "traces",
    ):
        self.name, self.path, self.offset_unit, self.format = name, os.fspath(traces), offset_unit, format
        self.markers = markers
        if not os.path.isfile(self.path):
            raise InputError(f"{self.path}: no such recording (replay pipeline {name!r})")
        self._index: LiveIndex | None = None

    def recorded(self) -> Iterator[Trace]:
        reader = None
        if self.format == "traces":  # read as this pipeline's runs, without a copy of each
            traces = whole(
                read_recording(self.path, offset_unit=self.offset_unit, markers=self.markers, replayed_as=self.name)
            )
        else:
            from ragaudit.io.spans import read_traces

            reader = read_traces(self.format, [self.path], config_name=self.name, markers=self.markers)
            traces = whole(reader)
        for trace in traces:
            if self._index is None and trace.index is not None:
                self._index = trace.index
            yield trace if reader is None else dataclasses.replace(trace, config=self.name, file=None, line=None)
        if reader is not None and (reader.unreadable or reader.late):  # a recording must be whole
            raise InputError([*reader.unreadable, *reader.late_problems])

    def index_info(self) -> LiveIndex | None:
        return self._index

    def close(self) -> str | None:
        return None

    def run(self, request: Request) -> Trace:
        return error_trace(
            self.name,
            request,
            f"no recorded run for qid {request.qid!r} variant {request.variant} seed {request.seed} in {self.path}",
        )


def build(spec: PipelineConfig, inputs: Inputs, exclude: Excluded = ()) -> ReplayPipeline:
    """The replay pipeline of `spec` (a recording has no index to leave sections out of)."""
    o, config = spec.options, inputs.config
    if o["traces"] is None:
        raise UsageError(f"pipeline {spec.name!r}: a replay pipeline needs `traces`")
    return ReplayPipeline(
        spec.name,
        o["traces"],
        offset_unit=config.audit.offset_unit,
        markers=config.audit.marker_forms,
        format=o["format"],
    )
