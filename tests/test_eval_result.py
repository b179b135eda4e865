"""The gate's checks as in-toto eval-result statements (the draft predicate of in-toto/attestation
pull request 575, v0.1), beside the run's statement in the attestation bundle: read back with the
in-toto libraries' own parsers (in_toto_attestation's Statement and ResourceDescriptor; in-toto's
DSSE envelope, which verifies the signatures), held to the draft's rules, and each claim applied
to the value report.json holds gives the gate's verdict. `verify --attestation` holds them to the
run directory."""

import base64
import hashlib
import json
import operator
import re
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from google.protobuf import json_format
from helpers import BM25, TFIDF, invoke, run_dir_of, write_config, write_keys
from in_toto.models.metadata import Envelope
from in_toto_attestation.v1 import resource_descriptor_pb2, statement_pb2
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
from in_toto_attestation.v1.statement import Statement
from securesystemslib.signer import SSlibKey

import ragaudit

EVAL_RESULT = "https://in-toto.io/attestation/eval-result/v0.1"
COMPARE = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def package_digest() -> str:
    """ragaudit's package files (compiled ones aside) as manifest.json's `harness` hashes them: each
    file by its name, framed by its length in 8 bytes, and the sha256 of its bytes, in name order."""
    root = Path(ragaudit.__file__).resolve().parent
    digest = hashlib.sha256()
    files = [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    for name, path in sorted((p.relative_to(root).as_posix(), p) for p in files):
        digest.update(
            len(name.encode()).to_bytes(8, "big") + name.encode() + hashlib.sha256(path.read_bytes()).digest()
        )
    return digest.hexdigest()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run of two pipelines gated against a baseline of an earlier run (drift and regression
    checks too), its attestation signed, and the public key."""
    folder = tmp_path_factory.mktemp("eval-result")
    config = write_config(folder, TFIDF + BM25, items=3, seeds="[1, 2]")
    first = run_dir_of(invoke("run", config, "--no-gate"))
    result = invoke("run", config, "--no-gate", "--baseline", first / "report.json")
    assert result.exit_code == 0, result.output
    run_dir = run_dir_of(result)
    private, public = write_keys(folder, "release")
    attested = invoke("attest", run_dir, "--key", private, "--out", folder / "release.intoto.jsonl")
    assert attested.exit_code == 0, attested.output
    return run_dir, folder / "release.intoto.jsonl", public, folder


def in_toto_statements(bundle: Path, public: Path) -> list[dict]:
    """Each line of the bundle as in-toto's DSSE envelope, its signature verified with the key (the
    key id: sha256 of the raw public key), and its payload as in_toto_attestation's Statement."""
    key = serialization.load_pem_public_key(public.read_bytes())
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    signer = SSlibKey.from_crypto(key, keyid=hashlib.sha256(raw).hexdigest())
    out = []
    for line in bundle.read_text().splitlines():
        envelope = Envelope.from_dict(json.loads(line))
        assert envelope.payload_type == "application/vnd.in-toto+json"
        assert set(envelope.verify([signer], 1)) == {signer.keyid}  # raises when no signature verifies
        parsed = Statement.copy_from_pb(json_format.Parse(envelope.payload, statement_pb2.Statement()))
        parsed.validate()  # in-toto's rules: the type, a subject with a digest each, a predicate type and predicate
        out.append(json.loads(envelope.payload))
    return out


def descriptor(value: dict) -> ResourceDescriptor:
    found = ResourceDescriptor.copy_from_pb(json_format.ParseDict(value, resource_descriptor_pb2.ResourceDescriptor()))
    found.validate()
    assert len(found.pb.digest) > 0  # the draft: a model, dataset or evidence descriptor MUST carry its digest
    return found


def test_each_gated_pipeline_has_an_eval_result_statement_in_totos_parsers_read(run):
    run_dir, bundle, public, folder = run
    statements = in_toto_statements(bundle, public)
    assert statements[0]["predicateType"] == "https://ragaudit.dev/attestation/audit-run/v1"
    results = [s for s in statements if s["predicateType"] == EVAL_RESULT]
    report = json.loads((run_dir / "report.json").read_text())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert len(statements) == 1 + len(results)
    assert [s["predicate"]["model"]["name"] for s in results] == report["gate"]["pipelines"] == ["tfidf", "bm25"]
    for statement in results:
        predicate, pipeline = statement["predicate"], statement["predicate"]["model"]["name"]
        assert statement["subject"] == [{"name": "report.json", "digest": {"sha256": sha256(run_dir / "report.json")}}]
        # the draft's required fields and their values
        assert predicate["evaluator"]["id"] and predicate["suite"]["name"] and predicate["suite"]["version"]
        assert datetime.fromisoformat(predicate["evaluatedAt"].replace("Z", "+00:00")).tzinfo is not None
        assert predicate["evaluatedAt"] == manifest["finished"]
        assert predicate["assuranceLevel"] in {"self_attested", "third_party", "reproduced", "enclave_attested"}
        assert predicate["subjectProfile"] in {"receipt", "public-model", "release-gate"}
        for identity in ("model", "dataset"):  # exactly one of the commitment and the descriptor
            assert (identity in predicate) != (identity in predicate.get("commitments", {}))
        assert descriptor(predicate["model"]).pb.digest["sha256"] == sha256(folder / "audit.toml")
        assert descriptor(predicate["dataset"]).pb.digest["sha256"] == sha256(folder / "gold.jsonl")
        assert {e["name"]: descriptor(e).pb.digest["sha256"] for e in predicate["evidence"]} == {
            name: sha256(run_dir / name) for name in ("manifest.json", "traces.jsonl", "runs.parquet")
        }
        assert predicate["harness"] == {
            "name": "ragaudit",
            "version": ragaudit.__version__,
            "digest": {"sha256": package_digest()},
        }
        assert predicate["sampleSize"] == report["summary"]["pipelines"][pipeline]["runs"] == 3 * 3 * 2
        # every check with a bar is a claim; applied to the value the report holds, it gives the verdict
        checks = {c["name"]: c for c in report["gate"]["checks"] if c["pipeline"] == pipeline}
        claims = {c["metric"]: c for c in predicate["claims"]}
        assert len(claims) == len(predicate["claims"]) and set(claims) <= set(checks)
        assert set(checks) - set(claims) == {c["name"] for c in checks.values() if c["threshold"] is None}
        assert {"drift_coverage", "regressions", "citation_match_min"} <= set(claims)
        for name, claim in claims.items():
            assert set(claim) == {"metric", "comparator", "threshold", "passed"}
            assert isinstance(claim["threshold"], str) and re.fullmatch(r"-?\d+(\.\d+)?", claim["threshold"])
            check = checks[name]
            assert claim["passed"] is check["passed"]
            assert (
                COMPARE[claim["comparator"]](Decimal(repr(check["value"])), Decimal(claim["threshold"]))
                is (check["passed"])
            ), (pipeline, claim, check["value"])
        assert abs(float(claims["citation_match_min"]["threshold"]) - checks["citation_match_min"]["threshold"]) < 1e-12


def test_verify_holds_the_eval_result_statements_to_the_run(run, tmp_path):
    run_dir, _, _, _ = run
    bundle = tmp_path / "bare.intoto.jsonl"
    assert invoke("attest", run_dir, "--out", bundle).exit_code == 0
    lines = bundle.read_text().splitlines()
    assert len(lines) == 3
    fine = invoke("verify", run_dir, "--attestation", bundle)
    assert fine.exit_code == 0, fine.output
    assert "2 eval-result statements" in fine.stdout and "note" not in fine.stderr
    claimed = json.loads(lines[2])
    claimed["predicate"]["claims"][0]["passed"] = not claimed["predicate"]["claims"][0]["passed"]
    claimed["predicate"]["sampleSize"] += 1
    bundle.write_text("\n".join([lines[0], lines[1], json.dumps(claimed)]) + "\n")
    changed = invoke("verify", run_dir, "--attestation", bundle)
    assert changed.exit_code == 5
    assert (
        f"eval-result of pipeline 'bm25' ({bundle}:3): claims, sampleSize differ from what the run directory says now"
        in changed.stderr
    )
    bundle.write_text(lines[0] + "\n" + lines[2] + "\n")  # the tfidf statement left out
    dropped = invoke("verify", run_dir, "--attestation", bundle)
    assert dropped.exit_code == 5 and "eval-result: none for gated pipeline 'tfidf'" in dropped.stderr
    other = {**json.loads(lines[0]), "predicateType": "https://slsa.dev/provenance/v1", "predicate": {"x": 1}}
    bundle.write_text("\n".join([json.dumps(other), *lines]) + "\n")  # in-toto's bundles may hold any statement
    beside = invoke("verify", run_dir, "--attestation", bundle)
    assert beside.exit_code == 0, beside.output
    assert f"note: not checked: {bundle}:1 is a statement of https://slsa.dev/provenance/v1" in beside.stderr
    bundle.write_text(lines[0] + "\n")  # as ragaudit wrote them before the eval-result statements
    older = invoke("verify", run_dir, "--attestation", bundle)
    assert older.exit_code == 0 and "no eval-result statement" in older.stderr


def test_every_statement_of_a_signed_bundle_must_verify(run, tmp_path):
    run_dir, bundle, public, folder = run
    lines = bundle.read_text().splitlines()
    _, other_public = write_keys(tmp_path, "other")
    other_private = tmp_path / "other.pem"
    mixed = tmp_path / "mixed.intoto.jsonl"
    assert invoke("attest", run_dir, "--key", other_private, "--out", mixed).exit_code == 0
    resigned = mixed.read_text().splitlines()
    mixed.write_text("\n".join([lines[0], resigned[1], lines[2]]) + "\n")  # one statement signed by another key
    result = invoke("verify", run_dir, "--attestation", mixed, "--pubkey", public)
    assert result.exit_code == 5
    assert f"signature: no signature of the eval-result statement {mixed}:2 verifies with {public}" in result.stderr
    envelope = json.loads(lines[2])
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["claims"] = [{**c, "passed": True} for c in statement["predicate"]["claims"]]
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    mixed.write_text("\n".join([lines[0], lines[1], json.dumps(envelope)]) + "\n")
    tampered = invoke("verify", run_dir, "--attestation", mixed, "--pubkey", public)
    assert tampered.exit_code == 5
    assert f"signature: no signature of the eval-result statement {mixed}:3 verifies" in tampered.stderr
    assert f"eval-result of pipeline 'bm25' ({mixed}:3): claims differ" in tampered.stderr
    assert invoke("verify", run_dir, "--attestation", bundle, "--pubkey", public).exit_code == 0
