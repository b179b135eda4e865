"""The history of finished runs: one SQLite file that every `ragaudit run` appends its summary to,
for trends across runs and releases and for `--baseline last-pass`.

Where: `$RAGAUDIT_HISTORY`, else `[history] path` in the config, else `history.sqlite` in the
folder that holds the run directories (`[audit] out` or `--out`). Each run adds, in one
transaction, a row to `runs` (run directory, finish time, verdict, input hashes, git commit when
the config sits in a git work tree) and its rows to `metrics` (pipeline, metric, value) and
`checks` (pipeline, check, value, threshold, passed). Two runs finishing at once both land.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ragaudit.errors import InputError, Problem

FILE = "history.sqlite"
TREND_METRICS = ("citation_match", "coverage", "delta_s_qr", "correct")
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_dir TEXT PRIMARY KEY, finished TEXT, verdict TEXT, gold TEXT, corpus TEXT, config TEXT,
    config_path TEXT, git_commit TEXT
);
CREATE TABLE IF NOT EXISTS metrics (run_dir TEXT, pipeline TEXT, metric TEXT, value REAL);
CREATE TABLE IF NOT EXISTS checks (
    run_dir TEXT, pipeline TEXT, name TEXT, value TEXT, threshold TEXT, passed INTEGER
);
CREATE INDEX IF NOT EXISTS metrics_by_run ON metrics (run_dir);
"""


def store_of(config, out: Path | None = None) -> Path:
    """The history file of runs of `config` written under `out` (default: the config's out)."""
    if os.environ.get("RAGAUDIT_HISTORY"):
        return Path(os.environ["RAGAUDIT_HISTORY"])
    configured = (getattr(config, "history", None) or {}).get("path")
    if configured:
        return Path(configured)
    return Path(out or config.out) / FILE


def _connect(path: Path, *, create: bool) -> sqlite3.Connection:
    if not create and not path.is_file():
        raise InputError(Problem(str(path), "expected a ragaudit history file, found none (no run recorded yet)"))
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        db = sqlite3.connect(path, timeout=60, isolation_level=None)
        db.executescript(SCHEMA)
    except sqlite3.DatabaseError as exc:
        raise InputError(Problem(str(path), f"expected a ragaudit history file (SQLite), found: {exc}")) from None
    return db


def git_commit(folder: Path) -> str | None:
    """The commit checked out in the git work tree holding `folder`, if any."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def record(store: Path, run_dir: Path, report: dict) -> None:
    """Append a finished run's summary to the history (replacing an earlier record of the same run)."""
    meta = report.get("meta") or {}
    inputs = meta.get("inputs") or {}
    config_path = meta.get("config_path")
    commit = git_commit(Path(config_path).parent) if config_path else None
    key = str(Path(run_dir).resolve())
    metrics = [
        (key, pipeline, name, float(value))
        for pipeline, summary in sorted((report["summary"].get("pipelines") or {}).items())
        for name, value in sorted((summary.get("metrics") or {}).items())
        if isinstance(value, (int, float))
    ]
    checks = [
        (key, c["pipeline"], c["name"], json.dumps(c.get("value")), json.dumps(c.get("threshold")), int(c["passed"]))
        for c in report["gate"]["checks"]
    ]
    db = _connect(store, create=True)
    try:
        db.execute("BEGIN IMMEDIATE")
        for table in ("runs", "metrics", "checks"):
            db.execute(f"DELETE FROM {table} WHERE run_dir = ?", (key,))
        db.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                meta.get("finished"),
                report["gate"]["verdict"],
                inputs.get("gold"),
                inputs.get("corpus"),
                inputs.get("config"),
                config_path,
                commit,
            ),
        )
        db.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?)", metrics)
        db.executemany("INSERT INTO checks VALUES (?, ?, ?, ?, ?, ?)", checks)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    finally:
        db.close()


@dataclass(frozen=True)
class Point:
    run_dir: str
    finished: str | None
    git_commit: str | None
    verdict: str
    pipeline: str
    metric: str
    value: float


def trend(
    store: Path,
    *,
    metric: str | None = None,
    pipeline: str | None = None,
    last: int | None = None,
    gold: str | None = None,
    corpus: str | None = None,
) -> list[Point]:
    """The recorded values, oldest run first; of the last `last` runs only, and of runs on the
    given gold set and corpus only, when asked."""
    db = _connect(store, create=False)
    try:
        runs = db.execute(
            "SELECT run_dir, finished, git_commit, verdict FROM runs "
            "WHERE (? IS NULL OR gold = ?) AND (? IS NULL OR corpus = ?) ORDER BY finished DESC, run_dir DESC",
            (gold, gold, corpus, corpus),
        ).fetchall()[:last]
        rows = []
        for run_dir, finished, commit, verdict in reversed(runs):
            for found_pipeline, found_metric, value in db.execute(
                "SELECT pipeline, metric, value FROM metrics WHERE run_dir = ? AND (? IS NULL OR metric = ?) "
                "AND (? IS NULL OR pipeline = ?) ORDER BY pipeline, metric",
                (run_dir, metric, metric, pipeline, pipeline),
            ):
                rows.append(Point(run_dir, finished, commit, verdict, found_pipeline, found_metric, value))
    except sqlite3.DatabaseError as exc:
        raise InputError(Problem(str(store), f"expected a ragaudit history file, found: {exc}")) from None
    finally:
        db.close()
    return rows


def last_pass(store: Path, *, gold: str | None, corpus: str | None) -> Path:
    """The report.json of the latest passing run on the same gold set and corpus."""
    db = _connect(store, create=False)
    try:
        rows = db.execute(
            "SELECT run_dir FROM runs WHERE verdict = 'pass' AND gold IS ? AND corpus IS ? "
            "ORDER BY finished DESC, run_dir DESC",
            (gold, corpus),
        ).fetchall()
    finally:
        db.close()
    for (run_dir,) in rows:
        report = Path(run_dir) / "report.json"
        if report.is_file():
            return report
    raise InputError(
        Problem(str(store), "expected a passing run on this gold set and corpus in the history, found none")
    )


SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = hi - lo
    return "".join(SPARKS[0 if span == 0 else min(len(SPARKS) - 1, int((v - lo) / span * len(SPARKS)))] for v in values)
