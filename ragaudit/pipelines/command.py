"""The command pipeline: any executable speaking JSONL (docs/reference.md §5).

ragaudit writes one request per line on the child's stdin (`{"k", "qid", "query", "seed",
"variant"}`) and reads one trace per line from its stdout. The child stays up between requests.
A request that times out, crashes the child or gets a line that is not a trace becomes a
`pipeline_error` trace, and the next request gets a fresh child. A child that never answers,
`max_start_failures` times in a row, is a PipelineStartError (exit 4).

Each child runs in a process group of its own, so that killing the group also ends the processes
it started. That also means it does not die with ragaudit: a helper process (`_Watcher`), one per
ragaudit process, holds the list of live groups and kills them when its stdin reaches end of file,
which happens when ragaudit exits or is killed, even by SIGKILL. (PR_SET_PDEATHSIG would reach only
the child, not its own children, and fires when the *thread* that started the child ends, which
for a child restarted by a worker thread is long before ragaudit does.) `kill()` ends every
child of a pipeline at once, from a signal handler or another thread.
"""

from __future__ import annotations

import io
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, cast

from ragaudit.core.errors import PipelineStartError, UsageError, clip
from ragaudit.core.markers import ALL_FORMS
from ragaudit.core.types import LiveIndex, Trace
from ragaudit.io.jsonl import JsonDefect, decode
from ragaudit.pipelines.base import Excluded, Request, check_timeout, error_trace, trace_from_output

if TYPE_CHECKING:
    from ragaudit.io.config import PipelineConfig
    from ragaudit.pipelines.inputs import Inputs

STDERR_TAIL_BYTES = 2048
CLOSE_GRACE_S = 2.0
# A run waits for its answer in slices this long: a signal that reaches another thread runs its
# handler (SIGINT, SIGTERM: kill()) in the main thread only when that thread wakes up.
WAKE_S = 0.2
_EOF = object()

# The watcher: "+PGID" adds a group, "-PGID" drops it; at end of input it kills what is left.
# SIGINT is ignored so that a ctrl-C reaching it by accident cannot end the watch early.
_WATCHER = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
groups = set()
for line in sys.stdin.buffer:
    op, pgid = line[:1], line[1:].strip()
    if pgid.isdigit():
        (groups.add if op == b"+" else groups.discard)(int(pgid))
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""


class _Watcher:
    """Kills the process groups of command children when ragaudit dies, however it dies.

    Its stdin pipe's write end is held only by ragaudit's process (it is not inherited by other
    children), so the kernel closes it exactly when ragaudit ends. Without a watcher (it could not
    start) children are still ended by `close()` and `kill()`; only ragaudit's own death leaks them.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._owner: int | None = None
        self._groups: set[int] = set()  # what a new watcher must be told, should the last one be gone

    def watch(self, pgid: int) -> None:
        self._send(pgid, b"+")

    def forget(self, pgid: int) -> None:
        self._send(pgid, b"-")

    def _send(self, pgid: int, op: bytes) -> None:
        if os.name != "posix" or not sys.executable:
            return
        with self._lock:
            if self._owner is not None and self._owner != os.getpid():
                self._groups.clear()  # a forked copy of ragaudit: its parent's groups are not its own
            (self._groups.add if op == b"+" else self._groups.discard)(pgid)
            try:
                process, fresh = self._running()
                lines = [b"+%d\n" % g for g in self._groups] if fresh else [op + b"%d\n" % pgid]
                assert process.stdin is not None  # opened as a pipe
                process.stdin.write(b"".join(lines))
                process.stdin.flush()
            except (OSError, ValueError):
                self._process = None  # gone: the next call starts a new one and tells it every group

    def _running(self) -> tuple[subprocess.Popen[bytes], bool]:
        # A forked copy of ragaudit must not write into its parent's watcher.
        if self._process is not None and self._owner == os.getpid() and self._process.poll() is None:
            return self._process, False
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHER],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,
        )  # out of reach of ctrl-C and killpg
        self._owner = os.getpid()
        return self._process, True


_watcher = _Watcher()


class _Child:
    """One incarnation of the command; threads drain stdout into a queue and keep stderr's tail."""

    def __init__(self, command: list[str], cwd: str | None):
        # Python children block-buffer a piped stdout, which would look like a hang.
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=os.name == "posix",  # its own group, so a kill reaches its children
        )
        stdin, stdout, stderr = self.process.stdin, self.process.stdout, self.process.stderr
        assert stdin is not None and stdout is not None and stderr is not None  # all three opened as pipes
        self.stdin, self.stdout, self.stderr = stdin, stdout, cast(io.BufferedReader, stderr)
        _watcher.watch(self.process.pid)
        self.answered = False
        self.lines: queue.Queue[object] = queue.Queue()  # stdout's lines (bytes), then _EOF
        self._tail = bytearray()
        self._tail_lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _read_stdout(self) -> None:
        try:
            for line in iter(self.stdout.readline, b""):
                self.lines.put(line)
        except (OSError, ValueError):
            pass
        finally:
            self.lines.put(_EOF)

    def _read_stderr(self) -> None:
        read = self.stderr.read1
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
            self.stdin.write(line)
            self.stdin.flush()
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
        """End the child: close stdin and wait up to `grace_s`, then kill its group. Returns the exit code.

        Processes the child started and left behind in its group are killed too: nothing of a
        command outlives the pipeline that ran it.
        """
        try:
            self.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self._signal_group()
            self.process.wait()
        # The leader is reaped now; its group lives on while any member does.
        self._signal_group()
        self._join_readers()
        _watcher.forget(self.process.pid)
        if not any(thread.is_alive() for thread in self._threads):
            # Closing a pipe a reader thread is blocked on could hang; a stuck daemon thread is harmless.
            self.stdout.close()
            self.stderr.close()
        return self.process.returncode

    def _join_readers(self) -> bool:
        for thread in self._threads:
            thread.join(timeout=0.5)
        return not any(thread.is_alive() for thread in self._threads)

    def kill(self) -> int:
        self.kill_group()
        return self.stop(grace_s=CLOSE_GRACE_S)

    def kill_group(self) -> None:
        """SIGKILL to the child's group, unless the child is reaped already (its id may be reused).

        Takes no lock and does not wait, so it may run in a signal handler or any thread.
        """
        if self.process.returncode is None:
            self._signal_group()

    def _signal_group(self) -> None:
        try:
            if os.name == "posix":
                os.killpg(self.process.pid, signal.SIGKILL)
            elif self.process.returncode is None:
                self.process.kill()
        except OSError:  # no such group any more, or not ours
            pass


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class CommandPipeline:
    def __init__(
        self,
        name: str,
        command: list[str],
        timeout_s: float = 30.0,
        cwd: str | None = None,
        offset_unit: str = "char",
        max_start_failures: int = 3,
        markers: frozenset[str] = ALL_FORMS,
    ):
        if not isinstance(command, (list, tuple)) or not command or not all(isinstance(c, str) for c in command):
            raise UsageError(
                f"pipeline {name!r}: the 'command' parameter must be a non-empty list of strings. "
                f"Got {command!r} instead."
            )
        timeout_s = check_timeout(name, timeout_s)
        if type(max_start_failures) is not int or max_start_failures < 1:
            raise UsageError(
                f"pipeline {name!r}: the 'max_start_failures' parameter must be an int in [1, inf). "
                f"Got {max_start_failures!r} instead."
            )
        self.name, self.command, self.timeout_s = name, list(command), timeout_s
        self.cwd, self.offset_unit, self.max_start_failures = cwd, offset_unit, max_start_failures
        self.markers = markers
        self.shown = shlex.join(self.command)
        self._index: LiveIndex | None = None
        self._ever_answered = False
        self._failures_before_answer = 0
        self._broken: str | None = None
        self._closed = False
        self._killed = False
        # Every child not yet reaped, for kill(); set.add/discard and list(set) are atomic under the GIL.
        self._children: set[_Child] = set()
        self._child: _Child | None = self._start()

    @property
    def pid(self) -> int | None:
        """The running child's process id, if one is running."""
        return None if self._child is None else self._child.process.pid

    def index_info(self) -> LiveIndex | None:
        """The index of the most recent good trace; the child reports it only by answering."""
        return self._index

    @property
    def killed(self) -> bool:
        """True once `kill()` was called: runs in flight then end as errors that say so."""
        return self._killed

    def run(self, request: Request) -> Trace:
        if self._broken is not None:
            raise PipelineStartError(self._broken)
        if self._closed:
            return error_trace(self.name, request, f"pipeline {self.name!r} is closed")
        if self._killed:
            return error_trace(self.name, request, f"pipeline {self.name!r} was killed")
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
                item = child.lines.get(timeout=max(min(deadline - time.monotonic(), WAKE_S), 0))
            except queue.Empty:
                if time.monotonic() < deadline:
                    continue
                return self._timed_out(request)
            if item is _EOF:
                return self._lost(request, "stopped before answering")
            try:
                trace = self._answer(request, cast(bytes, item))  # not _EOF: a line of stdout
            except Exception as exc:  # a line that breaks the parser fails this run only
                return error_trace(
                    self.name, request, f"cannot read the answer of {self.shown}: {type(exc).__name__}: {exc}"
                )
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

    def close(self) -> str | None:
        """End the child: end of input, then SIGKILL to its group after CLOSE_GRACE_S. Never raises;
        returns a warning when ending it went wrong."""
        if self._closed:
            return None
        self._closed = True
        try:
            self._discard_child(kill=False)
        except Exception as exc:  # every run has finished: report, do not lose them
            self.kill()
            return f"pipeline {self.name!r}: closing {self.shown} failed: {type(exc).__name__}: {exc}"
        return None

    def kill(self) -> None:
        """Kill every child of this pipeline now, with its whole process group, and start no other.

        For SIGINT/SIGTERM: it sends SIGKILL and returns without waiting or taking a lock, so it
        is safe in a signal handler and from any thread, and calling it again does nothing new.
        A run in flight ends as a `pipeline_error` saying the child was killed; later runs are
        errors too. `close()` still reaps the children afterwards.
        """
        self._killed = True
        for child in list(self._children):
            child.kill_group()

    def __enter__(self) -> CommandPipeline:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---- the child's life ---------------------------------------------------------------------

    def _start(self) -> _Child:
        try:
            child = _Child(self.command, self.cwd)
        except OSError as exc:
            where = f" in {self.cwd}" if self.cwd else ""
            reason = exc.strerror or str(exc)
            if exc.filename is not None:
                reason += f": {exc.filename!r}"
            raise PipelineStartError(f"pipeline {self.name!r}: cannot start {self.shown}{where}: {reason}") from exc
        self._children.add(child)
        if self._killed:  # kill() ran while this child was being started
            child.kill_group()
        return child

    def _discard_child(self, *, kill: bool) -> int | None:
        child, self._child = self._child, None
        if child is None:
            return None
        code = child.kill() if kill else child.stop(grace_s=CLOSE_GRACE_S)
        self._children.discard(child)  # only once it is reaped: until then kill() must still reach it
        return code

    def _answer(self, request: Request, raw: bytes) -> Trace | None:
        """The trace for one stdout line, or None for a line to skip (blank, or another run's answer)."""
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            return None
        try:
            # the shared reader: deep nesting, duplicate keys and lone surrogates are located defects;
            # NaN and Infinity become null, and the trace reader reports the field
            output, _ = decode(text.encode("utf-8"), finite=False)
        except JsonDefect as exc:
            self._mark_answered()
            where = f" at column {exc.column}" if exc.column else ""
            return error_trace(
                self.name,
                request,
                f"expected one JSON trace per line on stdout of {self.shown}, "
                f"found {clip(text, 80)!r} ({exc.syntax or exc.message}{where})",
            )
        if isinstance(output, dict) and _answers_other_run(output, request):
            return None
        self._mark_answered()
        trace = trace_from_output(self.name, request, output, offset_unit=self.offset_unit, markers=self.markers)
        if trace.error is None and trace.index is not None:
            self._index = trace.index
        return trace

    def _mark_answered(self) -> None:
        self._ever_answered = True
        if self._child is not None:
            self._child.answered = True

    def _timed_out(self, request: Request) -> Trace:
        child = self._child
        assert child is not None  # called about the child that was asked
        self._discard_child(kill=True)
        message = (
            f"{self.shown} timed out after {self.timeout_s:g} s without a trace line on stdout "
            f"(does it flush stdout after each line?)"
        )
        return self._failed(request, message, child.stderr_tail)

    def _lost(self, request: Request, what: str) -> Trace:
        child = self._child
        assert child is not None  # called about the child that was asked
        try:
            ended, still_running = describe_exit(child.process.wait(timeout=1.0)), False
        except subprocess.TimeoutExpired:
            ended, still_running = "closed its pipes but kept running, so it was ended", True
        self._discard_child(kill=still_running)
        return self._failed(request, f"{self.shown} {what}: it {ended}", child.stderr_tail)

    def _failed(self, request: Request, message: str, tail: str) -> Trace:
        if self._killed:  # the child died of kill(), not of this request: no start failure either
            return error_trace(
                self.name, request, f"{self.shown} was killed before answering: pipeline {self.name!r} was stopped"
            )
        if tail:
            message += f"; stderr: {tail}"
        if not self._ever_answered:
            self._failures_before_answer += 1
            if self._failures_before_answer >= self.max_start_failures:
                self._broken = (
                    f"pipeline {self.name!r}: {self.shown} never answered; "
                    f"{self._failures_before_answer} attempts in a row failed, the last: {message}"
                )
                raise PipelineStartError(self._broken)
        return error_trace(self.name, request, message)


def _answers_other_run(output: dict[str, Any], request: Request) -> bool:
    """True when the line names a different run: a late answer to an earlier request."""
    qid, variant, seed = output.get("qid"), output.get("variant"), output.get("seed")
    return (
        (isinstance(qid, str) and qid != request.qid)
        or (type(variant) is int and variant != request.variant)
        or (type(seed) is int and seed != request.seed)
    )


def build(spec: PipelineConfig, inputs: Inputs, exclude: Excluded = ()) -> CommandPipeline:
    """The command pipeline of `spec`, run in the config's folder (what it retrieves is its own)."""
    o, config, cwd = spec.options, inputs.config, str(inputs.config.path.parent) if inputs.config.path else None
    if not o["command"]:
        raise UsageError(f"pipeline {spec.name!r}: a command pipeline needs `command = [...]`")
    unit, markers = config.audit.offset_unit, config.audit.marker_forms
    return CommandPipeline(
        spec.name, o["command"], timeout_s=o["timeout_s"], cwd=cwd, offset_unit=unit, markers=markers
    )
