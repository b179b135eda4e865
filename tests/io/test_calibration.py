"""`[gate] from = "calibration.json"`: thresholds from a calibration, under those the config sets,
each with its source; a bad file is a usage error, a foreign one an input error."""

import json

import pytest
from helpers import BM25, invoke, run_dir_of, write_config

from ragaudit.core.errors import InputError, UsageError
from ragaudit.io.calibration import SCHEMA, check_inputs
from ragaudit.io.config import load_config
from ragaudit.io.files import sha256_file


def calibration(tmp_path, **gate) -> dict:
    config = write_config(tmp_path, BM25, items=3, seeds="[1]")
    body = {
        "schema": SCHEMA,
        "inputs": {
            "gold": sha256_file(tmp_path / "gold.jsonl"),
            "corpus": sha256_file(load_config(config).audit.corpus),
        },
        "gate": {"citation_match_min": 0.9, "delta_s_excess_max": None, "grounded_pass_rate": 0.85, **gate},
        "not_gated": {"delta_s_excess_max": "does not separate here"},
    }
    (tmp_path / "calibration.json").write_text(json.dumps(body))
    return body


def with_from(config, extra: str = ""):
    config.write_text(
        config.read_text().replace("[embedder]", f'[gate]\nfrom = "calibration.json"\n{extra}\n[embedder]')
    )
    return config


def test_thresholds_come_from_the_calibration_under_the_config(tmp_path):
    calibration(tmp_path)
    config = load_config(with_from(tmp_path / "audit.toml", "grounded_pass_rate = 0.7\n"))
    assert config.gate.citation_match_min == 0.9 and config.gate.delta_s_excess_max is None
    assert config.gate.grounded_pass_rate == 0.7  # the config's own key wins
    assert config.gate.sources == {
        "citation_match_min": "calibration",
        "delta_s_excess_max": "calibration",
        "grounded_pass_rate": "config",
    }
    assert config.gate.source("coverage_min") == "default"
    assert config.gate.not_gated == {"delta_s_excess_max": "does not separate here"}


def test_the_run_says_where_every_threshold_came_from(tmp_path):
    calibration(tmp_path)
    result = invoke("run", with_from(tmp_path / "audit.toml"))
    assert result.exit_code in (0, 1), result.output
    checks = {c["name"]: c for c in json.loads((run_dir_of(result) / "report.json").read_text())["gate"]["checks"]}
    assert checks["citation_match_min"]["source"] == "calibration" and checks["max_errors"]["source"] == "default"
    excess = checks["delta_s_excess_max"]
    assert excess["threshold"] is None and excess["passed"] and "does not separate here" in excess["detail"]


@pytest.mark.parametrize(
    "content,found",
    [
        (None, "no such"),
        ("not json", "expected"),
        (json.dumps({"schema": "other"}), "expected schema"),
        (json.dumps({"schema": SCHEMA, "gate": {"citation_match_min": 2}, "inputs": {}}), r"in \[0, 1\]"),
        (json.dumps({"schema": SCHEMA, "gate": {"nonsense": 1}, "inputs": {}}), "expected one of"),
        (json.dumps({"schema": SCHEMA, "gate": {"coverage_min": None}, "inputs": {}}), r"in \[0, 1\], found None"),
    ],
)
def test_an_unreadable_calibration_is_a_usage_error(tmp_path, content, found):
    config = with_from(write_config(tmp_path, BM25, items=3, seeds="[1]"))
    if content is not None:
        (tmp_path / "calibration.json").write_text(content)
    with pytest.raises(UsageError, match=found):
        load_config(config)
    result = invoke("run", config)
    assert result.exit_code == 2 and "calibration.json" in result.stderr


def test_a_calibration_of_other_inputs_is_refused(tmp_path):
    body = calibration(tmp_path)
    body["inputs"]["gold"] = "0" * 64
    (tmp_path / "calibration.json").write_text(json.dumps(body))
    config = with_from(tmp_path / "audit.toml")
    with pytest.raises(InputError, match="gold"):
        check_inputs(load_config(config).calibration, {"gold": "1" * 64, "corpus": body["inputs"]["corpus"]})
    result = invoke("run", config)
    assert result.exit_code == 3 and "calibration" in result.stderr and "ragaudit calibrate" in result.stderr


def test_a_calibration_relaxed_after_the_run_is_a_change_verify_names_and_regating_says(tmp_path):
    """The calibration decides the verdict: the run hashes it with its inputs, `verify` names it
    once it changed (exit 5), `report` and `gate` say they gate with it as it is now, and
    `--resume` and `attest` refuse the run."""
    calibration(tmp_path, citation_match_min=0.99, hallucination_max=0)
    config = with_from(tmp_path / "audit.toml")
    result = invoke("run", config)
    assert result.exit_code == 1, result.output  # the gate fails at 0.99
    run_dir = run_dir_of(result)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["paths"]["calibration"] == str(tmp_path / "calibration.json")
    assert manifest["inputs"]["calibration"] == sha256_file(tmp_path / "calibration.json")
    report = json.loads((run_dir / "report.json").read_text())
    assert report["meta"]["inputs"]["calibration"] == manifest["inputs"]["calibration"]
    before, kept = manifest["inputs"]["calibration"], (tmp_path / "calibration.json").read_bytes()
    relaxed = json.loads(kept)
    relaxed["gate"].update(citation_match_min=0, hallucination_max=1000)  # after the run
    (tmp_path / "calibration.json").write_text(json.dumps(relaxed))
    now = sha256_file(tmp_path / "calibration.json")
    changed = f"calibration: {tmp_path / 'calibration.json'} changed since the run (sha256 was {before[:12]}…)"
    verified = invoke("verify", run_dir)
    assert verified.exit_code == 5 and changed in verified.stderr
    regating = (
        f"warning: [gate] from {tmp_path / 'calibration.json'} changed since the run (sha256 was {before[:12]}…, "
        f"now {now[:12]}…): the gate reads the thresholds it holds now\n"
    )
    gated = invoke("gate", run_dir / "report.json", "--config", config)
    assert gated.stderr.startswith(regating), gated.stderr
    rebuilt = invoke("report", run_dir)
    assert rebuilt.stderr.startswith(regating), rebuilt.stderr
    assert invoke("verify", run_dir).exit_code == 5  # the rebuilt report does not make the change disappear
    resumed = invoke("run", config, "--resume", run_dir)
    assert resumed.exit_code == 2 and "calibration changed since the run" in resumed.stderr
    attested = invoke("attest", run_dir)
    assert attested.exit_code == 5 and changed in attested.stderr
    (tmp_path / "calibration.json").write_bytes(kept)
    assert invoke("attest", run_dir).exit_code == 0  # the rebuilt outputs were stamped again
    lines = (run_dir / "attestation.intoto.jsonl").read_text().splitlines()
    statement = json.loads(lines[0])  # the run's statement; the gate's eval-result statements follow it
    assert statement["predicate"]["inputs"]["calibration"] == {
        "path": str(tmp_path / "calibration.json"),
        "sha256": before,
    }
