"""The pytest plugin: `pytest --ragaudit CONFIG` turns an audit into one test per question and per
gate check, failing exactly where the gate does; it reuses a finished audit while the inputs are
unchanged; and the `ragaudit_run` fixture loads a marked config's run."""

import json
from xml.etree import ElementTree as ET

import pytest
from helpers import BM25, LENIENT, invoke, run_dir_of, write_config

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module", autouse=True)
def audit_imported(tmp_path_factory):
    """One audit in this process before any test: `pytester` restores sys.modules after each test,
    and numpy, once loaded, cannot be imported a second time."""
    folder = tmp_path_factory.mktemp("warm")
    assert invoke("run", write_config(folder, BM25, items=1, seeds="[1]"), "--no-gate").exit_code == 0
    import ragaudit.pytest_plugin  # noqa: F401
    import ragaudit.results  # noqa: F401


def mkdir_config(tmp_path, name, extra=""):
    folder = tmp_path / name
    folder.mkdir()
    return write_config(folder, BM25, items=4, seeds="[1]", extra=extra)


def expected_outcome(config) -> tuple[dict, set[str], set[str]]:
    """From a `ragaudit run` of the same config: its report, the questions failing checks name
    (as pipeline::qid) and the failing checks (as pipeline::name)."""
    result = invoke("run", config, "--no-gate")
    report = json.loads((run_dir_of(result) / "report.json").read_text())
    failing = [c for c in report["gate"]["checks"] if not c["passed"]]
    questions = {f"{c['pipeline']}::{q}" for c in failing for q in c.get("questions") or []}
    return report, questions, {f"{c['pipeline']}::{c['name']}" for c in failing}


def run_plugin(pytester, tmp_path, *args) -> tuple[object, dict[str, str], dict[str, str]]:
    """pytest in a subprocess (an audit imports numpy, which cannot be imported twice in one
    process); its outcomes from the JUnit XML it writes: test name -> passed / failed, and the
    failure messages."""
    junit = tmp_path / f"junit-{len(list(tmp_path.glob('junit-*.xml')))}.xml"
    result = pytester.runpytest_subprocess(*args, f"--junitxml={junit}", "-p", "no:cacheprovider")
    outcome, messages = {}, {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        collector, _, scope = case.get("classname").lstrip(".").partition(".")  # ragaudit-<stem>.<pipeline | gate...>
        assert collector == "ragaudit-audit"
        name = "::".join([*scope.split("."), case.get("name")])
        failure = case.find("failure")
        outcome[name] = "failed" if failure is not None else "passed"
        if failure is not None:
            messages[name] = (failure.get("message") or "") + (failure.text or "")
    return result, outcome, messages


def test_a_failing_audit_fails_exactly_the_flagged_questions_and_checks(pytester, tmp_path):
    (tmp_path / "strict").mkdir()
    config = write_config(tmp_path / "strict", BM25, items=6, seeds="[1]")
    report, flagged, failing_checks = expected_outcome(config)
    assert flagged and failing_checks, "this gold subset fails the default gate"
    result, seen, messages = run_plugin(pytester, tmp_path, "--ragaudit", str(config))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    questions = {k: v for k, v in seen.items() if not k.startswith("gate::")}
    checks = {k[len("gate::") :]: v for k, v in seen.items() if k.startswith("gate::")}
    assert len(questions) == len(report["questions"]) and len(checks) == len(report["gate"]["checks"])
    assert {k for k, v in questions.items() if v == "failed"} == flagged
    assert {k for k, v in checks.items() if v == "failed"} == failing_checks
    flagged_text = messages[sorted(flagged)[0]]
    assert "is flagged by the gate" in flagged_text and "v0 s1" in flagged_text


def test_a_passing_audit_passes_every_item_and_writes_junit(pytester, tmp_path):
    config = mkdir_config(tmp_path, "lenient", extra=LENIENT)
    result, seen, _ = run_plugin(pytester, tmp_path, "--ragaudit", str(config))
    assert result.ret == pytest.ExitCode.OK
    assert seen and set(seen.values()) == {"passed"}
    assert len(seen) == 4 + len([k for k in seen if k.startswith("gate::")])


def test_a_second_session_reuses_the_audit_until_fresh_is_asked(pytester, tmp_path):
    config = mkdir_config(tmp_path, "cached", extra=LENIENT)
    from ragaudit.pytest_plugin import audited

    first = audited(config)
    assert audited(config) == first  # unchanged inputs: the same run directory
    _, seen, _ = run_plugin(pytester, tmp_path, "--ragaudit", str(config))
    assert set(seen.values()) == {"passed"}
    assert audited(config) == first and [p for p in first.parent.iterdir() if p.is_dir()] == [first]
    assert audited(config, fresh=True) != first
    gold = config.parent / "gold.jsonl"
    gold.write_text("".join(gold.read_text().splitlines(keepends=True)[:3]))  # the inputs change
    assert audited(config) not in (first,)


def test_the_fixture_loads_the_marked_config(pytester, tmp_path):
    config = mkdir_config(tmp_path, "fixture", extra=LENIENT)
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.ragaudit({str(config)!r})
        def test_means(ragaudit_run):
            assert len(ragaudit_run.runs) == 4 * 3
            assert set(ragaudit_run.questions["pipeline"]) == {{"bm25"}}
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_missing_config_is_a_usage_error(pytester, tmp_path):
    result = pytester.runpytest("--ragaudit", str(tmp_path / "nope.toml"), "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--ragaudit*nope.toml: no such config file*"])
