"""pytest plugin: an audit's verdict as test results, in any CI that reads pytest output.

    pytest --ragaudit configs/default.toml            # the option may be repeated
    pytest --ragaudit configs/default.toml --ragaudit-fresh

The audit of each config runs once per session (as `ragaudit run` does), and yields one test
per (pipeline, question), `configs/default.toml::bm25::SEC-KEYS-1`, and one per gate check,
`configs/default.toml::gate::bm25::citation_match_min`: a question fails when a failing gate check
names it (the message lists the checks, why this question fails each (its own λ state and css, its
worst ΔS, its unmatched runs), and why each of its runs is or is not correct), a check
fails when the gate fails it (value, threshold, the questions it names). A config that cannot be
audited (invalid, a gold-set error, a pipeline that does not start) gives one failing test,
`configs/default.toml::audit`, whose message says where and why.

A finished audit is reused while its inputs are unchanged: ragaudit's version and the sha256 of the
config, the gold set, the corpus, replay recordings, the embedding and support models' files, and
each pipeline's own code (a `python` pipeline's module and the files of its package, a `command`
pipeline's executable and the files its arguments name). It is reused only once it verifies (its
traces and outputs unchanged since they were written); one that does not is set aside and audited
again. The latest audit of each config is kept under `pytest/` in ragaudit's cache folder; older
ones are removed once no session still reads them (`ragaudit.flows.auditcache`).

In a test module, the `ragaudit_run` fixture gives the loaded run (`ragaudit.load_run`) of the
config named by `@pytest.mark.ragaudit("configs/x.toml")`, else by the `ragaudit_config` ini
option (relative paths from the rootdir). Each config is audited once per session, whichever of
the option and the fixture asks first, and every test gets the same loaded run. Nothing heavy is
imported until an audit is asked for.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, cast

import pytest

if TYPE_CHECKING:
    from _pytest._code.code import TracebackStyle

    from ragaudit.flows.auditcache import Hold
    from ragaudit.outputs.results import Run

# config path -> run directory, or the error that stopped it
SESSION_AUDITS: pytest.StashKey[dict[Path, Path | Exception]] = pytest.StashKey()
SESSION_RUNS: pytest.StashKey[dict[Path, Run]] = pytest.StashKey()  # config path -> loaded run, for the fixture
SESSION_HOLDS: pytest.StashKey[list[Hold]] = (
    pytest.StashKey()
)  # the kept runs this session reads, released when it ends


class KeptAuditWarning(UserWarning):
    """A kept audit did not verify and was audited again."""


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
    config.stash[SESSION_HOLDS] = []


def pytest_unconfigure(config: pytest.Config) -> None:
    for hold in config.stash.get(SESSION_HOLDS, []):
        hold.release()


# ---- the audit, once per inputs -------------------------------------------------------------------


def session_audit(config: pytest.Config, path: Path) -> Path:
    """The run directory of `path`'s audit in this session: audited at most once per session, and
    held (never deleted by another session) until the session ends."""
    from ragaudit.flows.auditcache import kept_audit

    audits = config.stash[SESSION_AUDITS]
    if path not in audits:
        try:
            run_dir, hold, said = kept_audit(path, fresh=config.getoption("ragaudit_fresh"))
        except Exception as exc:  # shown as one failing test: never an internal error of pytest
            audits[path] = exc
        else:
            config.stash[SESSION_HOLDS].append(hold)
            audits[path] = run_dir
            for line in said:
                warnings.warn(line, KeptAuditWarning, stacklevel=2)
    found = audits[path]
    if isinstance(found, Exception):
        raise found
    return found


def audit_error(exc: Exception) -> str:
    """What stopped an audit, as a test's message: ragaudit's own errors say where and why; an
    error of the system (a file that cannot be opened) names the file."""
    from ragaudit.core.errors import RagauditError

    if isinstance(exc, RagauditError):
        return str(exc)
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror or exc}"
    return f"{type(exc).__name__}: {exc}"


def read_report(run_dir: Path) -> dict[str, Any]:
    """The audit's report.json, with what the plugin reads checked: an InputError naming the file
    and what it lacks otherwise."""
    from ragaudit.core.errors import InputError, Problem
    from ragaudit.flows.auditcache import report_problem
    from ragaudit.io.jsonfiles import read_json_file

    path = run_dir / "report.json"
    report: dict[str, Any] = read_json_file(path, what="report")
    problem = report_problem(report)
    if problem:
        raise InputError(Problem(str(path), problem))
    return report


# ---- collection -----------------------------------------------------------------------------------


class AuditFailure(Exception):
    """A question flagged by the gate, a failing gate check, or a config that could not be audited."""


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _against(check: dict[str, Any]) -> str:
    """`value 0.627, threshold 0.9`: rounded as the reports round them, never 0.6266666666666667."""
    from ragaudit.outputs.render.formatting import against, limit

    return f"value {against(check.get('value'), check.get('threshold'))}, threshold {limit(check.get('threshold'))}"


class QuestionItem(pytest.Item):
    def __init__(self, *, question: dict[str, Any], failing: list[dict[str, Any]], **kwargs: Any):
        super().__init__(**kwargs)
        self.question, self.failing = question, failing

    def runtest(self) -> None:
        if self.failing:
            from ragaudit.core.model import Check, Question
            from ragaudit.decisions.gating import question_why
            from ragaudit.outputs.render.formatting import num

            lam, question = _mapping(self.question.get("lambda")), Question.from_json(self.question, "question")
            lines = [
                f"{c['name']}: {_against(c)}"
                + (f"; this question: {why}" if (why := question_why(Check.from_json(c, "check"), question)) else "")
                for c in self.failing
            ]
            lines.append(f"lambda {lam.get('state')} (css {num(lam.get('css'))})")
            for run in self.question.get("runs") or []:
                verdict = "correct" if run.get("correct") else "not correct"
                lines.append(f"  v{run.get('variant')} s{run.get('seed')}: {verdict}: {run.get('why')}")
                lines += [
                    f"    claim {c.get('n')} {c.get('grounding')}: {c.get('text')}"
                    for c in run.get("claims") or []
                    if c.get("grounding") != "supported"
                ]
            raise AuditFailure("\n".join(lines))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None) -> str:
        if isinstance(excinfo.value, AuditFailure):
            return f"{self.question['pipeline']} · {self.question['qid']} is flagged by the gate:\n{excinfo.value}"
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.path, None, f"ragaudit question {self.name}"


class CheckItem(pytest.Item):
    def __init__(self, *, check: dict[str, Any], **kwargs: Any):
        super().__init__(**kwargs)
        self.check = check

    def runtest(self) -> None:
        if not self.check["passed"]:
            c = self.check
            named = ", ".join(c.get("questions") or []) or "none"
            detail = f" ({c['detail']})" if c.get("detail") else ""
            raise AuditFailure(f"{_against(c)}{detail}; questions: {named}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None) -> str:
        if isinstance(excinfo.value, AuditFailure):
            return f"gate check {self.name} failed: {excinfo.value}"
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.path, None, f"ragaudit gate check {self.name}"


class AuditErrorItem(pytest.Item):
    """A config that could not be audited: its error (file, line, reason) as one failing test."""

    def __init__(self, *, error: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.error = error

    def runtest(self) -> None:
        raise AuditFailure(self.error)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None) -> str:
        if isinstance(excinfo.value, AuditFailure):
            return f"the audit of {self.path} could not run:\n{excinfo.value}"
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.path, None, f"ragaudit audit of {self.path.name}"


class AuditCollector(pytest.Collector):
    """The tests of one config's audit."""

    def collect(self) -> Iterator[pytest.Item]:
        try:
            report = read_report(session_audit(self.config, self.path))
        except Exception as exc:  # one failing test says why, whatever stopped the audit
            yield AuditErrorItem.from_parent(self, name="audit", error=audit_error(exc))
            return
        failing: dict[tuple[str, str], list[dict[str, Any]]] = {}
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
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
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
        nodes = cast("list[pytest.Item | pytest.Collector]", collected)  # a list of items, which the report only reads
        session.ihook.pytest_collectreport(report=pytest.CollectReport(shown, "passed", None, nodes))
        items.extend(collected)


# ---- the fixture ----------------------------------------------------------------------------------


@pytest.fixture
def ragaudit_run(request: pytest.FixtureRequest) -> Run:
    """The loaded run (`ragaudit.load_run`) of the marked or configured config's audit, shared by
    every test of the session that names the same config."""
    from ragaudit.outputs.results import load_run

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
            run_dir = session_audit(request.config, path)
            read_report(run_dir)
            runs[path] = load_run(run_dir)
        except Exception as exc:  # a failing test that says why, not an error of pytest
            pytest.fail(f"the audit of {name} could not run:\n{audit_error(exc)}", pytrace=False)
    return runs[path]
