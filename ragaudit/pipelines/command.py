"""The command pipeline: any executable speaking JSONL (SPEC §5).

ragaudit writes one request per line on the child's stdin (`{"k", "qid", "query", "seed",
"variant"}`) and reads one trace per line from its stdout. The child stays up between requests.
A request that times out, crashes the child or gets a line that is not a trace becomes a
`pipeline_error` trace, and the next request gets a fresh child. A child that never answers,
`max_start_failures` times in a row, is a PipelineStartError (exit 4).
"""
from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import subprocess
import threading
import time

from ragaudit.errors import PipelineStartError, UsageError, clip
from ragaudit.pipelines.base import Request, error_trace, trace_from_output
from ragaudit.types import LiveIndex, Trace

STDERR_TAIL_BYTES = 2048
CLOSE_GRACE_S = 2.0
_EOF = object()


class _Child:
    """One incarnation of the command; threads drain stdout into a queue and keep stderr's tail."""

    def __init__(self, command: list[str], cwd: str | None):
        # Python children block-buffer a piped stdout, which would look like a hang.
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
            env=env, start_new_session=os.name == "posix",  # its own group, so a kill reaches its children
        )
        self.answered = False
        self.lines: queue.Queue = queue.Queue()
        self._tail = bytearray()
        self._tail_lock = threading.Lock()
        self._threads = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for thread in self._threads:
            thread.start()

    def _read_stdout(self) -> None:
        try:
            for line in iter(self.process.stdout.readline, b""):
                self.lines.put(line)
        except (OSError, ValueError):
            pass
        finally:
            self.lines.put(_EOF)

    def _read_stderr(self) -> None:
        read = self.process.stderr.read1
        try:
            while chunk := read(4096):
                with self._tail_lock:
                    self._tail += chunk
                    del self._tail[:-STDERR_TAIL_BYTES]
        except (OSError, ValueError):
            pass

    @property
    def stderr_tail(self) -> str:
        with self._tail_lock:
            return self._tail.decode("utf-8", errors="replace").strip()

    def exited(self) -> bool:
        return self.process.poll() is not None

    def send(self, request: Request) -> bool:
        """Write one request line; False when the child is no longer reading."""
        line = json.dumps(request.to_dict(), sort_keys=True).encode("utf-8") + b"\n"
        try:
            self.process.stdin.write(line)
            self.process.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def drop_pending(self) -> None:
        """Discard lines nobody asked for (extra output after an earlier answer); keep an EOF."""
        while True:
            try:
                item = self.lines.get_nowait()
            except queue.Empty:
                return
            if item is _EOF:
                self.lines.put(_EOF)
                return

    def stop(self, grace_s: float) -> int:
        """End the child: close stdin and wait up to `grace_s`, then kill its group. Returns the exit code."""
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.kill_group()
            self.process.wait()
        if not self._join_readers():
            # The child is gone but a process it started still holds the pipes open.
            self.kill_group()
            self._join_readers()
        if not any(thread.is_alive() for thread in self._threads):
            # Closing a pipe a reader thread is blocked on could hang; a stuck daemon thread is harmless.
            self.process.stdout.close()
            self.process.stderr.close()
        return self.process.returncode

    def _join_readers(self) -> bool:
        for thread in self._threads:
            thread.join(timeout=0.5)
        return not any(thread.is_alive() for thread in self._threads)

    def kill(self) -> int:
        self.kill_group()
        return self.stop(grace_s=CLOSE_GRACE_S)

    def kill_group(self) -> None:
        try:
            if os.name == "posix":
                os.killpg(self.process.pid, signal.SIGKILL)
            else:
                self.process.kill()
        except (ProcessLookupError, PermissionError):
            pass


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class CommandPipeline:
    def __init__(self, name: str, command: list[str], timeout_s: float = 30.0, cwd: str | None = None,
                 offset_unit: str = "char", max_start_failures: int = 3):
        if not isinstance(command, (list, tuple)) or not command or not all(isinstance(c, str) for c in command):
            raise UsageError(f"pipeline {name!r}: the 'command' parameter must be a non-empty list of strings. "
                             f"Got {command!r} instead.")
        if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or timeout_s <= 0:
            raise UsageError(f"pipeline {name!r}: the 'timeout_s' parameter must be a number > 0. "
                             f"Got {timeout_s!r} instead.")
        if type(max_start_failures) is not int or max_start_failures < 1:
            raise UsageError(f"pipeline {name!r}: the 'max_start_failures' parameter must be an int in [1, inf). "
                             f"Got {max_start_failures!r} instead.")
        self.name, self.command, self.timeout_s = name, list(command), float(timeout_s)
        self.cwd, self.offset_unit, self.max_start_failures = cwd, offset_unit, max_start_failures
        self.shown = shlex.join(self.command)
        self._index: LiveIndex | None = None
        self._ever_answered = False
        self._failures_before_answer = 0
        self._broken: str | None = None
        self._closed = False
        self._child: _Child | None = self._start()

    @property
    def pid(self) -> int | None:
        """The running child's process id, if one is running."""
        return None if self._child is None else self._child.process.pid

    def index_info(self) -> LiveIndex | None:
        """The index of the most recent good trace; the child reports it only by answering."""
        return self._index

    def run(self, request: Request) -> Trace:
        if self._broken is not None:
            raise PipelineStartError(self._broken)
        if self._closed:
            return error_trace(self.name, request, f"pipeline {self.name!r} is closed")
        if self._child is not None and self._child.answered and self._child.exited():
            # It died after its last answer: that is no fault of this request.
            self._discard_child(kill=False)
        if self._child is None:
            self._child = self._start()
        child = self._child
        child.drop_pending()
        deadline = time.monotonic() + self.timeout_s
        if not self._send(child, request):
            if time.monotonic() >= deadline:
                return self._timed_out(request)
            return self._lost(request, "stopped reading requests")
        while True:
            try:
                item = child.lines.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                return self._timed_out(request)
            if item is _EOF:
                return self._lost(request, "stopped before answering")
            try:
                trace = self._answer(request, item)
            except Exception as exc:  # a line that breaks the parser fails this run only
                return error_trace(self.name, request, f"cannot read the answer of {self.shown}: "
                                                       f"{type(exc).__name__}: {exc}")
            if trace is not None:
                return trace

    def _send(self, child: _Child, request: Request) -> bool:
        """Write the request; a child that stops reading is killed at the timeout, so the write cannot hang."""
        watchdog = threading.Timer(self.timeout_s, child.kill_group)
        watchdog.daemon = True
        watchdog.start()
        try:
            return child.send(request)
        finally:
            watchdog.cancel()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._discard_child(kill=False)

    def __enter__(self) -> CommandPipeline:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ---- the child's life ---------------------------------------------------------------------

    def _start(self) -> _Child:
        try:
            return _Child(self.command, self.cwd)
        except OSError as exc:
            where = f" in {self.cwd}" if self.cwd else ""
            reason = exc.strerror or str(exc)
            if exc.filename is not None:
                reason += f": {exc.filename!r}"
            raise PipelineStartError(f"pipeline {self.name!r}: cannot start {self.shown}{where}: {reason}") from exc

    def _discard_child(self, *, kill: bool) -> int | None:
        child, self._child = self._child, None
        if child is None:
            return None
        return child.kill() if kill else child.stop(grace_s=CLOSE_GRACE_S)

    def _answer(self, request: Request, raw: bytes) -> Trace | None:
        """The trace for one stdout line, or None for a line to skip (blank, or another run's answer)."""
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            return None
        try:
            output = json.loads(text)
        except json.JSONDecodeError as exc:
            self._mark_answered()
            return error_trace(self.name, request, f"expected one JSON trace per line on stdout of {self.shown}, "
                                                   f"found {clip(text, 80)!r} ({exc.msg} at column {exc.colno})")
        if isinstance(output, dict) and _answers_other_run(output, request):
            return None
        self._mark_answered()
        trace = trace_from_output(self.name, request, output, offset_unit=self.offset_unit)
        if trace.error is None and trace.index is not None:
            self._index = trace.index
        return trace

    def _mark_answered(self) -> None:
        self._ever_answered = True
        if self._child is not None:
            self._child.answered = True

    def _timed_out(self, request: Request) -> Trace:
        child = self._child
        self._discard_child(kill=True)
        message = (f"{self.shown} timed out after {self.timeout_s:g} s without a trace line on stdout "
                   f"(does it flush stdout after each line?)")
        return self._failed(request, message, child.stderr_tail)

    def _lost(self, request: Request, what: str) -> Trace:
        child = self._child
        try:
            ended, still_running = describe_exit(child.process.wait(timeout=1.0)), False
        except subprocess.TimeoutExpired:
            ended, still_running = "closed its pipes but kept running, so it was ended", True
        self._discard_child(kill=still_running)
        return self._failed(request, f"{self.shown} {what}: it {ended}", child.stderr_tail)

    def _failed(self, request: Request, message: str, tail: str) -> Trace:
        if tail:
            message += f"; stderr: {tail}"
        if not self._ever_answered:
            self._failures_before_answer += 1
            if self._failures_before_answer >= self.max_start_failures:
                self._broken = (f"pipeline {self.name!r}: {self.shown} never answered; "
                                f"{self._failures_before_answer} attempts in a row failed, the last: {message}")
                raise PipelineStartError(self._broken)
        return error_trace(self.name, request, message)


def _answers_other_run(output: dict, request: Request) -> bool:
    """True when the line names a different run: a late answer to an earlier request."""
    qid, variant, seed = output.get("qid"), output.get("variant"), output.get("seed")
    return ((isinstance(qid, str) and qid != request.qid)
            or (type(variant) is int and variant != request.variant)
            or (type(seed) is int and seed != request.seed))
