"""Validating large inputs on several processes with exactly the output of one.

The inputs are cut into jobs: a large file into byte ranges (each range holds the lines that
start in it, so a cut never splits a line), runs of small files into one job each. Worker
processes validate jobs with the same Context, write each job's issues to a spool file and send
back what the parent needs to stitch the ranges together: records, lines and issues per piece,
and the problems that made a file unreadable. The parent emits the jobs in input order, turning
line numbers within a range into line numbers within the file, so issues, their order, counts
and exit codes are those of the sequential run. Memory stays flat: jobs are dispatched only a
few ahead of the one being emitted, and issues stream from disk.

Workers are started with `spawn` (the parent may hold threads, which `fork` would copy in an
unknown state) and each talks to the parent through its own pipe: when the parent dies for any
reason, the worker's next read fails and it exits.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import stat
import tempfile
from collections import deque
from dataclasses import dataclass, fields, replace
from itertools import islice
from operator import attrgetter
from typing import Any, Generator, Iterator, cast

from ragaudit.errors import InputError, Problem
from ragaudit.io.jsonfiles import no_records
from ragaudit.io.traces import trace_lines, traces_in
from ragaudit.types import Issue
from ragaudit.validation.engine import Validator, bad_line_of

MIN_BYTES = 32 << 20  # below this much input, starting workers costs more than they save (measured)
MIN_JOB_BYTES = 4 << 20
MAX_JOB_BYTES = 16 << 20  # small enough that the last job leaves no core idle for long
JOBS_PER_WORKER = 4  # ... and enough jobs that uneven ones even out
AHEAD_PER_WORKER = 3  # jobs dispatched beyond the one being emitted, per worker
MAX_WORKERS = 8
CHUNK = 512  # issues per pickled chunk of a spool file

_ISSUE_FIELDS = tuple(f.name for f in fields(Issue))
_LINE = _ISSUE_FIELDS.index("line")
_issue_values = attrgetter(*_ISSUE_FIELDS)


def default_workers() -> int:
    """The CPUs this process may run on, capped at MAX_WORKERS."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_WORKERS))


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

    def flush():
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


def check_paths(validator: Validator, paths, *, workers: int = 1, client=None) -> Iterator[Issue]:
    """`validator.check_paths(paths)`, or with `workers` > 1 its inputs large enough to pay for the
    start-up validated by that many processes, with exactly the issues, order, counts and line
    numbers of the sequential run. (The processes are spawned, so a script that calls this must
    guard its entry point with `if __name__ == "__main__":`.) With a Dask `client`, the work goes
    to its cluster the same way."""
    if workers > 1 or client is not None:
        yield from check_sharded(validator, list(paths), workers=workers, client=client)
    else:
        yield from validator.check_paths(paths)


def check_sharded(
    validator: Validator,
    paths: list,
    *,
    workers: int,
    min_bytes: int | None = None,
    job_bytes: int | None = None,
    client=None,
) -> Iterator[Issue]:
    """`validator.check_paths(paths)` on `workers` processes, updating `validator` as it would;
    `min_bytes` and `job_bytes` as in `plan`. With a Dask `client`, the jobs run on its cluster
    instead (the inputs must be readable at the same paths there), however small they are."""
    names = [os.fspath(path) for path in paths]
    if client is not None:
        workers = max(2, sum(client.nthreads().values()))
        min_bytes = 0
    jobs = plan(names, workers=workers, min_bytes=min_bytes, job_bytes=job_bytes)
    if jobs is None:
        yield from validator.check_paths(names)
        return
    spool_dir = tempfile.mkdtemp(prefix="ragaudit-validate-")
    try:
        remote = sum(1 for job in jobs if not job.local)
        pool: _Workers | _DaskJobs
        if client is not None:
            pool = _DaskJobs(client, validator.ctx, validator.offset_unit)
        else:
            context_file = os.path.join(spool_dir, "context.pickle")
            try:
                with open(context_file, "wb") as out:
                    # the corpus is loaded once, in the parent, and read by each worker from disk
                    pickle.dump(validator.ctx, out, protocol=pickle.HIGHEST_PROTOCOL)
            except (pickle.PicklingError, TypeError, AttributeError):  # a context built of objects pickle refuses
                yield from validator.check_paths(names)
                return
            pool = _Workers(min(workers, remote) or 1, context_file, spool_dir, validator.offset_unit)
        with pool:
            files: dict[int, _FileState] = {}
            for job, results, issues in pool.run(jobs, ahead=workers * AHEAD_PER_WORKER):
                if job.local:
                    yield from validator.check_paths([job.pieces[0].path])
                    continue
                for piece, result in zip(job.pieces, results or ()):
                    yield from _emit_piece(validator, piece, result, islice(issues, result.issues), files)
    finally:
        shutil.rmtree(spool_dir, ignore_errors=True)


@dataclass
class _FileState:
    """How far the parent has stitched one file read in ranges."""

    lines: int = 0
    records: int = 0
    failed: bool = False


def _emit_piece(
    validator: Validator, piece: Piece, result: PieceResult, issues: Iterator[tuple], files: dict[int, _FileState]
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


def _read_issues(path: str) -> Generator[tuple, None, None]:
    with open(path, "rb") as spool:
        while True:
            try:
                chunk = pickle.load(spool)
            except EOFError:
                return
            yield from chunk


class WorkerFailed(RuntimeError):
    """A validation worker crashed or stopped; the run cannot be completed as a whole."""


class _Workers:
    """Worker processes, each with its own pipe, fed jobs in order and a bounded way ahead."""

    def __init__(self, count: int, context_file: str, spool_dir: str, offset_unit: str):
        import multiprocessing

        mp = multiprocessing.get_context("spawn")
        self.spool_dir = spool_dir
        self.processes, self.pipes = [], []
        try:
            for _ in range(count):
                ours, theirs = mp.Pipe()
                process = mp.Process(
                    target=_serve,
                    args=(theirs, context_file, spool_dir, offset_unit),
                    name="ragaudit-validate",
                    daemon=True,
                )
                process.start()
                theirs.close()  # so that the worker alone holds its end, and sees ours close
                self.processes.append(process)
                self.pipes.append(ours)
        except BaseException:
            self.close(stop=True)
            raise

    def __enter__(self) -> _Workers:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        self.close(stop=kind is not None)

    def run(self, jobs: list[Job], *, ahead: int) -> Iterator[tuple[Job, list[PieceResult] | None, Iterator]]:
        """(job, its piece results, its issues) in job order; local jobs come with None, for the caller."""
        from multiprocessing.connection import wait

        waiting = deque(job for job in jobs if not job.local)
        idle = list(self.pipes)
        busy: dict[Any, int] = {}  # pipe -> index of the job it works on
        done: dict[int, list[PieceResult]] = {}
        for job in jobs:
            if not job.local:
                while job.index not in done:
                    while idle and waiting and waiting[0].index <= job.index + ahead:
                        pipe = idle.pop()
                        sent = waiting.popleft()
                        pipe.send(sent)
                        busy[pipe] = sent.index
                    for ready in wait(list(busy)):
                        pipe = cast(Any, ready)
                        index = busy.pop(pipe)
                        done[index] = self._receive(pipe)
                        idle.append(pipe)
            if job.local:
                yield job, None, iter(())
                continue
            spool = os.path.join(self.spool_dir, f"{job.index}.issues")
            issues = _read_issues(spool)
            yield job, done.pop(job.index), issues
            issues.close()
            os.unlink(spool)

    def _receive(self, pipe) -> list[PieceResult]:
        try:
            kind, payload = pipe.recv()
        except (EOFError, OSError):
            process = self.processes[self.pipes.index(pipe)]
            process.join(1)
            raise WorkerFailed(f"a validation worker stopped unexpectedly (exit code {process.exitcode})") from None
        if kind == "error":
            raise WorkerFailed(f"a validation worker failed:\n{payload}")
        return payload

    def close(self, *, stop: bool) -> None:
        for pipe in self.pipes:
            try:
                if not stop:
                    pipe.send(None)
            except OSError:
                pass
            pipe.close()
        for process in self.processes:
            if stop:
                process.terminate()
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()


class _DaskJobs:
    """Jobs run on a Dask cluster: the context goes to every worker once, each job comes back with
    its issues (a worker's disk is not ours), a bounded number ahead of the one being emitted, and
    a job whose worker dies is run again elsewhere."""

    def __init__(self, client, ctx, offset_unit: str):
        self.client, self.offset_unit = client, offset_unit
        self.ctx = client.scatter(ctx, broadcast=True, hash=False)

    def __enter__(self) -> _DaskJobs:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        self.client.cancel([self.ctx])

    def run(self, jobs: list[Job], *, ahead: int) -> Iterator[tuple[Job, list[PieceResult] | None, Iterator]]:
        waiting = deque(job for job in jobs if not job.local)
        submitted: dict[int, Any] = {}
        for job in jobs:
            if job.local:
                yield job, None, iter(())
                continue
            while waiting and waiting[0].index <= job.index + ahead:
                sent = waiting.popleft()
                submitted[sent.index] = self.client.submit(
                    _run_job_returning, sent, self.ctx, self.offset_unit, pure=False
                )
            future = submitted.pop(job.index)
            results, issues = future.result()
            future.release()
            yield job, results, iter(issues)


def _run_job_returning(job: Job, ctx, offset_unit: str) -> tuple[list[PieceResult], list[tuple]]:
    """`run_job` on a Dask worker: the issues come back with the results."""
    handle, spool = tempfile.mkstemp(prefix="ragaudit-validate-", suffix=".issues")
    os.close(handle)
    try:
        results = run_job(job, ctx, offset_unit, spool)
        return results, list(_read_issues(spool))
    finally:
        os.unlink(spool)


# ---- a worker -----------------------------------------------------------------------------------


def _serve(pipe, context_file: str, spool_dir: str, offset_unit: str) -> None:
    """A worker's life: load the context once, then run jobs until told to stop or orphaned."""
    import traceback

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ctrl-C is for the parent, which stops us
    with open(context_file, "rb") as handle:
        ctx = pickle.load(handle)
    while True:
        try:
            job = pipe.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        if job is None:
            return
        reply: tuple[str, Any]
        try:
            reply = ("done", run_job(job, ctx, offset_unit, os.path.join(spool_dir, f"{job.index}.issues")))
        except Exception:  # a bug in a rule, say: the parent stops the run and shows where
            reply = ("error", traceback.format_exc())
        try:
            pipe.send(reply)
        except OSError:
            return


def run_job(job: Job, ctx, offset_unit: str, spool: str) -> list[PieceResult]:
    """Validate a job's pieces in order, writing their issues to `spool` (line numbers within
    each range) and returning what the parent needs to stitch them into the sequential output."""
    results = []
    chunk: list[tuple] = []
    with open(spool, "wb") as out:
        for piece in job.pieces:
            validator = Validator(ctx, offset_unit=offset_unit, keep_bad_lines=False)
            lines = None if piece.whole else trace_lines(piece.path, piece.start, piece.end)
            issues = (
                validator.check_files([piece.path])
                if lines is None
                else validator.check(traces_in(lines, offset_unit=offset_unit))
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
