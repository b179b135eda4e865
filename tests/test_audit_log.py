"""`ragaudit audit-log`: the gold-free audit of production traces, per time window.

The traces come from the reference pipeline (`ragaudit run` on a small hashing config), spread over
three days, with known defects injected: a changed number in one answer (day 1), a stale `rev` in
one payload (day 2), a re-built index on day 3. Every expectation is derived from those injections
and from the input file itself, never from what audit-log wrote.
"""

from __future__ import annotations

import copy
import json
import random
import re
import sqlite3
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from helpers import BM25, DEMO, invoke, run_dir_of, write_config

from ragaudit.checks.metrics.embed import HashingEncoder
from ragaudit.flows.auditlog import run_audit_log
from ragaudit.flows.auditlog.windows import Window, drift
from ragaudit.flows.auditlog.worst import KINDS, WorstExamples

DAYS = ("2026-11-20", "2026-11-21", "2026-11-22")
HOURS = (23, 20, 17, 14, 11, 8)  # within a day, later lines are earlier: first-seen is not the first line
NEW_HASH = "sha256:reindexed-2026-11-22"
STALE_REV = "000000000000"
HOSTILE = '</td><script>alert(1)</script><img src=x onerror="alert(2)">&amp;'
CORPUS = DEMO / "corpus"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, list[dict]]:
    """The config and the 18 traces of a real reference run (6 questions x 3 variants, one seed)."""
    tmp = tmp_path_factory.mktemp("run")
    config = write_config(tmp, BM25, items=6, seeds="[1]")
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    lines = (run_dir_of(result) / "traces.jsonl").read_text(encoding="utf-8").splitlines()
    return config, [json.loads(line) for line in lines]


def spread(traces: list[dict]) -> list[dict]:
    """The traces over three days, six a day, each day's times falling line by line."""
    out = copy.deepcopy(traces)
    for i, trace in enumerate(out):
        trace["retrieved_at"] = f"{DAYS[i // 6]}T{HOURS[i % 6]:02d}:00:00Z"
    # the same instant as 2026-11-21T23:00Z, written with an offset: still day 2 in UTC
    out[6]["retrieved_at"] = "2026-11-22T01:00:00+02:00"
    return out


def cited_texts(trace: dict, segment: dict) -> list[str]:
    by_id = {p["snippet_id"]: p["text"] for p in trace["retrieved"]}
    return [by_id[c] for c in segment["citations"] if c in by_id]


def change_a_number(trace: dict) -> str:
    """Alter the first number of the first answer segment stating one, to a number none of its cited
    texts holds; returns the new number."""
    for segment in trace["answer"]["segments"]:
        found = re.search(r"\d+", segment["text"])
        if not found:
            continue
        sources = " ".join(cited_texts(trace, segment))
        new = int(found.group()) + 1
        while re.search(rf"(?<!\d){new}(?!\d)", sources):
            new += 1
        old_text = segment["text"]
        segment["text"] = old_text[: found.start()] + str(new) + old_text[found.end() :]
        trace["answer"]["text"] = trace["answer"]["text"].replace(old_text[:-1], segment["text"][:-1])
        return str(new)
    raise AssertionError("no answer segment states a number")


def reindex(trace: dict) -> None:
    trace["index"]["index_hash"] = NEW_HASH
    for payload in trace["retrieved"]:
        payload["index_hash"] = NEW_HASH


def page_text(page: str) -> str:
    """The text a browser shows: the page's text nodes, entities decoded."""
    parts: list[str] = []
    parser = HTMLParser(convert_charrefs=True)
    parser.handle_data = parts.append  # type: ignore[method-assign]
    parser.feed(page)
    return "".join(parts)


def write_traces(path: Path, traces: list[dict]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in traces), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def production(recorded, tmp_path_factory):
    """The injected trace file, what was injected where, and the audit-log of it."""
    config, traces = recorded
    tmp = tmp_path_factory.mktemp("production")
    faulty = spread(traces)
    number_line = next(
        i for i, t in enumerate(faulty[:6]) if any(re.search(r"\d", s["text"]) for s in t["answer"]["segments"])
    )
    new_number = change_a_number(faulty[number_line])
    faulty[7]["retrieved"][0]["rev"] = STALE_REV
    for trace in faulty[12:]:
        reindex(trace)
    path = write_traces(tmp / "prod.jsonl", faulty)
    out = tmp / "out"
    result = invoke("audit-log", path, "--corpus", CORPUS, "--config", config, "--window", "1d", "--out", out)
    model = json.loads((out / "audit_log.json").read_text(encoding="utf-8"))
    return {
        "path": path,
        "traces": faulty,
        "original_hash": traces[0]["index"]["index_hash"],
        "number_line": number_line,
        "new_number": new_number,
        "result": result,
        "out": out,
        "model": model,
        "config": config,
    }


def test_clean_traces_pass(recorded, tmp_path):
    config, traces = recorded
    path = write_traces(tmp_path / "clean.jsonl", spread(traces))
    result = invoke("audit-log", path, "--corpus", CORPUS, "--config", config, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    model = json.loads((tmp_path / "out" / "audit_log.json").read_text(encoding="utf-8"))
    assert model["summary"]["verdict"] == "pass"
    assert model["drift"] == [] and model["summary"]["hallucinations"] == 0 and model["summary"]["errors"] == 0
    assert [w["traces"] for w in model["windows"]] == [6, 6, 6]


def test_an_embedding_cache_that_cannot_be_made_is_a_warning_and_the_audit_the_same(recorded, tmp_path, monkeypatch):
    config, traces = recorded
    from ragaudit.checks.metrics.embed import HashingEncoder

    monkeypatch.setattr(HashingEncoder, "on_disk", True)  # its vectors in the cache file, as a model's are
    path = write_traces(tmp_path / "clean.jsonl", spread(traces))
    cached = invoke("audit-log", path, "--corpus", CORPUS, "--config", config, "--out", tmp_path / "cached")
    blocked = tmp_path / "a-file"
    blocked.write_text("where the cache folder should be")
    monkeypatch.setenv("RAGAUDIT_CACHE", str(blocked / "cache"))
    uncached = invoke("audit-log", path, "--corpus", CORPUS, "--config", config, "--out", tmp_path / "uncached")
    assert cached.exit_code == uncached.exit_code == 0, uncached.output
    said = [line for line in uncached.stderr.splitlines() if line.startswith("warning: embedding cache")]
    assert len(said) == 1 and f"{blocked / 'cache'}: Not a directory" in said[0], uncached.stderr
    a, b = (json.loads((tmp_path / d / "audit_log.json").read_text(encoding="utf-8")) for d in ("cached", "uncached"))
    assert {k: v for k, v in a.items() if k != "meta"} == {k: v for k, v in b.items() if k != "meta"}


def test_windows_errors_drift_and_hallucinations(production):
    result, model = production["result"], production["model"]
    assert result.exit_code == 1, result.output
    windows = model["windows"]
    assert [w["window"] for w in windows] == [f"{d}T00:00:00Z" for d in DAYS]
    assert [(w["start"], w["end"]) for w in windows] == [
        ("2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z"),
        ("2026-11-21T00:00:00Z", "2026-11-22T00:00:00Z"),
        ("2026-11-22T00:00:00Z", "2026-11-23T00:00:00Z"),
    ]
    assert [w["traces"] for w in windows] == [6, 6, 6]
    assert [w["issues"] for w in windows] == [{}, {"rev_mismatch": 1}, {}]
    assert [w["errors"] for w in windows] == [0, 1, 0]
    assert [w["hallucinations"] for w in windows] == [1, 0, 0]
    assert windows[1]["last_seen"] == "2026-11-21T23:00:00Z"  # the +02:00 time, in UTC
    assert model["drift"] == [
        {
            "field": "index_hash",
            "value": NEW_HASH,
            "previous": [production["original_hash"]],
            "previous_first_seen": {production["original_hash"]: f"{DAYS[1]}T{min(HOURS):02d}:00:00Z"},
            "window": "2026-11-22T00:00:00Z",
            "first_seen": f"{DAYS[2]}T{min(HOURS):02d}:00:00Z",
            "within_window": False,
        }
    ]
    assert [sorted(w["index"]["index_hash"]) for w in windows] == [
        [production["original_hash"]],
        [production["original_hash"]],
        [NEW_HASH],
    ]
    summary = model["summary"]
    assert (summary["verdict"], summary["errors"], summary["drift"], summary["hallucinations"]) == ("fail", 1, 1, 1)
    assert "FAIL" in result.output and NEW_HASH in result.output


NEW_MODEL = "bge-small-en-v1.5:cls"


def test_a_reindex_and_a_new_model_inside_one_window_are_drift(recorded, tmp_path):
    """One day of traffic: the index is rebuilt at 11:00 and the embedding model changed at 13:00.
    The lines run newest first, so only the times say which value came first."""
    config, traces = recorded
    day = copy.deepcopy(traces[:6])
    for i, trace in enumerate(day):
        trace["retrieved_at"] = f"{DAYS[0]}T{8 + i:02d}:00:00Z"
    for trace in day[3:]:
        reindex(trace)
    day[5]["index"]["embed_model"] = NEW_MODEL
    for payload in day[5]["retrieved"]:
        payload["embed_model"] = NEW_MODEL
    original, model_before = traces[0]["index"]["index_hash"], traces[0]["index"]["embed_model"]
    assert model_before != NEW_MODEL and original != NEW_HASH
    path = write_traces(tmp_path / "day.jsonl", list(reversed(day)))
    out = tmp_path / "out"
    result = invoke("audit-log", path, "--corpus", CORPUS, "--config", config, "--window", "1d", "--out", out)
    model = json.loads((out / "audit_log.json").read_text(encoding="utf-8"))
    assert [w["window"] for w in model["windows"]] == [f"{DAYS[0]}T00:00:00Z"]
    assert model["drift"] == [
        {
            "field": "index_hash",
            "value": NEW_HASH,
            "previous": [original],
            "previous_first_seen": {original: f"{DAYS[0]}T08:00:00Z"},
            "window": f"{DAYS[0]}T00:00:00Z",
            "first_seen": f"{DAYS[0]}T11:00:00Z",
            "within_window": True,
        },
        {
            "field": "embed_model",
            "value": NEW_MODEL,
            "previous": [model_before],
            "previous_first_seen": {model_before: f"{DAYS[0]}T08:00:00Z"},
            "window": f"{DAYS[0]}T00:00:00Z",
            "first_seen": f"{DAYS[0]}T13:00:00Z",
            "within_window": True,
        },
    ]
    summary = model["summary"]
    assert (summary["verdict"], summary["drift"]) == ("fail", 2)
    assert "2 index changes (embed_model, index_hash; 2 within a window)" in summary["why"]
    assert result.exit_code == 1, result.output
    assert (
        f"drift: index_hash {NEW_HASH!r} first seen {DAYS[0]}T11:00:00Z within window {DAYS[0]}T00:00:00Z "
        f"(before: {original!r} first seen {DAYS[0]}T08:00:00Z)"
    ) in result.output
    assert f"drift: embed_model {NEW_MODEL!r} first seen {DAYS[0]}T13:00:00Z within window" in result.output
    page = page_text((out / "audit_log.html").read_text(encoding="utf-8"))
    assert f"{original} ({DAYS[0]}T08:00:00Z){NEW_HASH}{DAYS[0]}T00:00:00Z (within the window)" in page
    assert f"{model_before} ({DAYS[0]}T08:00:00Z){NEW_MODEL}" in page
    assert "2 index changes" in page


def hours(day: str, **values: int) -> dict[str, float]:
    return {
        value: datetime(2026, 11, int(day), hour, tzinfo=timezone.utc).timestamp() for value, hour in values.items()
    }


def window(day: str, **values: int) -> Window:
    found = Window(int(datetime(2026, 11, int(day), tzinfo=timezone.utc).timestamp()), 86_400)
    for value, at in hours(day, **values).items():
        found.seen("index_hash", value, at)
    return found


def test_drift_within_and_between_windows():
    changes = drift([window("20", A=8, B=9), window("21", B=8), window("22", C=9, B=8, D=9)])
    assert [(c["window"][:10], c["value"], c["previous_first_seen"], c["within_window"]) for c in changes] == [
        ("2026-11-20", "B", {"A": "2026-11-20T08:00:00Z"}, True),
        # B was there the day before: C and D (first seen at the same time: in value order) are new
        ("2026-11-22", "C", {"B": "2026-11-21T08:00:00Z"}, True),
        ("2026-11-22", "D", {"B": "2026-11-21T08:00:00Z", "C": "2026-11-22T09:00:00Z"}, True),
    ]
    assert drift([window("20", A=8), window("21", A=9), window("22", A=10)]) == []
    assert [c["previous"] for c in drift([window("20", A=8), window("21", E=3)])] == [["A"]]
    assert drift([window("21", E=3)]) == []  # a first value changes nothing


def test_worst_examples_point_at_their_lines(production):
    model, traces = production["model"], production["traces"]
    examples = {e["id"]: e for e in model["examples"]}
    [hallucination] = model["worst"]["hallucinations"]
    assert hallucination["found"] == [production["new_number"]]
    example = examples[hallucination["example"]]
    assert (example["file"], example["line"]) == (str(production["path"]), production["number_line"] + 1)
    assert example["qid"] == traces[production["number_line"]]["qid"]
    [errors] = model["worst"]["errors"]
    assert errors["codes"] == ["rev_mismatch"]
    assert examples[errors["example"]]["line"] == 8
    assert {(i["code"], i["severity"]) for i in examples[errors["example"]]["issues"]} == {("rev_mismatch", "error")}
    # highest ΔS first, each no lower than the next, and every example cited by some list
    values = [e["delta_s"] for e in model["worst"]["delta_s"]]
    assert values == sorted(values, reverse=True) and len(values) == 18
    supports = [e["support"] for e in model["worst"]["support"]]
    assert supports == sorted(supports)
    named = {e["example"] for kind in KINDS for e in model["worst"][kind]}
    assert named == set(examples)


def test_worst_examples_are_listed_by_query_with_trace_and_line_beside(production):
    """A reader knows a request by its question: each worst entry links its query, and names the
    trace and the file:line it came from beside it (the query and run key read from the input)."""
    page = page_text((production["out"] / "audit_log.html").read_text(encoding="utf-8"))
    model, traces, path = production["model"], production["traces"], production["path"]
    examples = {e["id"]: e for e in model["examples"]}
    for entry in model["worst"]["delta_s"][:5]:
        line = examples[entry["example"]]["line"]
        trace = traces[line - 1]
        run = f"{trace['qid']} v{trace['variant']} s{trace['seed']}"
        assert f"{trace['query']} — ΔS {entry['delta_s']:.3f} ({entry['zone']}) trace {run} · {path}:{line}" in page


@pytest.mark.browser
def test_the_page_fits_a_1280_px_window(recorded, tmp_path):
    """Two weeks of daily windows of production traces (32-hex trace ids, long index values): no part
    of the page is wider than a 1280 px window."""
    from helpers import chromium

    config, traces = recorded
    spans = []
    for i in range(84):
        trace = copy.deepcopy(traces[i % len(traces)])
        trace.update(qid=f"{random.Random(i).getrandbits(128):032x}", variant=0, seed=0)
        trace["retrieved_at"] = f"2026-11-{1 + i % 14:02d}T{i % 24:02d}:00:00Z"
        if i % 5 == 0:  # a rebuilt index now and then: drift in most windows
            reindex(trace)
            trace["index"]["embed_model"] = "sentence-transformers/all-mpnet-base-v2-finetuned-on-our-docs"
        spans.append(trace)
    path = write_traces(tmp_path / "prod.jsonl", spans)
    invoke("audit-log", path, "--corpus", CORPUS, "--config", config, "--window", "1d", "--out", tmp_path / "out")
    page = tmp_path / "out" / "audit_log.html"
    with chromium(1280, 900) as browser:
        browser.get(page.as_uri())
        wide = browser.execute_script(
            "const w = document.documentElement.clientWidth;"
            "return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > w + 0.5)"
            ".map(e => e.tagName + ' ' + (e.textContent || '').slice(0, 40));"
        )
        assert wide == []
        assert browser.execute_script("return document.documentElement.scrollWidth") <= 1280
        first = browser.find_element("css selector", "ol li")
        where = re.search(rf"trace ([0-9a-f]{{32}}) · {re.escape(str(path))}:(\d+)$", first.text)
        assert where, first.text  # a span trace's id alone: spans carry no variant or seed
        trace = spans[int(where.group(2)) - 1]
        assert where.group(1) == trace["qid"] and first.find_element("css selector", "a").text == trace["query"]


def test_delta_s_is_the_query_against_the_nearest_cited_text(production):
    """Recomputed with the hashing encoder by hand: min over the answer's cited texts of 1 - cos."""
    encoder = HashingEncoder()
    per_day: dict[int, list[float]] = {0: [], 1: [], 2: []}
    for i, trace in enumerate(production["traces"]):
        cited = {c for s in trace["answer"]["segments"] for c in s["citations"]}
        texts = [p["text"] for p in trace["retrieved"] if p["snippet_id"] in cited]
        vectors = encoder.encode([trace["query"], *texts])
        per_day[i // 6].append(min(float(np.clip(1 - vectors[0] @ v, 0, 1)) for v in vectors[1:]))
    means = [w["delta_s_mean"] for w in production["model"]["windows"]]
    assert means == pytest.approx([float(np.mean(per_day[d])) for d in range(3)], abs=1e-6)
    zones = production["model"]["summary"]["zones"]
    assert sum(zones.values()) == 18


def test_an_answer_without_citations_is_held_to_its_context(recorded, tmp_path):
    """As read from production spans: the answer's text only. It is one segment citing the top 5
    retrieved, and a number none of them holds is a hallucination."""
    config, traces = recorded
    trace = copy.deepcopy(traces[0])
    trace["retrieved_at"] = "2026-11-20T10:00:00Z"
    top = trace["retrieved"][:5]
    context = " ".join(p["text"] for p in top)
    new = next(n for n in range(1000, 10_000) if str(n) not in context)
    trace["answer"] = {"text": f"Passwords must be at least {new} characters long."}
    path = write_traces(tmp_path / "spans.jsonl", [trace])
    result = run_audit_log([path], corpus=CORPUS, config=config, out=tmp_path / "out")
    [example] = result.model["examples"]
    assert example["held_to_context"] is True
    [segment] = example["segments"]
    assert segment["citations"] == [p["snippet_id"] for p in top]
    assert segment["hallucinated"] == [str(new)] and segment["grounded"] is False
    encoder = HashingEncoder()
    vectors = encoder.encode([trace["query"], *(p["text"] for p in top)])
    expected = min(float(np.clip(1 - vectors[0] @ v, 0, 1)) for v in vectors[1:])
    assert example["delta_s"] == pytest.approx(expected, abs=1e-6)


def test_json_structure(production):
    model = production["model"]
    assert model["schema"] == "ragaudit.audit_log/1"
    assert set(model) == {"schema", "meta", "summary", "windows", "drift", "health", "worst", "examples"}
    assert set(model["worst"]) == set(KINDS)
    assert model["meta"]["window"] == "1d" and model["meta"]["window_seconds"] == 86_400
    assert model["meta"]["inputs"] == [str(production["path"])]
    window_keys = {
        "window", "start", "end", "first_seen", "last_seen", "traces", "malformed", "errored", "issues",
        "errors", "warnings", "index", "index_values_dropped", "segments", "grounded", "grounded_rate",
        "zones", "unscored", "delta_s_mean", "hallucinations", "hallucinating_traces", "health",
    }  # fmt: skip
    for window in model["windows"]:
        assert set(window) == window_keys
        assert set(window["zones"]) == {"stable", "transit", "risk", "danger"}
        assert set(window["index"]) == {"index_hash", "analyzer", "embed_model"}
    segments = sum(len(t["answer"]["segments"]) for t in production["traces"])
    assert model["summary"]["segments"] == segments
    assert model["summary"]["grounded"] <= segments - 1  # the changed number is never grounded


def test_sqlite_rows(production):
    traces, line = production["traces"], production["number_line"]
    db = sqlite3.connect(production["out"] / "rag_traces.sqlite")
    db.row_factory = sqlite3.Row
    rows = db.execute("SELECT * FROM rag_traces ORDER BY line, seg").fetchall()
    assert len(rows) == sum(max(1, len(t["answer"]["segments"])) for t in traces)
    assert {r["line"] for r in rows} == set(range(1, 19))
    for r in rows:
        trace = traces[r["line"] - 1]
        assert (r["qid"], r["variant"], r["seed"], r["pipeline"]) == (
            trace["qid"],
            trace["variant"],
            trace["seed"],
            trace["config"],
        )
        assert r["ts"] == trace["retrieved_at"] and r["index_hash"] == trace["index"]["index_hash"]
        segment = trace["answer"]["segments"][r["seg"] - 1]
        assert json.loads(r["citations"]) == list(dict.fromkeys(segment["citations"]))
        assert r["segment"] == segment["text"]
        assert json.loads(r["issues"]) == (["rev_mismatch"] if r["line"] == 8 else [])
        assert r["window"] == f"{DAYS[(r['line'] - 1) // 6]}T00:00:00Z"
        assert r["lambda_state"] is None
    changed = [r for r in rows if json.loads(r["hallucinated"])]
    assert [(r["line"], json.loads(r["hallucinated"]), r["grounded"]) for r in changed] == [
        (line + 1, [production["new_number"]], 0)
    ]
    grounded = [r for r in rows if r["grounded"]]
    assert all(r["support"] >= 0.5 and r["hallucinated"] == "[]" for r in grounded)
    assert len(grounded) == production["model"]["summary"]["grounded"]


def test_html_is_one_escaped_page(recorded, tmp_path):
    config, traces = recorded
    hostile = spread(traces)[:3]
    hostile[0]["query"] = HOSTILE
    hostile[0]["config"] = HOSTILE
    hostile[0]["answer"]["segments"][0]["text"] += " " + HOSTILE
    hostile[1]["retrieved"][0]["index_hash"] = HOSTILE  # a payload of another index: an error example
    hostile[2]["qid"] = HOSTILE
    hostile[2]["index"]["analyzer"] = HOSTILE
    path = write_traces(tmp_path / "hostile.jsonl", hostile)
    result = invoke("audit-log", path, "--corpus", CORPUS, "--config", config, "--out", tmp_path / "out")
    assert result.exit_code == 1, result.output
    page = (tmp_path / "out" / "audit_log.html").read_text(encoding="utf-8")
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert HOSTILE in page_text(page)  # shown as text, escaped
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)  # nothing fetched
    # every worst entry links to details on the page
    for target in re.findall(r'href="#([^"]+)"', page):
        assert f'id="{target}"' in page


def test_undated_and_malformed_lines(recorded, tmp_path):
    config, traces = recorded
    dated, undated = copy.deepcopy(traces[:2])
    dated["retrieved_at"] = "2026-11-20T10:00:00Z"
    undated.pop("retrieved_at")
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(dated) + "\nnot json\n" + json.dumps(undated) + "\n", encoding="utf-8")
    result = invoke("audit-log", path, "--corpus", CORPUS, "--config", config, "--out", tmp_path / "out")
    assert result.exit_code == 3
    assert f"error: {path}:2: " in result.stderr
    model = json.loads((tmp_path / "out" / "audit_log.json").read_text(encoding="utf-8"))
    assert [(w["window"], w["traces"], w["malformed"]) for w in model["windows"]] == [
        ("2026-11-20T00:00:00Z", 1, 0),
        ("undated", 1, 1),
    ]
    assert model["windows"][1]["issues"] == {"malformed_record": 1}
    assert model["drift"] == []
    [bad] = [e for e in model["examples"] if e["line"] == 2]
    assert bad["issues"][0]["code"] == "malformed_record"


def test_unreadable_input_and_bad_window(recorded, tmp_path):
    config, _ = recorded
    missing = invoke("audit-log", tmp_path / "nope.jsonl", "--corpus", CORPUS, "--config", config, "--out", tmp_path)
    assert missing.exit_code == 3 and "nope.jsonl" in missing.stderr
    bad = invoke("audit-log", tmp_path / "nope.jsonl", "--corpus", CORPUS, "--window", "5x")
    assert bad.exit_code == 2 and "'window' parameter" in bad.stderr
    no_corpus = invoke("audit-log", tmp_path / "nope.jsonl")
    assert no_corpus.exit_code == 2 and "--corpus" in no_corpus.stderr


def test_worst_lists_stay_bounded():
    """10,000 candidates, lists of 5: never more than 5 held per kind, they are the true 5 worst
    (ties to the earliest), and the details of only a few are ever built."""
    rng = random.Random(7)
    worst = WorstExamples(limit=5)
    badness = [rng.choice([rng.random(), 0.5]) for _ in range(10_000)]
    built = []
    for record, value in enumerate(badness, start=1):

        def example(record=record):
            built.append(record)
            return {"id": f"r{record}", "record": record}

        worst.offer([("delta_s", (value, -record), {"delta_s": value})], example)
        assert worst.size() <= 5
    lists, examples = worst.to_dict()
    expected = sorted(range(1, 10_001), key=lambda r: (-badness[r - 1], r))[:5]
    assert [e["example"] for e in lists["delta_s"]] == [f"r{r}" for r in expected]
    assert [e["record"] for e in examples] == sorted(expected)
    assert len(built) < 100


def test_batches_do_not_change_the_result(production, tmp_path):
    """Scored 4 traces at a time, with lists of 2: the same windows and drift, lists no longer than 2,
    each the head of the full list."""
    small = run_audit_log(
        [production["path"]],
        corpus=CORPUS,
        config=production["config"],
        out=tmp_path / "small",
        limit=2,
        batch=4,
    )
    full = production["model"]
    assert small.model["windows"] == full["windows"] and small.model["drift"] == full["drift"]
    for kind in KINDS:
        assert len(small.model["worst"][kind]) <= 2
        assert small.model["worst"][kind] == full["worst"][kind][:2]
    assert len(small.model["examples"]) <= 2 * len(KINDS)


@pytest.mark.parametrize("window", ["1h", "1d", "2w"])
def test_extreme_and_garbage_times_are_undated_never_a_crash(recorded, tmp_path, window):
    config, traces = recorded
    times = [
        "9999-12-31T23:59:59Z",  # its window would end in the year 10000
        "9999-12-31T23:00:00-05:00",  # the year 10000 in UTC
        "0001-01-01T00:00:00+14:00",  # the year 0 in UTC
        "0001-01-01T00:00:00Z",
        "2026-13-45T99:00:00Z",
        "not a time",
        "",
        "2026-11-20T10:00:00Z",
    ]
    written = []
    for trace, at in zip(copy.deepcopy(traces), times):
        trace["retrieved_at"] = at
        written.append(trace)
    path = write_traces(tmp_path / "times.jsonl", written)
    out = tmp_path / "out"
    result = invoke("audit-log", path, "--corpus", CORPUS, "--config", config, "--window", window, "--out", out)
    assert result.exit_code in (0, 1), result.output
    model = json.loads((out / "audit_log.json").read_text(encoding="utf-8"))
    assert {w["window"]: w["traces"] for w in model["windows"]} == expected_windows(times, window)


def expected_windows(times: list[str], window: str) -> dict[str, int]:
    """Traces per window, by datetime arithmetic: windows of the given length from Monday
    1970-01-05, undated when a time does not parse or its window leaves the years 1 to 9999."""
    from collections import Counter
    from datetime import datetime, timedelta, timezone

    length = timedelta(hours=1) if window == "1h" else timedelta(days=1 if window == "1d" else 14)
    origin = datetime(1970, 1, 5, tzinfo=timezone.utc)
    found: Counter = Counter()
    for text in times:
        try:
            at = datetime.fromisoformat(text).astimezone(timezone.utc)
            start = origin + (at - origin) // length * length
            _ = start + length  # raises past the year 9999
            found[start.isoformat().replace("+00:00", "Z")] += 1
        except (ValueError, OverflowError):
            found["undated"] += 1
    return dict(found)


def test_a_window_longer_than_a_century_is_a_usage_error(recorded, tmp_path):
    config, traces = recorded
    path = write_traces(tmp_path / "t.jsonl", traces[:1])
    for window in ("999999w", "36526d"):
        result = invoke("audit-log", path, "--corpus", CORPUS, "--config", config, "--window", window)
        assert result.exit_code == 2 and "of at most 36525d" in result.stderr
    assert invoke(
        "audit-log", path, "--corpus", CORPUS, "--config", config, "--window", "36525d", "--out", tmp_path / "o"
    ).exit_code in (0, 1)
