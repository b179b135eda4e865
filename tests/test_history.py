"""The run history: every run appends its summary (read back here against report.json), the
`history` command prints and plots trends, `--baseline last-pass` finds the latest passing run,
appends never lose rows, and report.html shows the trend once there are two runs."""

import json
import sqlite3
import subprocess
import threading
from xml.etree import ElementTree as ET

import pytest
from helpers import BM25, LENIENT, invoke, run_dir_of, write_config

from ragaudit import history


def run(config, *args):
    result = invoke("run", config, "--no-gate", *args)
    assert result.exit_code == 0, result.output
    return run_dir_of(result)


def test_every_run_appends_its_summary(tmp_path):
    config = write_config(tmp_path, BM25, items=3, seeds="[1]")
    first, second = run(config), run(config)
    store = tmp_path / "runs" / "history.sqlite"
    db = sqlite3.connect(store)
    recorded = [row[0] for row in db.execute("SELECT run_dir FROM runs ORDER BY finished, run_dir")]
    assert recorded == [str(first.resolve()), str(second.resolve())]
    for run_dir in (first, second):
        report = json.loads((run_dir / "report.json").read_text())
        metrics = {
            (p, m): v
            for p, summary in report["summary"]["pipelines"].items()
            for m, v in summary["metrics"].items()
            if isinstance(v, (int, float))
        }
        stored = db.execute("SELECT pipeline, metric, value FROM metrics WHERE run_dir = ?", (str(run_dir.resolve()),))
        assert {(p, m): v for p, m, v in stored} == pytest.approx(metrics)
        checks = db.execute("SELECT name, passed FROM checks WHERE run_dir = ?", (str(run_dir.resolve()),)).fetchall()
        assert sorted(checks) == sorted((c["name"], int(c["passed"])) for c in report["gate"]["checks"])
        verdict = db.execute("SELECT verdict, gold FROM runs WHERE run_dir = ?", (str(run_dir.resolve()),)).fetchone()
        assert verdict == (report["gate"]["verdict"], report["meta"]["inputs"]["gold"])


def test_the_history_command_prints_filters_and_plots(tmp_path):
    config = write_config(tmp_path, BM25, items=2, seeds="[1]")
    dirs = [run(config) for _ in range(3)]
    text = invoke("history", "--config", config)
    assert text.exit_code == 0 and text.output.startswith("3 runs in ")
    assert "bm25" in text.output and "citation_match" in text.output
    as_json = json.loads(invoke("history", "--config", config, "--metric", "coverage", "--format", "json").output)
    assert [s["metric"] for s in as_json] == ["coverage"]
    assert [r["run_dir"] for r in as_json[0]["runs"]] == [str(d.resolve()) for d in dirs]
    last = json.loads(invoke("history", "--config", config, "--last", "2", "--format", "json").output)
    assert all(len(s["runs"]) == 2 for s in last)
    plot = tmp_path / "trend.svg"
    assert invoke("history", "--config", config, "--pipeline", "bm25", "--plot", plot).exit_code == 0
    assert ET.parse(plot).getroot().tag.endswith("svg")
    missing = invoke("history", "--store", tmp_path / "none.sqlite")
    assert missing.exit_code == 3 and "no run recorded yet" in missing.stderr


def test_baseline_last_pass_is_the_latest_passing_run(tmp_path):
    passing = write_config(tmp_path, BM25, items=2, seeds="[1]", extra=LENIENT)
    assert invoke("run", passing, "--baseline", "last-pass").exit_code == 3  # nothing has passed yet
    good = run(passing)
    strict = tmp_path / "strict.toml"
    strict.write_text(passing.read_text().replace(LENIENT, ""))
    later = run(strict)  # same gold set and corpus, fails its gate: never a baseline
    assert json.loads((later / "report.json").read_text())["gate"]["verdict"] == "fail"
    third = run(strict, "--baseline", "last-pass")
    manifest = json.loads((third / "manifest.json").read_text())
    assert manifest["baseline"] == str((good / "report.json").resolve())
    gate = invoke("gate", third / "report.json", "--config", strict, "--baseline", "last-pass", "--format", "json")
    good_report = json.loads((good / "report.json").read_text())
    drift = {c["name"]: c for c in json.loads(gate.output)["checks"] if c["name"] == "drift_coverage"}
    expected = good_report["summary"]["pipelines"]["bm25"]["metrics"]["coverage"]
    assert drift["drift_coverage"]["detail"].startswith(f"baseline {expected:.4f}")


def test_appends_at_once_lose_nothing(tmp_path):
    config = write_config(tmp_path, BM25, items=1, seeds="[1]")
    report = json.loads((run(config) / "report.json").read_text())
    store = tmp_path / "concurrent.sqlite"
    threads = [threading.Thread(target=history.record, args=(store, tmp_path / f"r{i}", report)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sqlite3.connect(store).execute("SELECT count(*) FROM runs").fetchone() == (8,)


def test_the_report_shows_the_trend_from_the_second_run(tmp_path):
    config = write_config(tmp_path, BM25, items=2, seeds="[1]")
    assert 'id="trends"' not in (run(config) / "report.html").read_text()
    page = (run(config) / "report.html").read_text()
    assert 'id="trends"' in page and "The last 2 runs" in page


def test_the_git_commit_of_the_config_is_recorded(tmp_path):
    config = write_config(tmp_path, BM25, items=1, seeds="[1]")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "audit.toml"], check=True)
    subprocess.run([*git, "commit", "-qm", "config"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    run(config)
    assert history.trend(tmp_path / "runs" / "history.sqlite")[0].git_commit == head
