"""`ragaudit calibrate`: thresholds proposed for a gold set and corpus, from the oracle run, its
LLM-style rewrite and every fault class; no pipeline is called."""

import json

import pytest
from helpers import BM25, DEMO, invoke, write_config

from ragaudit.flows.calibrating import auroc
from ragaudit.flows.injection import FAULTS
from ragaudit.flows.injection.oracle import ORACLE, oracle_traces
from ragaudit.io.calibration import SCHEMA
from ragaudit.io.config import load_config
from ragaudit.io.files import sha256_file
from ragaudit.pipelines import runner

ITEMS = 8


def test_auroc_is_the_mann_whitney_statistic():
    assert auroc([0.1, 0.2], [0.3, 0.4]) == 1.0 and auroc([0.3, 0.4], [0.1, 0.2]) == 0.0
    assert auroc([0.5], [0.5]) == 0.5 and auroc([0.1, 0.5], [0.5]) == 0.75
    assert auroc([], [0.3]) is None


def test_the_oracle_cites_the_chunks_holding_the_anchor_and_states_it(tmp_path):
    config = load_config(write_config(tmp_path, BM25, items=3, seeds="[1, 2]"))
    inputs = runner.Inputs.from_config(config)
    traces = oracle_traces(inputs.items, inputs.corpus, inputs.encoder, variants=3, seeds=(1, 2), k=4)
    assert len(traces) == 3 * 3 * 2 and {t.config for t in traces} == {ORACLE}
    for trace in traces:
        item = next(i for i in inputs.items if i.qid == trace.qid)
        a = item.anchor.span
        cited = [p for p in trace.retrieved if p.snippet_id in trace.answer.citations]
        assert cited and all(p.doc_id == item.doc_id and p.span.start < a.end and a.start < p.span.end for p in cited)
        assert trace.retrieved[: len(cited)] == tuple(cited) and len(trace.retrieved) == 4
        assert [p.k_pos for p in trace.retrieved] == [1, 2, 3, 4]
        assert trace.answer.segments[0].text == " ".join(item.anchor.text.split())


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("calibrate")
    config = write_config(tmp, BM25, items=ITEMS, seeds="[1]")
    config.write_text(config.read_text().replace('model = "hashing"', 'model = "all-MiniLM-L6-v2"'))
    result = invoke("calibrate", config, "--rate", "0.25")
    return config, result


@pytest.mark.model
def test_calibrate_proposes_thresholds_every_control_passes(calibrated):
    config, result = calibrated
    assert result.exit_code == 0, result.output
    written = json.loads((config.parent / "calibration.json").read_text())
    assert written["schema"] == SCHEMA and written["questions"] == ITEMS
    assert written["inputs"] == {
        "gold": sha256_file(config.parent / "gold.jsonl"),
        "corpus": sha256_file(DEMO / "corpus"),
    }
    for key, check in written["checks"].items():
        assert check["false_fail"] == [], key  # every control passes what is proposed
        assert set(check["controls"]) == {ORACLE, *(n for n, f in FAULTS.items() if f.control)}
        assert set(check["faults"]) <= {n for n, f in FAULTS.items() if not f.control}
        assert written["gate"][key] == check["proposed"]
    # every fault class that changes an answer or a citation fails some proposed check
    caught = {name for c in written["checks"].values() for name, f in c["faults"].items() if f["fails"]}
    assert caught >= {"paraphrase_drift", "wrong_sentence", "number_change", "unsupported_claim", "wrong_marker"}
    assert "citation_match_min" in result.output and 'use it with [gate] from = "calibration.json"' in result.output


@pytest.mark.model
def test_a_config_runs_with_the_calibration(calibrated):
    config, _ = calibrated
    config.write_text(config.read_text().replace("[embedder]", '[gate]\nfrom = "calibration.json"\n\n[embedder]'))
    assert load_config(config).gate.source("citation_match_min") == "calibration"
    ran = invoke("run", config, "--no-gate")
    assert ran.exit_code == 0, ran.output


def test_a_config_reading_a_calibration_without_a_gold_set_names_what_is_missing(tmp_path):
    (tmp_path / "calibration.json").write_text(json.dumps({"schema": SCHEMA, "gate": {}, "inputs": {}}))
    config = tmp_path / "gate-only.toml"
    config.write_text('[gate]\nfrom = "calibration.json"\n')
    ran = invoke("run", config)
    assert ran.exit_code == 2 and "needs gold and corpus paths" in ran.output, ran.output
    assert "Traceback" not in ran.output


def test_a_bad_rate_or_an_output_over_an_input_is_a_usage_error(tmp_path):
    config = write_config(tmp_path, BM25, items=3, seeds="[1]")
    assert invoke("calibrate", config, "--rate", "0").exit_code == 2
    assert invoke("calibrate", config, "--out", tmp_path / "gold.jsonl").exit_code == 2
    assert invoke("calibrate", tmp_path / "missing.toml").exit_code in (2, 3)


def test_a_gold_set_the_oracle_cannot_cite_is_an_input_error_not_thresholds_of_zero(tmp_path):
    """Items naming unknown documents gave `citation_match_min 0.0` and `lambda_convergent_min 0.0`
    with exit 0; one anchor off its text was calibrated on silently. The gold check comes first, as
    in a run: each error is named, exit 3, and nothing is written."""
    config = write_config(tmp_path, BM25, items=4, seeds="[1]")
    items = [json.loads(line) for line in (tmp_path / "gold.jsonl").read_text().splitlines()]
    cases = {
        "unknown": [{**item, "doc_id": f"gone-{item['doc_id']}"} for item in items],
        "off-anchor": [{**items[0], "anchor": {**items[0]["anchor"], "text": "Not what the corpus says."}}, *items[1:]],
    }
    for name, gold in cases.items():
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(item) + "\n" for item in gold))
        own = tmp_path / f"{name}.toml"
        own.write_text(config.read_text().replace('gold = "gold.jsonl"', f'gold = "{name}.jsonl"'))
        result = invoke("calibrate", own, "--out", tmp_path / f"{name}.json")
        assert result.exit_code == 3, result.output
        assert not (tmp_path / f"{name}.json").exists()
        errors = result.stderr.splitlines()
        if name == "unknown":
            assert errors == [
                f"error: {tmp_path / 'unknown.jsonl'}:{i}: $.doc_id: gold_unknown_document: expected a doc_id of the "
                f"corpus, found 'gone-{item['doc_id']}'"
                for i, item in enumerate(items, 1)
            ]
        else:
            assert len(errors) == 1 and errors[0].startswith(
                f"error: {tmp_path / 'off-anchor.jsonl'}:1: $.anchor.text: gold_anchor_text_mismatch: expected "
                "anchor.text == document slice"
            )


def test_calibrate_shows_its_progress_by_phase_from_its_start(tmp_path):
    """The first phase shown is calibrate itself, counting its audits (the oracle, then each fault
    class), so a calibration that takes minutes says so from its first second; each audit counts the
    oracle's runs, not those of the config's pipelines."""
    import re

    from helpers import STAMP, TFIDF

    config = write_config(tmp_path, BM25 + TFIDF, items=2, seeds="[1, 2]")
    result = invoke("--verbose", "calibrate", config, "--out", tmp_path / "calibration.json")
    assert result.exit_code == 0, result.output
    lines = [line[22:] for line in result.stderr.splitlines() if re.match(STAMP + "  ", line)]
    audits = len(FAULTS) + 1
    assert lines[0] == f"calibrate: started ({audits} audits)", lines[:3]
    assert re.fullmatch(rf"calibrate: done in \d+\.\d s \({audits}/{audits} audits, .*\)", lines[-1]), lines[-1]
    assert any(line.startswith("calibrate › gold check") for line in lines)
    scored = [line for line in lines if line.startswith("scoring: done in")]
    assert len(scored) == audits and all("(12/12 runs" in line for line in scored), scored  # 2 × 3 × 2
    names = [re.match(r"calibrate › (\d+/\d+: \w+): started", line) for line in lines]
    assert [m.group(1) for m in names if m] == [f"{n}/{len(FAULTS)}: {name}" for n, name in enumerate(FAULTS, 1)]


def test_faulty_copies_scored_from_the_runs_they_share_calibrate_as_audited_from_scratch(tmp_path, monkeypatch):
    """Each distinct run is scored once across the audits, far fewer runs than the audits hold: the
    calibration is the one of every copy audited from scratch, figure for figure."""
    import ragaudit.checks.metrics.evaluate as evaluate
    import ragaudit.flows.calibrating as calibrating

    viewed: list = []  # what each run scored reads (`same_scores`), one per RunView

    class Counted(evaluate.RunView):
        def __init__(self, trace, *args, **kw):
            viewed.append(evaluate.same_scores(trace))
            super().__init__(trace, *args, **kw)

    monkeypatch.setattr(evaluate, "RunView", Counted)
    config = load_config(write_config(tmp_path, BM25, items=4, seeds="[1, 2]"))
    shared = calibrating.calibrate(runner.Inputs.from_config(config), rate=0.5)
    once = len(viewed)
    audited = calibrating.audit
    monkeypatch.setattr(calibrating, "audit", lambda traces, subject, remembered=None: audited(traces, subject))
    alone = calibrating.calibrate(runner.Inputs.from_config(config), rate=0.5)
    assert json.dumps(shared, sort_keys=True) == json.dumps(alone, sort_keys=True)
    # from scratch each audit scores the 4 × 3 runs of its seed 1 at least (seed 2 repeats them);
    # shared, no run is scored twice
    assert len(viewed) - once >= len(FAULTS) * 4 * 3 > once == len(set(viewed[:once])), (once, len(viewed) - once)
