"""Runs the registered rules over traces, streaming: one trace in memory at a time."""
from __future__ import annotations

import os
from collections import Counter
from typing import Iterable, Iterator

from ragaudit.io.jsonl import BadLine
from ragaudit.io.traces import read_traces
from ragaudit.types import Issue, Trace
from ragaudit.validate.codes import CODES, issue
from ragaudit.validate.registry import RULES, Context, Rule


def _active_rules(ctx: Context) -> tuple[list[Rule], list[Rule]]:
    """(aborting rules, the rest), in registration order, leaving out corpus rules without a corpus."""
    rules = [r for r in RULES if ctx.corpus is not None or not r.needs_corpus]
    return [r for r in rules if r.aborts], [r for r in rules if not r.aborts]


def validate_trace(trace: Trace, ctx: Context = Context()) -> list[Issue]:
    """Every issue of one trace. Never raises on bad data."""
    aborting, rest = _active_rules(ctx)
    return _check(trace, ctx, aborting, rest)


def _check(trace: Trace, ctx: Context, aborting: list[Rule], rest: list[Rule]) -> list[Issue]:
    found: list[Issue] = []
    for r in aborting:
        found.extend(r.check(trace, ctx))
        if found:
            break
    if found:
        # wrong types still explain the failure; nothing else is meaningful for an aborted run
        return [i for r in rest if r.name == "field_types" for i in r.check(trace, ctx)] + found
    for r in rest:
        found.extend(r.check(trace, ctx))
    return found


def malformed(bad: BadLine) -> Issue:
    return issue("malformed_record", bad.message, qid=None, variant=None, seed=None,
                 path=bad.path, file=bad.file, line=bad.line)


class Validator:
    """Validates trace files line by line, counting records and issues as it goes.

    `bad_lines` keeps the lines that could not be read as traces (for exit code 3).
    """

    def __init__(self, ctx: Context = Context(), *, offset_unit: str = "char"):
        self.ctx = ctx
        self.offset_unit = offset_unit
        self.records = 0
        self.counts: Counter[str] = Counter()
        self.bad_lines: list[BadLine] = []
        self._aborting, self._rest = _active_rules(ctx)

    def check(self, items: Iterable[Trace | BadLine]) -> Iterator[Issue]:
        for item in items:
            self.records += 1
            if isinstance(item, BadLine):
                self.bad_lines.append(item)
                found = [malformed(item)]
            else:
                found = _check(item, self.ctx, self._aborting, self._rest)
            for found_issue in found:
                self.counts[found_issue.code] += 1
                yield found_issue

    def check_files(self, paths: Iterable[str | os.PathLike]) -> Iterator[Issue]:
        for path in paths:
            yield from self.check(read_traces(path, offset_unit=self.offset_unit))

    @property
    def errors(self) -> int:
        return sum(n for code, n in self.counts.items() if CODES[code].severity == "error")


def parity_failure(trace: Trace, ctx: Context) -> str | None:
    """The first analyzer_mismatch of a trace, which stops its pipeline (SPEC §5), or None."""
    for found in validate_trace(trace, ctx):
        if found.code == "analyzer_mismatch":
            return f"{trace.qid} v{trace.variant} s{trace.seed}: {found.message}"
    return None


def aborted_pipelines(traces: Iterable[Trace], ctx: Context) -> dict[str, str]:
    """Pipelines stopped by analyzer parity: name -> its first mismatch, in the traces' order."""
    out: dict[str, str] = {}
    for trace in traces:
        if trace.config not in out and (failure := parity_failure(trace, ctx)):
            out[trace.config] = failure
    return out
