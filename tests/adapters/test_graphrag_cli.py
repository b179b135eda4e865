import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import shared_path

from ragaudit.cli.commands import main

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "graphrag"
GOOD = "Scrooge was a miser [Data: Sources (0); Entities (0)].\n"


def run(*args: str):
    return CliRunner().invoke(main, ["graphrag", "trace", *map(str, args)])


@pytest.fixture
def answer(tmp_path):
    def write(text: str, name: str = "answer.md") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


def test_markdown_and_exit_0_when_every_citation_resolves(answer):
    result = run(FIXTURES / "v3", "--answer", answer(GOOD))
    assert result.exit_code == 0, result.stderr
    assert (
        result.stdout
        == f"""\
# GraphRAG trace

- output: `{FIXTURES / "v3"}` (layout v3)
- answers: 1; citations: 2 (2 resolved, 0 dangling)

## Answer 1 — answer.md

- citations: 2 (2 resolved, 0 dangling) — Entities 1, Sources 1
- claims: 1, 1 cited

Scrooge was a miser [1,2].

### Sources

1. **Sources (0)** text unit 0
   - alpha.txt: text unit 0 (`tu-a`); page 3
2. **Entities (0)** SCROOGE
   - alpha.txt: text unit 0 (`tu-a`); page 3
"""
    )


def test_json_and_exit_1_when_an_id_dangles(answer):
    result = run(FIXTURES / "v1", "--answer", answer(GOOD + "Marley [Data: Entities (9)].\n"), "--format", "json")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["layout"] == "v1" and document["counts"]["dangling"] == 1
    assert document["answers"][0]["dangling"] == [
        {
            "number": 3,
            "kind": "Entities",
            "id": 9,
            "reason": "unknown_id",
            "message": "no row of entities has human_readable_id 9",
        }
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (("nope", "--answer", "answer.md"), "expected a GraphRAG output folder, found nothing"),
        ((FIXTURES / "v3", "--answer", "missing.md"), "unreadable answer file"),
    ],
)
def test_unreadable_inputs_exit_3(answer, tmp_path, args, message):
    answer(GOOD)
    args = [tmp_path / a if a in ("nope", "answer.md", "missing.md") else a for a in args]
    result = run(*args)
    assert result.exit_code == 3 and result.stdout == ""
    assert result.stderr.startswith("error: ") and message in result.stderr


def test_usage_errors_exit_2(answer):
    assert run(FIXTURES / "v3").exit_code == 2
    assert run(FIXTURES / "v3", "--answer", answer(GOOD), "--format", "html").exit_code == 2


def test_verify_marks_each_source(answer):
    # the hashing encoder keeps this fast; scores are then not calibrated, only the plumbing is tested
    result = run(FIXTURES / "v3", "--answer", answer(GOOD), "--verify", "--model", "hashing", "--threshold", "0")
    assert result.exit_code == 0, result.stderr
    assert "Scrooge was a miser [1✓,2✓]." in result.stdout
    assert "- verified: 2 of 2 claim–source pairs supported (support ≥ 0.00)" in result.stdout


@pytest.mark.shared
def test_a_recorded_notebook_traces_every_answer():
    folder = shared_path("graphrag", "v2-operation-dulce")
    result = run(folder, "--answer", folder / "local_search.ipynb", "--format", "json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert [a["origin"] for a in document["answers"]] == ["local_search.ipynb cell 22", "local_search.ipynb cell 23"]
    assert document["counts"]["citations"] == 33 and document["counts"]["dangling"] == 0


def test_the_command_documents_its_exit_codes():
    help_text = CliRunner().invoke(main, ["graphrag", "trace", "--help"]).output
    assert "Exit 0 when every cited id resolves" in help_text and "1 when some are dangling" in help_text
