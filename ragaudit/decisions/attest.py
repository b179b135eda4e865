"""Release attestations of a run directory: `ragaudit attest` and `ragaudit verify --attestation`.

An attestation is a bundle of in-toto Statements v1 (https://in-toto.io/Statement/v1), one a line
(JSON Lines, `*.intoto.jsonl`): the statement of the run, then the gate's checks as `eval-result`
statements, one per gated pipeline (`ragaudit.decisions.evalresult`). The run's statement's `subject` lists
every file of the run directory (hidden files and attestations aside) with its sha256, and nothing
outside it: a symlink that leads out of the run directory stops `attest` (exit 3), unread. Its
predicate holds what the run was: the inputs' hashes (gold set, corpus, config, traces), the
models' ids and the hashes of their folders, each pipeline's index identity, the gate's verdict
and every check with its threshold and where the threshold came from, the versions, and the
command that made the run. With an ed25519 key each statement is wrapped in a DSSE envelope
(payloadType `application/vnd.in-toto+json`) signed over DSSE's pre-authentication encoding.

`ragaudit.decisions.attestcheck` reads an attestation back, refuses a damaged or foreign one (InputError,
exit 3), and returns every mismatch: a subject whose file is gone, differs or is no longer a regular file of the
run directory (never read then), a signature that does not verify with the given public key, or an
eval-result statement that says what the run directory does not (exit 5, each named); anything
the run directory holds that the attestation does not list is noted, as is a statement of another
predicate type (in-toto's bundles may hold any: it is not checked).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ragaudit.core.errors import InputError, Problem, UsageError
from ragaudit.core.gatechecks.registry import BY_NAME
from ragaudit.decisions import evalresult
from ragaudit.decisions.evalresult import STATEMENT_TYPE
from ragaudit.io.files import inside, output_target, sha256_file, sha256_within, write_atomic
from ragaudit.io.rundir import INPUTS

if TYPE_CHECKING:  # types only
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

PREDICATE_TYPE = "https://ragaudit.dev/attestation/audit-run/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
DEFAULT_NAME = "attestation.intoto.jsonl"  # in-toto's bundle: JSON Lines, one statement or envelope a line
PASSWORD_ENV = "RAGAUDIT_KEY_PASSWORD"  # the passphrase of an encrypted private key, if any
_ATTESTATION = re.compile(r".*\.intoto\.jsonl?$")
_HEX = re.compile(r"^[0-9a-f]{64}$")


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


def _source(check: dict[str, Any], configured: set[str], keys: set[str]) -> str:
    if isinstance(source := check.get("source"), str):
        return source
    entry = BY_NAME.get(check.get("name", ""))
    own = [k for k in (entry.keys if entry is not None else ()) if k in keys]
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


def _folder_hash(spec: str | None, resolve: Callable[[str], Path]) -> dict[str, Any] | None:
    if not spec:
        return None
    try:
        folder = resolve(spec)
    except Exception as exc:  # a model not on this machine: say so rather than invent a hash
        return {"id": spec, "sha256": None, "note": f"not found where attested: {exc}"}
    return {"id": spec, "sha256": sha256_file(folder, follow=True)}  # a model cache links its files to blobs


def predicate(run_dir: Path, manifest: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    from ragaudit.checks.metrics.embed import resolve_model
    from ragaudit.io.config_schema import SCHEMA

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
                **(_folder_hash(config.embedder.model if config else manifest.get("embed_model"), resolve_model) or {}),
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


def statement(run_dir: Path) -> dict[str, Any]:
    """The in-toto Statement of a run directory whose files are unchanged since the run."""
    from ragaudit.io import rundir

    run_dir = Path(run_dir)
    manifest = rundir.read_manifest(run_dir)
    report = _report(run_dir)
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": name, "digest": {"sha256": sha256_within(run_dir, name)}} for name in subject_files(run_dir)
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate(run_dir, manifest, report),
    }


def _report(run_dir: Path) -> dict[str, Any]:
    from ragaudit.io.jsonfiles import read_json_file

    report: dict[str, Any] = read_json_file(run_dir / "report.json", what="report")
    gate = report.get("gate")
    if (
        not isinstance(gate, dict)
        or not isinstance(gate.get("checks"), list)
        or not isinstance(gate.get("pipelines"), list)
    ):
        raise InputError(Problem(str(run_dir / "report.json"), "expected a report with a gate and its checks"))
    return report


def _serialize(value: dict[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def keyid(public_key: Ed25519PublicKey) -> str:
    """sha256 of the raw 32-byte ed25519 public key, in hex."""
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def load_private_key(path: Path) -> Ed25519PrivateKey:
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


def load_public_key(path: Path) -> Ed25519PublicKey:
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


def envelope(body: dict[str, Any], private_key: Ed25519PrivateKey) -> dict[str, Any]:
    """A DSSE envelope of the statement, signed with the ed25519 key."""
    payload = _serialize(body)
    signature = private_key.sign(pae(PAYLOAD_TYPE, payload))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [{"keyid": keyid(private_key.public_key()), "sig": base64.b64encode(signature).decode("ascii")}],
    }


@dataclass(frozen=True)
class Attestation:
    """An attestation written: where, and its run statement (the in-toto JSON document)."""

    path: Path
    statement: dict[str, Any]


def attest(run_dir: Path, *, key: Path | None = None, out: Path | None = None) -> Attestation:
    """Write the attestation of an unchanged run directory (to `out`, default RUN_DIR/DEFAULT_NAME)."""
    from ragaudit.core.errors import InputsChangedError
    from ragaudit.io import rundir, runfiles

    run_dir = Path(run_dir)
    if not (run_dir / runfiles.MANIFEST).is_file():
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
        results = evalresult.statements(run_dir, rundir.read_manifest(run_dir), _report(run_dir))
    lines = [envelope(b, private_key) if private_key else b for b in (body, *results)]
    write_atomic(
        target, "".join(json.dumps(d, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n" for d in lines)
    )
    return Attestation(target, body)
