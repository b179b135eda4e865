"""Release attestations: `ragaudit attest` writes an in-toto Statement (signed in a DSSE envelope with
--key) and `ragaudit verify --attestation` checks the signature and every digest."""

import base64
import hashlib
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from helpers import BM25, TFIDF, invoke, run_dir_of, write_config, write_keys

from ragaudit.decisions.attest import pae


@pytest.fixture
def run(tmp_path):
    result = invoke("run", write_config(tmp_path, TFIDF + BM25, items=3, seeds="[1, 2]"), "--no-gate")
    assert result.exit_code == 0, result.output
    return run_dir_of(result)


@pytest.fixture
def keys(tmp_path):
    return write_keys(tmp_path, "release")


def statement_of(envelope: dict) -> dict:
    return json.loads(base64.b64decode(envelope["payload"]))


def lines_of(path: Path) -> list[dict]:
    """The documents of an attestation bundle, one a line."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_pae_is_dsses_test_vector():
    assert (
        pae("http://example.com/HelloWorld", b"hello world")
        == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_a_signed_attestation_lists_every_file_and_verifies(run, keys, tmp_path):
    private, public = keys
    result = invoke("attest", run, "--key", private)
    assert result.exit_code == 0, result.output
    path = run / "attestation.intoto.jsonl"
    envelope = lines_of(path)[0]  # the run's statement; the gate's checks as eval-result statements follow
    assert envelope["payloadType"] == "application/vnd.in-toto+json" and len(envelope["signatures"]) == 1
    # the signature covers DSSE's encoding of the payload, checked here with the public key alone
    payload = base64.b64decode(envelope["payload"])
    signed = (
        b"DSSEv1 %d application/vnd.in-toto+json %d " % (len("application/vnd.in-toto+json"), len(payload)) + payload
    )
    key = serialization.load_pem_public_key(public.read_bytes())
    key.verify(base64.b64decode(envelope["signatures"][0]["sig"]), signed)  # raises when it does not verify
    statement = statement_of(envelope)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    files = sorted(p.name for p in run.iterdir() if p.is_file() and not p.name.startswith(".") and p != path)
    assert [s["name"] for s in statement["subject"]] == files
    assert {"report.json", "runs.parquet", "traces.jsonl", "manifest.json", "summary.md", "compare.json"} <= set(files)
    for s in statement["subject"]:
        assert s["digest"] == {"sha256": sha256(run / s["name"])}, s["name"]
    verified = invoke("verify", run, "--attestation", path, "--pubkey", public)
    assert verified.exit_code == 0, verified.output
    assert f"attested: {len(files)} files match" in verified.stdout and "signature verified" in verified.stdout


def test_the_predicate_holds_inputs_verdict_checks_and_command(run, tmp_path):
    result = invoke("attest", run, "--out", tmp_path / "release.intoto.json")
    assert result.exit_code == 0 and "not signed" in result.stdout
    statement = lines_of(tmp_path / "release.intoto.json")[0]  # no key: the bare statement
    predicate = statement["predicate"]
    assert predicate["inputs"]["gold"]["sha256"] == sha256(tmp_path / "gold.jsonl")
    assert predicate["inputs"]["config"]["sha256"] == sha256(tmp_path / "audit.toml")
    assert predicate["inputs"]["traces"]["sha256"] == sha256(run / "traces.jsonl")
    report = json.loads((run / "report.json").read_text())
    assert predicate["verdict"] == report["gate"]["verdict"]
    assert len(predicate["checks"]) == len(report["gate"]["checks"])
    by_name = {(c["pipeline"], c["name"]): c for c in predicate["checks"]}
    # the test config sets no [gate]: every threshold is a default
    assert by_name[("bm25", "citation_match_min")] == {
        **by_name[("bm25", "citation_match_min")],
        "source": "default",
        "threshold": 0.95,
    }
    assert set(predicate["index"]) == {"tfidf", "bm25"} and predicate["index"]["bm25"]["index_hash"].startswith(
        "sha256:"
    )
    assert predicate["models"]["embedder"]["model_id"] == "hashing-256"
    assert predicate["command"][:2] == ["ragaudit", "run"] and predicate["command"][-1] == "--no-gate"
    assert predicate["versions"]["ragaudit"]


def test_a_configured_threshold_says_so(tmp_path):
    config = write_config(tmp_path, BM25, items=2, seeds="[1]")
    config.write_text(config.read_text() + "[gate]\ncitation_match_min = 0.5\n")
    run = run_dir_of(invoke("run", config, "--no-gate"))
    assert invoke("attest", run).exit_code == 0
    checks = lines_of(run / "attestation.intoto.jsonl")[0]["predicate"]["checks"]
    sources = {c["name"]: c["source"] for c in checks}
    assert sources["citation_match_min"] == "config" and sources["delta_s_excess_max"] == "default"


@pytest.mark.parametrize(
    "name", ["report.json", "runs.parquet", "traces.jsonl", "summary.md", "manifest.json", "compare.html"]
)
def test_a_flipped_byte_in_any_file_is_named(run, keys, name):
    private, public = keys
    assert invoke("attest", run, "--key", private).exit_code == 0
    target = run / name
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    result = invoke("verify", run, "--attestation", run / "attestation.intoto.jsonl", "--pubkey", public)
    assert result.exit_code == 5, result.output
    assert f"attested file {name} changed" in result.output


def test_a_wrong_key_or_an_unsigned_attestation_fails_with_the_signature_named(run, keys, tmp_path):
    private, _ = keys
    _, other = write_keys(tmp_path, "other")
    assert invoke("attest", run, "--key", private).exit_code == 0
    wrong = invoke("verify", run, "--attestation", run / "attestation.intoto.jsonl", "--pubkey", other)
    assert wrong.exit_code == 5 and "signature: no signature" in wrong.output and str(other) in wrong.output
    assert invoke("attest", run, "--out", tmp_path / "bare.intoto.json").exit_code == 0
    bare = invoke("verify", run, "--attestation", tmp_path / "bare.intoto.json", "--pubkey", other)
    assert bare.exit_code == 5 and "is not signed" in bare.output
    # a signed attestation without --pubkey: the digests are checked, and the unchecked signature is said
    unchecked = invoke("verify", run, "--attestation", run / "attestation.intoto.jsonl")
    assert unchecked.exit_code == 0 and "signature not checked" in unchecked.output


def test_a_changed_payload_no_longer_verifies(run, keys):
    private, public = keys
    assert invoke("attest", run, "--key", private).exit_code == 0
    path = run / "attestation.intoto.jsonl"
    envelope, *results = lines_of(path)
    statement = statement_of(envelope)
    statement["predicate"]["verdict"] = "pass" if statement["predicate"]["verdict"] == "fail" else "fail"
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    path.write_text("".join(json.dumps(d) + "\n" for d in (envelope, *results)))
    result = invoke("verify", run, "--attestation", path, "--pubkey", public)
    assert result.exit_code == 5 and "signature: no signature" in result.output


def foreign_documents() -> dict[str, str]:
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "report.json", "digest": {"sha256": "0" * 64}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {},
    }
    ours = {**statement, "predicateType": "https://ragaudit.dev/attestation/audit-run/v1"}
    envelope = {"payloadType": "application/json", "payload": base64.b64encode(b"{}").decode(), "signatures": []}
    return {
        "truncated": '{"payloadType": "application/vnd.in-toto+json", "payl',
        "not an object": "[1, 2]",
        "another predicate": json.dumps(statement),
        "another statement type": json.dumps({**ours, "_type": "https://in-toto.io/Statement/v0.1"}),
        "another payload type": json.dumps(envelope),
        "payload not base64": json.dumps({**envelope, "payloadType": "application/vnd.in-toto+json", "payload": "%%%"}),
        "a subject outside the run": json.dumps(
            {**ours, "subject": [{"name": "../x", "digest": {"sha256": "0" * 64}}]}
        ),
        "a digest that is no sha256": json.dumps({**ours, "subject": [{"name": "x", "digest": {"sha1": "0" * 40}}]}),
    }


@pytest.mark.parametrize("kind", list(foreign_documents()))
def test_a_damaged_or_foreign_attestation_is_an_input_error(run, tmp_path, kind):
    path = tmp_path / "attestation.json"
    path.write_text(foreign_documents()[kind])
    result = invoke("verify", run, "--attestation", path)
    assert result.exit_code == 3, result.output
    assert str(path) in result.output and "Traceback" not in result.output


def test_a_changed_run_is_not_attested(run, tmp_path):
    (run / "summary.md").write_text("edited\n")
    result = invoke("attest", run)
    assert result.exit_code == 5 and "summary.md" in result.output
    assert not (run / "attestation.intoto.jsonl").exists()


def test_keys_that_cannot_sign_are_input_errors(run, tmp_path):
    (tmp_path / "junk.pem").write_text("not a key\n")
    assert invoke("attest", run, "--key", tmp_path / "junk.pem").exit_code == 3
    assert invoke("attest", run, "--key", tmp_path / "absent.pem").exit_code == 3
    assert not (run / "attestation.intoto.jsonl").exists()
    assert invoke("verify", run, "--pubkey", tmp_path / "junk.pem").exit_code == 2  # --pubkey needs --attestation


def test_an_encrypted_key_takes_its_passphrase_from_the_environment(run, tmp_path, monkeypatch):
    private, public = write_keys(tmp_path, "locked", password=b"s3cret")
    assert invoke("attest", run, "--key", private).exit_code == 3  # no passphrase given
    monkeypatch.setenv("RAGAUDIT_KEY_PASSWORD", "s3cret")
    assert invoke("attest", run, "--key", private).exit_code == 0
    assert invoke("verify", run, "--attestation", run / "attestation.intoto.jsonl", "--pubkey", public).exit_code == 0


def test_a_file_added_after_the_attestation_is_noted_not_failed(run, tmp_path):
    """Every file added is named, hidden ones and attestations too: only the run's lock and the
    attestation checked are not; a symlink out of the run directory is said to be one, unread."""
    assert invoke("attest", run).exit_code == 0
    (run / "notes.txt").write_text("added later\n")
    (run / ".hidden").write_text("added later\n")
    (run / "other.intoto.jsonl").write_text("{}\n")
    (run / "sub").mkdir()
    (run / "sub" / "more.md").write_text("added later\n")
    (run / "outside.txt").symlink_to(tmp_path / "audit.toml")
    result = invoke("verify", run, "--attestation", run / "attestation.intoto.jsonl")
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "note: not attested (added since): .hidden, notes.txt, other.intoto.jsonl, outside.txt (a symlink out of "
        "the run directory, not read), sub/more.md\n"
    )


def test_attest_never_follows_a_symlink_out_of_the_run_directory(run, tmp_path):
    private, _ = write_keys(tmp_path, "secret")
    (run / "link-outside.txt").symlink_to(private)
    before = {p.name: sha256(p) for p in run.iterdir() if p.is_file() and not p.is_symlink()}
    result = invoke("attest", run)
    assert result.exit_code == 3, result.output
    assert result.stderr == (
        f"error: {run / 'link-outside.txt'}: expected a file of the run, found a symlink to {private}: not attested "
        "(remove the link, or put the file itself in the run directory)\n"
    )
    assert not (run / "attestation.intoto.jsonl").exists()
    assert {p.name: sha256(p) for p in run.iterdir() if p.is_file() and not p.is_symlink()} == before


def test_an_attested_file_that_became_a_symlink_out_of_the_run_is_a_change_never_read(run, tmp_path):
    assert invoke("attest", run, "--out", tmp_path / "release.intoto.jsonl").exit_code == 0
    secret = tmp_path / "secret.txt"
    secret.write_bytes((run / "summary.md").read_bytes())  # the same bytes: still not the run's file
    (run / "summary.md").unlink()
    (run / "summary.md").symlink_to(secret)
    result = invoke("verify", run, "--attestation", tmp_path / "release.intoto.jsonl")
    assert result.exit_code == 5
    assert (
        f"attested file summary.md is no longer a file of the run: {run / 'summary.md'}: expected a file of {run}, "
        f"found a symlink to {secret}: not read" in result.stderr
    )


def test_attest_out_onto_a_file_of_the_run_is_refused_and_changes_nothing(run):
    before = {p.name: sha256(p) for p in run.iterdir() if p.is_file()}
    for name in ("traces.jsonl", "report.json", "manifest.json", "notes.txt"):
        result = invoke("attest", run, "--out", run / name)
        assert result.exit_code == 2, result.output
        assert result.stderr == (
            f"error: --out {run / name}: expected an attestation outside the run directory, or named "
            "*.intoto.jsonl in it; another file there would be, or replace, a file of the run\n"
        )
    assert {p.name: sha256(p) for p in run.iterdir() if p.is_file()} == before
    assert invoke("verify", run).exit_code == 0
    assert invoke("attest", run, "--out", run / "release.intoto.jsonl").exit_code == 0


def test_attest_out_that_cannot_be_written_is_exit_3_and_writes_nothing(run, tmp_path):
    folder = tmp_path / "attestations"
    folder.mkdir()
    result = invoke("attest", run, "--out", folder)
    assert result.exit_code == 3, result.output
    assert result.stderr == f"error: {folder}: expected a regular file to write, or none, found a folder\n"
    missing = invoke("attest", run, "--out", tmp_path / "absent" / "a.intoto.jsonl")
    assert missing.exit_code == 3 and "expected a folder to write a.intoto.jsonl in, found none" in missing.stderr
    assert list(folder.iterdir()) == [] and not (run / "attestation.intoto.jsonl").exists()


def test_a_release_archive_verifies_on_another_machine(run, keys, tmp_path):
    """The inputs are not where the run recorded them: the attestation holds their hashes."""
    import shutil

    private, public = keys
    assert invoke("attest", run, "--key", private, "--out", tmp_path / "release.intoto.jsonl").exit_code == 0
    elsewhere = tmp_path / "downloaded" / "rag-audit"
    shutil.copytree(run, elsewhere)
    (tmp_path / "gold.jsonl").rename(tmp_path / "moved.jsonl")  # not at its recorded path any more
    plain = invoke("verify", elsewhere)
    assert plain.exit_code == 5 and "gold:" in plain.output and "is gone" in plain.output
    result = invoke("verify", elsewhere, "--attestation", tmp_path / "release.intoto.jsonl", "--pubkey", public)
    assert result.exit_code == 0, result.output
    assert "inputs not on this machine, not checked: gold:" in result.output and "signature verified" in result.stdout
    (elsewhere / "report.json").write_text("{}")
    tampered = invoke("verify", elsewhere, "--attestation", tmp_path / "release.intoto.jsonl", "--pubkey", public)
    assert tampered.exit_code == 5 and "attested file report.json changed" in tampered.output
