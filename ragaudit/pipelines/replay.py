"""The replay pipeline: recorded traces, matched to gold runs by (qid, variant, seed).

A run with no recorded trace becomes a `pipeline_error` trace saying so; nothing is invented.
A recording's strings may hold lone surrogates (`"\\ud800"` is valid JSON): they become U+FFFD
here, as for live pipelines, so the run's traces file stays writable.
"""
from __future__ import annotations

import dataclasses
import os

from ragaudit.errors import InputError
from ragaudit.io.jsonl import BadLine
from ragaudit.io.traces import read_traces
from ragaudit.pipelines.base import Request, error_trace, without_surrogates
from ragaudit.types import LiveIndex, RunKey, Trace


class ReplayPipeline:
    def __init__(self, name: str, traces: str | os.PathLike, *, offset_unit: str = "char"):
        self.name, self.path = name, os.fspath(traces)
        self.recorded: dict[RunKey, Trace] = {}
        bad: list[BadLine] = []
        for item in read_traces(self.path, offset_unit=offset_unit):
            if isinstance(item, BadLine):
                bad.append(item)
            else:
                item = without_surrogates(item)
                self.recorded.setdefault(item.key, item)  # the first recording of a run wins
        if bad:
            raise InputError([b.problem for b in bad])
        self._index = next((t.index for t in self.recorded.values() if t.index is not None), None)

    def index_info(self) -> LiveIndex | None:
        return self._index

    def close(self) -> str | None:
        return None

    def run(self, request: Request) -> Trace:
        trace = self.recorded.get(RunKey(request.qid, request.variant, request.seed))
        if trace is None:
            return error_trace(self.name, request, f"no recorded run for qid {request.qid!r} variant "
                               f"{request.variant} seed {request.seed} in {self.path}")
        return dataclasses.replace(trace, config=self.name, file=None, line=None)
