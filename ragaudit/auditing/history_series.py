"""Which series `ragaudit history` shows and under which name: a pipeline's values are kept under
its history key (`[[pipelines]] history_key`, default its name), so renaming a pipeline in the
config need not split its history; `rename` joins a series recorded under an old name to a new
one; and by default only the metrics the gate read are shown.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from ragaudit.core.errors import UsageError
from ragaudit.core.gatechecks.registry import CHECKS
from ragaudit.core.model import Report

if TYPE_CHECKING:
    from ragaudit.auditing.history import Point

# The history's name for the figure each gate check reads (the history keeps pipeline means,
# the share of convergent questions and counts of runs).
CHECK_METRICS = {check.name: check.history for check in CHECKS if check.history is not None}


def history_key(report: Report, pipeline: str) -> str:
    """The name the history keeps `pipeline`'s values under: its `history_key`, else its name."""
    result = report.pipelines.get(pipeline)
    key = (result.options or {}).get("history_key") if result is not None else None
    return key if isinstance(key, str) and key else pipeline


def gated_metrics(db: sqlite3.Connection) -> set[str]:
    """The metrics whose checks some recorded run gated (a check with a threshold)."""
    rows = db.execute("SELECT DISTINCT name, threshold FROM checks").fetchall()
    return {
        CHECK_METRICS[name] for name, threshold in rows if name in CHECK_METRICS and threshold not in (None, "null")
    }


def parse_rename(text: str) -> tuple[str, str]:
    """`OLD=NEW` as (old, new); a UsageError otherwise."""
    old, sep, new = text.partition("=")
    if not sep or not old.strip() or not new.strip() or old.strip() == new.strip():
        raise UsageError(f"--rename: expected OLD=NEW (two different pipeline names), found {text!r}")
    return old.strip(), new.strip()


def rename_in(db: sqlite3.Connection, old: str, new: str) -> int:
    """Record the values of pipeline `old` under `new`, in one transaction of the open history
    `db`: the runs recorded as `old` continue the series of `new`. Returns the runs moved. A name
    the history never recorded is a usage error naming the known ones; a run that recorded both
    names is refused (its values would collide)."""
    try:
        db.execute("BEGIN IMMEDIATE")
        known = sorted(row[0] for row in db.execute("SELECT DISTINCT pipeline FROM metrics") if row[0] is not None)
        if old not in known:
            raise UsageError(f"--rename: expected a recorded pipeline ({', '.join(map(str, known))}), found {old!r}")
        both = db.execute(
            "SELECT DISTINCT a.run_dir FROM metrics a JOIN metrics b USING (run_dir) "
            "WHERE a.pipeline = ? AND b.pipeline = ?",
            (old, new),
        ).fetchall()
        if both:
            raise UsageError(
                f"--rename {old}={new}: {len(both)} recorded runs have values of both "
                f"(first: {both[0][0]}); a series can only continue another that no run shares"
            )
        runs = db.execute("SELECT count(DISTINCT run_dir) FROM metrics WHERE pipeline = ?", (old,)).fetchone()[0]
        for table in ("metrics", "checks"):
            db.execute(f"UPDATE {table} SET pipeline = ? WHERE pipeline = ?", (new, old))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return int(runs)


def shown(points: list[Point], gated: set[str], *, every: bool) -> tuple[list[Point], list[str]]:
    """The points to show (those of gated metrics, or all with `every`) and the metrics left out."""
    if every or not gated:
        return points, []
    kept = [p for p in points if p.metric in gated]
    if not kept:
        return points, []
    return kept, sorted({p.metric for p in points} - gated)


SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    """One block character per value, from the lowest (▁) to the highest (█) of `values`."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = hi - lo
    top = len(SPARKS) - 1
    return "".join(SPARKS[0 if span == 0 else min(top, int((v - lo) / span * top + 0.5))] for v in values)
