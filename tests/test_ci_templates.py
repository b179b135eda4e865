"""docs/ci.md's GitHub Actions workflow and GitLab CI job: the YAML parses, has the structure each
CI system needs, names files a run really writes, and every `ragaudit` command in it parses with
the real CLI (a renamed command or option breaks this test)."""

import json
import re
import shlex

import click
import pytest
import yaml
from helpers import BM25, ROOT, invoke, run_dir_of, write_config

from ragaudit.auditing import history
from ragaudit.cli.commands import main

DOC = ROOT / "docs" / "ci.md"
OUT = "reports/ci"  # the templates' --out: the run directories and the history live there


def templates() -> dict[str, dict]:
    blocks = re.findall(r"^```yaml\n(.*?)^```$", DOC.read_text(), re.S | re.M)
    assert len(blocks) == 3
    github, gitlab, release = (yaml.safe_load(b) for b in blocks)
    return {"github": github, "gitlab": gitlab, "release": release}


def script_lines(template: dict) -> list[str]:
    """Every shell line of every `run` step / script of a template."""
    lines: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("run", "script", "after_script", "before_script"):
                    for item in value if isinstance(value, list) else [value]:
                        lines.extend(str(item).splitlines())
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(template)
    return [line.strip() for line in lines if line.strip()]


def command_words(line: str) -> list[str]:
    """The words of a shell command line up to its first redirection, pipe or list operator."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    cut = next((i for i, w in enumerate(words) if set(w) <= set("<>|&;")), len(words))
    return words[:cut]


def ragaudit_commands(template: dict) -> list[list[str]]:
    return [command_words(line)[1:] for line in script_lines(template) if line.startswith("ragaudit ")]


def parse_with_the_cli(args: list[str]) -> click.Command:
    """Resolve a command line to its click command and parse its options, without running it."""
    command: click.Command = main
    ctx = click.Context(main, info_name="ragaudit")
    rest = list(args)
    while isinstance(command, click.Group):
        name = rest.pop(0)
        sub = command.get_command(ctx, name)
        assert sub is not None, f"ragaudit has no command {name!r}"
        command, ctx = sub, click.Context(sub, info_name=name, parent=ctx)
    command.make_context(command.name, rest)  # raises UsageError on an unknown option or a missing argument
    return command


def test_both_templates_parse_and_run_the_audit():
    for name, template in templates().items():
        commands = ragaudit_commands(template)
        assert commands, name
        assert any(c[0] == "run" for c in commands), name
        for args in commands:
            parse_with_the_cli(args)


def test_a_renamed_option_would_be_caught():
    with pytest.raises(click.UsageError):
        parse_with_the_cli(["run", "configs/default.toml", "--output", "reports/ci"])
    with pytest.raises(click.UsageError):
        parse_with_the_cli(command_words("ragaudit history --stor h.sqlite >> out.md")[1:])
    words = command_words('ragaudit history --store "a b.sqlite" >> "$X"')
    assert words == ["ragaudit", "history", "--store", "a b.sqlite"]


def steps_using(steps: list[dict], action: str) -> list[dict]:
    return [s for s in steps if s.get("uses", "").split("@")[0] == action]


def test_the_release_workflow_attests_signs_checks_and_attaches():
    workflow = templates()["release"]
    assert (workflow[True] if True in workflow else workflow["on"]) == {"release": {"types": ["published"]}}
    assert workflow["permissions"]["contents"] == "write"
    commands = ragaudit_commands(workflow)
    assert [c[0] for c in commands] == ["run", "attest", "verify"]
    attest, verify = commands[1], commands[2]
    assert "--key" in attest and attest[attest.index("--out") + 1] == verify[verify.index("--attestation") + 1]
    assert "--pubkey" in verify
    lines = script_lines(workflow)
    assert any(line.startswith("gh release upload") and attest[attest.index("--out") + 1] in line for line in lines)
    assert "secrets.RAGAUDIT_SIGNING_KEY" in json.dumps(workflow)
    for line in re.findall(r"^ragaudit .*$", DOC.read_text(), re.M):  # the commands outside the templates too
        parse_with_the_cli(command_words(line)[1:])


def test_github_workflow_has_what_github_needs():
    workflow = templates()["github"]
    assert {"pull_request", "push"} <= set(
        workflow[True] if True in workflow else workflow["on"]
    )  # YAML 1.1: on = True
    job = workflow["jobs"]["audit"]
    steps = job["steps"]
    for action in ("actions/checkout", "actions/setup-python", "actions/upload-artifact"):
        assert steps_using(steps, action), action
    restored = {s["with"]["path"]: s["with"]["key"] for s in steps_using(steps, "actions/cache/restore")}
    saved = {s["with"]["path"]: s for s in steps_using(steps, "actions/cache/save")}
    assert set(restored) == set(saved) == {".cache/ragaudit", f"{OUT}/{history.FILE}"}
    assert all(saved[path]["with"]["key"] == key for path, key in restored.items())  # saved where restored from
    assert ".cache/ragaudit" in job["env"]["RAGAUDIT_CACHE"]
    (junit,) = steps_using(steps, "mikepenz/action-junit-report")
    assert junit["with"]["report_paths"] == f"{OUT}/*/junit.xml"
    uploaded = steps_using(steps, "actions/upload-artifact")[0]["with"]["path"].split()
    assert {f"{OUT}/*/report.html", f"{OUT}/{history.FILE}"} <= set(uploaded)
    lines = script_lines(workflow)
    assert any("summary.md" in line and "GITHUB_STEP_SUMMARY" in line for line in lines)
    assert any(line.startswith("ragaudit history") and "GITHUB_STEP_SUMMARY" in line for line in lines)
    audit = [i for i, s in enumerate(steps) if s.get("run", "").startswith("ragaudit run")]
    assert len(audit) == 1 and f"--out {OUT}" in steps[audit[0]]["run"]
    restores = [i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/cache/restore")]
    assert max(restores) < audit[0]
    # a failed gate still reports and still keeps the caches
    assert all(s.get("if", "").startswith("always()") for s in steps[audit[0] + 1 :])


def test_gitlab_job_has_what_gitlab_needs():
    job = templates()["gitlab"]["rag-audit"]
    caches = {c["paths"][0]: c for c in job["cache"]}
    assert set(caches) == {".cache/ragaudit", f"{OUT}/{history.FILE}"}
    assert all(c["when"] == "always" for c in caches.values())
    assert ".cache/ragaudit" in job["variables"]["RAGAUDIT_CACHE"]
    assert caches[f"{OUT}/{history.FILE}"]["fallback_keys"]  # a merge request starts from its target's history
    assert job["artifacts"]["when"] == "always"
    assert job["artifacts"]["reports"]["junit"] == f"{OUT}/*/junit.xml"
    assert f"{OUT}/" in job["artifacts"]["paths"]
    assert any(f"--out {OUT}" in line for line in job["script"] if line.startswith("ragaudit run"))
    assert any("summary.md" in line for line in script_lines(job))


def test_the_files_the_templates_name_are_the_files_a_run_writes(tmp_path, monkeypatch):
    monkeypatch.delenv("RAGAUDIT_HISTORY", raising=False)
    result = invoke("run", write_config(tmp_path, BM25, items=2, seeds="[1]"), "--out", tmp_path / OUT)
    run_dir = run_dir_of(result)
    assert run_dir.parent == tmp_path / OUT
    text = DOC.read_text()
    named = set(re.findall(r"\b([a-z_]+\.(?:xml|md|html|json))\b", text)) - {"ci.md", "rag-audit-summary.md"}
    assert named and all((run_dir / name).is_file() for name in named), named
    assert f"{OUT}/{history.FILE}" in text and (tmp_path / OUT / history.FILE).is_file()
