"""Reading lines of a binary file with a cap on their length: a line longer than the cap is
skipped in blocks and never held in memory, so a one-line file of gigabytes cannot exhaust it.
Every JSON lines reader goes through here."""

from __future__ import annotations

import os
from typing import IO, Iterator

MAX_LINE_BYTES = 256 << 20
BLOCK = 1 << 20  # what skipping a long line reads at a time
LINE_LIMIT_VARIABLE = "RAGAUDIT_MAX_LINE_BYTES"


def max_line_bytes() -> int:
    """The longest line (in bytes, its newline aside) a reader takes: MAX_LINE_BYTES, or the
    positive integer in $RAGAUDIT_MAX_LINE_BYTES."""
    raw = os.environ.get(LINE_LIMIT_VARIABLE, "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return MAX_LINE_BYTES


def read_lines(handle: IO[bytes], cap: int) -> Iterator[tuple[bytes, int]]:
    """Each line of a binary file with its length in bytes. A line longer than `cap` bytes comes
    as b"" (a line read is never empty) with its length: it is skipped in blocks, never held."""
    readline = handle.readline
    while raw := readline(cap + 1):
        if len(raw) > cap and raw[-1:] != b"\n":
            yield b"", len(raw) + skip_line(handle)
        else:
            yield raw, len(raw)


def skip_line(handle: IO[bytes]) -> int:
    """Read past the end of the current line, a block at a time; the bytes skipped."""
    skipped = 0
    while block := handle.readline(BLOCK):
        skipped += len(block)
        if block[-1:] == b"\n":
            break
    return skipped


def long_line(cap: int, size: int) -> str:
    return (
        f"expected a line of at most {cap:,} bytes (${LINE_LIMIT_VARIABLE} sets the limit), found one of "
        f"{size:,} bytes (skipped unread)"
    )
