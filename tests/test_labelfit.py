"""`ragaudit calibrate CONFIG --labels FILE --run RUN_DIR` end to end: a person stricter than the
default support threshold labels a run, the fit finds a threshold that reproduces their labels
(the set of such thresholds computed here from the claims' raw supports), the calibration file
records the labels' digest, and a run that reads it says its checks were judged with it."""

import json
from pathlib import Path

import pytest
from helpers import BM25, TFIDF, invoke, run_dir_of, write_config

from ragaudit.decisions.agreement import run_verdicts
from ragaudit.decisions.labelfit import GRID, MIN_LABELS

STRICT = 0.8  # the person calls a claim supported when its support is at least this, or its sentence is quoted


@pytest.fixture(scope="module")
def labelled(tmp_path_factory) -> tuple[Path, Path, Path, dict]:
    tmp = tmp_path_factory.mktemp("fit")
    config = write_config(tmp, BM25 + TFIDF, items=12, seeds="[1]")
    made = invoke("run", config, "--no-gate")
    assert made.exit_code == 0, made.output
    run = run_dir_of(made)
    verdicts = run_verdicts(run)
    labels = tmp / "labels.jsonl"
    truth = {}
    with labels.open("w", encoding="utf-8") as out:
        for key, v in sorted(verdicts.items()):
            supports = [(c["evidence"]["support"], c["evidence"]["said"]) for c in v.claims]
            supported = bool(supports) and all(said or s >= STRICT for s, said in supports)
            truth[key] = supported
            pipeline, qid, variant, seed = key
            out.write(json.dumps({"pipeline": pipeline, "qid": qid, "variant": variant, "seed": seed,
                                  "correct": v.correct, "supported": supported, "citation": v.citation, "note": "",
                                  "labeller": "ana", "time": "2026-12-07T10:00:00Z", "digest": v.digest,
                                  "sample": "random"}) + "\n")  # fmt: skip
    return config, run, labels, {"truth": truth, "verdicts": verdicts}


def reproducing(verdicts: dict, truth: dict) -> set[float]:
    """The grid's support thresholds under which 'every claim supported' is exactly the person's labels."""
    out = set()
    for threshold in GRID["support"]:
        found = {
            key: bool(v.claims)
            and all(c["evidence"]["said"] or c["evidence"]["support"] >= threshold for c in v.claims)
            for key, v in verdicts.items()
        }
        if found == truth:
            out.add(threshold)
    return out


def test_the_fit_finds_the_persons_threshold_and_a_run_reads_it(labelled, tmp_path):
    config, run, labels, known = labelled
    truth, verdicts = known["truth"], known["verdicts"]
    assert sum(not s for s in truth.values()) >= 5 and sum(truth.values()) >= 5  # both answers are there to fit
    assert not all(v.supported == truth[k] for k, v in verdicts.items())  # the default disagrees with the person
    expected = reproducing(verdicts, truth)
    assert expected and 0.7 not in expected

    out = tmp_path / "calibration.json"
    fitted = invoke("calibrate", config, "--labels", labels, "--run", run, "--out", out)
    assert fitted.exit_code == 0, fitted.output
    assert f'wrote {out}; use it with [gate] from = "calibration.json"' in fitted.output
    written = json.loads(out.read_text())
    assert written["claims"]["support"] in expected
    assert written["labels"]["sha256"].startswith("sha256:") and written["labels"]["labelled"] == len(truth)
    held_out = {d["dimension"]: d for d in written["labels"]["agreement"]["after"]}
    assert held_out["supported"]["kappa"] == pytest.approx(1.0)

    # a config that reads the calibration: every check that counts claims says whose thresholds judged them
    reads = config.parent / "reads.toml"
    reads.write_text(config.read_text().replace("[embedder]", f'[gate]\nfrom = "{out}"\n\n[embedder]'))
    rerun = invoke("run", reads, "--no-gate")
    assert rerun.exit_code == 0, rerun.output
    report = json.loads((run_dir_of(rerun) / "report.json").read_text())
    assert report["meta"]["thresholds"]["support"] == written["claims"]["support"]
    assert report["meta"]["thresholds"]["fitted_to"] == written["labels"]["sha256"]
    said = [c for c in report["gate"]["checks"] if c["name"] == "grounded_pass_rate"]
    assert said and all("fitted to labels sha256:" in c["detail"] for c in said)
    agreed = invoke("agree", run_dir_of(rerun), "--labels", labels, "--format", "json")
    assert agreed.exit_code == 0, agreed.output
    supported = next(d for d in json.loads(agreed.output)["dimensions"] if d["dimension"] == "supported")
    assert supported["kappa"] == pytest.approx(1.0)


def test_too_few_labels_fit_nothing_and_say_how_many_more(labelled, tmp_path):
    config, run, labels, _ = labelled
    few = tmp_path / "few.jsonl"
    few.write_text("".join(labels.read_text().splitlines(keepends=True)[:20]))
    out = tmp_path / "calibration.json"
    result = invoke("calibrate", config, "--labels", few, "--run", run, "--out", out)
    assert result.exit_code == 1, result.output
    assert f"{MIN_LABELS - 20} more labelled runs" in result.output and not out.exists()


def test_labels_without_their_run_are_a_usage_error(labelled):
    config, _, labels, _ = labelled
    result = invoke("calibrate", config, "--labels", labels)
    assert result.exit_code == 2 and "--labels and --run go together" in result.output
