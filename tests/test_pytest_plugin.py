"""The pytest plugin: `pytest --ragaudit CONFIG` turns an audit into one test per question and per
gate check, failing exactly where the gate of a `ragaudit run` of the same config does; it reuses a
finished audit while the inputs are unchanged and runs it again under `--ragaudit-fresh`; a config
that cannot be audited is one failing test; the `ragaudit_run` fixture loads a marked or configured
config's run; and loading the plugin imports nothing heavy."""

import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from helpers import BM25, FIXTURES, LENIENT, invoke, run_dir_of, write_config

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module", autouse=True)
def audit_imported(tmp_path_factory):
    """One audit in this process before any test: `pytester` restores sys.modules after each test,
    and numpy, once loaded, cannot be imported a second time."""
    folder = tmp_path_factory.mktemp("warm")
    assert invoke("run", write_config(folder, BM25, items=1, seeds="[1]"), "--no-gate").exit_code == 0
    import ragaudit.flows.pytest_plugin  # noqa: F401
    import ragaudit.outputs.results  # noqa: F401


# The sessions these tests start load only what they use: the cache provider would write into the
# pytester folder, and langsmith's, hypothesis', anyio's and xdist's plugins cost each session seconds of imports.
UNUSED_PLUGINS = (
    *("-p", "no:cacheprovider", "-p", "no:langsmith_plugin", "-p", "no:hypothesispytest", "-p", "no:anyio"),
    *("-p", "no:xdist"),
)


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
    result = pytester.runpytest_subprocess("--ragaudit", str(config), *args, f"--junitxml={junit}", *UNUSED_PLUGINS)
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
    """The kept runs of `config` (not those set aside)."""
    from ragaudit.flows.auditcache import cache_folder

    return sorted(
        p for p in cache_folder(config).iterdir() if (p / "manifest.json").is_file() and ".damaged-" not in p.name
    )


def set_aside(config) -> list:
    from ragaudit.flows.auditcache import cache_folder

    return sorted(p for p in cache_folder(config).iterdir() if ".damaged-" in p.name)


def shown(value, threshold) -> str:
    """A check's value as the reports show it: three decimals, more when it takes more to tell it
    from its threshold; a count whole."""
    if not isinstance(value, float):
        return str(value)
    digits = next((d for d in range(3, 16) if f"{value:.{d}f}" != f"{float(threshold):.{d}f}"), 3)
    return f"{value:.{digits}f}"


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
                assert (f"{check['name']}: value {shown(check['value'], check['threshold'])}, " in text) == named
                if named and check["name"] == "lambda_convergent_min":
                    lam = q["lambda"]
                    assert f"this question: its λ is {lam['state']} (css {lam['css']:.3g}, spread" in text
                elif named and check["name"] == "citation_match_min":
                    unmatched = q["stats"]["unmatched"]
                    assert f"this question: {unmatched} of {q['stats']['runs']} runs cite no span" in text
            css = q["lambda"]["css"]
            assert f"lambda {q['lambda']['state']} (css {'–' if css is None else f'{css:.3f}'})" in text
            for run in q["runs"]:
                assert f"v{run['variant']} s{run['seed']}: " in text and run["why"] in text
                for claim in run["claims"]:
                    named = claim["grounding"] != "supported"
                    assert (f"claim {claim['n']} {claim['grounding']}: {claim['text']}" in text) == named
    for check in report["gate"]["checks"]:
        if not check["passed"]:
            text = messages[f"gate::{check['pipeline']}::{check['name']}"]
            threshold = check["threshold"]
            bar = f"{threshold:g}" if isinstance(threshold, float) else str(threshold)
            assert f"value {shown(check['value'], threshold)}, threshold {bar}" in text
            assert not re.search(r"\d\.\d{7}", text), text  # no float as Python writes it (0.6266666666666667)
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
        import ragaudit.flows.app

        audits, audit_config = [], ragaudit.flows.app.audit_config

        def counted(config, **options):
            audits.append(config.path.parent.name)
            return audit_config(config, **options)

        ragaudit.flows.app.audit_config = counted

        def pytest_sessionfinish(session):
            (session.config.rootpath / "audits.txt").write_text(" ".join(sorted(audits)))
        """
    )
    result = pytester.runpytest_subprocess(
        "--ragaudit", str(marked), "--ragaudit-fresh", "-k", "not gate", *UNUSED_PLUGINS
    )
    result.assert_outcomes(passed=3 + 4)  # the tests and marked's questions
    assert (pytester.path / "audits.txt").read_text() == "configured marked"  # fresh, yet once each


def test_loading_the_plugin_imports_nothing_heavy():
    code = (
        "import sys, ragaudit.flows.pytest_plugin\n"
        "print(sorted(m for m in ('numpy', 'pandas', 'pyarrow', 'torch', 'sklearn', 'sentence_transformers') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_inputs_key_follows_every_file_the_config_names(tmp_path):
    from ragaudit.flows.auditcache import inputs_key
    from ragaudit.io.config import load_config

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


READER = """
import os, time
from pathlib import Path

import pytest

@pytest.mark.ragaudit("reader/audit.toml")
def test_reads_its_run_while_another_session_runs(ragaudit_run):
    ready, go = Path("{ready}"), Path("{go}")
    ready.write_text(str(ragaudit_run.path))
    deadline = time.monotonic() + 300
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert go.exists()
    assert (ragaudit_run.path / "report.json").is_file() and (ragaudit_run.path / "traces.jsonl").is_file()
    assert len(ragaudit_run.runs) == 4 * 3
"""


def test_a_fresh_session_never_deletes_the_run_another_session_reads(pytester):
    config = make_config(pytester, "reader", extra=LENIENT)
    ready, go = pytester.path / "ready", pytester.path / "go"
    (pytester.path / "side").mkdir()
    (pytester.path / "side" / "test_reader.py").write_text(READER.format(ready=ready, go=go))
    reader = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", *UNUSED_PLUGINS, f"--rootdir={pytester.path}", "side"],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not ready.exists() and reader.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), reader.communicate()[0]
        read = Path(ready.read_text())
        fresh, seen, _ = run_plugin(pytester, config, "--ragaudit-fresh", "--ignore=side")
        assert fresh.ret == pytest.ExitCode.OK and set(seen.values()) == {"passed"}
        assert read.is_dir() and len(run_dirs(config)) == 2  # the fresh audit is a new entry beside it
    finally:
        go.write_text("")
        out = reader.communicate(timeout=300)[0]
    assert reader.returncode == 0, out
    later, _, _ = run_plugin(pytester, config, "--ignore=side")  # the reader is gone: its run goes now
    assert later.ret == pytest.ExitCode.OK
    [kept] = run_dirs(config)
    assert kept != read and not read.exists()


def damage_report(run_dir):
    path = run_dir / "report.json"
    path.write_text(path.read_text()[:100])


def pass_everything(run_dir):
    """Tamper with the report: every check passed."""
    path = run_dir / "report.json"
    report = json.loads(path.read_text())
    for check in report["gate"]["checks"]:
        check["passed"] = True
    report["gate"]["verdict"] = "pass"
    path.write_text(json.dumps(report))


def without_questions_restamped(run_dir):
    """A report without questions whose manifest records its new sha256, so it verifies."""
    path = run_dir / "report.json"
    report = json.loads(path.read_text())
    del report["questions"]
    path.write_text(json.dumps(report))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["outputs"]["report.json"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


def damage_manifest(run_dir):
    (run_dir / "manifest.json").write_text("{not json")


def change_traces(run_dir):
    path = run_dir / "traces.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))


DAMAGE = {
    "a torn report": damage_report,
    "a tampered report": pass_everything,
    "a report without questions": without_questions_restamped,
    "a damaged manifest": damage_manifest,
    "changed traces": change_traces,
}


def test_a_kept_audit_that_does_not_verify_is_set_aside_and_audited_again(pytester):
    config = make_config(pytester, "kept", items=6)
    report, flagged, failing_checks = expected_outcome(config)
    first, seen, _ = run_plugin(pytester, config)
    assert first.ret == pytest.ExitCode.TESTS_FAILED and {k for k, v in seen.items() if v == "failed"}
    for n, (name, damage) in enumerate(DAMAGE.items(), start=1):
        [kept] = run_dirs(config)
        damage(kept)
        again, seen, _ = run_plugin(pytester, config)
        assert again.ret == pytest.ExitCode.TESTS_FAILED, name
        assert "INTERNALERROR" not in again.stdout.str() and "Traceback" not in again.stdout.str(), name
        questions = {k for k, v in seen.items() if v == "failed" and not k.startswith("gate::")}
        checks = {k[len("gate::") :] for k, v in seen.items() if v == "failed" and k.startswith("gate::")}
        assert questions == flagged and checks == failing_checks, name  # the audit's outcome, not the damaged one
        aside = [p for p in set_aside(config) if p.name.startswith(kept.name + ".damaged-")]
        [rebuilt] = run_dirs(config)
        assert len(aside) == 1 and len(set_aside(config)) == n and rebuilt != kept, name
        again.stdout.fnmatch_lines(
            [f"*KeptAuditWarning: the kept audit {kept} does not verify*set aside as {aside[0]}*"]
        )
    third, _, _ = run_plugin(pytester, config)
    assert run_dirs(config) == [rebuilt] and "KeptAuditWarning" not in third.stdout.str()  # reused: it verifies


def test_a_folder_where_the_lock_goes_is_one_failing_test(pytester):
    from ragaudit.flows.auditcache import cache_folder

    config = make_config(pytester, "locked")
    lock = cache_folder(config) / ".lock"
    lock.mkdir(parents=True)
    result, seen, messages = run_plugin(pytester, config)
    assert result.ret == pytest.ExitCode.TESTS_FAILED and seen == {"audit": "failed"}
    assert f"{lock}: expected the lock file of the kept audits, found a folder" in messages["audit"]
    assert "INTERNALERROR" not in result.stdout.str()


def test_an_audit_whose_report_lacks_what_the_plugin_reads_is_one_failing_test(pytester):
    config = make_config(pytester, "bare", extra=LENIENT)
    pytester.makeconftest(
        """
        import json

        import ragaudit.flows.app

        audit_config = ragaudit.flows.app.audit_config

        def without_questions(config, **options):
            outcome = audit_config(config, **options)
            path = outcome.run_dir / "report.json"
            report = json.loads(path.read_text())
            del report["questions"]
            path.write_text(json.dumps(report))
            return outcome

        ragaudit.flows.app.audit_config = without_questions
        """
    )
    result, seen, messages = run_plugin(pytester, config)
    assert result.ret == pytest.ExitCode.TESTS_FAILED and seen == {"audit": "failed"}
    report = run_dirs(config)[0] / "report.json"
    assert f"{report}: expected questions, an array, found none" in messages["audit"]
    assert "INTERNALERROR" not in result.stdout.str()


def test_a_change_to_the_pipelines_code_is_audited_again(pytester):
    folder = pytester.path / "code"
    folder.mkdir()
    shutil.copy(FIXTURES / "slow_rag.py", folder / "my_rag.py")
    pipeline = '[[pipelines]]\nname = "py"\nkind = "python"\nfactory = "my_rag:make"\noptions = {delay = 0.0}\n'
    config = write_config(folder, pipeline, items=2, seeds="[1]", extra=LENIENT)
    first, _, _ = run_plugin(pytester, config)
    [before] = run_dirs(config)
    again, _, _ = run_plugin(pytester, config)
    assert run_dirs(config) == [before]  # unchanged code: reused
    module = folder / "my_rag.py"
    module.write_text(module.read_text().replace('"text": "# Policies"', '"text": "# Policies, fixed"'))
    fixed, _, _ = run_plugin(pytester, config)
    [after] = run_dirs(config)
    assert after != before
    texts = {json.loads(line)["retrieved"][0]["text"] for line in (after / "traces.jsonl").read_text().splitlines()}
    assert texts == {"# Policies, fixed"}


def test_the_inputs_key_follows_the_pipelines_code(tmp_path):
    from ragaudit.flows.auditcache import inputs_key
    from ragaudit.io.config import load_config

    package = tmp_path / "mypkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "rag.py").write_text("from mypkg.util import helper\ndef make():\n    return None\n")
    (package / "util.py").write_text("def helper():\n    return 1\n")
    (package / "prompt.txt").write_text("Answer briefly.")
    (tmp_path / "solo.py").write_text("def make():\n    return None\n")
    (tmp_path / "script.py").write_text("print('answer')\n")
    (tmp_path / "other.py").write_text("x = 1\n")
    pipelines = (
        '[[pipelines]]\nname = "pkg"\nkind = "python"\nfactory = "mypkg.sub.rag:make"\n'
        '[[pipelines]]\nname = "solo"\nkind = "python"\nfactory = "solo:make"\n'
        f'[[pipelines]]\nname = "cmd"\nkind = "command"\ncommand = ["{sys.executable}", "script.py", "--fast"]\n'
    )
    config = write_config(tmp_path, pipelines, items=2)
    key = inputs_key(load_config(config))
    assert inputs_key(load_config(config)) == key
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "util.cpython-311.pyc").write_bytes(b"compiled")
    (tmp_path / "other.py").write_text("x = 2\n")  # named by no pipeline
    assert inputs_key(load_config(config)) == key
    keys = {key}
    for path, text in [
        (package / "sub" / "rag.py", "def make():\n    return 1\n"),  # the factory's module
        (package / "util.py", "def helper():\n    return 2\n"),  # another module of its package
        (package / "prompt.txt", "Answer at length."),  # a file of its package
        (tmp_path / "solo.py", "def make():\n    return 1\n"),  # a module of its own
        (tmp_path / "script.py", "print('another answer')\n"),  # the command's script
    ]:
        path.write_text(text)
        keys.add(inputs_key(load_config(config)))
    assert len(keys) == 6
    executable = tmp_path / "rag-bin"
    executable.write_text("#!/bin/sh\necho one\n")
    executable.chmod(0o755)
    config.write_text(config.read_text().replace(f'"{sys.executable}", "script.py", "--fast"', '"./rag-bin"'))
    before = inputs_key(load_config(config))
    executable.write_text("#!/bin/sh\necho two\n")
    assert inputs_key(load_config(config)) != before  # the command's executable
