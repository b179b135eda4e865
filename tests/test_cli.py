"""The command line: exact exit codes and messages."""

import json
import sqlite3

import pytest
from click.testing import CliRunner

from ragaudit.checks.validation import CODES
from ragaudit.cli.commands import main


@pytest.fixture
def cli():
    def invoke(*args):
        return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)

    return invoke


@pytest.fixture
def traces_file(tmp_path, valid_trace):
    def write(*lines):
        path = tmp_path / "traces.jsonl"
        path.write_text(
            "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines), encoding="utf-8"
        )
        return path

    return write


def test_valid_traces_exit_0(cli, traces_file, valid_trace, corpus_dir):
    result = cli("validate", traces_file(valid_trace, valid_trace), "--corpus", corpus_dir)
    assert result.exit_code == 0
    assert result.output == "2 records, 0 errors, 0 warnings\n"


def test_error_issues_exit_1_with_located_message(cli, traces_file, valid_trace, corpus_dir):
    valid_trace["retrieved"][0]["rev"] = "000000000000"
    path = traces_file(valid_trace)
    result = cli("validate", path, "--corpus", corpus_dir)
    assert result.exit_code == 1
    rev = result.output.splitlines()[0]
    assert rev.startswith(f"{path}:1: error rev_mismatch [SEC-KEYS-1 v0 s1] $.retrieved[0].rev: expected rev '")
    assert rev.endswith("' (corpus), found '000000000000'")
    assert result.output.splitlines()[1] == "    fix: re-index the changed document"
    assert result.output.endswith("1 records, 1 errors, 0 warnings\n  rev_mismatch: 1\n")


def test_warnings_alone_exit_0(cli, traces_file, valid_trace):
    del valid_trace["index"]
    result = cli("validate", traces_file(valid_trace))
    assert result.exit_code == 0 and "missing_live_index: 1" in result.output


def test_json_format_is_spec_shape(cli, traces_file, valid_trace):
    bad = json.loads(json.dumps(valid_trace))
    bad["retrieved"][1]["score_norm"] = 3
    result = cli("validate", traces_file(valid_trace, bad), "--format", "json")
    assert result.exit_code == 1
    out = json.loads(result.output)
    assert list(out) == ["records", "issues", "counts"]
    assert out["records"] == 2 and out["counts"] == {"score_out_of_range": 1}
    [issue] = out["issues"]
    assert issue == {
        "code": "score_out_of_range",
        "severity": "error",
        "qid": "SEC-KEYS-1",
        "variant": 0,
        "seed": 1,
        "path": "$.retrieved[1].score_norm",
        "message": "expected score_norm in [0, 1], found 3",
        "fix": "normalise scores to [0, 1]",
        "citation": "pol-pw-1",
        "file": out["issues"][0]["file"],
        "line": 2,
        "pipeline": "bm25-k5",
    }


def test_malformed_lines_exit_3_and_the_rest_is_checked(cli, traces_file, valid_trace):
    bad = json.loads(json.dumps(valid_trace))
    bad["retrieved"][0]["offsets"] = {"start": -4, "end": 2, "unit": "char"}
    path = traces_file(valid_trace, "{oops", bad, '{"qid": "X", "retrieved": [')
    result = CliRunner().invoke(main, ["validate", str(path), "--format", "json"])
    assert result.exit_code == 3
    out = json.loads(result.stdout)
    assert out["records"] == 4
    assert out["counts"] == {"malformed_record": 2, "bad_offsets": 1}
    assert result.stderr.splitlines() == [
        f"error: {path}:2: expected a JSON value, found invalid JSON (Expecting property name enclosed in double quotes at column 2)",
        f"error: {path}:4: expected a JSON value, found invalid JSON (Expecting value at column 28)",
    ]


def test_truncated_last_line(cli, tmp_path, valid_trace):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(valid_trace) + "\n" + json.dumps(valid_trace)[:50], encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 3
    assert result.stderr.startswith(f"error: {path}:2: truncated last line: expected a complete JSON value")


@pytest.mark.parametrize(
    "content,message",
    [
        (None, "no such file"),
        ("", "expected JSON lines, found an empty file"),
        ("\n\n", "expected JSON lines, found only blank lines"),
    ],
)
def test_unreadable_inputs_exit_3(tmp_path, content, message, traces_file, valid_trace):
    path = tmp_path / "x.jsonl"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    good = traces_file(valid_trace)
    result = CliRunner().invoke(main, ["validate", str(path), str(good)])
    assert result.exit_code == 3
    assert result.stderr == f"error: {path}: {message}\n"
    assert result.stdout == "1 records, 0 errors, 0 warnings\n"  # the readable file was still checked


def test_bad_corpus_exit_3(tmp_path, traces_file, valid_trace):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"doc_id": "a", "text": "x"}\n{"doc_id": "a", "text": "y"}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(traces_file(valid_trace)), "--corpus", str(corpus)])
    assert result.exit_code == 3
    assert (
        result.stderr
        == f"error: {corpus}:2: $.doc_id: duplicate doc_id 'a': expected unique ids, found it first on line 1\n"
    )


def test_usage_error_exit_2(cli):
    assert cli("validate").exit_code == 2
    assert cli("validate", "x.jsonl", "--format", "xml").exit_code == 2
    assert cli("nonsense").exit_code == 2


def test_config_section_policy(cli, tmp_path, traces_file, valid_trace, corpus_dir):
    valid_trace["answer"]["segments"][0]["citations"] = ["pol-keys-1", "pol-pw-1"]
    path = traces_file(valid_trace)
    reused = cli("validate", path, "--corpus", corpus_dir, "--format", "json")
    assert reused.exit_code == 0  # a sentence citing two sections is a warning: each claim is judged on its own
    assert [(i["code"], i["severity"]) for i in json.loads(reused.output)["issues"]] == [
        ("cross_section_reuse", "warning")
    ]
    config = tmp_path / "c.toml"
    config.write_text(
        f'[audit]\ncorpus = "{corpus_dir}"\ncross_section_whitelist = '
        '[["policies/security/keys", "policies/security/passwords"]]\n',
        encoding="utf-8",
    )
    whitelisted = cli("validate", path, "--config", config, "--format", "json")
    assert whitelisted.exit_code == 0 and json.loads(whitelisted.output)["issues"] == []


def test_codes_lists_every_code(cli):
    out = cli("codes", "--format", "json")
    assert out.exit_code == 0
    listed = json.loads(out.output)
    assert [c["code"] for c in listed] == list(CODES)
    assert all(c["meaning"] and c["fix"] for c in listed)
    text = cli("codes").output
    assert all(code in text for code in CODES)


def test_gold_check(cli, tmp_path, corpus_dir):
    from helpers import KEYS_SENTENCE, POLICIES

    start = POLICIES.index(KEYS_SENTENCE)
    item = {
        "qid": "K",
        "question": "q",
        "paraphrases": ["a", "b"],
        "doc_id": "policies",
        "section_id": "policies/security/keys",
        "anchor": {"start": start, "end": start + len(KEYS_SENTENCE), "unit": "char", "text": KEYS_SENTENCE},
    }
    gold = tmp_path / "gold.jsonl"
    gold.write_text("\n".join(json.dumps(dict(item, qid=f"K{i}")) for i in range(3)) + "\n", encoding="utf-8")
    ok = cli("gold", "check", gold, "--corpus", corpus_dir, "--no-distance")
    assert (ok.exit_code, ok.output) == (0, "3 records, 0 errors, 0 warnings\n")
    gold.write_text(gold.read_text() + json.dumps(dict(item, qid="K0")) + "\n", encoding="utf-8")
    dup = cli("gold", "check", gold, "--corpus", corpus_dir, "--no-distance", "--format", "json")
    assert dup.exit_code == 1 and json.loads(dup.output)["counts"] == {"gold_duplicate_qid": 1}
    text = cli("gold", "check", gold, "--corpus", corpus_dir, "--no-distance").output
    # a gold item is named by its qid: it has no variant or seed to print
    assert f"{gold}:4: error gold_duplicate_qid [K0] $" in text and "None" not in text
    gold.write_text(gold.read_text() + "[]\n", encoding="utf-8")
    assert cli("gold", "check", gold, "--corpus", corpus_dir, "--no-distance").exit_code == 3
    for qid in ("", "   "):
        gold.write_text(json.dumps(dict(item, qid="K1")) + "\n" + json.dumps(dict(item, qid=qid)) + "\n")
        blank = cli("gold", "check", gold, "--corpus", corpus_dir, "--no-distance")
        assert blank.exit_code == 3
        assert f"error: {gold}:2: $.qid: expected a non-empty qid, found string {qid!r}" in blank.stderr


def test_gold_check_builds_its_encoder_as_a_run_does(cli, tmp_path, corpus_dir, monkeypatch):
    """--model hashing, documented as the model without weights, is accepted (it was refused as an
    unknown sentence-transformers model, exit 3), and the distance goes through the encoder a run
    builds: with the hashing encoder's vectors kept in the cache file, a second check finds every
    text there."""
    from helpers import KEYS_SENTENCE, POLICIES

    start = POLICIES.index(KEYS_SENTENCE)
    item = {
        "question": "How often are the keys rotated?",
        "paraphrases": ["a", "b"],
        "doc_id": "policies",
        "section_id": "policies/security/keys",
        "anchor": {"start": start, "end": start + len(KEYS_SENTENCE), "unit": "char", "text": KEYS_SENTENCE},
    }
    gold = tmp_path / "gold.jsonl"
    gold.write_text("\n".join(json.dumps(dict(item, qid=f"K{i}")) for i in range(3)) + "\n", encoding="utf-8")
    from ragaudit.checks.metrics.embed import HashingEncoder

    monkeypatch.setenv("RAGAUDIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(HashingEncoder, "on_disk", True)
    first = cli("gold", "check", gold, "--corpus", corpus_dir, "--model", "hashing")
    assert first.exit_code in (0, 1) and "3 records" in first.output, first.stderr
    cache = tmp_path / "cache" / "embeddings.sqlite"
    assert cache.is_file()
    rows = sqlite3.connect(cache).execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    assert rows > 0
    again = cli("gold", "check", gold, "--corpus", corpus_dir, "--model", "hashing")
    assert (again.exit_code, again.output) == (first.exit_code, first.output)


def test_readme_documents_every_command():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    for command in main.commands:
        assert f"ragaudit {command}" in readme, command
    for command in ("ragaudit gold check", "make audit", "make test"):
        assert command in readme


@pytest.mark.parametrize(
    "args",
    [["codes"], ["metrics"], ["codes", "--format", "json"], ["--help"], ["validate", "--help"], ["--version"]],
)
def test_a_closed_stdout_ends_quietly(args):
    """`ragaudit codes | head -1`: the reader has gone before the first write; the command ends
    as a writer to a closed pipe does (141, no message), never with an error."""
    import subprocess
    import sys

    child = subprocess.Popen(
        [sys.executable, "-m", "ragaudit", "-q", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    child.stdout.close()  # closed before the interpreter has even started: every write fails
    assert child.wait(timeout=60) == 141
    assert child.stderr.read() == b""


def test_a_closed_stdout_ends_a_command_with_issues_quietly(tmp_path, traces_file, valid_trace):
    import subprocess
    import sys

    path = traces_file(*[dict(valid_trace, qid=f"q{i}") for i in range(2000)])
    child = subprocess.Popen(
        [sys.executable, "-m", "ragaudit", "-q", "validate", str(path), "--workers", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    child.stdout.close()
    assert child.wait(timeout=120) == 141
    assert child.stderr.read() == b""


BOOM = """
from ragaudit.cli import commands as cli

@cli.main.command("boom")
def boom():
    raise BrokenPipeError(32, "Broken pipe")  # as a dead worker's pipe would

cli.main(["boom"], prog_name="ragaudit")
"""


def test_a_broken_pipe_that_is_not_stdout_is_an_error():
    import subprocess
    import sys

    child = subprocess.run([sys.executable, "-c", BOOM], capture_output=True, text=True, timeout=60)
    assert (child.returncode, child.stderr) == (3, "error: input/output: Broken pipe\n")
    closed = subprocess.Popen([sys.executable, "-c", BOOM], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    closed.stdout.close()
    assert closed.wait(timeout=60) == 141 and closed.stderr.read() == b""


def test_metrics_lists_the_ranking_metrics_at_the_configured_cutoff(tmp_path):
    config = tmp_path / "ragaudit.toml"
    config.write_text("[metrics]\nk = 3\nndcg_k = 10\n", encoding="utf-8")
    from helpers import invoke

    default = invoke("metrics")
    assert default.exit_code == 0 and "\nhit@5 " in default.output and "\nndcg@5 " in default.output
    configured = invoke("metrics", "--config", str(config))
    assert configured.exit_code == 0, configured.output
    assert "\nhit@3 " in configured.output and "\nrecall@3 " in configured.output and "\nndcg@10 " in configured.output
    listed = json.loads(invoke("metrics", "--config", str(config), "--format", "json").output)
    assert {m["name"]: m["label"] for m in listed}["ndcg@k"] == "ndcg@10"
    bad = tmp_path / "bad.toml"
    bad.write_text("[metrics]\nndcg_k = 0\n", encoding="utf-8")
    refused = invoke("metrics", "--config", str(bad))
    assert refused.exit_code == 3 and "ndcg_k" in refused.output and "Traceback" not in refused.output


def arrow_backend(code: str, **env: str) -> str:
    """The allocator Arrow uses in a new Python process that runs `code` first, with `env` added."""
    import os
    import subprocess
    import sys

    clean = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    script = f"{code}\nimport pyarrow as pa\nprint(pa.default_memory_pool().backend_name)"
    done = subprocess.run([sys.executable, "-c", script], env={**clean, **env}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[-1]


def test_a_command_takes_jemalloc_for_arrow_unless_the_variable_chooses():
    import pyarrow as pa

    command = "from ragaudit.cli.commands import main\ntry:\n    main(['codes'])\nexcept SystemExit:\n    pass"
    assert "jemalloc" in pa.supported_memory_backends()  # the Linux wheels have it (CI installs the same)
    assert arrow_backend("pass") == "mimalloc"  # Arrow's own default, without a command of ours
    assert arrow_backend(command) == "jemalloc"
    assert arrow_backend(command, ARROW_DEFAULT_MEMORY_POOL="system") == "system"
    from_the_command = "import os\n" + command + "\nassert os.environ['ARROW_DEFAULT_MEMORY_POOL'] == 'jemalloc'"
    assert arrow_backend(from_the_command) == "jemalloc"  # the worker processes a run starts inherit it


def test_readme_layout_names_only_folders_and_files_that_exist():
    """Every folder the README's Layout names (`ragaudit/`, and `io/` within it) and every doc it
    names (`reference.md`) is in the repository."""
    import re
    from pathlib import Path

    from helpers import readme_layout

    root = Path(__file__).resolve().parents[1]
    layout = readme_layout()
    named: list[Path] = []
    parent = root
    for line in layout.splitlines():
        top = re.match(r"(\S+/)\s", line)
        if top:
            parent = root / top.group(1)
            named.append(parent)
        named += [parent / name for name in re.findall(r"(?<![\w/.-])([a-z_]+/)(?=[\s,)]|$)", line[17:])]
        named += [parent / name for name in re.findall(r"\b([a-z_]+\.(?:md|py))\b", line[17:])]
    assert len(named) > 10, layout
    assert [str(p.relative_to(root)) for p in named if not p.exists()] == []
