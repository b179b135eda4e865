"""docs/guide.md is true. Its marked blocks are written to a folder and read by ragaudit's own
readers: the corpus gives the sections and revisions the guide states, the gold set checks clean,
the recorded traces validate with no issue, the config runs end to end (with the `hashing`
encoder) and writes every output the guide lists, with the columns, keys and fields it documents.
The config reference names exactly the schema's keys with the schema's defaults, and the codes,
metrics and faults tables are those of the registries, word for word."""

import dataclasses
import hashlib
import json
import os
import re
import sqlite3
import sys
import tomllib
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import REFERENCE, ROOT, backticked, invoke, markdown_table, run_dir_of

from ragaudit.checks.metrics.embed import CachedEncoder, HashingEncoder
from ragaudit.checks.metrics.registry import METRICS
from ragaudit.core.types import REQUIRED_PAYLOAD_FIELDS, Issue, LiveIndex, Payload
from ragaudit.io.config import load_config
from ragaudit.io.corpus import load_corpus
from ragaudit.io.gold import read_gold
from ragaudit.io.traces import parse_trace, trace_to_dict
from ragaudit.pipelines.base import Request
from ragaudit.pipelines.python import as_live_index

GUIDE = ROOT / "docs" / "guide.md"
TEXT = GUIDE.read_text(encoding="utf-8")
MARKED = re.compile(r"<!-- check: ([\w-]+)(?: ([^>]*?))? -->\n```(\w*)\n(.*?)```", re.S)
KINDS = {
    "file",
    "sections",
    "corpus-jsonl",
    "same-as",
    "config",
    "bad-config",
    "bad-config-errors",
    "validate",
    "why",
    "request",
    "index-info",
    "traces-log",
    "compare",
    "probe",
    "layout",
}
DATA_LANGUAGES = {"json", "jsonl", "toml", "python"}
GOLD_FIELDS = {
    "qid",
    "question",
    "paraphrases",
    "doc_id",
    "section_id",
    "anchor",
    "expected_citations",
    "accept",
    "decoy",
    "answers_not_allowed",
    "reference_answer",
}
EXPECTED_CITATION_FIELDS = {"doc_id", "start", "end", "unit", "snippet_id", "section_id", "text"}
TRACE_FIELDS = {
    "schema",
    "qid",
    "variant",
    "seed",
    "query",
    "config",
    "retriever_name",
    "retrieved_at",
    "index",
    "offset_unit",
    "retrieved",
    "answer",
    "steps",
    "attempts",
    "retried",
    "error",
    "source",
}
CORPUS_JSONL_FIELDS = {"doc_id", "text", "title", "source_url", "rev", "sections", "pages"}


def blocks(kind: str) -> list[tuple[str, str]]:
    """(argument, body) of every block marked `<!-- check: kind ... -->`."""
    return [(arg or "", body) for found, arg, _, body in MARKED.findall(TEXT) if found == kind]


def only(kind: str) -> str:
    found = blocks(kind)
    assert len(found) == 1, f"expected one block marked {kind}, found {len(found)}"
    return found[0][1]


def table(marker: str) -> list[list[str]]:
    """The rows of a table of docs/reference.md, which holds the guide's fields, keys and columns."""
    return markdown_table(REFERENCE.read_text(encoding="utf-8"), marker)


names = backticked


def documented(marker: str) -> set[str]:
    return {name for row in table(marker) for name in names(row[0])}


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("guide") / "example"
    for path, body in blocks("file"):
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
    return folder


@dataclasses.dataclass
class Run:
    dir: Path
    config: Path
    cache: Path
    bin: Path  # where `python` is this interpreter


@pytest.fixture(scope="module")
def run(example, tmp_path_factory) -> Run:
    """`ragaudit run` of the guide's config with the hashing encoder, `python` on PATH being this
    interpreter (the command pipeline runs `python my_rag.py`) and a cache folder of its own."""
    cache = tmp_path_factory.mktemp("guide-cache")
    bin_dir = tmp_path_factory.mktemp("guide-bin")
    wrapper = bin_dir / "python"  # a script, not a symlink: a virtualenv's interpreter knows itself by its path
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    config = example / "ragaudit.toml"
    text = config.read_text(encoding="utf-8")
    assert text.count('model = "all-MiniLM-L6-v2"') == 1
    # the hashing encoder's vectors in the cache file all the same, as a model's are
    config.write_text(text.replace('model = "all-MiniLM-L6-v2"', 'model = "hashing"\ncache = true'), encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAGAUDIT_CACHE", str(cache))
        patch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        patch.chdir(example)  # as the guide runs it: `ragaudit run ragaudit.toml` in the example folder
        result = invoke("run", config.name)
    assert result.exit_code == 1, result.output  # the recording lacks runs: the gate fails, as the guide says
    return Run(example / run_dir_of(result), config, cache, bin_dir)


# ---- the guide's own shape ---------------------------------------------------------------------


def test_every_data_block_is_checked_and_every_check_is_known():
    fences = re.finditer(r"(<!-- check: ([\w-]+)[^>]*-->\n)?```(\w*)\n.*?```", TEXT, re.S)
    unchecked = [m.group(3) for m in fences if m.group(3) in DATA_LANGUAGES and not m.group(1)]
    assert unchecked == []
    assert {kind for kind, *_ in MARKED.findall(TEXT)} == KINDS


# ---- inputs ------------------------------------------------------------------------------------


def test_the_example_folder_is_the_one_the_guide_lays_out(example):
    listed = [line.split()[0] for line in only("layout").splitlines()[1:]]
    assert sorted(listed) == sorted(path for path, _ in blocks("file") if path != "stale.jsonl")


def test_the_corpus_folder_has_the_sections_and_revisions_the_guide_states(example):
    corpus = load_corpus(example / "handbook")
    sections = {doc_id: [s.section_id for s in doc.sections] for doc_id, doc in corpus.documents.items()}
    assert sections == json.loads(only("sections"))
    for doc_id, path in (("policies", "policies.md"), ("teams/on-call", "teams/on-call.md")):
        rev = hashlib.sha256((example / "handbook" / path).read_bytes()).hexdigest()[:12]
        assert corpus[doc_id].rev == rev and f"`{rev}`" in TEXT


def test_the_corpus_jsonl_example_reads_as_described(tmp_path):
    body = only("corpus-jsonl")
    (tmp_path / "corpus.jsonl").write_text(body, encoding="utf-8")
    corpus = load_corpus(tmp_path / "corpus.jsonl")
    lines = [json.loads(line) for line in body.splitlines()]
    manual, faq = corpus["manual"], corpus["faq"]
    assert manual.rev == "2026-10-r3" == lines[0]["rev"]
    assert [(s.section_id, manual.text[s.start : s.end].split("\n")[0]) for s in manual.sections] == [
        ("safety", "Safety"),
        ("maintenance", "Maintenance"),
    ]
    assert len(manual.pages) == 2 and manual.page_of(60) == 2
    faq_rev = hashlib.sha256(lines[1]["text"].encode("utf-8")).hexdigest()[:12]
    assert faq.rev == faq_rev and f"`{faq_rev}`" in TEXT
    assert [s.section_id for s in faq.sections] == ["_preamble"]
    assert documented("table: corpus.jsonl") == CORPUS_JSONL_FIELDS == set().union(*lines)


def test_the_gold_set_reads_and_checks_clean_and_shows_every_field(example):
    items, problems = read_gold(example / "gold.jsonl")
    assert problems == [] and [i.qid for i in items] == ["SEC-KEYS-1", "SEC-PW-1", "ONCALL-SEV1-1"]
    check = invoke("gold", "check", example / "gold.jsonl", "--corpus", example / "handbook", "--no-distance")
    assert check.exit_code == 0, check.output
    raw = [json.loads(line) for line in (example / "gold.jsonl").read_text().splitlines()]
    assert documented("table: gold") == GOLD_FIELDS == set().union(*raw)
    cited = [c for item in raw for c in item.get("expected_citations", [])]
    assert set().union(*cited) == EXPECTED_CITATION_FIELDS
    assert items[2].accept == "any" and len(items[2].gold_citations) == 2


def test_the_laid_out_examples_are_the_lines_they_show(example):
    shown = blocks("same-as")
    assert len(shown) == 2
    for arg, body in shown:
        path, number = arg.split()
        line = (example / path).read_text(encoding="utf-8").splitlines()[int(number) - 1]
        assert json.loads(body) == json.loads(line), arg


def test_the_recorded_traces_validate_with_no_issue_and_show_every_field(example):
    result = invoke("validate", example / "traces.jsonl", "--corpus", example / "handbook", "--format", "json")
    assert result.exit_code == 0, result.output
    stated = '{"records": 3, "issues": [], "counts": {}}'
    assert json.loads(result.stdout) == json.loads(stated) and f"`{stated}`" in TEXT
    raw = [json.loads(line) for line in (example / "traces.jsonl").read_text().splitlines()]
    payloads = [p for trace in raw for p in trace["retrieved"]]
    payload_fields = set(REQUIRED_PAYLOAD_FIELDS) | {
        f.name for f in dataclasses.fields(Payload) if f.init and f.name != "missing"
    }
    assert documented("table: payload") == payload_fields == set().union(*payloads)
    required = {name for row in table("table: payload") if row[1] == "required" for name in names(row[0])}
    assert required == set(REQUIRED_PAYLOAD_FIELDS)
    # every field but `source`, which only `ragaudit ingest` writes (tests/spans/test_ingest_cli.py)
    assert documented("table: trace") == TRACE_FIELDS == set().union(*raw) | {"source"}
    written = trace_to_dict(parse_trace(raw[0]))
    assert set(written) <= TRACE_FIELDS
    units = {p["offsets"]["unit"] if isinstance(p["offsets"], dict) else raw[1]["offset_unit"] for p in payloads}
    assert units == {"char", "token"}


def test_a_defective_trace_gives_exactly_the_output_shown(example, monkeypatch):
    monkeypatch.chdir(example)
    (argument, expected), *_ = blocks("validate")
    result = invoke("validate", argument, "--corpus", "handbook")
    assert result.exit_code == 1
    assert result.stdout == expected


def test_a_bad_config_gives_exactly_the_errors_shown(tmp_path, monkeypatch):
    (tmp_path / "bad.toml").write_text(only("bad-config"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = invoke("run", "bad.toml")
    assert result.exit_code == 3
    assert result.stderr == only("bad-config-errors")


def test_every_config_example_loads(example, tmp_path):
    loaded = load_config(example / "ragaudit.toml")
    assert [(p.name, p.kind) for p in loaded.pipelines] == [
        ("bm25", "reference"),
        ("keywords", "python"),
        ("keywords-cli", "command"),
        ("prod-log", "replay"),
    ]
    assert loaded.audit.gold == example / "gold.jsonl" and loaded.audit.corpus == example / "handbook"
    snippets = blocks("config")
    assert len(snippets) == 5
    loaded_snippets = []
    for i, (_, body) in enumerate(snippets):
        (tmp_path / f"snippet{i}.toml").write_text(body, encoding="utf-8")
        loaded_snippets.append(load_config(tmp_path / f"snippet{i}.toml"))
    assert loaded_snippets[0].audit.marker_forms == {"number"}  # the marker forms an app cites with
    assert loaded_snippets[3].gate.labelled_good_min == 0.80 and loaded_snippets[3].labels.path.name == "labels.jsonl"
    assert loaded_snippets[4].gate.faithful_min == 0.90  # ragaudit probe's gate


# ---- a run's outputs ---------------------------------------------------------------------------


def test_the_run_writes_every_output_the_guide_lists(run):
    listed = documented("table: outputs")
    assert len(listed) == 13
    assert sorted(name for name in listed if not (run.dir / name).is_file()) == []
    runs = pq.read_table(run.dir / "runs.parquet", columns=["pipeline", "errored"]).to_pylist()
    assert len(runs) == 4 * 3 * 3 * 2  # pipelines × questions × variants × seeds
    assert sum(r["errored"] for r in runs if r["pipeline"] == "prod-log") == 15  # 3 of 18 recorded


def test_runs_parquet_has_the_documented_columns(run):
    schema = pq.read_schema(run.dir / "runs.parquet")
    per_run = {name for name, metric in METRICS.items() if metric.level in ("run", "claim")}
    expected = {}
    for row in table("table: runs.parquet"):
        for name in names(row[0]):
            for column in [f"m.{m}" for m in per_run] if name == "m.<metric>" else [name]:
                expected[column] = row[1]
    assert {field.name: str(field.type) for field in schema} == expected


def test_questions_parquet_has_the_documented_columns(run):
    from ragaudit.checks.metrics.registry import AVERAGED

    schema = pq.read_schema(run.dir / "questions.parquet")
    expected = {}
    for row in table("table: questions.parquet"):
        for name in names(row[0]):
            for column in [f"m.{m}" for m in AVERAGED] if name == "m.<metric>" else [name]:
                expected[column] = row[1]
    assert {field.name: str(field.type) for field in schema} == expected
    rows = pq.read_table(run.dir / "questions.parquet", columns=["pipeline", "qid"]).to_pylist()
    assert len(rows) == 4 * 3  # pipelines × questions


def test_rag_traces_and_traces_log_have_the_documented_fields(run):
    with sqlite3.connect(run.dir / "rag_traces.sqlite") as db:
        columns = {row[1]: row[2] for row in db.execute("PRAGMA table_info(rag_traces)")}
    expected = {name: row[1] for row in table("table: rag_traces") for name in names(row[0])}
    assert columns == expected
    log = (run.dir / "traces.log").read_text(encoding="utf-8").splitlines()
    keys = [pair.split("=", 1)[0] for pair in log[0].split(" ")]
    assert set(keys) == documented("table: traces.log")
    shown = dict(pair.split("=", 1) for pair in only("traces-log").strip().split(" "))
    assert list(shown) == keys
    found = [
        dict(pair.split("=", 1) for pair in line.split(" "))
        for line in log
        if f"pipeline={shown['pipeline']} qid={shown['qid']} variant={shown['variant']} seed={shown['seed']} " in line
    ]
    assert len(found) == 1
    # ΔS is the one value that depends on the encoder, and this run uses the hashing one
    assert {k: v for k, v in found[0].items() if k != "deltaS"} == {k: v for k, v in shown.items() if k != "deltaS"}


def test_report_json_has_the_documented_keys(run):
    report = json.loads((run.dir / "report.json").read_text(encoding="utf-8"))
    assert set(report) == documented("table: report.json")
    # question_rows only in a report of more than 2,000 question rows (tests/report/test_bounded.py)
    assert set(report["summary"]) == documented("table: report.summary") - {"question_rows"}
    for summary in report["summary"]["pipelines"].values():
        assert set(summary) == documented("table: report.pipeline")
    questions = report["questions"]
    assert documented("table: report.question") - set().union(*questions) == {"runs_omitted"}
    assert set().union(*questions) <= documented("table: report.question")
    runs = [r for q in questions for r in q["runs"]]
    assert set().union(*runs) == documented("table: report.run")
    assert set(report["gate"]) == {"verdict", "pipelines", "checks"}
    # the guide's config leaves [metrics] out: the report names the documented defaults it was scored with
    documented_metrics = {
        names(row[0])[0]: None if row[1] == "none" else tomllib.loads(f"v = {row[1][1:-1]}")["v"]
        for row in table("keys: metrics")
    }
    expected = {"k": 5, "ndcg_k": None, "match_tolerance": 0, "delta_s": "nearest"}
    assert report["meta"]["metrics"] == documented_metrics == expected
    check_keys = {"pipeline", "name", "threshold", "value", "passed", "bound", "questions", "detail", "source"}
    check_keys |= {"reasons", "settings"}
    assert set(report["gate"]["checks"][0]) == check_keys


def test_manifest_and_issues_have_the_documented_fields(run):
    manifest = json.loads((run.dir / "manifest.json").read_text(encoding="utf-8"))
    assert documented("table: manifest.json") - set(manifest) == {"baseline"}
    assert set(manifest) <= documented("table: manifest.json")
    assert documented("table: issue") == {f.name for f in dataclasses.fields(Issue)}
    issues = [json.loads(line) for line in (run.dir / "issues.jsonl").read_text().splitlines()]
    assert issues and set().union(*issues) <= documented("table: issue")


def test_the_why_lines_are_those_of_the_run(run):
    rows = pq.read_table(run.dir / "runs.parquet", columns=["pipeline", "qid", "variant", "seed", "why"]).to_pylist()
    why = {(r["pipeline"], r["qid"], r["variant"], r["seed"]): r["why"] for r in rows}
    shown = only("why").strip().splitlines()
    assert len(shown) == 7
    for line in shown:
        pipeline, qid, variant, seed, reason = re.match(r"(\S+) (\S+) v(\d+) s(\d+): (.*)$", line).groups()
        assert why[(pipeline, qid, int(variant), int(seed))] == reason, line
    report = json.loads((run.dir / "report.json").read_text(encoding="utf-8"))
    sev1 = next(q for q in report["questions"] if (q["pipeline"], q["qid"]) == ("keywords", "ONCALL-SEV1-1"))
    # every run correct, two alternatives cited: recursive, as the guide's λ section says
    assert sev1["correct"] == sev1["stats"]["runs"] == 6
    assert (sev1["lambda"]["state"], sev1["lambda"]["css"]) == ("recursive", 0.0)


def test_every_gate_check_a_run_can_show_is_documented(run):
    report = run.dir / "report.json"
    checked = invoke("gate", report, "--config", run.config, "--baseline", report, "--format", "json")
    assert checked.exit_code in (0, 1), checked.output
    seen = {c["name"] for c in json.loads(checked.stdout)["checks"]}
    listed = documented("table: gate-checks")
    assert {"regressions", "max_errors", "lambda_forbid", "grounded_pass_rate"} <= seen <= listed
    from ragaudit.decisions.gating import CHECK_NAMES, STRUCTURAL

    assert listed == {*CHECK_NAMES, *STRUCTURAL}  # the gate's table and its structural checks, each documented


def test_the_comparison_line_is_that_of_the_run(run, tmp_path):
    compared = invoke("compare", run.dir, "--out", tmp_path)
    assert compared.exit_code == 0, compared.output
    header, line = only("compare").strip().splitlines()
    lines = compared.stdout.splitlines()
    metric = lines[lines.index(header) + 1 :][0:10]
    found = next(x for x in metric if x.split()[0] == line.split()[0])
    # p_holm is adjusted across every metric of the pair, some of which depend on the encoder
    assert re.sub(r"p_holm \S+", "p_holm ?", found) == re.sub(r"p_holm \S+", "p_holm ?", line)


def test_the_probe_lines_are_those_of_a_probe_of_the_example(run):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAGAUDIT_CACHE", str(run.cache))
        patch.setenv("PATH", f"{run.bin}{os.pathsep}{os.environ.get('PATH', '')}")
        patch.chdir(run.config.parent)
        probed = invoke("probe", run.config.name)
    assert probed.exit_code == 0, probed.output

    def shown(text: str) -> list[str]:  # the guide shortens the index hash and names another time
        text = re.sub(r"(sha256:[0-9a-f]{4})[0-9a-f]{56}([0-9a-f]{4})", r"\1…\2", text)
        return [line for line in text.strip().splitlines() if not line.startswith("probe directory: ")]

    assert shown(probed.output) == shown(only("probe"))


# ---- caches ------------------------------------------------------------------------------------


def test_the_caches_hold_what_the_guide_says(run):
    with sqlite3.connect(run.cache / "embeddings.sqlite") as db:
        assert [r[1] for r in db.execute("PRAGMA table_info(vectors)")] == ["model", "sha", "vec"]
        assert {r[0] for r in db.execute("SELECT DISTINCT model FROM vectors")} == {"hashing-256"}
    with sqlite3.connect(run.cache / "answers.sqlite") as db:
        assert [r[1] for r in db.execute("PRAGMA table_info(answers)")] == ["key", "trace"]
        kept = [json.loads(r[0]) for r in db.execute("SELECT trace FROM answers")]
    assert kept and all(t["error"] is None for t in kept)


def test_a_model_folder_is_keyed_by_the_sha256_of_its_files(tmp_path):
    class FolderEncoder(HashingEncoder):
        def __init__(self, path: Path):
            super().__init__()
            self.path = path

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"\x00\x01weights")
    name = b"weights.bin"  # framed: its length in 8 bytes, the name, the sha256 of the bytes
    framed = len(name).to_bytes(8, "big") + name + hashlib.sha256(b"\x00\x01weights").digest()
    digest = hashlib.sha256(framed).hexdigest()[:16]
    cached = CachedEncoder(FolderEncoder(folder), tmp_path / "embeddings.sqlite")
    cached.encode(["Hardware keys are rotated every 12 months."])
    cached.close()
    with sqlite3.connect(tmp_path / "embeddings.sqlite") as db:
        assert {r[0] for r in db.execute("SELECT model FROM vectors")} == {f"hashing-256@{digest}"}
        assert [r[1] for r in db.execute("PRAGMA table_info(fingerprints)")] == ["folder", "state", "digest"]
    assert "`vectors (model, sha, vec)`" in TEXT and "`fingerprints (folder, state, digest)`" in TEXT


# ---- the pipeline protocol ---------------------------------------------------------------------


def test_the_request_line_is_what_a_command_reads():
    body = only("request").strip()
    request = Request(**json.loads(body))
    assert json.dumps(request.to_dict(), sort_keys=True) == body


def test_the_index_info_example_is_accepted():
    value = json.loads(only("index-info"))
    assert as_live_index(value) == LiveIndex(**value)
