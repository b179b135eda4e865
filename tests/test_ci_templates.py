"""docs/ci.md's GitHub Actions workflow and GitLab CI job: the YAML parses, has the structure each
CI system needs, names files a run really writes, and every `ragaudit` command in it parses with
the real CLI (a renamed command or option breaks this test)."""

import re
import shlex

import click
import pytest
import yaml
from helpers import BM25, ROOT, invoke, run_dir_of, write_config

from ragaudit.cli import main

DOC = ROOT / "docs" / "ci.md"


def templates() -> dict[str, dict]:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 2
    github, gitlab = (yaml.safe_load(b) for b in blocks)
    return {"github": github, "gitlab": gitlab}


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


def ragaudit_commands(template: dict) -> list[list[str]]:
    return [shlex.split(line)[1:] for line in script_lines(template) if line.startswith("ragaudit ")]


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


def test_github_workflow_has_what_github_needs():
    workflow = templates()["github"]
    assert {"pull_request", "push"} <= set(
        workflow[True] if True in workflow else workflow["on"]
    )  # YAML 1.1: on = True
    steps = workflow["jobs"]["audit"]["steps"]
    uses = {s["uses"].split("@")[0]: s for s in steps if "uses" in s}
    assert {"actions/checkout", "actions/setup-python", "actions/cache", "actions/upload-artifact"} <= set(uses)
    assert uses["actions/cache"]["with"]["path"] in workflow["jobs"]["audit"]["env"]["RAGAUDIT_CACHE"]
    assert uses["mikepenz/action-junit-report"]["with"]["report_paths"].endswith("/junit.xml")
    assert "report.html" in uses["actions/upload-artifact"]["with"]["path"]
    lines = script_lines(workflow)
    assert any("summary.md" in line and "GITHUB_STEP_SUMMARY" in line for line in lines)
    after_audit = steps[[i for i, s in enumerate(steps) if "ragaudit run" in s.get("run", "")][0] + 1 :]
    assert all(s.get("if", "").startswith("always()") for s in after_audit)  # a failed gate still reports


def test_gitlab_job_has_what_gitlab_needs():
    job = templates()["gitlab"]["rag-audit"]
    assert job["cache"]["paths"][0] in job["variables"]["RAGAUDIT_CACHE"]
    assert job["artifacts"]["when"] == "always"
    assert job["artifacts"]["reports"]["junit"].endswith("/junit.xml")
    assert any("summary.md" in line for line in script_lines(job))


def test_the_files_the_templates_name_are_the_files_a_run_writes(tmp_path):
    result = invoke("run", write_config(tmp_path, BM25, items=2, seeds="[1]"), "--out", tmp_path / "reports/ci")
    run_dir = run_dir_of(result)
    text = DOC.read_text()
    named = set(re.findall(r"\b([a-z_]+\.(?:xml|md|html|json))\b", text)) - {"ci.md", "rag-audit-summary.md"}
    assert named and all((run_dir / name).is_file() for name in named), named
