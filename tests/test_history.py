"""The run history: every `ragaudit run` (and nothing else) appends its summary, read back here
against report.json and manifest.json; `ragaudit history` prints, filters and plots the trends;
`--baseline last-pass` finds the latest passing run, even when its run directory is gone; appends
from several processes at once lose nothing; report.html shows the trend from the second run on."""

import hashlib
import json
import multiprocessing
import re
import shutil
import sqlite3
import subprocess
import sys
import zlib
from xml.etree import ElementTree as ET

import pytest
from helpers import BM25, DEMO, LENIENT, TFIDF, invoke, run_dir_of, write_config

from ragaudit.auditing import history, history_series
from ragaudit.core.model import Report
from ragaudit.outputs.render.trends import trend_panel

STORE = "runs/history.sqlite"  # write_config's out is "runs"


@pytest.fixture(autouse=True)
def no_history_override(monkeypatch, tmp_path):
    monkeypatch.delenv("RAGAUDIT_HISTORY", raising=False)
    monkeypatch.chdir(tmp_path)  # not a git work tree: no commit is recorded unless a test makes one


def run(config, *args):
    result = invoke("run", config, "--no-gate", *args)
    assert result.exit_code == 0, result.output
    return run_dir_of(result)


def read(path) -> dict:
    return json.loads(path.read_text())


def expected_values(report: dict) -> dict:
    """(pipeline, metric) -> value, from report.json: the summary metrics, and the share of
    convergent questions counted from the question list."""
    out = {}
    for pipeline, summary in report["summary"]["pipelines"].items():
        out |= {(pipeline, m): v for m, v in summary["metrics"].items() if isinstance(v, (int, float))}
        states = [q["lambda"]["state"] for q in report["questions"] if q["pipeline"] == pipeline]
        out[(pipeline, "convergent_share")] = states.count("convergent") / len(states)
        out[(pipeline, "errored_runs")] = summary["errored"]
        out[(pipeline, "hallucinating_runs")] = summary["hallucinating_runs"]
    return out


def test_every_run_appends_its_summary_and_nothing_else_does(tmp_path):
    config = write_config(tmp_path, BM25 + TFIDF, items=3, seeds="[1]")
    first, second = run(config), run(config)
    db = sqlite3.connect(tmp_path / STORE)
    recorded = [row[0] for row in db.execute("SELECT run_dir FROM runs ORDER BY rowid")]
    assert recorded == [str(first.resolve()), str(second.resolve())]
    gold_sha = hashlib.sha256((tmp_path / "gold.jsonl").read_bytes()).hexdigest()
    for run_dir in (first, second):
        key = str(run_dir.resolve())
        report, manifest = read(run_dir / "report.json"), read(run_dir / "manifest.json")
        stored = db.execute("SELECT pipeline, metric, value FROM metrics WHERE run_dir = ?", (key,))
        assert {(p, m): v for p, m, v in stored} == pytest.approx(expected_values(report))
        checks = db.execute("SELECT pipeline, name, value, threshold, passed FROM checks WHERE run_dir = ?", (key,))
        got = [(p, n, json.loads(v), json.loads(t), bool(ok)) for p, n, v, t, ok in checks]
        want = [(c["pipeline"], c["name"], c["value"], c["threshold"], c["passed"]) for c in report["gate"]["checks"]]
        assert sorted(got, key=repr) == sorted(want, key=repr)
        row = db.execute(
            "SELECT run_id, finished, verdict, gold, corpus, config, git_commit FROM runs WHERE run_dir = ?", (key,)
        ).fetchone()
        inputs = manifest["inputs"]
        assert row == (
            run_dir.name,
            manifest["finished"],
            report["gate"]["verdict"],
            gold_sha,
            inputs["corpus"],
            inputs["config"],
            None,
        )
    assert invoke("report", first, "--no-gate").exit_code == 0  # a rebuild is not a run
    assert invoke("faults", first, "--only", "offset_shift").exit_code in (0, 1)  # nor is a fault copy
    assert db.execute("SELECT count(*) FROM runs").fetchone() == (2,)


def test_the_git_commit_of_the_working_directory_is_recorded(tmp_path):
    config = write_config(tmp_path, BM25, items=1, seeds="[1]")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "audit.toml"], check=True)
    subprocess.run([*git, "commit", "-qm", "config"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    run(config)
    assert {p.git_commit for p in history.trend(tmp_path / STORE)} == {head}


def test_history_prints_each_metric_run_by_run(tmp_path):
    config = write_config(tmp_path, BM25 + TFIDF, items=2, seeds="[1]")
    dirs = [run(config) for _ in range(3)]
    reports = [read(d / "report.json") for d in dirs]
    text = invoke("history", "--config", config, "--metric", "coverage", "--pipeline", "tfidf")
    assert text.exit_code == 0, text.output
    values = [r["summary"]["pipelines"]["tfidf"]["metrics"]["coverage"] for r in reports]
    lines = text.output.splitlines()
    assert lines[0] == f"3 runs in {tmp_path / STORE}, oldest first"
    assert lines[2].startswith(
        f"tfidf · coverage  {history_series.sparkline(values)}  {values[0]:.4f} → {values[-1]:.4f}"
    )
    assert lines[3].split() == ["finished", "commit", "run", "gate", "value"]
    rows = [line.split() for line in lines[4:]]
    assert [(r[0], r[2], r[4]) for r in rows] == [
        (r["meta"]["finished"], r["gate"]["verdict"], f"{v:.4f}") for r, v in zip(reports, values)
    ]
    everything = invoke("history", "--config", config, "--all").output
    assert everything.count(" · ") == len(expected_values(reports[0]))  # every pipeline and metric
    # by default, the figures the default gate reads: delta_s_excess_max, coverage_pass_rate,
    # citation_match_min, lambda_convergent_min (and lambda_forbid), hallucination_max, grounded_pass_rate
    gated = {"delta_s_excess", "coverage", "citation_match", "convergent_share", "hallucinating_runs", "fully_grounded"}
    default = invoke("history", "--config", config).output
    shown = re.findall(r"^(\w+) · (\S+)  ", default, flags=re.M)
    assert sorted(shown) == sorted((p, m) for p in ("bm25", "tfidf") for m in gated)
    rest = sorted({m for _, m in expected_values(reports[0])} - gated)
    assert (
        default.splitlines()[-1] == f"not gated, left out: {', '.join(rest)} (--all shows them, --metric one of them)"
    )


def test_history_as_json_with_filters(tmp_path):
    config = write_config(tmp_path, BM25 + TFIDF, items=2, seeds="[1]")
    dirs = [run(config) for _ in range(3)]
    reports = [read(d / "report.json") for d in dirs]

    def as_json(*args):
        result = invoke("history", "--config", config, "--format", "json", *args)
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    coverage = as_json("--metric", "coverage")
    assert [(s["pipeline"], s["metric"]) for s in coverage] == [("bm25", "coverage"), ("tfidf", "coverage")]
    for series in coverage:
        assert [r["run_dir"] for r in series["runs"]] == [str(d.resolve()) for d in dirs]
        assert [r["value"] for r in series["runs"]] == pytest.approx(
            [r["summary"]["pipelines"][series["pipeline"]]["metrics"]["coverage"] for r in reports]
        )
        assert [r["verdict"] for r in series["runs"]] == [r["gate"]["verdict"] for r in reports]
    only_bm25 = as_json("--pipeline", "bm25", "--all")
    assert {s["pipeline"] for s in only_bm25} == {"bm25"}
    assert {s["metric"] for s in only_bm25} == {m for p, m in expected_values(reports[0]) if p == "bm25"}
    last = as_json("--last", "2", "--metric", "convergent_share")
    assert [[r["run_dir"] for r in s["runs"]] for s in last] == [[str(d.resolve()) for d in dirs[1:]]] * 2


def _series(config, *args) -> dict:
    result = invoke("history", "--config", config, "--format", "json", "--metric", "coverage", *args)
    assert result.exit_code == 0, result.output
    return {s["pipeline"]: [r["run_dir"] for r in s["runs"]] for s in json.loads(result.output)}


def test_a_history_key_keeps_one_series_when_the_pipeline_is_renamed(tmp_path):
    """k changes and the name follows (dense-k3 → dense-k5): with one history_key the runs stay one series."""
    config = write_config(tmp_path, BM25.replace('"bm25"\nkind', '"bm25-k3"\nkind') + 'k = 3\nhistory_key = "bm25"\n')
    first = run(config)
    assert read(first / "report.json")["pipelines"]["bm25-k3"]["options"]["history_key"] == "bm25"
    config.write_text(config.read_text().replace('"bm25-k3"', '"bm25-k5"').replace("k = 3", "k = 5"))
    second = run(config)
    assert _series(config) == {"bm25": [str(first.resolve()), str(second.resolve())]}
    twice = write_config(tmp_path, BM25 + BM25.replace('"bm25"\nkind', '"other"\nkind') + 'history_key = "bm25"\n')
    refused = invoke("run", twice)
    line = twice.read_text().splitlines().index('history_key = "bm25"') + 1
    assert refused.exit_code == 3
    assert (
        f"{twice}:{line}: $.pipelines[1].history_key: expected a history key of its own, found 'bm25', "
        "the history key of pipeline 'bm25'" in refused.stderr
    )


def test_rename_joins_a_series_recorded_under_an_old_name(tmp_path):
    config = write_config(tmp_path, BM25)
    first = run(config)
    config.write_text(config.read_text().replace('name = "bm25"', 'name = "bm25-k5"'))
    second = run(config)
    assert _series(config) == {"bm25": [str(first.resolve())], "bm25-k5": [str(second.resolve())]}
    for bad, said in (
        ("bm25", "--rename: expected OLD=NEW (two different pipeline names), found 'bm25'"),
        ("gone=bm25-k5", "--rename: expected a recorded pipeline (bm25, bm25-k5), found 'gone'"),
    ):
        result = invoke("history", "--config", config, "--rename", bad)
        assert result.exit_code == 2 and said in result.output, result.output
    assert _series(config, "--rename", "bm25=bm25-k5") == {"bm25-k5": [str(first.resolve()), str(second.resolve())]}
    assert _series(config) == {"bm25-k5": [str(first.resolve()), str(second.resolve())]}  # kept in the history
    both = write_config(tmp_path, BM25 + TFIDF)
    shared = run(both)
    result = invoke("history", "--config", both, "--rename", "tfidf=bm25")
    assert result.exit_code == 2 and f"1 recorded runs have values of both (first: {shared.resolve()})" in result.output


def test_history_plots_an_svg(tmp_path):
    config = write_config(tmp_path, BM25 + TFIDF, items=2, seeds="[1]")
    run(config), run(config)
    plot = tmp_path / "trend.svg"
    result = invoke("history", "--config", config, "--metric", "delta_s_qr", "--plot", plot)
    assert result.exit_code == 0, result.output
    root = ET.parse(plot).getroot()
    svg = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{svg}svg"
    assert [t.text for t in root.iter(f"{svg}text") if "·" in (t.text or "")] == [
        "bm25 · delta_s_qr",
        "tfidf · delta_s_qr",
    ]
    lines = list(root.iter(f"{svg}polyline"))
    assert len(lines) == 2 and all(len(line.get("points").split()) == 2 for line in lines)


def test_where_the_history_lives(tmp_path, monkeypatch):
    plain = write_config(tmp_path, BM25, items=1, seeds="[1]")
    run(plain, "--out", tmp_path / "reports")
    assert invoke("history").exit_code == 0  # default: ./reports/history.sqlite
    configured = tmp_path / "configured.toml"
    configured.write_text(plain.read_text() + '\n[history]\npath = "kept/trend.sqlite"\n')
    run(configured)
    assert (tmp_path / "kept" / "trend.sqlite").is_file() and not (tmp_path / STORE).exists()
    assert json.loads(invoke("history", "--config", configured, "--format", "json").output)
    monkeypatch.setenv("RAGAUDIT_HISTORY", str(tmp_path / "env.sqlite"))
    run(configured)
    assert len({p.run_dir for p in history.trend(tmp_path / "env.sqlite")}) == 1
    assert len({p.run_dir for p in history.trend(tmp_path / "kept" / "trend.sqlite")}) == 1


def test_a_missing_or_damaged_history_is_a_clear_error(tmp_path):
    missing = invoke("history", "--store", tmp_path / "none.sqlite")
    assert missing.exit_code == 3 and "none.sqlite: expected a ragaudit history file" in missing.stderr
    damaged = tmp_path / "damaged.sqlite"
    damaged.write_bytes(b"SQLite format 3\x00" + b"\xff" * 600)
    foreign = tmp_path / "foreign.sqlite"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)")
    for store in (damaged, foreign):
        result = invoke("history", "--store", store)
        assert result.exit_code == 3, result.output
        assert f"{store.name}: expected a ragaudit history file (SQLite)" in result.stderr
        assert "Traceback" not in result.output
    config = write_config(tmp_path, BM25, items=1, seeds="[1]")
    (tmp_path / "runs").mkdir()
    shutil.copy(damaged, tmp_path / STORE)
    stopped = invoke("run", config)
    assert stopped.exit_code == 3 and "history.sqlite: expected a ragaudit history file" in stopped.stderr
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["history.sqlite"]  # stopped before any work
    run(config, "--out", tmp_path / "elsewhere")
    unknown = invoke("history", "--store", tmp_path / "elsewhere" / "history.sqlite", "--metric", "nope")
    assert unknown.exit_code == 2 and "--metric: expected one of" in unknown.stderr


def test_baseline_last_pass_is_the_latest_passing_run(tmp_path):
    passing = write_config(tmp_path, BM25, items=2, seeds="[1]", extra=LENIENT)
    none_yet = invoke("run", passing, "--baseline", "last-pass")  # CI's first run: gated without a baseline
    assert none_yet.exit_code == 0 and "warning: no baseline, so no regression checks" in none_yet.stderr
    assert "expected a passing run on this gold set and corpus for --baseline last-pass" in none_yet.stderr
    good = run(passing)
    strict = tmp_path / "strict.toml"
    strict.write_text(passing.read_text().replace(LENIENT, ""))
    later = run(strict)  # same gold set and corpus, fails its gate: never a baseline
    assert read(later / "report.json")["gate"]["verdict"] == "fail"
    third = run(strict, "--baseline", "last-pass")
    assert read(third / "manifest.json")["baseline"] == str((good / "report.json").resolve())
    expected = read(good / "report.json")["summary"]["pipelines"]["bm25"]["metrics"]["coverage"]

    def drift_detail(report_path):
        gate = invoke("gate", report_path, "--config", strict, "--baseline", "last-pass", "--format", "json")
        assert gate.exit_code in (0, 1), gate.output
        assert f"baseline: {(good / 'report.json').resolve()}" in gate.stderr
        return next(c for c in json.loads(gate.stdout)["checks"] if c["name"] == "drift_coverage")["detail"]

    assert drift_detail(third / "report.json").startswith(f"baseline {expected:.4f}")
    itself = invoke("gate", good / "report.json", "--config", strict, "--baseline", "last-pass")
    # a run is never its own baseline, nor is a later one: the one before it is
    assert f"baseline: {(run_dir_of(none_yet) / 'report.json').resolve()}" in itself.stderr
    shutil.rmtree(good)  # as in CI, where only the history file is kept between jobs
    fourth = run(strict, "--baseline", "last-pass")
    assert read(fourth / "report.json")["gate"] == read(third / "report.json")["gate"]


def test_runs_on_another_gold_set_are_neither_baseline_nor_trend(tmp_path):
    passing = write_config(tmp_path, BM25, items=2, seeds="[1]", extra=LENIENT)
    run(passing), run(passing)
    other = tmp_path / "other"
    other.mkdir()
    shorter = write_config(other, BM25, items=1, seeds="[1]", extra=LENIENT)  # another gold set
    result = invoke("run", shorter, "--out", tmp_path / "runs", "--baseline", "last-pass")
    assert result.exit_code == 0 and "no baseline" in result.stderr and "found none in the history" in result.stderr
    alone = run_dir_of(result)
    assert "regressions" not in {c["name"] for c in read(alone / "report.json")["gate"]["checks"]}
    assert 'id="trends"' not in (alone / "report.html").read_text()
    assert len({p.run_dir for p in history.trend(tmp_path / STORE)}) == 3


def _append(store, run_dirs, report):
    for run_dir in run_dirs:
        history.record(store, run_dir, Report.from_json(report))


def test_appends_at_once_lose_nothing(tmp_path):
    config = write_config(tmp_path, BM25, items=1, seeds="[1]", extra=LENIENT)
    report = read(run(config) / "report.json")
    assert report["gate"]["verdict"] == "pass"
    store = tmp_path / "concurrent.sqlite"
    fork = multiprocessing.get_context("fork")
    batches = [[tmp_path / f"r{w}-{i}" for i in range(5)] for w in range(4)]
    workers = [fork.Process(target=_append, args=(store, batch, report)) for batch in batches]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert [w.exitcode for w in workers] == [0] * 4
    db = sqlite3.connect(store)
    assert db.execute("SELECT count(*) FROM runs").fetchone() == (20,)
    per_run = len(expected_values(report))
    assert db.execute("SELECT count(*) FROM metrics").fetchone() == (20 * per_run,)
    assert db.execute("SELECT count(*) FROM passing_reports").fetchone() == (history.KEPT_REPORTS,)
    assert db.execute("SELECT count(DISTINCT run_dir) FROM checks").fetchone() == (20,)


def test_the_report_shows_the_trend_from_the_second_run(tmp_path):
    config = write_config(tmp_path, BM25 + TFIDF, items=2, seeds="[1]")
    first = run(config)
    assert 'id="trends"' not in (first / "report.html").read_text()
    second = run(config)
    page = (second / "report.html").read_text()
    panel = re.search(r'<section id="trends">.*?</section>', page, re.S).group(0)
    assert "The last 2 runs" in panel
    rows = re.findall(r"<tr><td>(\w+)</td>(.*?)</tr>", panel, re.S)
    assert [name for name, _ in rows] == ["bm25", "tfidf"]
    report = read(second / "report.json")
    for name, cells in rows:
        assert cells.count("<svg") == 4
        shown = re.findall(r"<span class=num>([\d.]+)</span>", cells)
        metrics = report["summary"]["pipelines"][name]["metrics"]
        assert shown[:3] == [f"{metrics[m]:.3f}" for m in ("citation_match", "coverage", "delta_s_qr")]
        assert shown[3] == f"{expected_values(report)[(name, 'convergent_share')]:.3f}"
    run(config)  # a later run is not part of the second run's trend, and a rebuild draws the same panel
    assert invoke("report", second, "--no-gate").exit_code == 0
    rebuilt = re.search(r'<section id="trends">.*?</section>', (second / "report.html").read_text(), re.S)
    assert rebuilt.group(0) == panel


def test_the_trend_panel_escapes_what_it_shows():
    points = [
        history.Point(f"/r{i}", None, None, "pass", "<script>&", True, "coverage", 0.5 + i / 10) for i in range(2)
    ]
    panel = trend_panel(points)
    assert "<script>" not in panel and "&lt;script&gt;&amp;" in panel
    assert trend_panel(points[:1]) == ""  # one run is no trend


def _trigger(db):
    db.execute("CREATE TRIGGER refuse AFTER INSERT ON runs BEGIN SELECT RAISE(ABORT, 'no'); END")


def _renamed_column(db):
    db.execute("ALTER TABLE metrics RENAME COLUMN value TO val")


def _view(db):
    db.execute("CREATE VIEW latest AS SELECT * FROM runs")


def _version(db):
    db.execute("PRAGMA user_version = 7")


def _corrupt_pages(store):
    """The header of every page but the first (which holds the schema) overwritten."""
    data = bytearray(store.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for start in range(page, len(data), page):
        data[start : start + 8] = b"\xab" * 8
    store.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage, found",
    [
        (_trigger, "a trigger 'refuse' a history never has"),
        (_renamed_column, "table 'metrics' changed"),
        (_view, "a view 'latest' a history never has"),
        (_version, "one of schema version 7"),
        (None, "a damaged database"),
    ],
)
def test_a_damaged_history_stops_the_run_before_any_work(tmp_path, damage, found):
    config = write_config(tmp_path, BM25, items=1, seeds="[1]")
    first = run(config)
    store = tmp_path / STORE
    if damage is None:
        _corrupt_pages(store)
    else:
        db = sqlite3.connect(store)
        damage(db)
        db.commit()
        db.close()
    before = sorted(p.name for p in (tmp_path / "runs").iterdir())
    stopped = invoke("run", config, "--no-gate")
    assert stopped.exit_code == 3, stopped.output
    assert f"history.sqlite: expected a ragaudit history file (SQLite), found {found}" in stopped.stderr
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == before == sorted([first.name, "history.sqlite"])


HOLD = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN")
db.execute("SELECT count(*) FROM runs").fetchall()  # a reader's open transaction: no writer may commit
print("holding", flush=True)
time.sleep(120)
"""


def test_a_locked_history_costs_the_run_nothing(tmp_path, monkeypatch):
    config = write_config(tmp_path, BM25, items=1, seeds="[1]")
    run(config)
    store = tmp_path / STORE
    monkeypatch.setattr(history, "BUSY_WAIT_S", 0.3)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(store)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "holding\n"
        result = invoke("run", config, "--no-gate")
    finally:
        holder.kill()
        holder.wait()
    assert result.exit_code == 0, result.output  # the run's own exit code stands
    run_dir = run_dir_of(result)
    assert "warning: the run was not recorded in the history" in result.stderr
    assert "expected the history to be free, found it locked for 0.3 s" in result.stderr
    assert f"its run directory {run_dir} is complete" in result.stderr
    written = {p.name for p in run_dir.iterdir() if not p.name.startswith(".")}
    assert written == {
        "manifest.json", "traces.jsonl", "runs.parquet", "issues.jsonl", "report.json", "report.html",
        "traces.log", "rag_traces.sqlite", "junit.xml", "summary.md", "questions.parquet",
    }  # fmt: skip
    assert invoke("verify", run_dir).exit_code == 0
    recorded = [p.run_dir for p in history.trend(store)]
    assert str(run_dir.resolve()) not in recorded and len(set(recorded)) == 1


def test_history_reports_bad_stored_values_and_shows_the_rest(tmp_path):
    config = write_config(tmp_path, BM25, items=1, seeds="[1]")
    first, second = run(config), run(config)
    store = tmp_path / STORE
    db = sqlite3.connect(store)
    key = str(first.resolve())
    db.execute("UPDATE metrics SET value = NULL WHERE metric = 'coverage' AND run_dir = ?", (key,))
    db.execute("UPDATE metrics SET value = 'abc' WHERE metric = 'citation_match' AND run_dir = ?", (key,))
    db.execute("UPDATE metrics SET value = 1e999 WHERE metric = 'mrr' AND run_dir = ?", (key,))
    db.execute("UPDATE runs SET verdict = NULL, finished = x'ff' WHERE run_dir = ?", (key,))
    db.commit()
    db.close()
    coverage = read(second / "report.json")["summary"]["pipelines"]["bm25"]["metrics"]["coverage"]
    for fmt in ("text", "json"):
        result = invoke("history", "--store", store, "--format", fmt, "--plot", tmp_path / f"{fmt}.svg", "--all")
        assert result.exit_code == 0, result.output
        for metric, found in (("coverage", "null"), ("citation_match", "string 'abc'"), ("mrr", "number inf")):
            assert (
                f"warning: {store}: metrics[{key!r}, 'bm25', {metric!r}].value: expected a finite number, "
                f"found {found} (left out)"
            ) in result.stderr
        assert f"warning: {store}: runs[{key!r}].finished: expected text, found bytes (read as unknown)" in (
            result.stderr
        )
        assert "Traceback" not in result.output
    shown = {s["metric"]: s["runs"] for s in json.loads(result.stdout)}
    assert [r["value"] for r in shown["coverage"]] == [pytest.approx(coverage)]
    assert [r["verdict"] for r in shown["anchor_support"]] == ["?", read(second / "report.json")["gate"]["verdict"]]
    unknown = invoke("history", "--store", store, "--metric", "nope")  # still a usage error among bad values
    assert unknown.exit_code == 2 and "--metric: expected one of anchor_support, " in unknown.stderr
    only_bad = invoke("history", "--store", store, "--metric", "citation_match", "--last", "1")
    assert only_bad.exit_code == 0 and "citation_match" in only_bad.stdout
    db = sqlite3.connect(store)
    db.execute("UPDATE metrics SET value = 'x' WHERE metric = 'citation_match'")
    db.commit()
    db.close()
    none_left = invoke("history", "--store", store, "--metric", "citation_match")
    assert none_left.exit_code == 3
    assert (
        "expected recorded values, found none readable (3 stored values of the wrong kind, each named above)"
        in none_left.stderr
    )


@pytest.mark.parametrize(
    "stored, found",
    [
        (b"[]", "found array of 0"),
        (b"{}", "found one whose summary is missing (expected an object)"),
        (b'{"summary": NaN, "questions": [], "gate": {}}', "a damaged copy"),
        (b'{"summary": {}, "questions": {}, "gate": {}}', "found one whose questions is object (expected an array)"),
        (b"not json", "a damaged copy"),
    ],
)
def test_a_stored_baseline_that_is_not_a_report_is_a_clear_error(tmp_path, stored, found):
    config = write_config(tmp_path, BM25, items=1, seeds="[1]", extra=LENIENT)
    good = run(config)
    db = sqlite3.connect(tmp_path / STORE)
    db.execute("UPDATE passing_reports SET report = ?", (zlib.compress(stored),))
    db.commit()
    db.close()
    result = invoke("run", config, "--baseline", "last-pass")
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    assert f"{good.resolve()}" in result.stderr and found in result.stderr


def test_last_pass_finds_runs_recorded_before_the_corpus_hash_changed(tmp_path):
    """History rows and baselines written by a ragaudit that hashed a corpus folder the old way (no
    length prefixes) still name the same corpus."""
    config = write_config(tmp_path, BM25, items=1, seeds="[1]", extra=LENIENT)
    good = run(config)
    old = old_folder_hash(DEMO / "corpus")
    db = sqlite3.connect(tmp_path / STORE)
    db.execute("UPDATE runs SET corpus = ?", (old,))
    db.commit()
    db.close()
    later = run(config, "--baseline", "last-pass")
    assert read(later / "manifest.json")["baseline"] == str((good / "report.json").resolve())
    report = read(good / "report.json")
    report["meta"]["inputs"]["corpus"] = old
    (tmp_path / "old-report.json").write_text(json.dumps(report))
    assert invoke("run", config, "--baseline", tmp_path / "old-report.json").exit_code == 0
    report["meta"]["inputs"]["corpus"] = "0" * 64
    (tmp_path / "other-report.json").write_text(json.dumps(report))
    foreign = invoke("run", config, "--baseline", tmp_path / "other-report.json")
    assert foreign.exit_code == 3 and "expected a baseline built on the same corpus" in foreign.stderr


def old_folder_hash(folder) -> str:
    """How ragaudit hashed a folder before hash version 2: each file's name, a NUL, its bytes."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def test_the_readme_says_what_last_pass_does_before_any_run_passed(tmp_path):
    """The first `run` and `gate` with --baseline last-pass warn and gate without a baseline, as the
    README says (it once promised exit 3, which would leave CI with no passing run, ever)."""
    from pathlib import Path

    config = write_config(tmp_path, BM25, items=2, seeds="[1]", extra=LENIENT)
    first = invoke("run", config, "--baseline", "last-pass")
    assert first.exit_code == 0 and "warning: no baseline, so no regression checks" in first.stderr
    report = run_dir_of(first) / "report.json"
    (tmp_path / STORE).unlink()  # no history at all
    gated = invoke("gate", report, "--config", config, "--baseline", "last-pass")
    assert gated.exit_code == 0 and "warning: no baseline, so no regression checks" in gated.stderr
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = re.search(r"### `--baseline last-pass`\n(.*?)\n### ", readme, re.S).group(1)
    said = " ".join(section.split())
    assert (
        "While no run has passed yet (CI's first job), the run or gate goes on without a baseline, with a warning"
        in said
    )
    assert not re.search(r"[Nn]o passing run yet is an input error", said)
