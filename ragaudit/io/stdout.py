"""Whether the reader of stdout has gone, and how to stop writing to it."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

CLOSED_STDOUT = 141  # 128 + SIGPIPE, as a shell reports a writer ended by a closed pipe


def stdout_gone() -> bool:
    """Whether stdout is a pipe (or socket) whose reader has gone. A stdout without a file
    descriptor (an in-process test runner) counts as gone: only a write to it failed."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return True


def discard_stdout() -> None:
    """Send stdout, and what is still buffered for it, nowhere."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # a stdout without a file descriptor (tests)
        pass


def end_quietly() -> NoReturn:
    """The reader of stdout went away (`ragaudit codes | head -1`): end quietly, as a writer to a
    closed pipe does, with what is still buffered sent nowhere."""
    discard_stdout()
    raise SystemExit(CLOSED_STDOUT)


def end_output() -> None:
    """A command ends: its progress display is closed, and what it wrote is flushed (a closed
    stdout shows here, as BrokenPipeError, not at exit)."""
    from ragaudit.core import progress

    progress.close()
    sys.stdout.flush()
