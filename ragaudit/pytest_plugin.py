"""pytest plugin: an audit's verdict as test results, in any CI that reads pytest output.

    pytest --ragaudit configs/default.toml            # the option may be repeated
    pytest --ragaudit configs/default.toml --ragaudit-fresh

The audit of each config runs once per session (as `ragaudit run` does), and yields one test
per (pipeline, question), `configs/default.toml::bm25::SEC-KEYS-1`, and one per gate check,
`configs/default.toml::gate::bm25::citation_match_min`: a question fails when a failing gate check
names it (the message lists the checks and why each of its runs is or is not correct), a check
fails when the gate fails it (value, threshold, the questions it names). A config that cannot be
audited (invalid, a gold-set error, a pipeline that does not start) gives one failing test,
`configs/default.toml::audit`, whose message says where and why.

A finished audit is reused while its inputs are unchanged: ragaudit's version and the sha256 of the
config, the gold set, the corpus, replay recordings, and the embedding and support models' files.
A pipeline's own code is not among them: after changing a `python` or `command` pipeline, pass
`--ragaudit-fresh`. The latest audit of each config is kept under `pytest/` in ragaudit's cache
folder; older ones are removed when it is replaced.

In a test module, the `ragaudit_run` fixture gives the loaded run (`ragaudit.load_run`) of the
config named by `@pytest.mark.ragaudit("configs/x.toml")`, else by the `ragaudit_config` ini
option (relative paths from the rootdir). Each config is audited once per session, whichever of
the option and the fixture asks first, and every test gets the same loaded run. Nothing heavy is
imported until an audit is asked for.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

CACHE_FOLDER = "pytest"
POINTER = "audit.json"  # {"inputs": key, "run_dir": name} of the audit kept for one config
SESSION_AUDITS = pytest.StashKey[dict]()  # config path -> run directory, or the error that stopped it
SESSION_RUNS = pytest.StashKey[dict]()  # config path -> loaded run, for the fixture


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ragaudit", "RAG audit (ragaudit)")
    group.addoption(
        "--ragaudit", action="append", default=[], metavar="CONFIG", help="audit CONFIG and report it as tests"
    )
    group.addoption("--ragaudit-fresh", action="store_true", help="run the audits again even when cached")
    parser.addini("ragaudit_config", "config of the ragaudit_run fixture when no marker names one", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ragaudit(config): the config whose audit the ragaudit_run fixture loads")
    config.stash[SESSION_AUDITS] = {}
    config.stash[SESSION_RUNS] = {}


# ---- the audit, once per inputs -------------------------------------------------------------------


def inputs_key(config: Any) -> str:
    """What decides an audit's result: ragaudit's version and the sha256 of every file the config
    names (a missing one counts as absent; the audit itself then says what is wrong)."""
    from ragaudit import __version__
    from ragaudit.io.files import sha256_file

    named: dict[str, Any] = {
        "config": config.path,
        "gold": config.gold,
        "corpus": config.corpus,
        "embedder": Path(config.model).expanduser(),  # a model folder; a model's name is in the config
        "support_model": config.support.get("model"),
        "support_params": config.support.get("params"),
    }
    for pipeline in config.pipelines:
        if pipeline.kind == "replay":
            named[f"traces of {pipeline.name}"] = pipeline.options.get("traces")
    hashes = {name: sha256_file(Path(p)) if p and Path(p).exists() else None for name, p in named.items()}
    body = json.dumps({"ragaudit": __version__, **hashes}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def cache_folder(config_path: Path) -> Path:
    """Where the audit of `config_path` is kept."""
    from ragaudit.metrics.embed import cache_dir

    name = hashlib.sha256(str(config_path.resolve()).encode()).hexdigest()[:16]
    return cache_dir() / CACHE_FOLDER / name


def audited(config_path: Path, *, fresh: bool = False) -> Path:
    """The run directory of an audit of `config_path` with the current inputs, run now if needed.
    One process at a time audits a config (a file lock), so parallel sessions run it once."""
    import shutil

    from filelock import FileLock

    from ragaudit.app import audit_config
    from ragaudit.io.config import load_config

    config = load_config(config_path)
    key = inputs_key(config)
    folder = cache_folder(config_path)
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / ".lock")):
        kept = _kept(folder)
        if not fresh and kept.get("inputs") == key and (folder / kept["run_dir"] / "report.json").is_file():
            return folder / kept["run_dir"]
        run_dir = audit_config(config, out=folder).run_dir
        temporary = folder / f"{POINTER}.tmp"
        temporary.write_text(json.dumps({"inputs": key, "run_dir": run_dir.name}), encoding="utf-8")
        os.replace(temporary, folder / POINTER)
        for old in folder.iterdir():
            if old.is_dir() and old.name != run_dir.name:
                shutil.rmtree(old, ignore_errors=True)
    return run_dir


def _kept(folder: Path) -> dict:
    try:
        kept = json.loads((folder / POINTER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return kept if isinstance(kept, dict) and isinstance(kept.get("run_dir"), str) else {}


def session_audit(config: pytest.Config, path: Path) -> Path:
    """The run directory of `path`'s audit in this session: audited at most once per session."""
    audits = config.stash[SESSION_AUDITS]
    if path not in audits:
        try:
            audits[path] = audited(path, fresh=config.getoption("ragaudit_fresh"))
        except Exception as exc:
            audits[path] = exc
    if isinstance(audits[path], Exception):
        raise audits[path]
    return audits[path]


# ---- collection -----------------------------------------------------------------------------------


class AuditFailure(Exception):
    """A question flagged by the gate, a failing gate check, or a config that could not be audited."""


class QuestionItem(pytest.Item):
    def __init__(self, *, question: dict, failing: list[dict], **kwargs: Any):
        super().__init__(**kwargs)
        self.question, self.failing = question, failing

    def runtest(self) -> None:
        if self.failing:
            lam, qid = self.question.get("lambda") or {}, self.question.get("qid")
            lines = [f"{c['name']}: value {c['value']}, threshold {c['threshold']}" for c in self.failing]
            lines.append(f"lambda {lam.get('state')} (css {lam.get('css')})")
            lines += [f"  regression: {why}" for c in self.failing if (why := (c.get("reasons") or {}).get(qid))]
            for run in self.question.get("runs") or []:
                verdict = "correct" if run.get("correct") else "not correct"
                lines.append(f"  v{run.get('variant')} s{run.get('seed')}: {verdict}: {run.get('why')}")
                lines += [
                    f"    claim {c.get('n')} {c.get('grounding')}: {c.get('text')}"
                    for c in run.get("claims") or []
                    if c.get("grounding") in ("unsupported", "uncited")
                ]
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


class AuditErrorItem(pytest.Item):
    """A config that could not be audited: its error (file, line, reason) as one failing test."""

    def __init__(self, *, error: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.error = error

    def runtest(self) -> None:
        raise AuditFailure(self.error)

    def repr_failure(self, excinfo, style=None) -> str:
        if isinstance(excinfo.value, AuditFailure):
            return f"the audit of {self.path} could not run:\n{excinfo.value}"
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self):
        return self.path, None, f"ragaudit audit of {self.path.name}"


class AuditCollector(pytest.Collector):
    """The tests of one config's audit."""

    def collect(self):
        from ragaudit.errors import RagauditError
        from ragaudit.io.jsonl import read_json_file

        try:
            report = read_json_file(session_audit(self.config, self.path) / "report.json", what="report")
        except RagauditError as exc:
            yield AuditErrorItem.from_parent(self, name="audit", error=str(exc))
            return
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


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect, so they apply to these items too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    seen: set[Path] = set()
    for name in config.getoption("ragaudit") or []:
        path = (Path(config.invocation_params.dir) / name).resolve()
        if not path.is_file():
            raise pytest.UsageError(f"--ragaudit {name}: no such config file")
        if path in seen:
            continue
        seen.add(path)
        # named as pytest names a test file (relative to the rootdir), so reports read
        # `configs/default.toml::bm25::SEC-KEYS-1`; no brackets, which JUnit readers take for parameters
        shown = Path(os.path.relpath(path, config.rootpath)).as_posix()
        collector = AuditCollector.from_parent(session, name=shown, path=path, nodeid=shown)
        collected = list(collector.collect())
        # reported as pytest reports a collected file, so "collected N items" counts them
        session.ihook.pytest_collectreport(report=pytest.CollectReport(shown, "passed", None, collected))
        items.extend(collected)


# ---- the fixture ----------------------------------------------------------------------------------


@pytest.fixture
def ragaudit_run(request: pytest.FixtureRequest):
    """The loaded run (`ragaudit.load_run`) of the marked or configured config's audit, shared by
    every test of the session that names the same config."""
    from ragaudit.errors import RagauditError
    from ragaudit.results import load_run

    marker = request.node.get_closest_marker("ragaudit")
    name = marker.args[0] if marker and marker.args else request.config.getini("ragaudit_config")
    if not name:
        pytest.fail(
            "ragaudit_run needs @pytest.mark.ragaudit('config.toml') or ragaudit_config in the ini", pytrace=False
        )
    path = (Path(request.config.rootpath) / name).resolve()
    if not path.is_file():
        pytest.fail(f"ragaudit_run: {name}: no such config file", pytrace=False)
    runs = request.config.stash[SESSION_RUNS]
    if path not in runs:
        try:
            runs[path] = load_run(session_audit(request.config, path))
        except RagauditError as exc:
            pytest.fail(f"the audit of {name} could not run:\n{exc}", pytrace=False)
    return runs[path]
