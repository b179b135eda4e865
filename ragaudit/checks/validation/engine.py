"""Runs the registered rules over traces, streaming: one trace in memory at a time."""

from __future__ import annotations

import os
from collections import Counter
from typing import Iterable, Iterator

from ragaudit.checks.validation.registry import RULES, Check, Context, Rule
from ragaudit.checks.validation.spool import Spool
from ragaudit.core.codes import CODES, issue
from ragaudit.core.errors import InputError
from ragaudit.core.types import Issue, Trace
from ragaudit.io.jsonl import BadLine
from ragaudit.io.traces import read_traces

# the checks to run: aborting ones, the rest, and those that still run on an aborted trace
Plan = tuple[tuple[Check, ...], tuple[Check, ...], tuple[Check, ...]]


def _active_rules(ctx: Context) -> tuple[list[Rule], list[Rule]]:
    """(aborting rules, the rest), in registration order, leaving out corpus rules without a corpus."""
    rules = [r for r in RULES if ctx.corpus is not None or not r.needs_corpus]
    return [r for r in rules if r.aborts], [r for r in rules if not r.aborts]


def _plan(ctx: Context) -> Plan:
    """The checks to run: aborting ones, the rest, and those that still run on an aborted trace."""
    aborting, rest = _active_rules(ctx)
    return (
        tuple(r.check for r in aborting),
        tuple(r.check for r in rest),
        # wrong types still explain the failure; nothing else is meaningful for an aborted run
        tuple(r.check for r in rest if r.name == "field_types"),
    )


def validate_trace(trace: Trace, ctx: Context = Context()) -> list[Issue]:
    """Every issue of one trace. Never raises on bad data."""
    return _check(trace, ctx, _plan(ctx))


def validate_traces(traces: Iterable[Trace], ctx: Context = Context()) -> list[Issue]:
    """Every issue of each trace, in order; the checks are chosen once for all of them."""
    plan = _plan(ctx)
    return [found for trace in traces for found in _check(trace, ctx, plan)]


def _check(trace: Trace, ctx: Context, plan: Plan) -> list[Issue]:
    aborting, rest, after_abort = plan
    found: list[Issue] = []
    for check in aborting:
        found.extend(check(trace, ctx))
        if found:
            return [i for check in after_abort for i in check(trace, ctx)] + found
    for check in rest:
        found.extend(check(trace, ctx))
    return found


def malformed(bad: BadLine) -> Issue:
    return issue(
        "malformed_record", bad.message, qid=None, variant=None, seed=None, path=bad.path, file=bad.file, line=bad.line
    )


def bad_line_of(found: Issue) -> BadLine:
    """The BadLine a `malformed_record` issue was made from (the inverse of `malformed`)."""
    return BadLine(found.file or "<trace>", found.line or 0, found.message, found.path)


class Validator:
    """Validates trace files line by line, counting records and issues as it goes.

    `bad_lines` keeps the lines that could not be read as traces (for exit code 3; on disk past
    a thousand, and not at all with `keep_bad_lines=False`); `unreadable` the files
    `check_paths` could not read.
    """

    def __init__(self, ctx: Context = Context(), *, offset_unit: str = "char", keep_bad_lines: bool = True):
        self.ctx = ctx
        self.offset_unit = offset_unit
        self.records = 0
        self.counts: Counter[str] = Counter()
        self.bad_lines = Spool()
        self._keep_bad_lines = keep_bad_lines
        self.unreadable: list[InputError] = []
        self._plan = _plan(ctx)

    def check(self, items: Iterable[Trace | BadLine]) -> Iterator[Issue]:
        ctx, plan, counts = self.ctx, self._plan, self.counts
        for item in items:
            self.records += 1
            if isinstance(item, BadLine):
                if self._keep_bad_lines:
                    self.bad_lines.append(item)
                found = [malformed(item)]
            else:
                found = _check(item, ctx, plan)
            for found_issue in found:
                counts[found_issue.code] += 1
                yield found_issue

    def check_files(self, paths: Iterable[str | os.PathLike[str]]) -> Iterator[Issue]:
        """Issues of each file in turn. Raises InputError at the first file that cannot be read."""
        for path in paths:
            yield from self.check(read_traces(path, offset_unit=self.offset_unit, markers=self.ctx.markers))

    def check_paths(self, paths: Iterable[str | os.PathLike[str]]) -> Iterator[Issue]:
        """Issues of each file in turn, in this process; a file that cannot be read goes to
        `unreadable` and the others are still checked. `ragaudit.checks.validation.shards.check_paths`
        shares large inputs among processes or a Dask cluster with exactly this output."""
        for path in paths:
            try:
                yield from self.check_files([path])
            except InputError as exc:  # this file is lost; the others are still checked
                self.unreadable.append(exc)

    @property
    def errors(self) -> int:
        return sum(n for code, n in self.counts.items() if CODES[code].severity == "error")


def parity_failure(trace: Trace, ctx: Context) -> str | None:
    """The first analyzer_mismatch of a trace, which stops its pipeline (docs/reference.md §5), or None."""
    for found in validate_trace(trace, ctx):
        if found.code == "analyzer_mismatch":
            return f"{trace.qid} v{trace.variant} s{trace.seed}: {found.message}"
    return None


def aborted_pipelines(traces: Iterable[Trace], ctx: Context) -> dict[str, str]:
    """Pipelines stopped by analyzer parity: name -> its first mismatch, in the traces' order."""
    out: dict[str, str] = {}
    for trace in traces:
        name = trace.config or ""
        if name not in out and (failure := parity_failure(trace, ctx)):
            out[name] = failure
    return out
