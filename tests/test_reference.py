"""docs/reference.md is the contract, and it is the registries' own: its codes, metrics, fault
classes, λ states, config keys, commands and exit codes are those of the code, word for word, and
nothing in the repository sends a user to a document outside it. When a registry changes, the
failing test names the rows of docs/reference.md to change."""

import json
import re
import tomllib
from pathlib import Path

import click
import pytest
from helpers import BM25, REFERENCE, ROOT, backticked, invoke, markdown_table, run_dir_of, write_config

from ragaudit.checks.metrics.lam import SYMBOLS
from ragaudit.checks.metrics.registry import GATED_DELTA_S, METRICS
from ragaudit.checks.validation import CODES
from ragaudit.cli.commands import main
from ragaudit.core import errors
from ragaudit.core.gatechecks.registry import CHECKS as GATE_CHECKS
from ragaudit.core.gatechecks.registry import KEYS as GATE_KEYS
from ragaudit.flows.injection.registry import FAULTS
from ragaudit.io import config as config_module
from ragaudit.outputs.render import doctables

TEXT = REFERENCE.read_text(encoding="utf-8")


def table(marker: str) -> list[list[str]]:
    return markdown_table(TEXT, marker)


def plain(cell: str) -> str:
    return cell[1:-1] if cell.startswith("`") and cell.endswith("`") else cell


def same_rows(marker: str, documented: list[tuple], registry: list[tuple], source: str) -> None:
    """The table's rows are the registry's, in its order; else say which rows to change."""
    if documented == registry:
        return
    missing = [row for row in registry if row not in documented]
    stale = [row for row in documented if row not in registry]
    lines = [f"docs/reference.md, table `{marker}`, differs from {source}:"]
    lines += [f"  add or update: {row}" for row in missing]
    lines += [f"  remove or update: {row}" for row in stale]
    if not missing and not stale:
        lines.append(f"  same rows, another order: {[row[0] for row in registry]}")
    raise AssertionError("\n".join(lines))


def test_the_codes_table_is_ragaudit_codes():
    rows = [(plain(code), sev, family, meaning, fix) for code, sev, family, meaning, fix in table("table: codes")]
    same_rows(
        "codes",
        rows,
        [(c.code, c.severity, c.family, c.meaning, c.fix) for c in CODES.values()],
        "ragaudit.core.codes",
    )


def test_the_metrics_table_is_ragaudit_metrics():
    rows = [
        (plain(name), level, better, tuple(backticked(gated)), compared, text)
        for name, level, better, gated, compared, text in table("table: metrics")
    ]
    registry = [
        (
            m.name,
            m.level,
            "higher" if m.higher_is_better else "lower",
            m.gated_by,
            "yes" if m.compared else "no",
            m.description,
        )
        for m in METRICS.values()
    ]
    same_rows("metrics", rows, registry, "ragaudit.checks.metrics.registry.METRICS")


def test_the_reference_says_which_delta_s_is_gated_as_ragaudit_metrics_does():
    assert GATED_DELTA_S in TEXT, "docs/reference.md §3 must quote ragaudit.checks.metrics.registry.GATED_DELTA_S"
    gated = {m.name for m in METRICS.values() if m.gated_by and m.name.startswith("delta_s")}
    assert gated == {"delta_s_excess"} and "delta_s_excess" in GATED_DELTA_S


def test_every_gated_metric_names_a_documented_check_and_config_key():
    checks = {backticked(row[0])[0] for row in table("table: gate-checks")}
    keys = {backticked(row[0])[0] for row in table("keys: gate")}
    for metric in METRICS.values():
        for check in metric.gated_by:
            assert check in checks, f"{metric.name} is gated by {check}, which reference §4 does not list"
            assert check in keys, f"{metric.name} is gated by {check}, which is no [gate] key of reference §1.5"


def test_the_gate_checks_table_is_ragaudit_gatechecks():
    rows = [(plain(check), fails, names) for check, fails, names in table("table: gate-checks")]
    same_rows("gate-checks", rows, [(c.name, c.fails_when, c.names) for c in GATE_CHECKS], "ragaudit.core.gatechecks")


def test_the_gate_keys_table_is_the_checks_keys_then_the_sections_own():
    rows = [(plain(key), limits, what) for key, _, limits, what in table("keys: gate")]
    own = ["pipelines", "from"]  # the section's: which pipelines, and a calibration
    keys = [(k.name, k.range, k.what) for k in GATE_KEYS.values()]
    same_rows("keys: gate", [row for row in rows if row[0] not in own], keys, "ragaudit.core.gatechecks")
    assert [row[0] for row in rows[-len(own) :]] == own


@pytest.mark.parametrize("marker", sorted(doctables.TABLES))
def test_the_registry_tables_are_written_from_their_registries(marker):
    start, end = doctables.block(TEXT, marker)
    assert TEXT[start:end] == doctables.TABLES[marker](), f"docs/reference.md, table `{marker}`: run `make docs`"


def test_make_docs_writes_a_stale_table_back_and_leaves_the_rest(tmp_path):
    start, end = doctables.block(TEXT, "table: gate-checks")
    stale = TEXT[:start] + "| check | fails when | questions named |\n|---|---|---|\n" + TEXT[end:]
    path = tmp_path / "reference.md"
    path.write_text(stale, encoding="utf-8")
    assert doctables.main([str(path)]) == 0
    assert path.read_text(encoding="utf-8") == TEXT


def test_the_lambda_states_are_those_of_the_code():
    rows = [(plain(state), plain(symbol)) for state, symbol, _ in table("table: lambda")]
    same_rows("lambda", rows, list(reversed(SYMBOLS.items())), "ragaudit.checks.metrics.lam.SYMBOLS")


def test_the_faults_table_is_ragaudit_faults():
    rows = [(plain(name), what) for name, what in table("table: faults")]
    same_rows("faults", rows, [(f.name, f.description) for f in FAULTS.values()], "ragaudit.flows.injection.registry")
    assert all(f.description.startswith("control:") == f.control for f in FAULTS.values())


# ---- the config keys ---------------------------------------------------------------------------


def _default(cell: str):
    return tomllib.loads(f"v = {cell[1:-1]}")["v"] if cell.startswith("`") else None


def _schema(model) -> dict:
    """Every key of a schema table with its default (None for a key without one)."""
    out = {}
    for name, field in model.model_fields.items():
        value = None if field.is_required() else field.get_default(call_default_factory=True)
        out[field.alias or name] = str(value) if isinstance(value, Path) else value
    return out


def _documented(marker: str) -> dict:
    return {backticked(row[0])[0]: _default(row[1]) for row in table(f"keys: {marker}")}


def test_the_config_reference_has_exactly_the_schemas_keys_and_defaults():
    sections = config_module._SECTIONS
    assert {m.split(": ", 1)[1] for m in re.findall(r"<!-- (keys: [\w.+]+) -->", TEXT)} == {
        *sections,
        "pipelines",
        *(f"pipelines.{kind}" for kind in config_module.PIPELINE_KINDS),
        "pipelines.python+command",
    }
    for section, model in sections.items():
        assert _documented(section) == _schema(model), f"reference §1.5, [{section}]"
    common, remote = _documented("pipelines"), _documented("pipelines.python+command")
    for kind, model in config_module._KINDS.items():
        expected = {**common, **_documented(f"pipelines.{kind}"), **(remote if kind in ("python", "command") else {})}
        assert expected == _schema(model), f"reference §1.5, pipelines of kind {kind}"


# ---- commands and exit codes -------------------------------------------------------------------


def _commands(group: click.Group, prefix: str) -> set[str]:
    out = set()
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            out |= _commands(command, f"{prefix} {name}")
        else:
            out.add(f"{prefix} {name}")
    return out


def test_every_command_is_listed():
    listed = {backticked(row[0])[0] for row in table("table: commands")}
    assert listed == _commands(main, "ragaudit")


def test_the_exit_codes_are_those_the_errors_carry():
    listed = {row[0]: row[1] for row in table("table: exit-codes")}
    assert list(listed) == ["0", "1", "2", "3", "4", "5", "130 / 143"]
    for error, word in (
        (errors.UsageError, "usage"),
        (errors.InputError, "input"),
        (errors.PipelineStartError, "pipeline"),
        (errors.InputsChangedError, "changed"),
    ):
        assert word in listed[str(error.exit_code)], (error.__name__, error.exit_code)


# ---- links and pointers ------------------------------------------------------------------------


def _anchors(path: Path) -> set[str]:
    """The anchors a markdown renderer gives the headings of a page (GitHub's rule)."""
    out = set()
    for heading in re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M):
        out.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return out


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_link_into_the_docs_lands_on_a_heading():
    broken = []
    for source in _documents():
        text = source.read_text(encoding="utf-8")
        for target, anchor in re.findall(r"\]\(((?:\.\./|docs/)?[\w.-]+\.md)#([^)\s]+)\)", text):
            page = (source.parent / target).resolve()
            if not page.is_file() or anchor not in _anchors(page):
                broken.append(f"{source.relative_to(ROOT)}: {target}#{anchor}")
    assert broken == []


def _lines_matching(pattern: str, files) -> list[str]:
    found = re.compile(pattern)
    return [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in files
        if path != Path(__file__).resolve()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if found.search(line)
    ]


def test_nothing_sends_a_user_outside_the_repository():
    """README, docs, help and fix texts and the package's own code speak only of what a clone holds."""
    user_facing = [*_documents(), *sorted((ROOT / "ragaudit").rglob("*.py")), *sorted((ROOT / "configs").glob("*"))]
    assert _lines_matching(r"\bSPEC\b|\.\./shared|project's shared", user_facing) == []
    # the tests and benchmarks read external datasets from beside the clone, but cite no outside contract
    developer = [*sorted((ROOT / "tests").rglob("*.py")), *sorted((ROOT / "bench").glob("*.py")), ROOT / "Makefile"]
    assert _lines_matching(r"\bSPEC\b", developer) == []


def test_the_fix_texts_and_help_texts_point_into_the_repository():
    texts = [c.fix for c in CODES.values()]
    for name in _commands(main, "ragaudit"):
        command = main
        for part in name.split()[1:]:
            command = command.commands[part]
        texts.append(command.help or "")
        texts += [getattr(p, "help", None) or "" for p in command.params]
    pointers = [t for t in texts if "§" in t]
    assert pointers and all("docs/reference.md §" in t for t in pointers), pointers


def test_the_long_text_example_is_what_a_run_writes(tmp_path):
    """§1.4's example: a recording whose snippet is its own text 400 times over, replayed through
    `ragaudit run`, is scored on its first 100,000 characters and says so in issues.jsonl."""
    recorded = run_dir_of(invoke("run", write_config(tmp_path, BM25, items=1, seeds="[1]"), "--no-gate"))
    lines = (recorded / "traces.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["retrieved"][0]["text"] = (first["retrieved"][0]["text"] + "\n\n") * 400
    (tmp_path / "long.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    replay = '[[pipelines]]\nname = "bm25"\nkind = "replay"\ntraces = "long.jsonl"\n'
    run_dir = run_dir_of(invoke("run", write_config(tmp_path, replay, items=1, seeds="[1]"), "--no-gate"))
    written = [json.loads(line) for line in (run_dir / "issues.jsonl").read_text().splitlines()]
    example = re.search(r"<!-- example: text_truncated -->\n```json\n(.*?)\n```", TEXT, re.DOTALL)
    assert example, "docs/reference.md: the text_truncated example is missing"
    assert [i for i in written if i["code"] == "text_truncated"] == [json.loads(example.group(1))]
    report = json.loads((run_dir / "report.json").read_text())
    assert "text_truncated" in {i["code"] for i in report["issues"]}


def test_the_grounding_table_is_the_scorers():
    from ragaudit.checks.metrics.grounding import GROUNDING

    assert [backticked(row[0])[0] for row in table("table: grounding")] == [
        "uncited",
        "contradicted",
        "misattributed",
        "supported",
        "unsupported",
    ]
    assert set(GROUNDING) == {backticked(row[0])[0] for row in table("table: grounding")}
