"""`ragaudit faults`: every fault class is a transformation of recorded traces that the gate
catches, on a small run of the reference pipeline; the CLI writes faults.json and faults.html
and exits 0 only when the clean run passes and every fault fails."""

import dataclasses
import json
import random

import pytest
from helpers import DEMO, invoke, run_dir_of, write_config

from ragaudit.checks.metrics.embed import DEFAULT_MODEL, HashingEncoder, make_encoder
from ragaudit.checks.metrics.quantities import hallucinated
from ragaudit.core.analyzers import ANALYZERS
from ragaudit.core.types import Answer, LiveIndex, Offsets, Payload, Segment, Trace
from ragaudit.flows.injection import FAULTS, inject, run_faults
from ragaudit.flows.injection.mutations import Scene, cited_ids
from ragaudit.io.config import load_config
from ragaudit.io.corpus import load_corpus
from ragaudit.io.gold import read_gold
from ragaudit.io.stream import read_trace_file
from ragaudit.io.traces import dump_trace
from ragaudit.pipelines import runner
from ragaudit.pipelines.reference.chunking import chunk_corpus, index_hash

ITEMS = 15
# The hashing encoder stands in for the model, so ΔS is not a meaningful distance here: the
# ΔS check is opened, every other check keeps its default.
OPEN_DELTA_S = "[gate]\ndelta_s_excess_max = 1.0\n\n"


def clean_recording(path):
    """Traces of a pipeline that does everything right: for every run it retrieves the chunk that
    holds the gold anchor first, then four more chunks of the same document, and answers with the
    anchor sentence, citing its chunk. Written as a recording for a replay pipeline."""
    corpus = load_corpus(DEMO / "corpus")
    items, _ = read_gold(DEMO / "gold.jsonl")
    analyzer = "lowercase+ascii_fold"
    chunks = chunk_corpus(corpus, ANALYZERS[analyzer], chunk_size=64)
    index = LiveIndex(index_hash(chunks, analyzer=analyzer), analyzer, "none", "bm25")

    def payload(chunk, rank):
        return Payload(
            chunk.doc_id,
            chunk.section_id,
            chunk.snippet_id,
            chunk.source_url,
            Offsets(chunk.start, chunk.end, "char"),
            chunk.tokens,
            index.index_hash,
            index.embed_model,
            analyzer,
            chunk.rev,
            score_norm=1.0 - 0.1 * rank,
            k_pos=rank + 1,
            text=chunk.text,
        )

    with open(path, "w", encoding="utf-8") as out:
        for item in items[:ITEMS]:
            gold = next(c for c in chunks if c.doc_id == item.doc_id and c.start <= item.anchor.span.start < c.end)
            others = [c for c in chunks if c.doc_id == item.doc_id and c is not gold][:4]
            retrieved = tuple(payload(c, r) for r, c in enumerate([gold, *others]))
            answer = Answer(
                text=f"{item.anchor.text.rstrip('.')} [{gold.snippet_id}].",
                segments=(Segment(1, item.anchor.text, (gold.snippet_id,)),),
            )
            for variant, query in enumerate(item.variants[:3]):
                for seed in (1, 2):
                    out.write(
                        dump_trace(
                            Trace(
                                item.qid,
                                variant,
                                seed,
                                retrieved,
                                query,
                                "clean",
                                "bm25",
                                "2026-11-23T10:00:00Z",
                                index,
                                answer,
                            )
                        )
                        + "\n"
                    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    clean_recording(tmp / "recorded.jsonl")
    replay = '[[pipelines]]\nname = "clean"\nkind = "replay"\ntraces = "recorded.jsonl"\n'
    config = write_config(tmp, replay, items=ITEMS)
    config.write_text(config.read_text().replace("[embedder]", OPEN_DELTA_S + "[embedder]"))
    result = invoke("run", config)
    run_dir = run_dir_of(result)
    inputs = runner.Inputs.from_config(load_config(config), encoder=HashingEncoder())
    return config, run_dir, inputs, read_trace_file(run_dir / "traces.jsonl")


def test_the_clean_fixture_passes_the_gate(recorded):
    config, run_dir, _, _ = recorded
    report = json.loads((run_dir / "report.json").read_text())
    assert report["gate"]["verdict"] == "pass", [c for c in report["gate"]["checks"] if not c["passed"]]


@pytest.mark.parametrize("name", [n for n, f in FAULTS.items() if not f.control])
def test_each_fault_fails_the_gate_and_names_the_affected_questions(recorded, name):
    _, _, inputs, traces = recorded
    result, audits = run_faults(traces, inputs, only=[name], rate=0.2, seed=3)
    assert result["clean"]["verdict"] == "pass"
    [row] = result["faults"]
    p = row["pipelines"]["clean"]
    assert row["affected"] and p["verdict"] == "fail" and row["caught"] and row["ok"], row
    assert p["detection_rate"] >= 0.8, row
    assert p["false_flag_rate"] <= 0.15, row
    against = row["with_baseline"]["pipelines"]["clean"]
    assert against["detection_rate"] >= 0.8 and against["false_flag_rate"] <= 0.15, row
    changed = [t for t, before in zip(sorted(audits[name].traces, key=_key), sorted(traces, key=_key)) if t != before]
    assert changed and {t.qid for t in changed} <= set(row["affected"])


def _key(t):
    return (t.config, t.qid, t.variant, t.seed)


@pytest.mark.model
@pytest.mark.parametrize("name", [n for n, f in FAULTS.items() if f.control])
def test_a_negative_control_passes_alone_and_against_the_baseline(recorded, name):
    """Reworded answers are judged by the real model (the hashing encoder knows no synonyms)."""
    config, _, _, traces = recorded
    inputs = runner.Inputs.from_config(load_config(config), encoder=make_encoder(DEFAULT_MODEL))
    result, audits = run_faults(traces, inputs, only=[name], rate=0.5, seed=3)
    [row] = result["faults"]
    assert row["control"] and row["affected"] and row["ok"] and result["passed"], row
    assert row["pipelines"]["clean"]["verdict"] == row["with_baseline"]["pipelines"]["clean"]["verdict"] == "pass"
    changed = [t for t, before in zip(sorted(audits[name].traces, key=_key), sorted(traces, key=_key)) if t != before]
    assert changed and all(r["correct"] for r in audits[name].evaluation.runs)


def test_at_a_low_rate_the_baseline_names_what_the_aggregates_miss(recorded):
    _, _, inputs, traces = recorded
    result, _ = run_faults(traces, inputs, only=["unsupported_claim"], rate=0.05, seed=3)
    [row] = result["faults"]
    assert len(row["affected"]) == 1  # one question of fifteen
    assert row["pipelines"]["clean"]["verdict"] == "pass"  # no aggregate moves
    against = row["with_baseline"]["pipelines"]["clean"]
    assert against["verdict"] == "fail" and "regressions" in against["failed_checks"]
    assert against["flagged"] == row["affected"] and row["ok"]


def test_the_mutations_do_what_they_say(recorded):
    _, _, inputs, traces = recorded
    gold = {i.qid: i for i in inputs.items}
    first = next(t for t in traces if t.variant == 1 and t.seed == 2)
    scene = Scene(
        gold[first.qid], inputs.corpus, [p for t in traces for p in t.retrieved], (1, 2), rng=random.Random(0)
    )
    cited = cited_ids(first, 5)

    stale = FAULTS["stale_revision"].mutate(first, scene)
    assert {p.rev for p in stale.retrieved if p.snippet_id in cited}.isdisjoint({p.rev for p in first.retrieved})
    dangling = FAULTS["dangling_citation"].mutate(first, scene)
    assert set(dangling.answer.citations) - {p.snippet_id for p in dangling.retrieved}
    drift = FAULTS["paraphrase_drift"].mutate(first, scene)
    cited_sections = {(p.doc_id, p.section_id) for p in drift.retrieved if p.snippet_id in drift.answer.citations}
    assert cited_sections and not cited_sections & scene.gold_sections
    assert FAULTS["paraphrase_drift"].mutate(dataclasses.replace(first, variant=0), scene) is None
    assert FAULTS["seed_drift"].mutate(dataclasses.replace(first, seed=1), scene) is None
    lost = FAULTS["retrieval_loss"].mutate(first, scene)
    assert not any(scene.in_gold_section(p) for p in lost.retrieved)
    assert [p.k_pos for p in lost.retrieved] == list(range(1, len(lost.retrieved) + 1))
    other = FAULTS["wrong_document"].mutate(first, scene)
    assert {p.doc_id for p in other.retrieved if p.snippet_id in other.answer.citations} - {scene.item.doc_id}
    shifted = FAULTS["offset_shift_no_text"].mutate(first, scene)
    moved = [(a.span, b.span) for a, b in zip(first.retrieved, shifted.retrieved) if a.snippet_id in cited]
    assert all(x != y for x, y in moved) and all(p.text is None for p in shifted.retrieved if p.snippet_id in cited)


def test_number_change_alters_a_quantity_or_identifier(recorded):
    _, _, inputs, traces = recorded
    gold = {i.qid: i for i in inputs.items}
    for trace in traces:
        scene = Scene(gold[trace.qid], inputs.corpus, [], (1, 2))
        changed = FAULTS["number_change"].mutate(trace, scene)
        if changed is not None:
            break
    texts = {p.snippet_id: p.text for p in changed.retrieved}
    before = [s.text for s in trace.answer.segments]
    after = [s.text for s in changed.answer.segments]
    [(old, new)] = [(a, b) for a, b in zip(before, after) if a != b]
    assert hallucinated(new, [texts[c] for c in changed.answer.segments[after.index(new)].citations])


def test_injection_is_seeded_and_order_free(recorded):
    _, _, inputs, traces = recorded
    subject = inputs
    a = inject(FAULTS["offset_shift"], traces, subject, rate=0.3, seed=7)
    b = inject(FAULTS["offset_shift"], list(reversed(traces)), subject, rate=0.3, seed=7)
    assert a.affected == b.affected and sorted(a.traces, key=_key) == sorted(b.traces, key=_key)
    assert len(a.affected) == round(0.3 * len({t.qid for t in traces}))
    assert inject(FAULTS["offset_shift"], traces, subject, rate=0.3, seed=8).affected != a.affected


def test_cli_writes_the_matrix_and_exits_by_the_verdict(recorded, tmp_path):
    config, run_dir, _, _ = recorded
    result = invoke("faults", run_dir, "--only", "stale_revision,number_change", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "faults.json").read_text())
    assert [r["fault"] for r in written["faults"]] == ["stale_revision", "number_change"] and written["passed"]
    html = (tmp_path / "faults.html").read_text()
    assert "clean run" in html and "stale_revision" in html and "<script" not in html
    assert "stale_revision" in result.output and "gate passes the clean run" in result.output
    # a gate that lets every validation error through misses a fault only validation sees: exit 1
    lax = tmp_path / "lax.toml"
    lax.write_text(
        config.read_text()
        .replace(OPEN_DELTA_S, "[gate]\ndelta_s_excess_max = 1.0\nmax_errors = 100000\n\n")
        .replace('"gold.jsonl"', f'"{config.parent / "gold.jsonl"}"')
    )
    result = invoke("faults", run_dir, "--config", lax, "--only", "wrong_index_hash", "--out", tmp_path)
    assert result.exit_code == 1 and "MISSED" in result.output
    assert invoke("faults", run_dir, "--only", "no_such_fault").exit_code == 2


def test_an_embedding_cache_that_cannot_be_made_is_a_warning_and_the_matrix_the_same(recorded, tmp_path, monkeypatch):
    _, run_dir, _, _ = recorded
    from ragaudit.checks.metrics.embed import HashingEncoder

    monkeypatch.setattr(HashingEncoder, "on_disk", True)  # its vectors in the cache file, as a model's are
    cached = invoke("faults", run_dir, "--only", "number_change", "--out", tmp_path / "cached")
    blocked = tmp_path / "a-file"
    blocked.write_text("where the cache folder should be")
    monkeypatch.setenv("RAGAUDIT_CACHE", str(blocked / "cache"))
    uncached = invoke("faults", run_dir, "--only", "number_change", "--out", tmp_path / "uncached")
    assert cached.exit_code == uncached.exit_code == 0, uncached.output
    said = [line for line in uncached.stderr.splitlines() if line.startswith("warning: embedding cache")]
    assert len(said) == 1 and f"{blocked / 'cache'}: Not a directory" in said[0], uncached.stderr
    a, b = (json.loads((tmp_path / d / "faults.json").read_text()) for d in ("cached", "uncached"))
    assert a == b


@pytest.mark.parametrize("only", [",", "", " ", "stale_revision,", ",number_change", "stale_revision,,number_change"])
def test_an_empty_or_malformed_only_is_a_usage_error(recorded, tmp_path, only):
    _, run_dir, _, _ = recorded
    result = invoke("faults", run_dir, "--only", only, "--out", tmp_path)
    assert result.exit_code == 2, result.output
    assert "--only: expected comma-separated fault names (some of stale_revision, " in result.stderr
    assert f"found {only!r}" in result.stderr
    assert not (tmp_path / "faults.json").exists()


def test_only_names_known_faults_or_exits_2(tmp_path):
    from helpers import invoke

    result = invoke("faults", tmp_path, "--only", "offset_shift,,nope")
    assert result.exit_code == 2
    assert (
        "--only: expected comma-separated fault names (some of " in result.output
        and "'offset_shift,,nope'" in result.output
    )
