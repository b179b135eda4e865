"""Validating large inputs on several processes with exactly the output of one.

The inputs are cut into jobs: a large file into byte ranges (each range holds the lines that
start in it, so a cut never splits a line), runs of small files into one job each. Worker
processes validate jobs with the same Context, write each job's issues to a spool file and send
back what the parent needs to stitch the ranges together: records, lines and issues per piece,
and the problems that made a file unreadable. The parent emits the jobs in input order, turning
line numbers within a range into line numbers within the file, so issues, their order, counts
and exit codes are those of the sequential run. Memory stays flat: jobs are dispatched only a
few ahead of the one being emitted, and issues stream from disk.

The processes are those of `ragaudit.core.execution.Processes` (or a cluster's, through
`ragaudit.auditing.executors.DaskClient`): a job whose worker dies is given to another, and a worker whose
parent dies exits.
"""

from __future__ import annotations

import os
import pickle
import shutil
import stat
import tempfile
import traceback
from concurrent.futures import Future
from dataclasses import dataclass, fields, replace
from itertools import islice
from operator import attrgetter
from typing import Any, Generator, Iterable, Iterator, Sequence

from ragaudit.checks.validation.engine import Validator, bad_line_of
from ragaudit.checks.validation.registry import Context
from ragaudit.core.errors import InputError, Problem, RagauditError
from ragaudit.core.execution import (
    ClusterExecutor,
    Processes,
    RemoteTraceback,
    WorkerDied,
    map_ordered,
    remote_traceback,
)
from ragaudit.core.types import Issue
from ragaudit.io.jsonfiles import no_records
from ragaudit.io.traces import trace_lines, traces_in

MIN_BYTES = 32 << 20  # below this much input, starting workers costs more than they save (measured)
MIN_JOB_BYTES = 4 << 20
MAX_JOB_BYTES = 16 << 20  # small enough that the last job leaves no core idle for long
JOBS_PER_WORKER = 4  # ... and enough jobs that uneven ones even out
AHEAD_PER_WORKER = 3  # jobs dispatched beyond the one being emitted, per worker
CHUNK = 512  # issues per pickled chunk of a spool file

_ISSUE_FIELDS = tuple(f.name for f in fields(Issue))
_LINE = _ISSUE_FIELDS.index("line")
_issue_values = attrgetter(*_ISSUE_FIELDS)
IssueValues = tuple[Any, ...]  # an Issue's fields in order, as a spool file holds it


@dataclass(frozen=True)
class Piece:
    """A whole file (`whole`), or the lines starting in bytes [start, end) of input `file`
    (its position in the input list; `end=None`: to the end of the file)."""

    path: str
    file: int
    whole: bool = True
    start: int = 0
    end: int | None = None
    last: bool = True  # the file's last range


@dataclass(frozen=True)
class Job:
    index: int
    pieces: tuple[Piece, ...]
    local: bool = False  # not a regular file (a pipe, a missing path): read by the parent, in turn


@dataclass(frozen=True)
class PieceResult:
    records: int
    lines: int
    issues: int
    problems: tuple[Problem | str, ...] = ()  # why the file could not be read, when it could not


# a job's results, and its issues when they come back with them (None: in the spool folder)
JobOutcome = tuple[list[PieceResult], list[IssueValues] | None]


def plan(
    paths: list[str], *, workers: int, min_bytes: int | None = None, job_bytes: int | None = None
) -> list[Job] | None:
    """The jobs for these inputs, in order, or None when they are too small to share out
    (`min_bytes`, default MIN_BYTES). Jobs are about `job_bytes` long (default: the input shared
    in JOBS_PER_WORKER jobs a worker, within MIN_JOB_BYTES and MAX_JOB_BYTES)."""
    sizes = [_regular_size(path) for path in paths]
    total = sum(size for size in sizes if size is not None)
    if workers < 2 or total < (MIN_BYTES if min_bytes is None else min_bytes):
        return None
    target = job_bytes or min(max(total // (workers * JOBS_PER_WORKER), MIN_JOB_BYTES), MAX_JOB_BYTES)
    jobs: list[Job] = []
    batch: list[Piece] = []
    batch_bytes = 0

    def flush() -> None:
        nonlocal batch, batch_bytes
        if batch:
            jobs.append(Job(len(jobs), tuple(batch)))
            batch, batch_bytes = [], 0

    for number, (path, size) in enumerate(zip(paths, sizes)):
        if size is None:
            flush()
            jobs.append(Job(len(jobs), (Piece(path, number),), local=True))
        elif size > target + target // 2:
            flush()
            parts = -(-size // target)
            cuts = [size * k // parts for k in range(parts)]
            for k, start in enumerate(cuts):
                last = k == parts - 1
                # The last range runs to the end of the file as it is when read, as a sequential
                # read would.
                end = None if last else cuts[k + 1]
                jobs.append(Job(len(jobs), (Piece(path, number, False, start, end, last),)))
        else:
            batch.append(Piece(path, number))
            batch_bytes += size
            if batch_bytes >= target:
                flush()
    flush()
    return jobs


def _regular_size(path: str) -> int | None:
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


# ---- the parent ---------------------------------------------------------------------------------


def check_paths(
    validator: Validator,
    paths: Iterable[str | os.PathLike[str]],
    *,
    workers: int = 1,
    executor: ClusterExecutor | None = None,
) -> Iterator[Issue]:
    """`validator.check_paths(paths)`, or with `workers` > 1 its inputs large enough to pay for the
    start-up validated by that many processes, with exactly the issues, order, counts and line
    numbers of the sequential run. (The processes are spawned, so a script that calls this must
    guard its entry point with `if __name__ == "__main__":`.) With a cluster's `executor`
    (`ragaudit.auditing.executors.DaskClient`), the work goes to its cluster the same way."""
    if workers > 1 or executor is not None:
        yield from check_sharded(validator, list(paths), workers=workers, executor=executor)
    else:
        yield from validator.check_paths(paths)


def check_sharded(
    validator: Validator,
    paths: Sequence[str | os.PathLike[str]],
    *,
    workers: int,
    min_bytes: int | None = None,
    job_bytes: int | None = None,
    executor: ClusterExecutor | None = None,
) -> Iterator[Issue]:
    """`validator.check_paths(paths)` on `workers` processes of this machine, this one and
    `workers` - 1 of `ragaudit.core.execution.Processes` (`_sharing`), updating `validator` as it would; `min_bytes` and
    `job_bytes` as in `plan`. With a cluster's `executor`, the jobs run on its cluster instead
    (the inputs must be readable at the same paths there), however small they are. A job whose
    worker dies is given to another worker; one that ends every worker it is given, or a worker
    that fails, stops the run with WorkerFailed."""
    names = [os.fspath(path) for path in paths]
    if executor is not None:
        workers = max(2, executor.workers)
        min_bytes = 0
    jobs = plan(names, workers=workers, min_bytes=min_bytes, job_bytes=job_bytes)
    if jobs is None:
        yield from validator.check_paths(names)
        return
    spool_dir = tempfile.mkdtemp(prefix="ragaudit-validate-")
    pool: Processes | None = None
    try:
        remote = [job for job in jobs if not job.local]
        if executor is None:
            context_file = os.path.join(spool_dir, "context.pickle")
            try:
                with open(context_file, "wb") as out:
                    # the corpus is loaded once, in the parent, and read by each worker from disk
                    pickle.dump(validator.ctx, out, protocol=pickle.HIGHEST_PROTOCOL)
            except (pickle.PicklingError, TypeError, AttributeError):  # a context built of objects pickle refuses
                yield from validator.check_paths(names)
                return
            # this process is one of the `workers`: it validates the jobs no worker has taken yet
            pool = Processes(
                max(1, min(workers - 1, len(remote) - 1)),
                setup=(_load_context, (context_file,)),
                name="ragaudit-validate",
                when_ready=True,
            )
            done: Iterator[JobOutcome] = _sharing(pool, remote, validator, spool_dir, ahead=workers * AHEAD_PER_WORKER)
        else:
            args = (executor.scatter(validator.ctx), validator.offset_unit)
            done = map_ordered(executor, _run_job_returning, remote, *args, ahead=workers * AHEAD_PER_WORKER)
        files: dict[int, _FileState] = {}
        for job in jobs:
            if job.local:
                yield from validator.check_paths([job.pieces[0].path])
                continue
            results, issues = _outcome(done)
            spool = os.path.join(spool_dir, f"{job.index}.issues")
            stream = iter(issues) if issues is not None else _read_issues(spool)
            for piece, result in zip(job.pieces, results):
                yield from _emit_piece(validator, piece, result, islice(stream, result.issues), files)
            if isinstance(stream, Generator):  # read from the spool folder
                stream.close()
                os.unlink(spool)
    finally:
        if pool is not None:
            pool.close()
        shutil.rmtree(spool_dir, ignore_errors=True)


def _sharing(
    pool: Processes, jobs: list[Job], validator: Validator, spool_dir: str, *, ahead: int
) -> Iterator[tuple[list[PieceResult], None]]:
    """Each job's results, in order: the worker processes take jobs as they come free, and this
    process, rather than wait for the next result, validates the next job no worker has taken yet
    (its task cancelled, so that no worker takes it after). Workers that start slowly, or a core
    busy elsewhere, then cost little: what they do not take, this process does."""
    tasks: dict[int, Future[tuple[list[PieceResult], None]]] = {}
    here: dict[int, list[PieceResult]] = {}
    submitted = 0
    for at, job in enumerate(jobs):
        while submitted < len(jobs) and submitted <= at + ahead:
            tasks[submitted] = pool.submit(_run_job_spooled, jobs[submitted], validator.offset_unit, spool_dir)
            submitted += 1
        task = tasks.pop(at, None)
        while at not in here and task is not None and not task.done():
            waiting = next((i for i in sorted(tasks) if tasks[i].cancel()), None) if not task.cancel() else at
            if waiting is None:
                break  # every job submitted is taken: wait for this one
            if waiting != at:
                tasks.pop(waiting)
            here[waiting] = _here(jobs[waiting], validator, spool_dir)
        if at in here:
            yield here.pop(at), None
        else:
            assert task is not None  # submitted above, and not validated here
            yield task.result()


def _here(job: Job, validator: Validator, spool_dir: str) -> list[PieceResult]:
    """A job validated by this process, as a worker would: a failure stops the run the same way."""
    try:
        return run_job(job, validator.ctx, validator.offset_unit, os.path.join(spool_dir, f"{job.index}.issues"))
    except Exception as exc:  # noqa: BLE001 - a bug in a rule, say: shown as a worker's would be
        exc.__cause__ = RemoteTraceback("".join(traceback.format_exception(exc)))
        raise


def _outcome(done: Iterator[JobOutcome]) -> JobOutcome:
    """The next job's results, or WorkerFailed saying why there are none."""
    try:
        return next(done)
    except RagauditError:  # a stop signal while waiting, say
        raise
    except WorkerDied as exc:
        raise WorkerFailed(f"a validation job {exc}; the input it reads may crash the validator") from None
    except Exception as exc:  # noqa: BLE001 - a bug in a rule, say: the run stops and shows where
        raise WorkerFailed(f"a validation worker failed:\n{remote_traceback(exc)}") from None


@dataclass
class _FileState:
    """How far the parent has stitched one file read in ranges."""

    lines: int = 0
    records: int = 0
    failed: bool = False


def _emit_piece(
    validator: Validator,
    piece: Piece,
    result: PieceResult,
    issues: Iterator[IssueValues],
    files: dict[int, _FileState],
) -> Iterator[Issue]:
    offset = 0
    if not piece.whole:
        state = files.setdefault(piece.file, _FileState())
        if state.failed:  # a sequential read stopped at the error: what follows it was never read
            for _ in issues:
                pass
            return
        offset = state.lines
        state.lines += result.lines
        state.records += result.records
    validator.records += result.records
    counts = validator.counts
    for values in issues:
        if offset and values[_LINE] is not None:
            values = values[:_LINE] + (values[_LINE] + offset,) + values[_LINE + 1 :]
        found = Issue(*values)
        counts[found.code] += 1
        if found.code == "malformed_record":
            validator.bad_lines.append(bad_line_of(found))
        yield found
    if result.problems:
        validator.unreadable.append(
            InputError(
                [
                    replace(p, line=p.line + offset) if isinstance(p, Problem) and p.line is not None and offset else p
                    for p in result.problems
                ]
            )
        )
        if not piece.whole:
            state.failed = True
    elif not piece.whole and piece.last and state.records == 0:
        validator.unreadable.append(InputError(no_records(piece.path, state.lines)))


def _read_issues(path: str) -> Generator[IssueValues, None, None]:
    with open(path, "rb") as spool:
        while True:
            try:
                chunk = pickle.load(spool)
            except EOFError:
                return
            yield from chunk


class WorkerFailed(RuntimeError):
    """A validation job failed or ended every worker it was given; the run cannot be completed as a whole."""


# ---- a worker -----------------------------------------------------------------------------------

_context: list[Context] = []  # in a worker process: the Context every job reads, loaded once


def _load_context(context_file: str) -> None:
    with open(context_file, "rb") as handle:
        _context[:] = [pickle.load(handle)]


def _run_job_spooled(job: Job, offset_unit: str, spool_dir: str) -> tuple[list[PieceResult], None]:
    """`run_job` in a worker process of this machine: the issues stay in the spool folder, for the parent."""
    return run_job(job, _context[0], offset_unit, os.path.join(spool_dir, f"{job.index}.issues")), None


def _run_job_returning(job: Job, ctx: Context, offset_unit: str) -> tuple[list[PieceResult], list[IssueValues]]:
    """`run_job` on a cluster's worker: the issues come back with the results (its disk is not ours)."""
    handle, spool = tempfile.mkstemp(prefix="ragaudit-validate-", suffix=".issues")
    os.close(handle)
    try:
        results = run_job(job, ctx, offset_unit, spool)
        return results, list(_read_issues(spool))
    finally:
        os.unlink(spool)


def run_job(job: Job, ctx: Context, offset_unit: str, spool: str) -> list[PieceResult]:
    """Validate a job's pieces in order, writing their issues to `spool` (line numbers within
    each range) and returning what the parent needs to stitch them into the sequential output."""
    results: list[PieceResult] = []
    chunk: list[IssueValues] = []
    with open(spool, "wb") as out:
        for piece in job.pieces:
            validator = Validator(ctx, offset_unit=offset_unit, keep_bad_lines=False)
            lines = None if piece.whole else trace_lines(piece.path, piece.start, piece.end)
            issues = (
                validator.check_files([piece.path])
                if lines is None
                else validator.check(traces_in(lines, offset_unit=offset_unit, markers=ctx.markers))
            )
            count, problems = 0, tuple[Problem | str, ...]()
            try:
                for found in issues:
                    chunk.append(_issue_values(found))
                    count += 1
                    if len(chunk) >= CHUNK:
                        pickle.dump(chunk, out, protocol=pickle.HIGHEST_PROTOCOL)
                        chunk = []
            except InputError as exc:
                problems = tuple(exc.problems)
            results.append(PieceResult(validator.records, lines.lines if lines is not None else 0, count, problems))
        if chunk:
            pickle.dump(chunk, out, protocol=pickle.HIGHEST_PROTOCOL)
    return results
