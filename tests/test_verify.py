"""`ragaudit verify` covers every output a run writes (runs.parquet too), counts an output missing
from the manifest as a change, hashes a corpus folder with its files framed by length (hash
version 2), and still verifies a manifest of hash version 1 (with a note)."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest
from helpers import BM25, DEMO, invoke, run_dir_of, write_config

from ragaudit.io.files import sha256_file

WRITTEN = (
    "runs.parquet",
    "issues.jsonl",
    "report.json",
    "report.html",
    "traces.log",
    "rag_traces.sqlite",
    "junit.xml",
    "summary.md",
    "questions.parquet",
)


@pytest.fixture
def finished(tmp_path):
    """A finished run over a copy of the handbook corpus (so that a test may change it)."""
    corpus = tmp_path / "corpus"
    shutil.copytree(DEMO / "corpus", corpus)
    config = write_config(tmp_path, BM25, items=1, seeds="[1]")
    config.write_text(config.read_text().replace(str(DEMO / "corpus"), str(corpus)))
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    run_dir = run_dir_of(result)
    assert invoke("verify", run_dir).exit_code == 0
    return run_dir, corpus


def manifest_of(run_dir) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


def rewrite(run_dir, change) -> None:
    manifest = manifest_of(run_dir)
    change(manifest)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


def framed_hash(folder) -> str:
    """Hash version 2, written out: per file in name order, its name's length (8 bytes, big
    endian), its name, and the sha256 of its bytes."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = path.relative_to(folder).as_posix().encode()
        digest.update(len(name).to_bytes(8, "big") + name + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def old_hash(folder) -> str:
    """Hash version 1: per file its name, a NUL and its bytes, all run together."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def test_every_output_the_run_wrote_is_recorded_and_checked(finished):
    run_dir, _ = finished
    assert set(manifest_of(run_dir)["outputs"]) == set(WRITTEN)
    parquet = run_dir / "runs.parquet"
    kept = parquet.read_bytes()
    parquet.unlink()
    gone = invoke("verify", run_dir)
    assert gone.exit_code == 5 and "output: runs.parquet is gone" in gone.stderr
    parquet.write_bytes(kept[:-1] + bytes([kept[-1] ^ 1]))
    changed = invoke("verify", run_dir)
    assert changed.exit_code == 5 and "output: runs.parquet changed since it was written" in changed.stderr
    parquet.write_bytes(kept)
    assert invoke("verify", run_dir).exit_code == 0


@pytest.mark.parametrize("outputs", [{}, None, {"report.json": "x"}])
def test_an_output_missing_from_the_manifest_is_a_change(finished, outputs):
    run_dir, _ = finished

    def change(manifest):
        if outputs is None:
            del manifest["outputs"]
        else:
            manifest["outputs"] = outputs

    rewrite(run_dir, change)
    result = invoke("verify", run_dir)
    assert result.exit_code == 5
    unrecorded = [name for name in WRITTEN if name not in (outputs or {})]
    assert f"output: {', '.join(unrecorded)} not recorded in manifest.json" in result.stderr


def test_the_corpus_hash_frames_each_file_so_moved_bytes_are_a_change(finished):
    run_dir, corpus = finished
    manifest = manifest_of(run_dir)
    assert manifest["hash_version"] == 2 and manifest["inputs"]["corpus"] == framed_hash(corpus)
    *_, before, last = sorted(p for p in corpus.rglob("*") if p.is_file())
    name = last.relative_to(corpus).as_posix().encode()
    moved = before.read_bytes() + name + b"\0" + last.read_bytes()
    old = old_hash(corpus)
    before.write_bytes(moved)  # the last document's `name \0 text` moved into the one before it
    last.unlink()
    assert old_hash(corpus) == old  # the same bytes to the old hash
    result = invoke("verify", run_dir)
    assert result.exit_code == 5 and f"corpus: {corpus} changed since the run" in result.stderr


def test_a_manifest_of_hash_version_1_still_verifies_with_a_note(finished):
    run_dir, corpus = finished

    def as_old(manifest):
        del manifest["hash_version"]
        manifest["inputs"]["corpus"] = old_hash(corpus)
        del manifest["outputs"]["runs.parquet"]

    rewrite(run_dir, as_old)
    result = invoke("verify", run_dir)
    assert result.exit_code == 0, result.output
    assert (
        f"note: {run_dir / 'manifest.json'}: written by an older ragaudit (hash version 1): its corpus folder was "
        "hashed the old way" in result.stderr
    )
    resumed = invoke("run", run_dir.parent.parent / "audit.toml", "--resume", run_dir, "--no-gate")
    assert resumed.exit_code == 0, resumed.output  # its inputs compare the way they were hashed
    assert manifest_of(run_dir).get("hash_version") is None
    assert invoke("verify", run_dir).exit_code == 0
    (corpus / "backups.md").write_text((corpus / "backups.md").read_text() + "\nA new sentence.\n")
    changed = invoke("verify", run_dir)
    assert changed.exit_code == 5 and "documents changed backups" in changed.stderr


@pytest.mark.parametrize("version", [3, "2", True, None])
def test_an_unknown_hash_version_is_a_damaged_manifest(finished, version):
    run_dir, _ = finished
    rewrite(run_dir, lambda manifest: manifest.update(hash_version=version))
    result = invoke("verify", run_dir)
    assert result.exit_code == 3 and "$.hash_version: expected hash_version 1 or 2" in result.stderr


def test_sha256_file_of_a_folder_is_the_framed_hash(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.md").write_bytes(b"one")
    (tmp_path / "b.md").write_bytes(b"")
    assert sha256_file(tmp_path) == framed_hash(tmp_path)
    assert sha256_file(tmp_path, version=1) == old_hash(tmp_path)
    assert sha256_file(tmp_path / "b.md") == hashlib.sha256(b"").hexdigest()


def verify_within(run_dir, seconds: float = 60, command: str = "verify"):
    """`ragaudit verify` (or `command`) in a process of its own, which must end well within `seconds`."""
    return subprocess.run(
        [sys.executable, "-m", "ragaudit", command, str(run_dir)], capture_output=True, text=True, timeout=seconds
    )


def test_an_input_path_that_names_a_device_or_a_fifo_is_a_change_never_read(finished, tmp_path):
    """`paths.gold = "/dev/zero"` read for ever; a FIFO waits for a writer that never comes."""
    run_dir, _ = finished
    rewrite(run_dir, lambda manifest: manifest["paths"].update(gold="/dev/zero"))
    zero = verify_within(run_dir)
    assert zero.returncode == 5, zero.stderr
    assert "gold: /dev/zero: expected a regular file, found a character device: not read" in zero.stderr
    attested = verify_within(run_dir, command="attest")
    assert attested.returncode == 5 and "gold: /dev/zero: expected a regular file" in attested.stderr
    assert not (run_dir / "attestation.intoto.jsonl").exists()
    fifo = tmp_path / "gold.fifo"
    os.mkfifo(fifo)
    rewrite(run_dir, lambda manifest: manifest["paths"].update(gold=str(fifo), config=str(fifo)))
    waiting = verify_within(run_dir)
    assert waiting.returncode == 5, waiting.stderr
    assert f"gold: {fifo}: expected a regular file, found a FIFO (named pipe): not read" in waiting.stderr
    assert f"config: {fifo}: expected a regular file, found a FIFO (named pipe): not read" in waiting.stderr


@pytest.mark.parametrize("name", ["../../../../dev/zero", "/etc/shadow", "notes/../report.json"])
def test_an_output_named_by_a_path_is_a_damaged_manifest_never_opened(finished, name):
    run_dir, _ = finished
    rewrite(run_dir, lambda manifest: manifest["outputs"].update({name: "0" * 64}))
    for command in ("verify", "attest"):
        result = verify_within(run_dir, command=command)
        assert result.returncode == 3, (command, result.stderr)
        assert "$.outputs: expected outputs named among the files a run writes (runs.parquet, " in result.stderr
        assert f"found {name!r}" in result.stderr and "Traceback" not in result.stderr
    assert not (run_dir / "attestation.intoto.jsonl").exists()


def test_a_file_of_the_run_that_became_a_symlink_out_of_it_is_a_change_never_read(finished, tmp_path):
    run_dir, _ = finished
    secret = tmp_path / "secret.txt"
    secret.write_text("not part of the run\n")
    for name in ("report.json", "traces.jsonl"):
        (run_dir / name).unlink()
        (run_dir / name).symlink_to(secret)
    result = invoke("verify", run_dir)
    assert result.exit_code == 5
    for name, label in (("report.json", "output"), ("traces.jsonl", "traces")):
        assert (
            f"{label}: {run_dir / name}: expected a file of {run_dir}, found a symlink to {secret}: not read"
            in result.stderr
        )


def test_a_corpus_link_out_of_its_folder_added_after_the_run_is_a_change_never_read(finished, tmp_path):
    run_dir, corpus = finished
    secret = tmp_path / "outside.md"
    secret.write_text("# Outside\n\nNot a document of the corpus.\n")
    (corpus / "linked.md").symlink_to(secret)
    hashed = sha256_file(corpus)
    secret.write_text("# Outside\n\nOther text: the link is never opened.\n")
    assert sha256_file(corpus) == hashed  # the link's text is hashed, not what it points to
    result = invoke("verify", run_dir)
    assert result.exit_code == 5
    assert (
        f"corpus: {corpus} changed and can no longer be read: {corpus / 'linked.md'}: expected a file inside the "
        f"corpus folder {corpus}, found a symlink to {secret}: not read" in result.stderr
    )


def test_the_support_params_a_run_scored_with_are_an_input_verify_names_once_changed(tmp_path):
    """`[support] params` decides every claim's support, so grounded_pass_rate's verdict: the run
    hashes the file with its inputs, verify names it once it changed (exit 5), `report` says it
    scores with it as it is now, and --resume refuses it."""
    from ragaudit.checks.metrics.support import PARAMS_PATH

    params = tmp_path / "support.json"
    params.write_bytes(PARAMS_PATH.read_bytes())
    config = write_config(tmp_path, BM25, items=1, seeds="[1]")
    config.write_text(config.read_text().replace("[embedder]", '[support]\nparams = "support.json"\n\n[embedder]'))
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    run_dir = run_dir_of(result)
    manifest = manifest_of(run_dir)
    assert manifest["paths"]["support_params"] == str(params)
    assert manifest["inputs"]["support_params"] == sha256_file(params)
    changed = json.loads(params.read_text())
    changed["mean"] = [m + 0.1 for m in changed["mean"]]
    params.write_text(json.dumps(changed))
    verified = invoke("verify", run_dir)
    assert verified.exit_code == 5
    assert f"support_params: {params} changed since the run (sha256 was" in verified.stderr
    rebuilt = invoke("report", run_dir, "--no-gate")
    assert rebuilt.exit_code == 0
    assert f"warning: support_params {params} changed since the run: the report reads it as it is now" in rebuilt.stderr
    resumed = invoke("run", config, "--resume", run_dir)
    assert resumed.exit_code == 2 and "support_params changed since the run" in resumed.stderr
