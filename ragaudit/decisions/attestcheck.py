"""`ragaudit verify --attestation`: a run directory held to an attestation `ragaudit attest` wrote.

An attestation file is a bundle of in-toto statements, one a line, each bare or in a DSSE envelope
(`ragaudit.decisions.attest`); a file of one JSON document, on one line or several, is a bundle of one. The
bundle must hold exactly one statement of the run (predicate type `attest.PREDICATE_TYPE`); its
eval-result statements are held to the run directory (`ragaudit.decisions.evalresult.check`), and a statement
of any other predicate type is noted and not checked, as in-toto's bundle specification asks of a
reader that does not know it. A damaged line or a foreign file is an InputError (exit 3) naming the
line and what is wrong.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragaudit.core.errors import InputError, Problem, UsageError, describe
from ragaudit.decisions import evalresult
from ragaudit.decisions.attest import (
    _HEX,
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    _entries,
    keyid,
    load_public_key,
    pae,
)
from ragaudit.decisions.evalresult import STATEMENT_TYPE
from ragaudit.io.files import NotAFile, inside, same_file, sha256_within
from ragaudit.io.rundir import LOCK, OWNER

if TYPE_CHECKING:  # types only
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


@dataclass
class Checked:
    """What `check` found: the mismatches (exit 5), and notes that are not failures."""

    statement: dict[str, Any]
    signed: bool
    verified_with: str | None = None
    mismatches: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)  # inputs not on this machine
    results: int = 0  # eval-result statements checked

    def checked(self, run_dir: Path, attestation: Path) -> list[str]:
        """What was checked, in the words `verify` prints."""
        what = "traces and outputs" if self.absent else "gold, corpus, config, traces and outputs"
        results = f", {self.results} eval-result statement{'s' if self.results != 1 else ''}" if self.results else ""
        signed = f", signature verified with key {self.verified_with[:16]}…" if self.verified_with else ""
        files = len(self.statement["subject"])
        return [f"unchanged: {what} of {run_dir}", f"attested: {files} files match {attestation}{results}{signed}"]


@dataclass(frozen=True)
class Line:
    """One statement of a bundle: where it is (its line, None for a file of one document), the
    statement, and its DSSE envelope when it has one."""

    line: int | None
    statement: dict[str, Any]
    envelope: dict[str, Any] | None

    def named(self, path: Path) -> str:
        return f"{path}" if self.line is None else f"{path}:{self.line}"


def _foreign(path: Path, message: str, where: str = "$", line: int | None = None) -> InputError:
    return InputError(Problem(str(path), message, line, path=where))


def _decode(path: Path, text: str, where: str, line: int | None = None) -> bytes:
    try:  # DSSE readers accept the standard and the URL-safe alphabet, padded or not
        standard = text.replace("-", "+").replace("_", "/")
        return base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except (ValueError, TypeError):
        raise _foreign(path, "expected base64, found other characters", where, line) from None


def _documents(path: Path) -> list[tuple[int | None, object]]:
    """The JSON documents of the file: the whole file as one when it is one (a statement printed
    over several lines, say), else one a line (blank lines skipped)."""
    from ragaudit.io.jsonfiles import open_input
    from ragaudit.io.jsonl import BOM, JsonDefect, decode

    name = str(path)
    with open_input(name, what="attestation") as handle:
        try:
            data = handle.read()
        except OSError as exc:
            raise InputError(Problem(name, f"cannot read attestation: {exc.strerror}")) from None
    data = data[len(BOM) :] if data.startswith(BOM) else data
    if not data.strip():
        raise InputError(Problem(name, "expected an attestation in JSON, found an empty file"))
    try:
        return [(None, decode(data)[0])]
    except JsonDefect as whole:
        lines = data.split(b"\n")
        if sum(1 for line in lines if line.strip()) < 2:
            raise InputError(Problem(name, whole.message, whole.line, whole.path)) from None
    found: list[tuple[int | None, object]] = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                found.append((number, decode(line)[0]))
            except JsonDefect as defect:
                raise InputError(Problem(name, defect.message, number, defect.path)) from None
    return found


def _statement(path: Path, line: int | None, document: object) -> Line:
    """A document of the bundle as a statement, and its envelope when it is one."""
    from ragaudit.io.jsonl import JsonDefect
    from ragaudit.io.jsonl import decode as decode_json

    if not isinstance(document, dict):
        raise _foreign(path, f"expected an in-toto statement or envelope, found {describe(document)}", line=line)
    envelope_doc = None
    if "payloadType" in document or "signatures" in document:
        envelope_doc = document
        if document.get("payloadType") != PAYLOAD_TYPE:
            found = describe(document.get("payloadType"))
            raise _foreign(path, f"expected payloadType {PAYLOAD_TYPE}, found {found}", "$.payloadType", line)
        if not isinstance(document.get("payload"), str):
            found = describe(document.get("payload"))
            raise _foreign(path, f"expected a base64 payload, found {found}", "$.payload", line)
        signatures = document.get("signatures")
        if not isinstance(signatures, list) or not all(
            isinstance(s, dict) and isinstance(s.get("sig"), str) for s in signatures
        ):
            raise _foreign(path, "expected signatures as an array of {keyid, sig}", "$.signatures", line)
        payload = _decode(path, document["payload"], "$.payload", line)
        try:
            document, _ = decode_json(payload)
        except JsonDefect as defect:  # not UTF-8, not JSON
            message = f"expected an in-toto statement as the payload: {defect.message}"
            raise _foreign(path, message, "$.payload", line) from None
        if not isinstance(document, dict):
            message = f"expected an in-toto statement as the payload, found {describe(document)}"
            raise _foreign(path, message, "$.payload", line)
    if document.get("_type") != STATEMENT_TYPE:
        found = describe(document.get("_type"))
        raise _foreign(path, f"expected an in-toto statement ({STATEMENT_TYPE}), found _type {found}", "$._type", line)
    if not isinstance(document.get("predicateType"), str):
        found = describe(document.get("predicateType"))
        raise _foreign(path, f"expected a predicateType, found {found}", "$.predicateType", line)
    return Line(line, document, envelope_doc)


def _run_subjects(path: Path, line: int | None, document: dict[str, Any]) -> None:
    """The run's statement names files inside the run directory, each with a sha256."""
    subjects = document.get("subject")
    if not isinstance(subjects, list) or not subjects:
        raise _foreign(path, f"expected subject as a non-empty array, found {describe(subjects)}", "$.subject", line)
    for i, s in enumerate(subjects):
        name, digest = (s.get("name"), s.get("digest")) if isinstance(s, dict) else (None, None)
        if not isinstance(name, str) or not name or name.startswith("/") or ".." in name.split("/"):
            message = f"expected a file name inside the run directory, found {describe(name)}"
            raise _foreign(path, message, f"$.subject[{i}].name", line)
        if (
            not isinstance(digest, dict)
            or not isinstance(digest.get("sha256"), str)
            or not _HEX.match(digest["sha256"])
        ):
            raise _foreign(path, "expected a sha256 digest of 64 lowercase hex digits", f"$.subject[{i}].digest", line)


def read_bundle(path: Path) -> tuple[Line, list[Line]]:
    """The statement of the run of an attestation file, and its other statements. A damaged or
    foreign file is an InputError naming what is wrong."""
    path = Path(path)
    lines = [_statement(path, line, document) for line, document in _documents(path)]
    runs = [line for line in lines if line.statement["predicateType"] == PREDICATE_TYPE]
    if not runs:
        first = lines[0]
        found = describe(first.statement["predicateType"])
        raise _foreign(
            path,
            f"expected a ragaudit attestation ({PREDICATE_TYPE}), found predicateType {found}",
            "$.predicateType",
            first.line,
        )
    if len(runs) > 1:
        where = ", ".join(str(line.line) for line in runs)
        raise _foreign(path, f"expected one statement of the run, found {len(runs)} (lines {where})", line=runs[1].line)
    _run_subjects(path, runs[0].line, runs[0].statement)
    return runs[0], [line for line in lines if line is not runs[0]]


def read_attestation(path: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The statement of the run of an attestation file, and its DSSE envelope when it has one."""
    run, _ = read_bundle(path)
    return run.statement, run.envelope


def _signature(path: Path, line: Line, public_key: Ed25519PublicKey, pubkey: Path, what: str) -> str | None:
    """Why the statement's signature does not verify with the key, or None when it does."""
    from cryptography.exceptions import InvalidSignature

    if line.envelope is None:
        return f"signature: {what}{line.named(path)} is not signed (a bare statement); expected a DSSE envelope"
    message = pae(PAYLOAD_TYPE, _decode(path, line.envelope["payload"], "$.payload", line.line))
    for i, signature in enumerate(line.envelope["signatures"]):
        try:
            public_key.verify(_decode(path, signature["sig"], f"$.signatures[{i}].sig", line.line), message)
            return None
        except InvalidSignature:
            continue
    return (
        f"signature: no signature of {what}{line.named(path)} verifies with {pubkey} (another key, or the "
        "attestation changed after it was signed)"
    )


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


def check(run_dir: Path, path: Path, pubkey: Path | None = None) -> Checked:
    """Every mismatch between a run directory and its attestation (and the signatures, with `pubkey`)."""
    run, others = read_bundle(path)
    results = [line for line in others if line.statement["predicateType"] == evalresult.EVAL_RESULT_TYPE]
    public_key = load_public_key(pubkey) if pubkey else None
    found = Checked(run.statement, signed=run.envelope is not None, results=len(results))
    if public_key is not None:
        assert pubkey is not None
        said = [_signature(path, run, public_key, pubkey, "")]
        said += [_signature(path, line, public_key, pubkey, "the eval-result statement ") for line in results]
        found.mismatches += [why for why in said if why is not None]
        if said[0] is None:
            found.verified_with = keyid(public_key)
    elif any(line.envelope is not None for line in (run, *results)):
        found.notes.append(f"signature not checked: give --pubkey to check the signature of {path}")
    for line in others:
        if line not in results:
            found.notes.append(f"not checked: {line.named(path)} is a statement of {line.statement['predicateType']}")
    run_dir = Path(run_dir)
    attested = set()
    for s in run.statement["subject"]:
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
    mismatches, notes = evalresult.check(run_dir, [(line.statement, line.named(Path(path))) for line in results])
    found.mismatches += mismatches
    found.notes += notes
    extra = _added(run_dir, attested, Path(path))
    if extra:
        found.notes.append(f"not attested (added since): {', '.join(extra[:10])}{' …' if len(extra) > 10 else ''}")
    return found


def verify(run_dir: Path, path: Path, pubkey: Path | None = None) -> Checked:
    """`ragaudit verify --attestation`: the run directory against its manifest, as `verify` checks it,
    and against the attestation. Inputs missing from their recorded paths (the run directory
    checked on another machine) are noted, not failed: the attestation holds their hashes."""
    from ragaudit.io import rundir

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
