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

A run checks the whole history before it does any work (`check`: its tables exactly as this
version makes them, no trigger or view, SQLite's integrity check): a damaged history stops it
with exit 3 before anything runs. The append comes after every output of the run is written; an
append that fails (the history locked by another process for more than BUSY_WAIT_S, a full disk)
loses nothing of the run and is reported as a warning. Reading tolerates bad stored values: a
value that is not a finite number is left out and reported, never a crash.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import sqlite3
import subprocess
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragaudit.auditing.history_series import gated_metrics, history_key, parse_rename, rename_in, shown
from ragaudit.checks.metrics.registry import TRENDED
from ragaudit.core.errors import InputError, Problem, RagauditError, UsageError, describe
from ragaudit.core.model import Report

if TYPE_CHECKING:
    from ragaudit.io.config import Config

FILE = "history.sqlite"
VERSION = 1
TREND_METRICS = tuple(TRENDED.values())
KEPT_REPORTS = 10  # copies of passing reports kept per gold set and corpus, newest first
BUSY_WAIT_S = 10.0  # how long a read or an append waits for another process's transaction
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


def store_of(config: Config | None = None, out: Path | None = None) -> Path:
    """The history file of runs written under `out` (default: the config's out, else ./reports)."""
    if os.environ.get("RAGAUDIT_HISTORY"):
        return Path(os.environ["RAGAUDIT_HISTORY"])
    configured = config.history.path if config is not None else None
    if configured:
        return Path(configured)
    return Path(out or (config.audit.out if config is not None else "reports")) / FILE


def _damaged(store: Path, found: str) -> InputError:
    return InputError(Problem(str(store), f"expected a ragaudit history file (SQLite), found {found}"))


def _check_version(store: Path, db: sqlite3.Connection) -> None:
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version != VERSION:
        raise _damaged(store, f"one of schema version {version} (this ragaudit reads version {VERSION})")


@functools.cache
def _schema() -> frozenset[tuple[str, str, str | None]]:
    """(type, name, sql) of every entry a history's sqlite_master holds: tables, indexes."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        db.executescript(SCHEMA)
        return frozenset(db.execute("SELECT type, name, sql FROM sqlite_master"))
    finally:
        db.close()


def _check_schema(store: Path, db: sqlite3.Connection) -> None:
    """Refuse a history whose tables, columns or indexes differ from this version's, or that has
    a trigger or a view (an append would run it)."""
    found = set(db.execute("SELECT type, name, sql FROM sqlite_master"))
    expected = _schema()
    if found == expected:
        return
    names = {name: (kind, sql) for kind, name, sql in expected}
    for kind, name, sql in sorted(found - expected, key=lambda row: (row[0] != "trigger", row[1])):
        if name not in names:
            raise _damaged(store, f"a {kind} {name!r} a history never has")
        raise _damaged(store, f"{kind} {name!r} changed: expected {names[name][1]!r}, found {sql!r}")
    kind, name, _ = min(expected - found)
    raise _damaged(store, f"no {kind} {name!r}")


@contextmanager
def _opened(store: Path, *, write: bool) -> Iterator[sqlite3.Connection]:
    """A connection to the store, its schema checked; reading needs an existing history and
    never changes the file. Waits BUSY_WAIT_S at most for another process's transaction."""
    store = Path(store)
    if not store.is_file():
        if not write:
            raise InputError(Problem(str(store), "expected a ragaudit history file, found none (no run recorded yet)"))
        store.parent.mkdir(parents=True, exist_ok=True)
    try:
        if write:
            db = sqlite3.connect(store, timeout=BUSY_WAIT_S, isolation_level=None)
        else:
            db = sqlite3.connect(
                f"{store.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_WAIT_S, isolation_level=None
            )
    except sqlite3.Error as exc:
        raise _damaged(store, f"a file SQLite cannot open ({exc})") from None
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        if write and not tables:
            db.executescript(SCHEMA)
        else:
            _check_version(store, db)
            _check_schema(store, db)
        yield db
    except sqlite3.DatabaseError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise InputError(
                Problem(str(store), f"expected the history to be free, found it locked for {BUSY_WAIT_S:g} s")
            ) from None
        raise _damaged(store, f"a file it cannot use ({exc})") from None
    finally:
        db.close()


def check(store: Path) -> None:
    """Refuse (InputError) a history file that exists but cannot take this run's record, before
    any work is done: another schema or version, a trigger or a view, a damaged page. A missing
    file is fine (the first run creates it)."""
    if Path(store).exists():
        with _opened(store, write=False) as db:
            found = [
                line.strip() for row in db.execute("PRAGMA integrity_check(3)") for line in str(row[0]).splitlines()
            ]
            if found != ["ok"]:
                raise _damaged(store, f"a damaged database ({'; '.join(found[:4])})")


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


def pipeline_values(report: Report) -> list[tuple[str, str, float]]:
    """(pipeline, metric, value) of a report, the pipeline by its history key: every summary
    metric, the share of convergent questions, and the counts of errored and hallucinating runs."""
    rows = []
    for name, summary in sorted(report.summary.pipelines.items()):
        pipeline = history_key(report, name)
        values: dict[str, float | None] = dict(summary.metrics)
        if summary.questions:
            values["convergent_share"] = summary.lam.get("convergent", 0) / summary.questions
        values["errored_runs"] = summary.errored
        values["hallucinating_runs"] = summary.hallucinating_runs
        rows += [
            (pipeline, name, float(value))
            for name, value in sorted(values.items())
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        ]
    return rows


def _key(run_dir: Path | None) -> str | None:
    """How the history names a run: its run directory's absolute path."""
    return str(Path(run_dir).resolve()) if run_dir is not None else None


def _compressed(report: Report) -> bytes:
    """The report with every question row, compressed a row at a time (the baseline `last-pass` reads)."""
    from ragaudit.auditing.reporting import report_text

    packer = zlib.compressobj()
    return b"".join(packer.compress(piece.encode()) for piece in report_text(report)) + packer.flush()


def record(store: Path, run_dir: Path, report: Report) -> None:
    """Append a finished run's summary to the history, in one transaction (replacing an earlier
    record of the same run, as after `--resume`)."""
    meta = report.meta
    inputs = report.inputs or {}
    config_path = meta.get("config_path")
    key = str(Path(run_dir).resolve())
    commit = git_commit(Path.cwd(), *([Path(config_path).parent] if config_path else []))
    checks = [
        (key, history_key(report, c.pipeline), c.name, json.dumps(c.value), json.dumps(c.threshold), int(c.passed))
        for c in report.gate.checks
    ]
    passed = report.gate.passed
    copy = _compressed(report) if passed else None
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
                    report.gate.verdict,
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


def points_of(run_dir: Path, report: Report, git: str | None = None) -> list[Point]:
    """A report's values as the history would give them back."""
    failed = {history_key(report, c.pipeline) for c in report.gate.failed()}
    finished = report.meta.get("finished")
    key, verdict = str(Path(run_dir).resolve()), report.gate.verdict
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
    problems: list[Problem] | None = None,
) -> list[Point]:
    """The recorded values, oldest run first: of the last `last` runs only, of runs on the given
    gold set and corpus only, and of runs recorded before the run `until` only, when asked.
    A stored value of the wrong kind (a value that is not a finite number, a name that is not
    text) is left out, or read as unknown, and described in `problems` when given."""
    bad = _Bad(Path(store), problems)
    with _opened(store, write=False) as db:
        runs = db.execute(
            "SELECT run_dir, finished, git_commit, verdict FROM runs WHERE (:gold IS NULL OR gold = :gold) "
            f"AND (:corpus IS NULL OR corpus = :corpus) AND {_BEFORE} ORDER BY rowid DESC",
            {"gold": gold, "corpus": corpus, "until": _key(until)},
        ).fetchall()[:last]
        points = []
        for run_dir, finished, commit, verdict in reversed(runs):
            where = f"runs[{run_dir!r}]"
            if type(run_dir) is not str:
                bad.note(f"runs[{describe(run_dir)}].run_dir", "a run directory's path", run_dir, "the run left out")
                continue
            finished = bad.text(f"{where}.finished", finished)
            commit = bad.text(f"{where}.git_commit", commit)
            verdict = bad.text(f"{where}.verdict", verdict, allowed=("pass", "fail")) or "?"
            failed = {
                row[0] for row in db.execute("SELECT pipeline FROM checks WHERE run_dir = ? AND NOT passed", (run_dir,))
            }
            for found_pipeline, found_metric, value in db.execute(
                "SELECT pipeline, metric, value FROM metrics WHERE run_dir = ? AND (? IS NULL OR metric = ?) "
                "AND (? IS NULL OR pipeline = ?) ORDER BY pipeline, metric",
                (run_dir, metric, metric, pipeline, pipeline),
            ):
                at = f"metrics[{run_dir!r}, {found_pipeline!r}, {found_metric!r}]"
                if type(found_pipeline) is not str or type(found_metric) is not str:
                    bad.note(at, "a pipeline and a metric name (text)", (found_pipeline, found_metric), "left out")
                    continue
                if type(value) not in (int, float) or not math.isfinite(value):
                    bad.note(f"{at}.value", "a finite number", value, "left out")
                    continue
                passed = found_pipeline not in failed
                points.append(
                    Point(run_dir, finished, commit, verdict, found_pipeline, passed, found_metric, float(value))
                )
    return points


def names(store: Path) -> tuple[set[str], set[str]]:
    """The pipelines and the metrics the history has values of (of any kind)."""
    with _opened(store, write=False) as db:
        rows = db.execute("SELECT DISTINCT pipeline, metric FROM metrics").fetchall()
    return {p for p, _ in rows if type(p) is str}, {m for _, m in rows if type(m) is str}


@dataclass
class Trends:
    """What `ragaudit history` shows: the recorded values asked for, from which history file, and
    the stored values of the wrong kind that were left out."""

    store: Path
    points: list[Point]
    problems: list[Problem]
    left_out: list[str] = dataclasses.field(default_factory=list)  # metrics not gated, shown with --all
    error: RagauditError | None = None  # why there is nothing to show (`refusal`)

    def refusal(self, *, metric: str | None = None, pipeline: str | None = None) -> RagauditError | None:
        """Why an answer without values is refused (None when there are values): a pipeline or metric
        the history never recorded is a usage error naming the known ones; otherwise no values is an
        unreadable input."""
        if self.points:
            return None
        if metric or pipeline:
            pipelines, metrics = names(self.store)
            for option, asked, known in (("--pipeline", pipeline, pipelines), ("--metric", metric, metrics)):
                if asked and asked not in known:
                    return UsageError(f"{option}: expected one of {', '.join(sorted(known))}, found {asked!r}")
        found = (
            f"none readable ({len(self.problems)} stored values of the wrong kind, each named above)"
            if self.problems
            else "none"
        )
        return InputError(f"{self.store}: expected recorded values, found {found}")


def trends(
    store: Path | None = None,
    *,
    config_path: Path | None = None,
    metric: str | None = None,
    pipeline: str | None = None,
    last: int | None = None,
    plot: Path | None = None,
    every: bool = False,
    rename: str | None = None,
) -> Trends:
    """The values `ragaudit history` shows: of `store`, else of the history of the config's runs;
    of the metrics some recorded run gated, unless `every` or a `metric` is asked for. `rename`
    ("OLD=NEW") first records pipeline OLD's values under NEW. A `plot` that would overwrite the
    store is refused before anything is read."""
    if store is None:
        from ragaudit.io.config import load_config

        store = store_of(load_config(config_path) if config_path else None)
    if plot:
        from ragaudit.io.files import refuse_overwriting

        refuse_overwriting([plot], [store], option="--plot")
    if rename is not None:
        pair = parse_rename(rename)
        if not Path(store).is_file():
            raise InputError(Problem(str(store), "expected a ragaudit history file, found none (no run recorded yet)"))
        with _opened(store, write=True) as db:
            rename_in(db, *pair)
    problems: list[Problem] = []
    points = trend(store, metric=metric, pipeline=pipeline, last=last, problems=problems)
    with _opened(store, write=False) as db:
        points, left_out = shown(points, gated_metrics(db), every=every or metric is not None)
    return Trends(Path(store), points, problems, left_out)


class _Bad:
    """Notes on stored values of the wrong kind, as located problems (kept only when asked)."""

    def __init__(self, store: Path, problems: list[Problem] | None):
        self.store, self.problems = store, problems

    def note(self, where: str, expected: str, found: Any, then: str) -> None:
        if self.problems is not None:
            shown = found if isinstance(found, tuple) else (found,)
            self.problems.append(
                Problem(
                    str(self.store),
                    f"expected {expected}, found {', '.join(map(describe, shown))} ({then})",
                    path=where,
                )
            )

    def text(self, where: str, value: Any, *, allowed: tuple[str, ...] | None = None) -> str | None:
        """`value` when it is text (one of `allowed`, when given) or null; else None, noted."""
        if value is None or (type(value) is str and (allowed is None or value in allowed)):
            return value
        self.note(where, "text" if allowed is None else " or ".join(map(repr, allowed)), value, "read as unknown")
        return None


class NoPassingRun(InputError):
    """The history holds no passing run on this gold set and corpus (yet)."""


def last_pass(
    store: Path, *, gold: str | None, corpus: str | None | list[str | None], until: Path | None = None
) -> tuple[Path, Report]:
    """The latest passing run on the same gold set and corpus (`corpus`: its hash, or the hashes
    it may be recorded under) recorded before the run `until`, when given: its report.json's
    path and its report as it was recorded. A stored copy that is not a report is an InputError
    naming it."""
    from ragaudit.io.jsonl import JsonDefect, decode

    expected = "expected a passing run on this gold set and corpus for --baseline last-pass, found"
    if not Path(store).is_file():
        raise NoPassingRun(Problem(str(store), f"{expected} no history (no run recorded yet)"))
    corpora = {f"c{i}": c for i, c in enumerate(corpus if isinstance(corpus, list) else [corpus])}
    same_corpus = " OR ".join(f"corpus IS :{name}" for name in corpora)
    with _opened(store, write=False) as db:
        found = db.execute(
            "SELECT run_dir, report FROM runs JOIN passing_reports USING (run_dir) WHERE verdict = 'pass' "
            f"AND gold IS :gold AND ({same_corpus}) AND {_BEFORE} ORDER BY runs.rowid DESC LIMIT 1",
            {"gold": gold, **corpora, "until": _key(until)},
        ).fetchone()
    if found is None:
        raise NoPassingRun(Problem(str(store), f"{expected} none in the history"))
    run_dir, copy = found
    if type(run_dir) is not str:
        raise _damaged(Path(store), f"a passing run whose run_dir is {describe(run_dir)}")
    where = f"passing_reports[{run_dir!r}]"
    try:
        report, _ = decode(zlib.decompress(copy))
    except (zlib.error, TypeError) as exc:
        raise _damaged(Path(store), f"a damaged copy of {run_dir}/report.json ({exc})") from None
    except JsonDefect as defect:
        raise _damaged(Path(store), f"a damaged copy of {run_dir}/report.json ({defect.message})") from None
    shape = _report_problem(report)
    if shape:
        raise InputError(
            Problem(
                str(store),
                f"expected a ragaudit report as the stored copy of {run_dir}/report.json, found {shape}",
                path=where,
            )
        )
    return Path(run_dir) / "report.json", Report.from_json(report, f"{store}: {where}")


def _report_problem(report: Any) -> str | None:
    """What keeps `report` from being a ragaudit report (its summary, questions and gate), or None."""
    if not isinstance(report, dict):
        return describe(report)
    for key, kind, name in (
        ("summary", dict, "an object"),
        ("questions", list, "an array"),
        ("gate", dict, "an object"),
    ):
        if not isinstance(report.get(key), kind):
            return f"one whose {key} is {'missing' if report.get(key) is None else describe(report[key])} (expected {name})"
    return None
