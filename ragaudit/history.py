"""The history of finished runs: one SQLite file that every `ragaudit run` appends its summary to,
for trends across runs and releases and for `--baseline last-pass`.

Where: `$RAGAUDIT_HISTORY`, else `[history] path` in the config, else `history.sqlite` in the
folder that holds the run directories (`[audit] out` or `--out`). Each run adds, in one
transaction, a row to `runs` (run directory, finish time, verdict, input hashes, the git commit
of the work tree when there is one) and its rows to `metrics` (pipeline, metric, value) and
`checks` (pipeline, check, value, threshold, passed). A passing run also leaves a compressed copy
of its report.json in `passing_reports` (the newest few per gold set and corpus), so that
`--baseline last-pass` works where only the history file is kept, as in CI. Two runs finishing
at once both land: each append is one immediate transaction that waits for the other.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ragaudit.errors import InputError, Problem

FILE = "history.sqlite"
VERSION = 1
TREND_METRICS = ("citation_match", "coverage", "delta_s_qr", "convergent_share")
KEPT_REPORTS = 10  # copies of passing reports kept per gold set and corpus, newest first
SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS runs (
    run_dir TEXT PRIMARY KEY, run_id TEXT, finished TEXT, verdict TEXT,
    gold TEXT, corpus TEXT, config TEXT, config_path TEXT, git_commit TEXT
);
CREATE TABLE IF NOT EXISTS metrics (run_dir TEXT, pipeline TEXT, metric TEXT, value REAL);
CREATE TABLE IF NOT EXISTS checks (
    run_dir TEXT, pipeline TEXT, name TEXT, value TEXT, threshold TEXT, passed INTEGER
);
CREATE TABLE IF NOT EXISTS passing_reports (run_dir TEXT PRIMARY KEY, report BLOB);
CREATE INDEX IF NOT EXISTS metrics_by_run ON metrics (run_dir);
CREATE INDEX IF NOT EXISTS checks_by_run ON checks (run_dir);
PRAGMA user_version = {VERSION};
COMMIT;
"""


def store_of(config=None, out: Path | None = None) -> Path:
    """The history file of runs written under `out` (default: the config's out, else ./reports)."""
    if os.environ.get("RAGAUDIT_HISTORY"):
        return Path(os.environ["RAGAUDIT_HISTORY"])
    configured = (getattr(config, "history", None) or {}).get("path")
    if configured:
        return Path(configured)
    return Path(out or getattr(config, "out", None) or "reports") / FILE


def _damaged(store: Path, found: str) -> InputError:
    return InputError(Problem(str(store), f"expected a ragaudit history file (SQLite), found {found}"))


def _check_version(store: Path, db: sqlite3.Connection) -> None:
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version != VERSION:
        raise _damaged(store, f"one of schema version {version} (this ragaudit reads version {VERSION})")


@contextmanager
def _opened(store: Path, *, write: bool) -> Iterator[sqlite3.Connection]:
    """A connection to the store; reading needs an existing history and never changes the file."""
    store = Path(store)
    if not store.is_file():
        if not write:
            raise InputError(Problem(str(store), "expected a ragaudit history file, found none (no run recorded yet)"))
        store.parent.mkdir(parents=True, exist_ok=True)
    try:
        if write:
            db = sqlite3.connect(store, timeout=60, isolation_level=None)
        else:
            db = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True, timeout=60, isolation_level=None)
    except sqlite3.Error as exc:
        raise _damaged(store, f"a file SQLite cannot open ({exc})") from None
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if write and not tables:
            db.executescript(SCHEMA)
        elif not {"runs", "metrics", "checks", "passing_reports"} <= tables:
            raise _damaged(store, "a database without the history's tables")
        else:
            _check_version(store, db)
        yield db
    except sqlite3.DatabaseError as exc:
        if "locked" in str(exc):
            raise InputError(Problem(str(store), "expected the history to be free, found it locked for 60 s")) from None
        raise _damaged(store, f"a file it cannot use ({exc})") from None
    finally:
        db.close()


def check(store: Path) -> None:
    """Refuse (InputError) a history file that exists but cannot take this run's record, before
    any work is done; a missing file is fine (the first run creates it)."""
    if Path(store).exists():
        with _opened(store, write=False):
            pass


def git_commit(*folders: Path) -> str | None:
    """The commit checked out in the first git work tree among `folders`, if any."""
    for folder in folders:
        try:
            done = subprocess.run(
                ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    return None


def pipeline_values(report: dict) -> list[tuple[str, str, float]]:
    """(pipeline, metric, value) of a report: every summary metric, the share of convergent
    questions, and the counts of errored and hallucinating runs."""
    rows = []
    for pipeline, summary in sorted((report["summary"].get("pipelines") or {}).items()):
        values = dict(summary.get("metrics") or {})
        if summary.get("questions"):
            values["convergent_share"] = (summary.get("lambda") or {}).get("convergent", 0) / summary["questions"]
        values["errored_runs"] = summary.get("errored")
        values["hallucinating_runs"] = summary.get("hallucinating_runs")
        rows += [
            (pipeline, name, float(value))
            for name, value in sorted(values.items())
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        ]
    return rows


def _key(run_dir: Path | None) -> str | None:
    """How the history names a run: its run directory's absolute path."""
    return str(Path(run_dir).resolve()) if run_dir is not None else None


def record(store: Path, run_dir: Path, report: dict) -> None:
    """Append a finished run's summary to the history, in one transaction (replacing an earlier
    record of the same run, as after `--resume`)."""
    meta = report.get("meta") or {}
    inputs = meta.get("inputs") or {}
    config_path = meta.get("config_path")
    key = str(Path(run_dir).resolve())
    commit = git_commit(Path.cwd(), *([Path(config_path).parent] if config_path else []))
    checks = [
        (key, c["pipeline"], c["name"], json.dumps(c.get("value")), json.dumps(c.get("threshold")), int(c["passed"]))
        for c in report["gate"]["checks"]
    ]
    passed = report["gate"]["verdict"] == "pass"
    copy = zlib.compress(json.dumps(report, sort_keys=True).encode()) if passed else None
    with _opened(store, write=True) as db:
        try:
            db.execute("BEGIN IMMEDIATE")
            for table in ("runs", "metrics", "checks", "passing_reports"):
                db.execute(f"DELETE FROM {table} WHERE run_dir = ?", (key,))
            db.execute(
                "INSERT INTO runs (run_dir, run_id, finished, verdict, gold, corpus, config, config_path, git_commit) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    meta.get("run_id") or Path(run_dir).name,
                    meta.get("finished"),
                    report["gate"]["verdict"],
                    inputs.get("gold"),
                    inputs.get("corpus"),
                    inputs.get("config"),
                    config_path,
                    commit,
                ),
            )
            db.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?)", [(key, *row) for row in pipeline_values(report)])
            db.executemany("INSERT INTO checks VALUES (?, ?, ?, ?, ?, ?)", checks)
            if copy is not None:
                db.execute("INSERT INTO passing_reports VALUES (?, ?)", (key, copy))
                db.execute(
                    "DELETE FROM passing_reports WHERE run_dir IN (SELECT run_dir FROM runs WHERE gold IS ? "
                    "AND corpus IS ? AND run_dir IN (SELECT run_dir FROM passing_reports) "
                    "ORDER BY rowid DESC LIMIT -1 OFFSET ?)",
                    (inputs.get("gold"), inputs.get("corpus"), KEPT_REPORTS),
                )
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise


@dataclass(frozen=True)
class Point:
    """One recorded value: a metric of a pipeline in a run."""

    run_dir: str
    finished: str | None
    git_commit: str | None
    verdict: str
    pipeline: str
    pipeline_passed: bool
    metric: str
    value: float


def points_of(run_dir: Path, report: dict, git: str | None = None) -> list[Point]:
    """A report's values as the history would give them back."""
    failed = {c["pipeline"] for c in report["gate"]["checks"] if not c["passed"]}
    finished = (report.get("meta") or {}).get("finished")
    key, verdict = str(Path(run_dir).resolve()), report["gate"]["verdict"]
    return [
        Point(key, finished, git, verdict, pipeline, pipeline not in failed, metric, value)
        for pipeline, metric, value in pipeline_values(report)
    ]


# rows recorded before a given run's (all rows when it is not recorded)
_BEFORE = "runs.rowid < coalesce((SELECT rowid FROM runs WHERE run_dir = :until), 9e18)"


def trend(
    store: Path,
    *,
    metric: str | None = None,
    pipeline: str | None = None,
    last: int | None = None,
    gold: str | None = None,
    corpus: str | None = None,
    until: Path | None = None,
) -> list[Point]:
    """The recorded values, oldest run first: of the last `last` runs only, of runs on the given
    gold set and corpus only, and of runs recorded before the run `until` only, when asked."""
    with _opened(store, write=False) as db:
        runs = db.execute(
            "SELECT run_dir, finished, git_commit, verdict FROM runs WHERE (:gold IS NULL OR gold = :gold) "
            f"AND (:corpus IS NULL OR corpus = :corpus) AND {_BEFORE} ORDER BY rowid DESC",
            {"gold": gold, "corpus": corpus, "until": _key(until)},
        ).fetchall()[:last]
        points = []
        for run_dir, finished, commit, verdict in reversed(runs):
            failed = {
                row[0] for row in db.execute("SELECT pipeline FROM checks WHERE run_dir = ? AND NOT passed", (run_dir,))
            }
            for found_pipeline, found_metric, value in db.execute(
                "SELECT pipeline, metric, value FROM metrics WHERE run_dir = ? AND (? IS NULL OR metric = ?) "
                "AND (? IS NULL OR pipeline = ?) ORDER BY pipeline, metric",
                (run_dir, metric, metric, pipeline, pipeline),
            ):
                passed = found_pipeline not in failed
                points.append(Point(run_dir, finished, commit, verdict, found_pipeline, passed, found_metric, value))
    return points


def last_pass(store: Path, *, gold: str | None, corpus: str | None, until: Path | None = None) -> tuple[Path, dict]:
    """The latest passing run on the same gold set and corpus (recorded before the run `until`,
    when given): its report.json's path and its report as it was recorded."""
    expected = "expected a passing run on this gold set and corpus for --baseline last-pass, found"
    if not Path(store).is_file():
        raise InputError(Problem(str(store), f"{expected} no history (no run recorded yet)"))
    with _opened(store, write=False) as db:
        found = db.execute(
            "SELECT run_dir, report FROM runs JOIN passing_reports USING (run_dir) WHERE verdict = 'pass' "
            f"AND gold IS :gold AND corpus IS :corpus AND {_BEFORE} ORDER BY runs.rowid DESC LIMIT 1",
            {"gold": gold, "corpus": corpus, "until": _key(until)},
        ).fetchone()
    if found is None:
        raise InputError(Problem(str(store), f"{expected} none in the history"))
    run_dir, copy = found
    try:
        report = json.loads(zlib.decompress(copy))
    except (zlib.error, ValueError, TypeError) as exc:
        raise _damaged(Path(store), f"a damaged copy of {run_dir}/report.json ({exc})") from None
    return Path(run_dir) / "report.json", report


SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    """One block character per value, from the lowest (▁) to the highest (█) of `values`."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = hi - lo
    top = len(SPARKS) - 1
    return "".join(SPARKS[0 if span == 0 else min(top, int((v - lo) / span * top + 0.5))] for v in values)
