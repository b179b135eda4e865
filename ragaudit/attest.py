"""Release attestations of a run directory: `ragaudit attest` and `ragaudit verify --attestation`.

An attestation is an in-toto Statement v1 (https://in-toto.io/Statement/v1). Its `subject` lists
every file of the run directory (hidden files and attestations aside) with its sha256, and nothing
outside it: a symlink that leads out of the run directory stops `attest` (exit 3), unread. Its
predicate holds what the run was: the inputs' hashes (gold set, corpus, config, traces), the
models' ids and the hashes of their folders, each pipeline's index identity, the gate's verdict
and every check with its threshold and where the threshold came from, the versions, and the
command that made the run. With an ed25519 key it is wrapped in a DSSE envelope (payloadType
`application/vnd.in-toto+json`) signed over DSSE's pre-authentication encoding.

`check` reads an attestation back, refuses a damaged or foreign one (InputError, exit 3), and
returns every mismatch: a subject whose file is gone, differs or is no longer a regular file of the
run directory (never read then), or a signature that does not verify with the given public key
(exit 5, each named); anything the run directory holds that the attestation does not list is noted.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ragaudit.errors import InputError, Problem, UsageError, describe
from ragaudit.io.files import NotAFile, inside, output_target, same_file, sha256_file, sha256_within, write_atomic
from ragaudit.rundir import INPUTS, LOCK, OWNER

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://ragaudit.dev/attestation/audit-run/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
DEFAULT_NAME = "attestation.intoto.jsonl"  # one line: the in-toto bundle convention, one envelope a line
PASSWORD_ENV = "RAGAUDIT_KEY_PASSWORD"  # the passphrase of an encrypted private key, if any
_ATTESTATION = re.compile(r".*\.intoto\.jsonl?$")
_HEX = re.compile(r"^[0-9a-f]{64}$")
# gate checks whose threshold is a combination of [gate] keys; every other check's key is its name
_THRESHOLD_KEYS = {"coverage_pass_rate": ("coverage_min", "coverage_pass_rate")}


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what a signature covers."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(body), body)


def _entries(run_dir: Path) -> list[tuple[str, Path]]:
    """Everything below the run directory but its folders, by '/'-separated relative name, in order
    (a symlink to a folder included: it is not followed)."""
    return [
        (path.relative_to(run_dir).as_posix(), path)
        for path in sorted(run_dir.rglob("*"))
        if path.is_symlink() or not path.is_dir()
    ]


def _of_the_run(name: str) -> bool:
    """Whether a file of this name is part of the run: hidden files (the lock, work folders) and
    attestations are not."""
    return not any(part.startswith(".") for part in name.split("/")) and not _ATTESTATION.match(name.rsplit("/", 1)[-1])


def subject_files(run_dir: Path) -> list[str]:
    """The run directory's files as '/'-separated relative names, in order (hidden files and
    attestations aside). A symlink leading out of the run directory is not one of them and is
    never read: InputError naming each, as nothing is attested while one is there."""
    run_dir = Path(run_dir)
    names, outside = [], []
    for name, path in _entries(run_dir):
        if not _of_the_run(name):
            continue
        if not inside(run_dir, path):
            outside.append(
                Problem(
                    str(path),
                    f"expected a file of the run, found a symlink to {os.path.realpath(path)}: "
                    "not attested (remove the link, or put the file itself in the run directory)",
                )
            )
        elif path.is_file():
            names.append(name)
    if outside:
        raise InputError(outside)
    return names


def _added(run_dir: Path, attested: set[str], attestation: Path) -> list[str]:
    """What the run directory holds that the attestation does not list (its lock and the
    attestation itself aside), a symlink out of the run directory said to be one (not read)."""
    run_dir = Path(run_dir)
    found = []
    for name, path in _entries(run_dir):
        if name in attested or name in (LOCK, OWNER) or same_file(path, attestation):
            continue
        found.append(name if inside(run_dir, path) else f"{name} (a symlink out of the run directory, not read)")
    return found


def _source(check: dict, configured: set[str], keys: set[str]) -> str:
    if isinstance(check.get("source"), str):
        return check["source"]
    own = [k for k in _THRESHOLD_KEYS.get(check.get("name", ""), (check.get("name", ""),)) if k in keys]
    if not own:
        return "built-in"  # a rule of the gate itself: a pipeline ran, parity held, drift against the baseline
    return "config" if any(k in configured for k in own) else "default"


def _configured_gate(config_path: str | None) -> set[str]:
    import tomllib

    try:
        with open(config_path or "", "rb") as handle:
            gate = tomllib.load(handle).get("gate")
    except (OSError, tomllib.TOMLDecodeError):
        return set()
    return set(gate) if isinstance(gate, dict) else set()


def _folder_hash(spec: str | None, resolve) -> dict | None:
    if not spec:
        return None
    try:
        folder = resolve(spec)
    except Exception as exc:  # a model not on this machine: say so rather than invent a hash
        return {"id": spec, "sha256": None, "note": f"not found where attested: {exc}"}
    return {"id": spec, "sha256": sha256_file(folder, follow=True)}  # a model cache links its files to blobs


def predicate(run_dir: Path, manifest: dict, report: dict) -> dict:
    from ragaudit.io.config import SCHEMA
    from ragaudit.metrics.embed import resolve_model

    meta, paths, inputs = report.get("meta") or {}, manifest["paths"], manifest["inputs"]
    configured, keys = _configured_gate(paths.get("config")), set(SCHEMA["gate"])
    config = None
    try:  # unchanged since the run (attest checked it): the models it names are the run's
        from ragaudit.io.config import load_config

        config = load_config(paths["config"])
    except InputError:
        pass
    support_path = config.support.model if config else None
    return {
        "run": {
            "run_dir": Path(run_dir).resolve().name,
            "started": manifest.get("started"),
            "finished": manifest.get("finished"),
            "seeds": manifest.get("seeds"),
            "paraphrases": manifest.get("paraphrases"),
        },
        "inputs": {
            **{
                n: {"path": paths[n], "sha256": inputs[n]}
                for n in ("gold", "corpus", "config", *INPUTS[3:])
                if n in inputs
            },
            "traces": {"path": "traces.jsonl", "sha256": manifest.get("traces_sha256")},
        },
        "models": {
            "embedder": {
                **(_folder_hash(config.model if config else manifest.get("embed_model"), resolve_model) or {}),
                "model_id": manifest.get("embed_model_id"),
            },
            "support": {
                "model_id": meta.get("support_model"),
                **({"folder": _folder_hash(str(support_path), Path)} if support_path else {}),
            },
        },
        "index": manifest.get("index") or {},
        "verdict": report["gate"]["verdict"],
        "checks": [
            {
                "pipeline": c.get("pipeline"),
                "name": c.get("name"),
                "threshold": c.get("threshold"),
                "source": _source(c, configured, keys),
                "value": c.get("value"),
                "passed": c.get("passed"),
            }
            for c in report["gate"]["checks"]
        ],
        "versions": meta.get("versions") or {"ragaudit": manifest.get("ragaudit_version")},
        "command": manifest.get("command"),
    }


def statement(run_dir: Path) -> dict:
    """The in-toto Statement of a run directory whose files are unchanged since the run."""
    from ragaudit import rundir
    from ragaudit.io.jsonfiles import read_json_file

    run_dir = Path(run_dir)
    manifest = rundir.read_manifest(run_dir)
    report = read_json_file(run_dir / "report.json", what="report")
    if not isinstance(report.get("gate"), dict) or not isinstance(report["gate"].get("checks"), list):
        raise InputError(Problem(str(run_dir / "report.json"), "expected a report with a gate and its checks"))
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": name, "digest": {"sha256": sha256_within(run_dir, name)}} for name in subject_files(run_dir)
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate(run_dir, manifest, report),
    }


def _serialize(value: dict) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def keyid(public_key) -> str:
    """sha256 of the raw 32-byte ed25519 public key, in hex."""
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def load_private_key(path: Path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    data = _read_key(path)
    password = os.environ.get(PASSWORD_ENV)
    try:
        key = serialization.load_pem_private_key(data, password=password.encode() if password else None)
    except TypeError as exc:  # encrypted without a password, or a password for a plain key
        raise InputError(
            Problem(str(path), f"expected an ed25519 private key (PEM): {exc} (${PASSWORD_ENV})")
        ) from None
    except ValueError as exc:
        raise InputError(
            Problem(str(path), f"expected an ed25519 private key (PEM), found none readable ({exc})")
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(Problem(str(path), f"expected an ed25519 private key, found {type(key).__name__}"))
    return key


def load_public_key(path: Path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(_read_key(path))
    except ValueError as exc:
        raise InputError(
            Problem(str(path), f"expected an ed25519 public key (PEM), found none readable ({exc})")
        ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise InputError(Problem(str(path), f"expected an ed25519 public key, found {type(key).__name__}"))
    return key


def _read_key(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(Problem(str(path), f"cannot read key: {exc.strerror}")) from None


def envelope(body: dict, private_key) -> dict:
    """A DSSE envelope of the statement, signed with the ed25519 key."""
    payload = _serialize(body)
    signature = private_key.sign(pae(PAYLOAD_TYPE, payload))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [{"keyid": keyid(private_key.public_key()), "sig": base64.b64encode(signature).decode("ascii")}],
    }


def attest(run_dir: Path, *, key: Path | None = None, out: Path | None = None) -> tuple[Path, dict]:
    """Write the attestation of an unchanged run directory (to `out`, default RUN_DIR/DEFAULT_NAME);
    returns where, and the statement."""
    from ragaudit import rundir
    from ragaudit.errors import InputsChangedError

    run_dir = Path(run_dir)
    if not (run_dir / rundir.MANIFEST).is_file():
        raise InputError(Problem(str(run_dir), "expected a run directory with manifest.json, found none"))
    target = Path(out) if out else run_dir / DEFAULT_NAME
    if inside(run_dir, target) and not _ATTESTATION.match(target.name):
        raise UsageError(
            f"--out {target}: expected an attestation outside the run directory, or named *.intoto.jsonl in it; "
            "another file there would be, or replace, a file of the run"
        )
    output_target(target)  # a folder, a FIFO or a device is refused before any hashing
    private_key = load_private_key(key) if key else None  # a bad key stops before any hashing
    with rundir.locked(run_dir):
        changed = rundir.changes(run_dir)
        if changed:
            raise InputsChangedError("cannot attest a run that changed since it ran: " + "; ".join(changed))
        body = statement(run_dir)
    document = envelope(body, private_key) if private_key else body
    write_atomic(target, json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n")
    return target, body


@dataclass
class Checked:
    """What `check` found: the mismatches (exit 5), and notes that are not failures."""

    statement: dict
    signed: bool
    verified_with: str | None = None
    mismatches: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)  # inputs not on this machine


def _foreign(path: Path, message: str, where: str = "$") -> InputError:
    return InputError(Problem(str(path), message, path=where))


def _decode(path: Path, text: str, where: str) -> bytes:
    try:  # DSSE readers accept the standard and the URL-safe alphabet, padded or not
        standard = text.replace("-", "+").replace("_", "/")
        return base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except (ValueError, TypeError):
        raise _foreign(path, "expected base64, found other characters", where) from None


def read_attestation(path: Path) -> tuple[dict, dict | None]:
    """The statement of an attestation file, and its DSSE envelope when it has one. A damaged or
    foreign file is an InputError naming what is wrong."""
    from ragaudit.io.jsonfiles import read_json_file
    from ragaudit.io.jsonl import JsonDefect
    from ragaudit.io.jsonl import decode as decode_json

    document = read_json_file(path, what="attestation")
    envelope_doc = None
    if "payloadType" in document or "signatures" in document:
        envelope_doc = document
        if document.get("payloadType") != PAYLOAD_TYPE:
            raise _foreign(
                path,
                f"expected payloadType {PAYLOAD_TYPE}, found {describe(document.get('payloadType'))}",
                "$.payloadType",
            )
        if not isinstance(document.get("payload"), str):
            raise _foreign(path, f"expected a base64 payload, found {describe(document.get('payload'))}", "$.payload")
        signatures = document.get("signatures")
        if not isinstance(signatures, list) or not all(
            isinstance(s, dict) and isinstance(s.get("sig"), str) for s in signatures
        ):
            raise _foreign(path, "expected signatures as an array of {keyid, sig}", "$.signatures")
        payload = _decode(path, document["payload"], "$.payload")
        try:
            document, _ = decode_json(payload)
        except JsonDefect as defect:  # not UTF-8, not JSON
            raise _foreign(
                path, f"expected an in-toto statement as the payload: {defect.message}", "$.payload"
            ) from None
        if not isinstance(document, dict):
            raise _foreign(
                path, f"expected an in-toto statement as the payload, found {describe(document)}", "$.payload"
            )
    if document.get("_type") != STATEMENT_TYPE:
        raise _foreign(
            path,
            f"expected an in-toto statement ({STATEMENT_TYPE}), found _type {describe(document.get('_type'))}",
            "$._type",
        )
    if document.get("predicateType") != PREDICATE_TYPE:
        raise _foreign(
            path,
            f"expected a ragaudit attestation ({PREDICATE_TYPE}), found predicateType {describe(document.get('predicateType'))}",
            "$.predicateType",
        )
    subjects = document.get("subject")
    if not isinstance(subjects, list) or not subjects:
        raise _foreign(path, f"expected subject as a non-empty array, found {describe(subjects)}", "$.subject")
    for i, s in enumerate(subjects):
        name, digest = (s.get("name"), s.get("digest")) if isinstance(s, dict) else (None, None)
        if not isinstance(name, str) or not name or name.startswith("/") or ".." in name.split("/"):
            raise _foreign(
                path, f"expected a file name inside the run directory, found {describe(name)}", f"$.subject[{i}].name"
            )
        if (
            not isinstance(digest, dict)
            or not isinstance(digest.get("sha256"), str)
            or not _HEX.match(digest["sha256"])
        ):
            raise _foreign(path, "expected a sha256 digest of 64 lowercase hex digits", f"$.subject[{i}].digest")
    return document, envelope_doc


def check(run_dir: Path, path: Path, pubkey: Path | None = None) -> Checked:
    """Every mismatch between a run directory and its attestation (and the signature, with `pubkey`)."""
    body, envelope_doc = read_attestation(path)
    public_key = load_public_key(pubkey) if pubkey else None
    found = Checked(body, signed=envelope_doc is not None)
    if public_key is not None:
        if envelope_doc is None:
            found.mismatches.append(f"signature: {path} is not signed (a bare statement); expected a DSSE envelope")
        else:
            from cryptography.exceptions import InvalidSignature

            message = pae(PAYLOAD_TYPE, _decode(path, envelope_doc["payload"], "$.payload"))
            verified = False
            for i, signature in enumerate(envelope_doc["signatures"]):
                try:
                    public_key.verify(_decode(path, signature["sig"], f"$.signatures[{i}].sig"), message)
                    verified = True
                except InvalidSignature:
                    continue
            if verified:
                found.verified_with = keyid(public_key)
            else:
                found.mismatches.append(
                    f"signature: no signature of {path} verifies with {pubkey} (another key, or the attestation "
                    "changed after it was signed)"
                )
    elif envelope_doc is not None:
        found.notes.append(f"signature not checked: give --pubkey to check the signature of {path}")
    run_dir = Path(run_dir)
    attested = set()
    for s in body["subject"]:
        name, digest = s["name"], s["digest"]["sha256"]
        attested.add(name)
        if not (run_dir / name).exists():
            found.mismatches.append(f"attested file {name} is gone")
            continue
        try:
            now = sha256_within(run_dir, name)
        except NotAFile as exc:
            found.mismatches.append(f"attested file {name} is no longer a file of the run: {exc.problems[0]}")
            continue
        if now != digest:
            found.mismatches.append(f"attested file {name} changed (sha256 was {digest[:12]}…)")
    extra = _added(run_dir, attested, Path(path))
    if extra:
        found.notes.append(f"not attested (added since): {', '.join(extra[:10])}{' …' if len(extra) > 10 else ''}")
    return found


def verify(run_dir: Path, path: Path, pubkey: Path | None = None) -> Checked:
    """`ragaudit verify --attestation`: the run directory against its manifest, as `verify` checks it,
    and against the attestation. Inputs missing from their recorded paths (the run directory
    checked on another machine) are noted, not failed: the attestation holds their hashes."""
    from ragaudit import rundir

    found = check(run_dir, path, pubkey)
    try:
        changed = rundir.changes(run_dir, absent=found.absent)
    except InputError as exc:  # a damaged manifest: when the attestation names it, that is the answer
        if not found.mismatches:
            raise
        changed = [f"manifest: {problem}" for problem in exc.problems]
    found.mismatches = changed + found.mismatches
    if found.absent:
        found.notes.append(f"inputs not on this machine, not checked: {'; '.join(found.absent)}")
    return found


def check_options(attestation: Path | None, pubkey: Path | None) -> None:
    if pubkey is not None and attestation is None:
        raise UsageError("--pubkey checks the signature of an attestation: give --attestation FILE too")
