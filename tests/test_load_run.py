"""`ragaudit.load_run`: a run directory as DataFrames whose rows and values are those of the files
it reads (read here directly, with json and pyarrow, or recomputed from the traces and the gold
set), located errors for what is not a finished run, and docs/notebook.md's examples run as they
are and print what the files say."""

import contextlib
import io
import json
import math
import re
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import BM25, ROOT, TFIDF, invoke, run_dir_of, write_config

import ragaudit
from ragaudit.core.errors import InputError

NOTEBOOK = ROOT / "docs" / "notebook.md"
PIPELINES = ("bm25", "tfidf", "recorded")
ITEMS, VARIANTS, SEEDS = 5, 3, 2


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """bm25 and tfidf live, and `recorded`: a replay of bm25's runs in which every run of seed 2
    lost the `rev` of its first payload (one missing_rev issue each)."""
    tmp = tmp_path_factory.mktemp("load-run")
    first = run_dir_of(invoke("run", write_config(tmp, BM25, items=ITEMS, seeds="[1, 2]"), "--no-gate"))
    recording = []
    for trace in read_jsonl(first / "traces.jsonl"):
        if trace["seed"] == 2:
            del trace["retrieved"][0]["rev"]
        recording.append(json.dumps(trace))
    (tmp / "recorded.jsonl").write_text("\n".join(recording) + "\n")
    replay = '[[pipelines]]\nname = "recorded"\nkind = "replay"\ntraces = "recorded.jsonl"\n'
    result = invoke("run", write_config(tmp, BM25 + TFIDF + replay, items=ITEMS, seeds="[1, 2]"), "--no-gate")
    assert result.exit_code in (0, 1), result.output
    return run_dir_of(result)


@pytest.fixture(scope="module")
def gold(run_dir) -> dict[str, dict]:
    return {item["qid"]: item for item in read_jsonl(run_dir.parent.parent / "gold.jsonl")}


def test_runs_are_every_stored_run_with_metric_columns(run_dir, gold):
    run = ragaudit.load_run(run_dir)
    traces = read_jsonl(run_dir / "traces.jsonl")
    assert len(run.runs) == len(traces) == len(PIPELINES) * ITEMS * VARIANTS * SEEDS
    keys = ["pipeline", "qid", "variant", "seed"]
    assert run.runs[keys].values.tolist() == [[t["config"], t["qid"], t["variant"], t["seed"]] for t in traces]
    stored = pq.read_table(run_dir / "runs.parquet").to_pylist()
    metrics = sorted(k[2:] for k in stored[0] if k.startswith("m.") and k != "m.correct")
    assert {"citation_match", "coverage", "delta_s_qr", "hit@k", "ndcg@k"} <= set(metrics)
    assert not [c for c in run.runs.columns if c.startswith("m.")]
    for row, raw in zip(run.runs.to_dict("records"), stored):
        for name in metrics:
            assert row[name] == raw[f"m.{name}"] or row[name] != row[name] and raw[f"m.{name}"] is None
        assert row["correct"] is raw["correct"] and float(raw["correct"]) == raw["m.correct"]
        assert (row["gold_doc_id"], row["gold_section_id"]) == (
            gold[row["qid"]]["doc_id"],
            gold[row["qid"]]["section_id"],
        )
        assert json.loads(row["citations"]) == json.loads(raw["citations"])


def test_questions_count_their_runs_and_take_the_report_means(run_dir, gold):
    run = ragaudit.load_run(run_dir)
    report = json.loads((run_dir / "report.json").read_text())
    traces = read_jsonl(run_dir / "traces.jsonl")
    assert len(run.questions) == len(report["questions"]) == len(PIPELINES) * ITEMS
    runs_of = Counter((t["config"], t["qid"]) for t in traces)
    stored = pq.read_table(run_dir / "runs.parquet").to_pylist()
    correct_of = Counter((r["pipeline"], r["qid"]) for r in stored if r["correct"])
    for row, q in zip(run.questions.to_dict("records"), report["questions"]):
        key = (q["pipeline"], q["qid"])
        assert (row["pipeline"], row["qid"]) == key
        assert row["runs"] == runs_of[key] == VARIANTS * SEEDS
        assert row["correct_runs"] == correct_of[key] == q["stats"]["correct"]
        assert row["correct"] == pytest.approx(correct_of[key] / runs_of[key])
        assert row["errored_runs"] == q["stats"]["errored"] and row["unmatched_runs"] == q["stats"]["unmatched"]
        assert (row["doc_id"], row["section_id"]) == (gold[q["qid"]]["doc_id"], gold[q["qid"]]["section_id"])
        assert row["lambda_state"] == q["lambda"]["state"] and row["css"] == q["lambda"]["css"]
        for name, value in q["metrics"].items():  # a mean of no values is null in the report, NaN here
            assert math.isnan(row[name]) if value is None else row[name] == pytest.approx(value, nan_ok=True)


def test_sections_count_their_questions_by_lambda_state(run_dir, gold):
    run = ragaudit.load_run(run_dir)
    report = json.loads((run_dir / "report.json").read_text())
    expected = Counter()
    for q in report["questions"]:
        item = gold[q["qid"]]
        expected[(q["pipeline"], item["doc_id"], item["section_id"], q["lambda"]["state"])] += 1
    found = Counter()
    for row in run.sections.to_dict("records"):
        assert row["questions"] == sum(row[s] for s in ("convergent", "recursive", "chaotic", "divergent"))
        for state in ("convergent", "recursive", "chaotic", "divergent"):
            if row[state]:
                found[(row["pipeline"], row["doc_id"], row["section_id"], state)] = row[state]
    assert found == expected


def test_issues_are_every_line_of_issues_jsonl(run_dir):
    run = ragaudit.load_run(run_dir)
    lines = read_jsonl(run_dir / "issues.jsonl")
    assert len(run.issues) == len(lines)
    missing_rev = run.issues[run.issues["code"] == "missing_rev"]
    assert Counter(missing_rev["pipeline"]) == {"recorded": ITEMS * VARIANTS}  # every run of seed 2
    assert set(missing_rev["seed"]) == {2} and set(missing_rev["path"]) == {"$.retrieved[0].rev"}
    assert list(run.issues.columns[:3]) == ["pipeline", "code", "severity"]
    assert run.issues[["code", "message"]].values.tolist() == [[i["code"], i["message"]] for i in lines]


def test_every_column_the_docstring_names_is_there(run_dir):
    run = ragaudit.load_run(run_dir)
    doc = ragaudit.outputs.results.Run.__doc__
    for table in ("runs", "questions", "sections", "issues"):
        text = re.search(rf"`run\.{table}`: [^\n]*\n(.*?)(?=\n    `run\.|\n\n)", doc, re.S).group(1)
        text = re.sub(r"\s*\([^)]*\)|`[^`]*`", "", text.split("one per metric")[0])  # remarks, quoted words
        named = set(re.findall(r"[a-z_@0-9]+(?=[,;.])", text))
        assert len(named) >= 8 and named <= set(getattr(run, table).columns), (
            table,
            named - set(getattr(run, table).columns),
        )


def test_an_empty_issues_file_still_has_the_columns(tmp_path, run_dir):
    copy = tmp_path / "run"
    copy.mkdir()
    for name in ("runs.parquet", "report.json", "manifest.json"):
        (copy / name).write_bytes((run_dir / name).read_bytes())
    (copy / "issues.jsonl").write_text("")
    issues = ragaudit.load_run(copy).issues
    assert len(issues) == 0 and {"pipeline", "code", "severity", "qid", "message", "fix"} <= set(issues.columns)
    assert issues.groupby("code").size().empty


@pytest.mark.parametrize(
    "damage, expected",
    [
        (lambda d: (d / "report.json").unlink(), r"found no report\.json; the run did not finish: .*--resume"),
        (
            lambda d: (d / "runs.parquet").write_bytes(b"not parquet"),
            r"runs\.parquet: expected a parquet table of runs",
        ),
        (lambda d: (d / "issues.jsonl").write_text('{"code": "x"}\nnot json\n'), r"issues\.jsonl:2: expected an issue"),
        (lambda d: (d / "report.json").write_text("[1]"), r"report\.json: expected a report object, found an array"),
    ],
)
def test_a_damaged_run_directory_is_an_input_error_naming_the_file(tmp_path, run_dir, damage, expected):
    copy = tmp_path / "run"
    copy.mkdir()
    for name in ("runs.parquet", "report.json", "manifest.json", "issues.jsonl", "traces.jsonl"):
        (copy / name).write_bytes((run_dir / name).read_bytes())
    damage(copy)
    with pytest.raises(InputError, match=expected) as caught:
        loaded = ragaudit.load_run(copy)
        loaded.report, loaded.runs, loaded.issues
    assert str(copy) in str(caught.value)


def test_not_a_run_directory_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="found no runs.parquet, report.json, issues.jsonl, manifest.json$"):
        ragaudit.load_run(tmp_path)
    with pytest.raises(InputError, match="nope: expected a ragaudit run directory, found nothing there"):
        ragaudit.load_run(tmp_path / "nope")


def notebook_outputs(run_dir: Path) -> tuple[dict, list[str]]:
    """docs/notebook.md's python blocks run in order in one namespace; what each printed."""
    blocks = re.findall(r"```python\n(.*?)```", NOTEBOOK.read_text(), re.S)
    namespace, printed = {"run_dir": run_dir}, []
    for block in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, str(NOTEBOOK), "exec"), namespace)
        printed.append(out.getvalue())
    return namespace, printed


def cited_sections(trace: dict, k: int = 5) -> set[tuple[str, str]]:
    """The sections a run cites (docs/reference.md §3): its answer's citations, else its top-k retrieved."""
    answer = trace.get("answer") or {}
    retrieved = trace.get("retrieved") or []
    if answer:
        cited = {c for seg in answer.get("segments") or [] for c in seg.get("citations") or []}
        retrieved = [p for p in retrieved if p["snippet_id"] in cited]
    else:
        retrieved = retrieved[:k]
    return {(p["doc_id"], p["section_id"]) for p in retrieved}


def test_the_notebook_examples_print_what_the_files_hold(run_dir, gold):
    namespace, printed = notebook_outputs(run_dir)
    assert len(printed) == 7
    report = json.loads((run_dir / "report.json").read_text())
    traces = read_jsonl(run_dir / "traces.jsonl")
    stored = pq.read_table(run_dir / "runs.parquet").to_pandas()
    load, means, worst, off_section, why, pivots, issues = printed

    assert load == f"{report['summary']['verdict']} {len(traces)} runs\n"

    expected = stored.rename(columns=lambda c: c[2:] if c.startswith("m.") and c != "m.correct" else c)
    expected = expected.groupby("pipeline")[["citation_match", "coverage", "delta_s_qr", "correct"]].mean()
    assert means == str(expected.round(3)) + "\n"

    order = sorted(report["questions"], key=lambda q: (q["metrics"]["correct"], -q["metrics"]["delta_s_qr"]))
    shown = [line.split()[:2] for line in worst.splitlines()[1:]]
    assert shown == [[q["pipeline"], q["qid"]] for q in order[:5]]

    wrong_section = Counter(
        t["config"]
        for t in traces
        if not t.get("error") and (gold[t["qid"]]["doc_id"], gold[t["qid"]]["section_id"]) not in cited_sections(t)
    )
    assert wrong_section, "some runs of this gold subset cite another section"
    counts = dict(line.split() for line in off_section.splitlines()[1 : 1 + len(wrong_section)])
    assert {p: int(n) for p, n in counts.items()} == wrong_section

    not_correct = stored[~stored["correct"]]
    assert len(namespace["wrong"]) == len(not_correct)
    top = Counter(zip(not_correct.pipeline, not_correct.why)).most_common()
    assert [int(line.split()[-1]) for line in why.splitlines()[1:]] == [n for _, n in top[:5]]

    states = Counter((q["pipeline"], q["lambda"]["state"]) for q in report["questions"])
    table = namespace["states"]
    assert {(p, s): int(table.loc[p, s]) for p in table.index for s in table.columns if table.loc[p, s]} == states
    match = namespace["match"]
    for (qid, pipeline), value in stored.groupby(["qid", "pipeline"])["m.citation_match"].mean().items():
        assert match.loc[qid, pipeline] == pytest.approx(value)
    assert str(match.round(2)) in pivots

    codes = Counter((i.get("pipeline"), i["code"]) for i in read_jsonl(run_dir / "issues.jsonl"))
    assert {tuple(line.split()[:2]): int(line.split()[2]) for line in issues.splitlines()[1:]} == codes
