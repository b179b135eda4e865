"""pytest plugin: an audit's verdict as test results, in any CI that reads pytest output.

    pytest --ragaudit configs/default.toml            # the option may be repeated
    pytest --ragaudit configs/default.toml --ragaudit-fresh

The audit of each config runs once per session (as `ragaudit run` does), and yields one test
per (pipeline, question) and one per gate check: a question fails when a failing gate check names
it (the message lists the checks and why each of its runs is or is not correct), a check fails
when the gate fails it (value, threshold, the questions it names). A finished audit is reused
while its inputs are unchanged (config, gold set and corpus hashes, ragaudit's version): it is
kept under `pytest/` in ragaudit's cache folder; `--ragaudit-fresh` runs it again.

In a test module, the `ragaudit_run` fixture gives the loaded run (`ragaudit.load_run`) of the
config named by `@pytest.mark.ragaudit("configs/x.toml")`, else by the `ragaudit_config` ini
option. Nothing heavy is imported until an audit is asked for.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

CACHE_FOLDER = "pytest"
POINTER = "run_dir.txt"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ragaudit", "RAG audit (ragaudit)")
    group.addoption(
        "--ragaudit", action="append", default=[], metavar="CONFIG", help="audit CONFIG and report it as tests"
    )
    group.addoption("--ragaudit-fresh", action="store_true", help="run the audits again even when cached")
    parser.addini("ragaudit_config", "config of the ragaudit_run fixture when no marker names one", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ragaudit(config): the config whose audit the ragaudit_run fixture loads")


# ---- the audit, once per inputs -------------------------------------------------------------------


def inputs_key(config_path: Path) -> str:
    """What decides an audit's result: the config, gold set and corpus hashes and ragaudit's version."""
    from ragaudit import __version__, rundir
    from ragaudit.io.config import load_config
    from ragaudit.io.corpus import load_corpus

    config = load_config(config_path)
    corpus = load_corpus(config.corpus) if config.corpus else None
    record = rundir.input_record(config, corpus)["inputs"]
    body = json.dumps([__version__, str(config_path.resolve()), record], sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def audited(config_path: Path, *, fresh: bool = False) -> Path:
    """The run directory of an audit of `config_path` with the current inputs, run now if needed."""
    from ragaudit.app import audit_config
    from ragaudit.io.config import load_config
    from ragaudit.metrics.embed import cache_dir

    folder = cache_dir() / CACHE_FOLDER / inputs_key(config_path)
    pointer = folder / POINTER
    if not fresh and pointer.is_file():
        run_dir = Path(pointer.read_text(encoding="utf-8").strip())
        if (run_dir / "report.json").is_file():
            return run_dir
    folder.mkdir(parents=True, exist_ok=True)
    outcome = audit_config(load_config(config_path), out=folder)
    pointer.write_text(str(outcome.run_dir), encoding="utf-8")
    return outcome.run_dir


# ---- collection -----------------------------------------------------------------------------------


class AuditFailure(Exception):
    """A question flagged by the gate, or a failing gate check."""


class QuestionItem(pytest.Item):
    def __init__(self, *, question: dict, failing: list[dict], **kwargs: Any):
        super().__init__(**kwargs)
        self.question, self.failing = question, failing

    def runtest(self) -> None:
        if self.failing:
            lines = [f"{c['name']}: value {c['value']}, threshold {c['threshold']}" for c in self.failing]
            for run in self.question.get("runs") or []:
                verdict = "correct" if run.get("correct") else "not correct"
                lines.append(f"  v{run.get('variant')} s{run.get('seed')}: {verdict}: {run.get('why')}")
            raise AuditFailure("\n".join(lines))

    def repr_failure(self, excinfo, style=None) -> str:
        if isinstance(excinfo.value, AuditFailure):
            return f"{self.question['pipeline']} · {self.question['qid']} is flagged by the gate:\n{excinfo.value}"
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self):
        return self.path, None, f"ragaudit question {self.name}"


class CheckItem(pytest.Item):
    def __init__(self, *, check: dict, **kwargs: Any):
        super().__init__(**kwargs)
        self.check = check

    def runtest(self) -> None:
        if not self.check["passed"]:
            c = self.check
            named = ", ".join(c.get("questions") or []) or "none"
            detail = f" ({c['detail']})" if c.get("detail") else ""
            raise AuditFailure(f"value {c['value']}, threshold {c['threshold']}{detail}; questions: {named}")

    def repr_failure(self, excinfo, style=None) -> str:
        if isinstance(excinfo.value, AuditFailure):
            return f"gate check {self.name} failed: {excinfo.value}"
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self):
        return self.path, None, f"ragaudit gate check {self.name}"


class AuditCollector(pytest.Collector):
    """The tests of one config's audit."""

    def __init__(self, *, config_path: Path, **kwargs: Any):
        super().__init__(**kwargs)
        self.config_path = config_path

    def collect(self):
        run_dir = audited(self.config_path, fresh=self.config.getoption("ragaudit_fresh"))
        report = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
        failing: dict[tuple[str, str], list[dict]] = {}
        for check in report["gate"]["checks"]:
            if not check["passed"]:
                for qid in check.get("questions") or []:
                    failing.setdefault((check["pipeline"], qid), []).append(check)
        for q in report["questions"]:
            yield QuestionItem.from_parent(
                self,
                name=f"{q['pipeline']}::{q['qid']}",
                question=q,
                failing=failing.get((q["pipeline"], q["qid"]), []),
            )
        for check in report["gate"]["checks"]:
            yield CheckItem.from_parent(self, name=f"gate::{check['pipeline']}::{check['name']}", check=check)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    for name in config.getoption("ragaudit") or []:
        path = Path(name)
        if not path.is_absolute():
            path = Path(config.invocation_params.dir) / path
        if not path.is_file():
            raise pytest.UsageError(f"--ragaudit {name}: no such config file")
        # no brackets in the name: JUnit reports would read what follows one as test parameters
        collector = AuditCollector.from_parent(session, name=f"ragaudit-{path.stem}", config_path=path)
        items.extend(collector.collect())


# ---- the fixture ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def _ragaudit_runs() -> dict:
    return {}


@pytest.fixture
def ragaudit_run(request: pytest.FixtureRequest, _ragaudit_runs: dict):
    """The loaded run (`ragaudit.load_run`) of the marked or configured config's audit."""
    from ragaudit.results import load_run

    marker = request.node.get_closest_marker("ragaudit")
    name = marker.args[0] if marker and marker.args else request.config.getini("ragaudit_config")
    if not name:
        raise pytest.UsageError("ragaudit_run needs @pytest.mark.ragaudit('config.toml') or ragaudit_config in the ini")
    path = Path(name)
    if not path.is_absolute():
        path = Path(request.config.rootpath) / path
    if path not in _ragaudit_runs:
        _ragaudit_runs[path] = load_run(audited(path, fresh=request.config.getoption("ragaudit_fresh")))
    return _ragaudit_runs[path]
