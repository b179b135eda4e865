"""A run directory: its manifest, its lock and what `ragaudit verify` checks (docs/reference.md §5, §6).

The manifest records the sha256 of the inputs (config, gold set, corpus, and each corpus
document), of `traces.jsonl` as the runner finished it, and of every output. Only the runner
stamps the traces; `report` rebuilds outputs and re-stamps only them, so a changed trace file
is always caught by `verify`. One process owns a run directory at a time (an OS file lock).

`hash_version` says how the inputs were hashed (`ragaudit.io.files.HASH_VERSION`): 2 frames a
corpus folder's files by length, so no moving of bytes between documents keeps its hash. A
manifest without it (version 1, older ragaudit) still verifies, the old way, with a note.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, cast

from ragaudit.core.errors import InputError, Problem
from ragaudit.io.files import HASH_VERSION, NotAFile, sha256_file, sha256_within, write_atomic
from ragaudit.io.runfiles import MANIFEST, OUTPUTS, TRACES

if TYPE_CHECKING:
    from ragaudit.core.types import Corpus
    from ragaudit.io.config import Config

CALIBRATION = "calibration"  # the input a run has when its [gate] reads one (`[gate] from`)
# every input a run hashes: the three it always has, then those its config may name (each decides
# verdicts: the gate's thresholds of `[gate] from`, the support scorer's weights of `[support] params`)
INPUTS = ("config", "gold", "corpus", CALIBRATION, "support_params", "labels")
LOCK = ".lock"
OWNER = ".lock.owner"
# what every finished run writes (compare.* only with more than one pipeline); hash version 1
# manifests did not record runs.parquet, runs before questions.parquet did not write it
WRITTEN = {
    2: tuple(name for name in OUTPUTS if not name.startswith("compare.") and name != "questions.parquet"),
    1: tuple(
        name
        for name in OUTPUTS
        if not name.startswith("compare.") and name not in ("runs.parquet", "questions.parquet")
    ),
}


class RunDirBusyError(InputError):
    """Another process holds the run directory's lock."""


@contextlib.contextmanager
def locked(run_dir: Path) -> Iterator[None]:
    """Hold the run directory's lock for the block; a second holder is refused with the pid of the first."""
    from filelock import FileLock, Timeout

    run_dir = Path(run_dir)
    lock = FileLock(run_dir / LOCK)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        owner = (run_dir / OWNER).read_text().strip() if (run_dir / OWNER).exists() else "unknown"
        raise RunDirBusyError(
            Problem(str(run_dir), f"expected a run directory no other process is using, found it locked by pid {owner}")
        ) from None
    try:
        (run_dir / OWNER).write_text(f"{os.getpid()}\n")
        yield
    finally:
        (run_dir / OWNER).unlink(missing_ok=True)
        lock.release()


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The manifest; a missing or damaged one is an input error (exit 3)."""
    from ragaudit.io.jsonfiles import read_json_file

    path = Path(run_dir) / MANIFEST
    manifest: dict[str, Any] = read_json_file(path, what="manifest")
    for key in ("inputs", "paths"):
        value = manifest.get(key)
        if not isinstance(value, dict) or not all(isinstance(value.get(n), str) for n in ("config", "gold", "corpus")):
            raise InputError(
                Problem(
                    str(path),
                    f"expected {key} with string config, gold and corpus entries, found "
                    f"{'none' if value is None else type(value).__name__}",
                    path=f"$.{key}",
                )
            )
    for name in INPUTS[3:]:
        found = [manifest[key].get(name) for key in ("inputs", "paths")]
        if found != [None, None] and not all(isinstance(v, str) for v in found):
            raise InputError(
                Problem(
                    str(path), f"expected inputs and paths to hold {name} both, as strings", path=f"$.inputs.{name}"
                )
            )
    if not isinstance(manifest.get("config_path"), str):
        raise InputError(Problem(str(path), "expected a config_path string, found none", path="$.config_path"))
    for key, kinds in _OPTIONAL.items():
        if key in manifest and not isinstance(manifest[key], kinds):
            raise InputError(
                Problem(
                    str(path),
                    f"expected {key} to be {' or '.join(_NAMES[k] for k in kinds)}, found "
                    f"{type(manifest[key]).__name__}",
                    path=f"$.{key}",
                )
            )
    strange = [name for name in manifest.get("outputs") or {} if name not in OUTPUTS]
    if strange:  # verify opens each output by its name: only the run's own files, never a path
        raise InputError(
            Problem(
                str(path),
                f"expected outputs named among the files a run writes ({', '.join(OUTPUTS)}), found {strange[0]!r}",
                path="$.outputs",
            )
        )
    for key in ("index", "outputs", "documents", "aborted"):
        bad = [
            name
            for name, value in (manifest.get(key) or {}).items()
            if not isinstance(value, dict if key == "index" else str) and value is not None
        ]
        if bad:
            raise InputError(
                Problem(str(path), f"expected {key} entries of the right type, found {bad[0]!r}", path=f"$.{key}")
            )
    version = manifest.get("hash_version", 1)
    if type(version) is not int or version not in WRITTEN:
        raise InputError(
            Problem(
                str(path),
                f"expected hash_version {' or '.join(map(str, sorted(WRITTEN)))}, found {json.dumps(version)} "
                "(written by a newer ragaudit?)",
                path="$.hash_version",
            )
        )
    return manifest


def hash_version(manifest: dict[str, Any]) -> int:
    """How the manifest's inputs were hashed: its hash_version, 1 when it has none."""
    version: int = manifest.get("hash_version", 1)
    return version


_OPTIONAL = {
    "index": (dict, type(None)),
    "outputs": (dict,),
    "documents": (dict,),
    "aborted": (dict,),
    "traces_sha256": (str, type(None)),
    "baseline": (str, type(None)),
    "history": (str,),
    "seeds": (list,),
    "gold_checked": (bool,),
    "started": (str,),
    "finished": (str,),
    "command": (list,),
}
_NAMES = {dict: "an object", type(None): "null", str: "a string", list: "an array", bool: "a boolean"}


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    write_atomic(Path(run_dir) / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True, allow_nan=False) + "\n")


def update_manifest(run_dir: Path, **fields: Any) -> dict[str, Any]:
    manifest = read_manifest(run_dir)
    manifest.update(fields)
    write_manifest(run_dir, manifest)
    return manifest


def document_hashes(corpus: Corpus) -> dict[str, str]:
    """Each corpus document's text hash, so `verify` can say which documents changed."""
    return {
        doc_id: hashlib.sha256(doc.text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        for doc_id, doc in sorted(corpus.documents.items())
    }


def input_paths(config: Config) -> dict[str, Path]:
    """A config's inputs by name (INPUTS): config, gold, corpus, and the files its `[gate] from`,
    `[support] params` and `[labels] path` name, when it names them."""
    calibration = config.calibration.path if config.calibration is not None else None
    named = (
        config.path,
        config.audit.gold,
        config.audit.corpus,
        calibration,
        config.support.params,
        config.labels.path,
    )
    return {name: Path(path) for name, path in zip(INPUTS, named) if path is not None}


def input_hashes(config: Config, *, version: int = HASH_VERSION) -> dict[str, str]:
    """The sha256 of a config's inputs by name (`input_paths`), as a manifest records them: no file
    is parsed, the corpus is not loaded."""
    return {name: sha256_file(p, version=version) for name, p in input_paths(config).items()}


def input_record(config: Config, corpus: Corpus, *, version: int = HASH_VERSION) -> dict[str, Any]:
    """What the manifest records of a run's inputs, hashed as `version` says."""
    paths = input_paths(config)
    return {
        "hash_version": version,
        "config_path": str(Path(cast(Path, config.path)).resolve()),  # a run's config was read from a file
        "inputs": input_hashes(config, version=version),
        "paths": {name: str(Path(p).resolve()) for name, p in paths.items()},
        "documents": document_hashes(corpus),
    }


def gating_changes(manifest: dict[str, Any], config: Config) -> list[str]:
    """What decides verdicts besides the traces, changed since the run the manifest records, in
    words: its config, the support params its `[support] params` names, and the calibration its
    `[gate] from` names (a run recorded before they were hashed names none). `ragaudit report`
    says these as it scores and gates again."""
    from ragaudit.io.calibration import regated

    now, recorded = input_paths(config), manifest["inputs"]
    found = [
        f"{name} {now[name]} changed since the run: the report reads it as it is now"
        for name in ("config", "support_params", "labels")
        if name in now and isinstance(recorded.get(name), str) and sha256_file(now[name]) != recorded[name]
    ]
    said = regated(config.calibration, recorded)
    return found + ([said] if said else [])


def older_hashes(path: str | os.PathLike[str] | None, now: str | None) -> list[str]:
    """The hashes older ragaudit versions recorded for the input `path` (a corpus folder), when
    `now` is this version's hash of it: baselines and history rows from before name it so."""
    if path is None or now is None or not Path(path).is_dir() or sha256_file(Path(path)) != now:
        return []
    return [sha256_file(Path(path), version=v) for v in range(1, HASH_VERSION)]


def stamp_outputs(run_dir: Path) -> dict[str, Any]:
    """Record the sha256 of every output present, and the ragaudit that wrote them (`harness`)."""
    run_dir = Path(run_dir)
    return update_manifest(
        run_dir,
        outputs={name: sha256_file(run_dir / name) for name in OUTPUTS if (run_dir / name).exists()},
        harness=harness_record(),
    )


def harness_record() -> dict[str, str]:
    """ragaudit as it runs: its version and the sha256 of its package's files (by the framing of
    `folder_digest`; compiled files aside), which a release attestation names as the harness."""
    return dict(_harness())


@functools.cache
def _harness() -> tuple[tuple[str, str], ...]:
    from ragaudit._version import __version__
    from ragaudit.io.files import folder_digest

    package = Path(__file__).resolve().parents[1]  # the whole package, this room and every other
    names = sorted(
        path.relative_to(package).as_posix()
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.relative_to(package).parts and path.suffix != ".pyc"
    )
    return (("name", "ragaudit"), ("version", __version__), ("sha256", folder_digest(package, names).hexdigest()))


def _corpus_changes(manifest: dict[str, Any], path: Path) -> str:
    from ragaudit.io.corpus import load_corpus

    before = manifest.get("documents") or {}
    try:
        now = document_hashes(load_corpus(path))
    except InputError as exc:
        return f"corpus: {path} changed and can no longer be read: {exc.problems[0]}"
    parts = []
    for label, names in (
        ("changed", [d for d in before if d in now and now[d] != before[d]]),
        ("added", [d for d in now if d not in before]),
        ("removed", [d for d in before if d not in now]),
    ):
        if names:
            parts.append(f"{label} {', '.join(sorted(names)[:10])}{' …' if len(names) > 10 else ''}")
    return f"corpus: {path} changed since the run (documents {'; '.join(parts) or 'unchanged, files renamed'})"


def changes(run_dir: Path, notes: list[str] | None = None, *, absent: list[str] | None = None) -> list[str]:
    """What changed since the run: inputs (naming changed corpus documents), traces and every
    output the run writes (one missing from the manifest's outputs counts as changed). `notes`,
    when given, receives what the caller should know besides (a manifest hashed the old way). With
    `absent`, an input missing from its recorded path (a run directory checked on another machine,
    whose attestation holds the inputs' hashes) is listed there instead."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    version = hash_version(manifest)
    if version < HASH_VERSION and notes is not None:
        notes.append(
            f"{run_dir / MANIFEST}: written by an older ragaudit (hash version {version}): its corpus folder "
            "was hashed the old way (file names and contents run together, without lengths) and runs.parquet "
            "was not recorded; a new run records both"
        )
    found = []
    for name in ("gold", "corpus", "config", *(n for n in INPUTS[3:] if n in manifest["inputs"])):
        path, recorded = Path(manifest["paths"][name]), manifest["inputs"][name]
        if not path.exists() and absent is not None:
            absent.append(f"{name}: {path}")
        elif not path.exists():
            found.append(f"{name}: {path} is gone")
        elif (now := _digest(found, name, lambda: sha256_file(path, version=version))) and now != recorded:
            found.append(
                _corpus_changes(manifest, path)
                if name == "corpus"
                else f"{name}: {path} changed since the run (sha256 was {recorded[:12]}…)"
            )
    recorded = manifest.get("traces_sha256")
    if not (run_dir / TRACES).exists():
        found.append(f"traces: {run_dir / TRACES} is gone")
    elif (now := _digest(found, "traces", lambda: sha256_within(run_dir, TRACES))) and now != recorded:
        found.append(f"traces: {run_dir / TRACES} changed since the run")
    outputs = manifest.get("outputs") or {}
    unrecorded = [
        name
        for name in OUTPUTS
        if name not in outputs
        and (name in WRITTEN[version] or (name == "questions.parquet" and (run_dir / name).exists()))
    ]
    if unrecorded:
        found.append(
            f"output: {', '.join(unrecorded)} not recorded in {MANIFEST} (the run never finished writing its "
            "outputs, or the manifest was edited)"
        )
    for name, digest in sorted(outputs.items()):
        if not (run_dir / name).exists():
            found.append(f"output: {name} is gone")
        elif (now := _digest(found, "output", lambda: sha256_within(run_dir, name))) and now != digest:
            found.append(f"output: {name} changed since it was written")
    return found


def _digest(found: list[str], label: str, digest: Callable[[], str]) -> str | None:
    """`digest()`; None, with the change noted in `found`, for a path that is no longer a file of
    the run (a FIFO, a device, a symlink out of the run directory), which is not read."""
    try:
        return digest()
    except NotAFile as exc:
        found.append(f"{label}: {exc.problems[0]}")
        return None


def foreign_baseline(inputs: dict[str, Any] | None, baseline_inputs: dict[str, Any] | None) -> str | None:
    """Why a baseline (built on `baseline_inputs`) cannot be compared with a run on these inputs
    (another gold set or corpus), or None when it can. Inputs are sha256 by name, as a manifest
    records them."""
    theirs = baseline_inputs or {}
    differ = [name for name in ("gold", "corpus") if (inputs or {}).get(name) != theirs.get(name)]
    if not differ:
        return None
    return f"expected a baseline built on the same {' and '.join(differ)}, found one built on " + ", ".join(
        f"{name} {str(theirs.get(name))[:12]}… (now {str((inputs or {}).get(name))[:12]}…)" for name in differ
    )
