"""`ragaudit audit-log` window over window: a planted regression in production spans is named with
its metric, size, CI, windows and queries; unchanged traffic passes with its movement named noise;
gold-tagged traffic of two days is two sets of runs.

The traffic is the handbook's reference RAG (BM25, extractive answers with `[snippet_id]` markers)
recorded as OpenInference spans by the OpenTelemetry SDK, a day per window. Expectations come from
the traffic as it was made (which queries got a planted sentence, how many documents each
retrieval returned), never from what audit-log wrote.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone

import pytest
from helpers import DEMO, invoke, marked_answer, otlp_line, rag_spans, span_recorder, trace_documents

from ragaudit.checks.metrics.embed import HashingEncoder
from ragaudit.core.text import sentences
from ragaudit.pipelines.base import Request
from ragaudit.pipelines.reference import ReferencePipeline

FIRST_DAY = datetime(2026, 11, 2, tzinfo=timezone.utc)
PER_DAY = 120
CORPUS = DEMO / "corpus"


def gold_queries() -> list[tuple[str, int, str]]:
    out = []
    for line in (DEMO / "gold.jsonl").read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        out += [(item["qid"], v, q) for v, q in enumerate([item["question"], *item["paraphrases"]])]
    return out


@pytest.fixture(scope="module")
def served():
    """Every gold query's trace under the reference pipeline, with k 5 and with k 2."""
    from ragaudit.io.corpus import load_corpus

    corpus, encoder = load_corpus(CORPUS), HashingEncoder()
    out = {}
    for k in (5, 2):
        pipeline = ReferencePipeline("handbook-rag", corpus, k=k, encoder=encoder)
        out[k] = {(qid, v): pipeline.run(Request(qid, v, 1, q, k)) for qid, v, q in gold_queries()}
    return out


def planted(trace) -> str:
    """The answer with one more sentence, from a retrieved passage it does not cite, under its last marker."""
    cited = {c for s in trace.answer.segments for c in s.citations}
    facts = [
        s.strip().rstrip(".")
        for p in trace.retrieved
        if p.snippet_id not in cited
        for s in sentences(p.text)
        if len(s.split()) >= 5 and not s.lstrip().startswith("#")
    ]
    marker = "".join(f" [{c}]" for c in trace.answer.segments[-1].citations)
    return f"{marked_answer(trace)} {facts[0]}{marker}."


def export(path, days, *, tags: bool = False):
    """Days of (trace, answer) as OTLP JSON lines (a line per day), each request at its time of day."""
    provider, exporter = span_recorder("handbook-rag")
    tracer = provider.get_tracer("app")
    lines = []
    for d, day in enumerate(days):
        start = int(FIRST_DAY.timestamp()) + d * 86_400
        for i, (trace, answer) in enumerate(day):
            key = {"ragaudit.qid": trace.qid, "ragaudit.variant": trace.variant, "ragaudit.seed": 1} if tags else None
            at = (start + i * 600) * 1_000_000_000
            rag_spans(tracer, trace.query, trace_documents(trace), answer, root_attributes=key, start_ns=at)
        if day:
            lines.append(otlp_line(exporter.get_finished_spans()))
        exporter.clear()
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def days_of(served, count: int, seed: int, last=None):
    """`count` days of traffic drawn from the gold queries; `last(rng, day)` may change the last."""
    rng = random.Random(seed)
    keys = sorted(served[5])
    days = [[(served[5][k], marked_answer(served[5][k])) for k in rng.choices(keys, k=PER_DAY)] for _ in range(count)]
    if last is not None:
        days[-1] = last(rng, keys)
    return days


def audit(tmp_path, spans, *args):
    config = tmp_path / "audit.toml"
    if not config.exists():
        config.write_text('[embedder]\nmodel = "hashing"\n')
    out = tmp_path / f"log-{len(list(tmp_path.glob('log-*')))}"
    result = invoke("audit-log", spans, "--from", "otlp", "--corpus", CORPUS, "--config", config, "--out", out, *args)
    model = json.loads((out / "audit_log.json").read_text()) if (out / "audit_log.json").exists() else None
    return result, model


def test_unchanged_traffic_passes_and_its_movement_is_named_noise(tmp_path, served):
    spans = export(tmp_path / "spans.jsonl", days_of(served, 4, seed=1))
    result, model = audit(tmp_path, spans)
    assert result.exit_code == 0, result.output
    assert model["health"]["regressions"] == []
    moved = [m for c in model["health"]["comparisons"] for m in c["metrics"].values() if m.get("size")]
    assert moved and {m["verdict"] for m in moved} == {"noise"}
    assert "movements named noise" in result.stdout and result.stdout.rstrip().endswith(f"wrote {tmp_path / 'log-0'}")


def test_k_cut_from_5_to_2_is_a_regression_naming_metric_size_windows_and_queries(tmp_path, served):
    def cut(rng, keys):
        return [(served[2][k], marked_answer(served[2][k])) for k in rng.choices(keys, k=PER_DAY)]

    days = days_of(served, 4, seed=2, last=cut)
    spans = export(tmp_path / "spans.jsonl", days)
    result, model = audit(tmp_path, spans)
    assert result.exit_code == 1, result.output
    (found,) = [r for r in model["health"]["regressions"] if r["metric"] == "retrieved"]
    expected_before = sum(len(t.retrieved) for t, _ in days[2]) / PER_DAY
    assert (found["before"], found["after"]) == pytest.approx((expected_before, 2.0))
    assert found["size"] == pytest.approx(2.0 - expected_before)
    assert found["low"] <= found["size"] <= found["high"] < 0  # every run retrieved 2: no spread at all
    assert (found["window"], found["against"], found["reference"]) == (
        "2026-11-05T00:00:00Z",
        "previous",
        "2026-11-04T00:00:00Z",
    )
    last_queries = {t.query for t, _ in days[3]}
    assert found["queries"] and {q["query"] for q in found["queries"]} <= last_queries
    assert all(w["value"] == 2.0 and w["file"] == str(spans) for q in found["queries"] for w in q["worst"])
    assert "regression: retrieved of handbook-rag 5.000 → 2.000" in result.stdout or (
        f"regression: retrieved of handbook-rag {expected_before:.3f} → 2.000" in result.stdout
    )
    assert "FAIL: " in result.stdout and "retrieved of handbook-rag in 2026-11-05T00:00:00Z" in result.stdout


def test_a_planted_uncited_fact_is_named_with_the_queries_it_was_planted_in(tmp_path, served):
    plant: set[str] = set()

    def last(rng, keys):
        day = []
        for k in rng.choices(keys, k=PER_DAY):
            trace = served[5][k]
            if rng.random() < 0.25:
                plant.add(trace.query)
                day.append((trace, planted(trace)))
            else:
                day.append((trace, marked_answer(trace)))
        return day

    spans = export(tmp_path / "spans.jsonl", days_of(served, 4, seed=3, last=last))
    result, model = audit(tmp_path, spans)
    assert result.exit_code == 1, result.output
    found = model["health"]["regressions"]
    assert found and {r["metric"] for r in found} <= {"grounded", "hallucinating", "support"}
    for r in found:
        assert r["window"] == "2026-11-05T00:00:00Z" and r["p_holm"] < 0.05
        moved = [q["query"] for q in r["queries"] if q["before"] is not None]  # seen the day before too
        assert (
            moved
            and set(moved) <= plant
            and r["queries"][: len(moved)] == [q for q in r["queries"] if q["before"] is not None]
        )


def test_thresholds_from_the_config_gate_the_verdict(tmp_path, served):
    days = days_of(
        served, 3, seed=4, last=lambda rng, keys: [(served[2][k], marked_answer(served[2][k])) for k in keys[:PER_DAY]]
    )
    spans = export(tmp_path / "spans.jsonl", days)
    (tmp_path / "audit.toml").write_text('[embedder]\nmodel = "hashing"\n\n[audit_log]\nmin_effect = 0.9\n')
    result, model = audit(tmp_path, spans)
    assert result.exit_code == 0, result.output
    retrieved = model["health"]["comparisons"][-1]["metrics"]["retrieved"]
    assert retrieved["verdict"] == "noise" and retrieved["why"] == "below the minimum effect 0.9"


def test_a_baseline_window_or_an_earlier_audit(tmp_path, served):
    days = days_of(served, 3, seed=5)
    spans = export(tmp_path / "spans.jsonl", days)
    result, model = audit(tmp_path, spans, "--baseline", "2026-11-02")
    assert result.exit_code == 0, result.output
    against = [(c["window"], c["against"], c["reference"]) for c in model["health"]["comparisons"]]
    assert ("2026-11-04T00:00:00Z", "baseline", "2026-11-02T00:00:00Z") in against
    assert ("2026-11-02T00:00:00Z", "baseline", "2026-11-02T00:00:00Z") not in against

    cut = [(served[2][k], marked_answer(served[2][k])) for k in sorted(served[2])[:PER_DAY]]
    later = export(tmp_path / "later.jsonl", [cut])
    result, model = audit(tmp_path, later, "--baseline", tmp_path / "log-0" / "audit_log.json")
    assert result.exit_code == 1, result.output
    (found,) = [r for r in model["health"]["regressions"] if r["metric"] == "retrieved"]
    pooled = sum(len(t.retrieved) for day in days for t, _ in day) / (3 * PER_DAY)
    assert (found["against"], found["before"], found["after"]) == ("baseline", pytest.approx(pooled), 2.0)

    wrong = invoke(
        "audit-log", spans, "--from", "otlp", "--corpus", CORPUS, "--baseline", "2027-01-01", "--out", tmp_path / "x"
    )
    assert wrong.exit_code == 2 and "found 0 windows named '2027-01-01'" in wrong.stderr


def test_gold_tagged_traffic_of_two_days_is_two_sets_of_runs(tmp_path, served):
    """Two exports of the same gold-tagged questions (day 1 and day 2): every trace of both days is
    audited, none is a second trace under one run key."""
    keys = sorted(served[5])[:30]
    day = [(served[5][k], marked_answer(served[5][k])) for k in keys]
    first = export(tmp_path / "day1.jsonl", [day], tags=True)
    second = export(tmp_path / "day2.jsonl", [[], day], tags=True)
    result, model = audit(tmp_path, first, second)
    assert "again" not in result.stderr and result.exit_code == 0, result.output
    assert [(w["window"], w["traces"]) for w in model["windows"]] == [
        ("2026-11-02T00:00:00Z", 30),
        ("2026-11-03T00:00:00Z", 30),
    ]
    assert model["health"]["comparisons"][0]["metrics"]["grounded"]["traces"] == [30, 30]
    # within one day the run key still holds: the same tagged question twice in a window is an error
    twice = export(tmp_path / "twice.jsonl", [day + day[:1]], tags=True)
    result, _ = audit(tmp_path, twice)
    assert result.exit_code == 3
    assert "expected one trace per run key (pipeline, qid, variant, seed, window)" in result.stderr
    assert "again in window 2026-11-02T00:00:00Z" in result.stderr
