"""ragaudit as a library: the flows of the commands as functions that return typed results, which
the CLI only prints."""

import json

import pytest
from helpers import BM25, TFIDF, invoke, run_dir_of, write_config

from ragaudit.core.errors import InputError, UsageError
from ragaudit.core.model import Report
from ragaudit.flows import api


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("api")
    config = write_config(tmp, BM25 + TFIDF, items=3, seeds="[1]")
    return config, run_dir_of(invoke("run", config, "--no-gate"))


def test_gate_returns_the_gate_the_run_wrote(run_dir):
    config, run = run_dir
    written = json.loads((run / "report.json").read_text())
    gated = api.gate(run / "report.json", config)
    assert gated.gate.to_json() == written["gate"]
    assert isinstance(gated.report, Report) and gated.report.gate is gated.gate
    assert gated.gate.verdict in ("pass", "fail") and not gated.warnings


def test_a_damaged_report_names_where_it_differs(run_dir, tmp_path):
    config, run = run_dir
    damaged = json.loads((run / "report.json").read_text())
    damaged["questions"][1]["stats"]["runs"] = "three"
    (tmp_path / "report.json").write_text(json.dumps(damaged))
    with pytest.raises(InputError) as caught:
        api.gate(tmp_path / "report.json", config)
    assert "$.questions[1].stats.runs: expected a count (an integer >= 0), found text" in str(caught.value)
    result = invoke("gate", tmp_path / "report.json", "--config", config)
    assert result.exit_code == 3 and "$.questions[1].stats.runs: expected a count (an integer >= 0)" in result.stderr


def test_validate_yields_the_issues_the_command_prints(run_dir):
    _, run = run_dir
    with api.validate([run / "traces.jsonl"], workers=1) as found:
        issues = list(found)
    assert found.records == 3 * 3 * 2 and found.problems == [] and found.warnings == []
    assert sum(found.counts.values()) == len(issues)
    printed = invoke("validate", run / "traces.jsonl", "--workers", "1", "--format", "json")
    assert json.loads(printed.output)["records"] == found.records


def test_verify_says_what_changed(run_dir, tmp_path):
    _, run = run_dir
    assert api.verify(run).changed == []
    html = run / "report.html"
    original = html.read_bytes()
    try:
        html.write_bytes(original + b" ")
        assert any("report.html" in change for change in api.verify(run).changed)
    finally:
        html.write_bytes(original)


def test_trends_say_why_there_is_nothing_to_show_and_draw_only_what_there_is(run_dir, tmp_path):
    config, run = run_dir
    found = api.trends(config=config, metric="citation_match")
    assert found.error is None and {p.pipeline for p in found.points} == {"bm25", "tfidf"}
    assert {p.run_dir for p in found.points} == {str(run.resolve())}
    unknown = api.trends(config=config, metric="nonesuch", plot=tmp_path / "none.svg")
    assert isinstance(unknown.error, UsageError) and "--metric: expected one of" in str(unknown.error)
    assert unknown.points == [] and not (tmp_path / "none.svg").exists()
    api.trends(config=config, plot=tmp_path / "trends.svg")
    assert (tmp_path / "trends.svg").read_text().startswith("<svg")


def test_a_run_baseline_is_chosen_against_the_inputs_of_its_config(run_dir):
    config, run = run_dir
    assert api.run_baseline(config, None) is None
    chosen = api.run_baseline(api.load_config(config), run / "report.json")
    assert chosen.path == run / "report.json" and isinstance(chosen.report, Report)
    assert chosen.warnings == [] and chosen.notes == []


def test_an_anchor_needs_a_question_and_an_answer():
    with pytest.raises(UsageError, match="--question and --answer must hold text"):
        api.anchor("no-corpus-is-read", "  ", "Keys are rotated every 12 months.")


def test_the_facade_names_are_functions_whatever_was_imported():
    """`ragaudit.gate` is the function, not a module: no module of the package shadows a facade name."""
    import importlib
    import pkgutil

    import ragaudit

    for module in pkgutil.walk_packages(ragaudit.__path__, "ragaudit."):
        if ".adapters." not in module.name and not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    for name in set(ragaudit.__all__) - {"__version__", "Report"}:
        found = getattr(ragaudit, name)
        assert callable(found) and not isinstance(found, type(ragaudit)), name
    assert ragaudit.gate is api.gate and ragaudit.validate is api.validate and ragaudit.report is api.report
