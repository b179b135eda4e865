"""How fast a phase goes and when it should end, as `ragaudit.core.progress` shows them.

A rate reads in the unit that keeps it readable: `240 texts/s`, `3.4 runs/min` below one a second,
`2.0 runs/h` below one a minute, so a slow pipeline never shows `0.0 runs/s`.

The ETA of a phase whose work ends in steps (a run of a slow pipeline every few minutes, a batch
of runs at once) is not the remaining work over the rate so far, which falls between two steps
and jumps back at each: it rose from 27 min to 3 h 38 min and back, step after step. `Eta` keeps
an estimate of when the phase ends, taken when its count moves (the remaining work at the rate
measured up to that step), smoothed across steps, and counts down from it between steps. Only when
the phase falls behind that estimate does it show the remaining work at the rate so far.
"""

from __future__ import annotations

SMOOTHING = 0.3  # weight of a new step's estimate of the end against those before it


def rate_text(per_second: float, unit: str) -> str:
    """`240 texts/s`, `12.5 texts/s`, `3.4 runs/min`, `2.0 runs/h`: per second from one a second up,
    per minute from one a minute up, else per hour; 0 when nothing moved."""
    if per_second <= 0:
        return f"0 {unit}/s"
    for scale, per in ((1.0, "s"), (60.0, "min"), (3600.0, "h")):
        value = per_second * scale
        if value >= 1 or per == "h":
            return f"{value:,.1f} {unit}/{per}" if value < 100 else f"{value:,.0f} {unit}/{per}"
    raise AssertionError("unreachable")  # the loop returns at the hour


class Eta:
    """When a phase should end, smoothed across the steps of its count (module docstring)."""

    def __init__(self) -> None:
        self.count: int | None = None  # the count at the last step
        self.ends: float | None = None  # when the phase should end, as estimated at the last step

    def seconds(self, now: float, count: int, total: int, rate: float, step: float, step_rate: float) -> float | None:
        """Seconds left at `now`, with `count` of `total` done at `rate` (per second, so far); the
        count last moved at `step`, when the rate so far was `step_rate`."""
        if rate <= 0 or step_rate <= 0 or count >= total:
            return None
        if count != self.count:  # a step: a new estimate of the end, folded into the earlier ones
            estimate = step + (total - count) / step_rate
            self.ends = estimate if self.ends is None else self.ends + SMOOTHING * (estimate - self.ends)
            self.count = count
        assert self.ends is not None  # set at the first step
        left = self.ends - now
        return left if left > 0 else (total - count) / rate
