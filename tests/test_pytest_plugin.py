"""The pytest plugin: `pytest --ragaudit CONFIG` turns an audit into one test per question and per
gate check, failing exactly where the gate of a `ragaudit run` of the same config does; it reuses a
finished audit while the inputs are unchanged and runs it again under `--ragaudit-fresh`; a config
that cannot be audited is one failing test; the `ragaudit_run` fixture loads a marked or configured
config's run; and loading the plugin imports nothing heavy."""

import json
import subprocess
import sys
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


def make_config(pytester, name, *, items=4, extra=""):
    """A config in a folder of the pytester directory (the rootdir), so its tests are named
    `<name>/audit.toml::...`."""
    folder = pytester.path / name
    folder.mkdir()
    return write_config(folder, BM25, items=items, seeds="[1]", extra=extra)


def expected_outcome(config) -> tuple[dict, set[str], set[str]]:
    """From a `ragaudit run` of the same config: its report, the questions failing checks name
    (as pipeline::qid) and the failing checks (as pipeline::name)."""
    result = invoke("run", config, "--no-gate")
    report = json.loads((run_dir_of(result) / "report.json").read_text())
    failing = [c for c in report["gate"]["checks"] if not c["passed"]]
    questions = {f"{c['pipeline']}::{q}" for c in failing for q in c.get("questions") or []}
    return report, questions, {f"{c['pipeline']}::{c['name']}" for c in failing}


def run_plugin(pytester, config, *args) -> tuple[object, dict[str, str], dict[str, str]]:
    """pytest in a subprocess (an audit imports numpy, which cannot be imported twice in one
    process) on `config`; its outcomes from the JUnit XML it writes: test name (`bm25::QID`,
    `gate::bm25::check`) -> passed / failed, and the failure messages."""
    junit = pytester.path / f"junit-{len(list(pytester.path.glob('junit-*.xml')))}.xml"
    result = pytester.runpytest_subprocess(
        "--ragaudit", str(config), *args, f"--junitxml={junit}", "-p", "no:cacheprovider"
    )
    prefix = config.relative_to(pytester.path).as_posix().replace("/", ".") + "."
    outcome, messages = {}, {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        classname = case.get("classname") + "."
        assert classname.startswith(prefix), classname
        name = "::".join([*classname[len(prefix) :].split(".")[:-1], case.get("name")])
        failure = case.find("failure")
        outcome[name] = "failed" if failure is not None else "passed"
        if failure is not None:
            messages[name] = (failure.get("message") or "") + (failure.text or "")
    return result, outcome, messages


def run_dirs(config) -> list:
    from ragaudit.pytest_plugin import cache_folder

    return sorted(p for p in cache_folder(config).iterdir() if p.is_dir())


def test_a_failing_audit_fails_exactly_the_flagged_questions_and_checks(pytester):
    config = make_config(pytester, "strict", items=6)
    report, flagged, failing_checks = expected_outcome(config)
    assert flagged and failing_checks, "this gold subset fails the default gate"
    result, seen, messages = run_plugin(pytester, config)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    questions = {k: v for k, v in seen.items() if not k.startswith("gate::")}
    checks = {k[len("gate::") :]: v for k, v in seen.items() if k.startswith("gate::")}
    assert set(questions) == {f"{q['pipeline']}::{q['qid']}" for q in report["questions"]}
    assert set(checks) == {f"{c['pipeline']}::{c['name']}" for c in report["gate"]["checks"]}
    assert {k for k, v in questions.items() if v == "failed"} == flagged
    assert {k for k, v in checks.items() if v == "failed"} == failing_checks
    for q in report["questions"]:
        name = f"{q['pipeline']}::{q['qid']}"
        if name in flagged:
            text = messages[name]
            assert f"{name.replace('::', ' · ')} is flagged by the gate" in text
            for check in report["gate"]["checks"]:
                named = not check["passed"] and q["qid"] in check["questions"]
                assert (f"{check['name']}: value {check['value']}" in text) == named
            assert f"lambda {q['lambda']['state']} (css {q['lambda']['css']})" in text
            for run in q["runs"]:
                assert f"v{run['variant']} s{run['seed']}: " in text and run["why"] in text
                for claim in run["claims"]:
                    named = claim["grounding"] != "supported"
                    assert (f"claim {claim['n']} {claim['grounding']}: {claim['text']}" in text) == named
    for check in report["gate"]["checks"]:
        if not check["passed"]:
            text = messages[f"gate::{check['pipeline']}::{check['name']}"]
            assert f"value {check['value']}, threshold {check['threshold']}" in text
            assert text.endswith("questions: " + ", ".join(check["questions"]))
    result.stdout.fnmatch_lines([f"FAILED strict/audit.toml::{sorted(flagged)[0]} - *"])


def test_a_passing_audit_passes_every_item_and_is_reused_until_fresh_is_asked(pytester):
    config = make_config(pytester, "lenient", extra=LENIENT)
    report, flagged, failing_checks = expected_outcome(config)
    assert not flagged and not failing_checks
    first, seen, _ = run_plugin(pytester, config)
    assert first.ret == pytest.ExitCode.OK
    assert set(seen) == {f"bm25::{q['qid']}" for q in report["questions"]} | {
        f"gate::bm25::{c['name']}" for c in report["gate"]["checks"]
    }
    assert len(seen) == 4 + len(report["gate"]["checks"]) and set(seen.values()) == {"passed"}
    first.stdout.fnmatch_lines([f"collected {len(seen)} items"])
    [kept] = run_dirs(config)
    stamp = (kept / "traces.jsonl").stat().st_mtime_ns

    again, seen, _ = run_plugin(pytester, config, "-k", "gate")  # -k and -m apply to audit items too
    assert again.ret == pytest.ExitCode.OK and seen and all(name.startswith("gate::") for name in seen)
    assert run_dirs(config) == [kept] and (kept / "traces.jsonl").stat().st_mtime_ns == stamp

    fresh, _, _ = run_plugin(pytester, config, "--ragaudit-fresh")
    assert fresh.ret == pytest.ExitCode.OK
    [renewed] = run_dirs(config)  # the new audit replaces the old one
    assert renewed != kept

    gold = config.parent / "gold.jsonl"
    gold.write_text("".join(gold.read_text().splitlines(keepends=True)[:3]))  # the inputs change
    changed, seen, _ = run_plugin(pytester, config)
    [latest] = run_dirs(config)
    assert latest != renewed and len([k for k in seen if not k.startswith("gate::")]) == 3


def test_a_config_that_cannot_be_audited_is_one_failing_test(pytester):
    config = make_config(pytester, "broken")
    config.write_text(config.read_text().replace('retriever = "bm25"', 'retriever = "bm26"'))
    result, seen, messages = run_plugin(pytester, config)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert seen == {"audit": "failed"}
    line = config.read_text().splitlines().index('retriever = "bm26"') + 1
    assert f"{config}:{line}" in messages["audit"] and "bm26" in messages["audit"]
    assert "Traceback" not in result.stdout.str()


def test_a_missing_config_is_a_usage_error(pytester):
    result = pytester.runpytest("--ragaudit", str(pytester.path / "nope.toml"), "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--ragaudit*nope.toml: no such config file*"])


def test_the_fixture_loads_the_marked_or_configured_config_once_per_session(pytester):
    marked = make_config(pytester, "marked", extra=LENIENT)
    make_config(pytester, "configured", items=2, extra=LENIENT)
    pytester.makeini("[pytest]\nragaudit_config = configured/audit.toml\n")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.ragaudit("marked/audit.toml")
        def test_marked(ragaudit_run):
            assert len(ragaudit_run.runs) == 4 * 3
            assert set(ragaudit_run.questions["pipeline"]) == {"bm25"}

        @pytest.mark.ragaudit("marked/audit.toml")
        def test_the_same_run(ragaudit_run):
            assert ragaudit_run.runs is ragaudit_run.runs

        def test_configured(ragaudit_run):
            assert len(ragaudit_run.questions) == 2
        """
    )
    pytester.makeconftest(
        """
        import ragaudit.app

        audits, audit_config = [], ragaudit.app.audit_config

        def counted(config, **options):
            audits.append(config.path.parent.name)
            return audit_config(config, **options)

        ragaudit.app.audit_config = counted

        def pytest_sessionfinish(session):
            (session.config.rootpath / "audits.txt").write_text(" ".join(sorted(audits)))
        """
    )
    result = pytester.runpytest_subprocess(
        "--ragaudit", str(marked), "--ragaudit-fresh", "-k", "not gate", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=3 + 4)  # the tests and marked's questions
    assert (pytester.path / "audits.txt").read_text() == "configured marked"  # fresh, yet once each


def test_loading_the_plugin_imports_nothing_heavy():
    code = (
        "import sys, ragaudit.pytest_plugin\n"
        "print(sorted(m for m in ('numpy', 'pandas', 'pyarrow', 'torch', 'sklearn', 'sentence_transformers') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_inputs_key_follows_every_file_the_config_names(tmp_path):
    from ragaudit.io.config import load_config
    from ragaudit.pytest_plugin import inputs_key

    (tmp_path / "recorded.jsonl").write_text("{}\n")
    replay = '[[pipelines]]\nname = "recorded"\nkind = "replay"\ntraces = "recorded.jsonl"\n'
    config = write_config(tmp_path, BM25 + replay, items=2)
    keys = [inputs_key(load_config(config))]
    assert inputs_key(load_config(config)) == keys[0]  # the same inputs, the same key
    for path, change in [
        (tmp_path / "recorded.jsonl", "{}\n{}\n"),
        (tmp_path / "gold.jsonl", (tmp_path / "gold.jsonl").read_text().splitlines(keepends=True)[0]),
        (config, config.read_text().replace("paraphrases = 3", "paraphrases = 2")),
    ]:
        path.write_text(change)
        keys.append(inputs_key(load_config(config)))
    assert len(set(keys)) == len(keys)
