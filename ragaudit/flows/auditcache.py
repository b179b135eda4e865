"""The audits the pytest plugin keeps between sessions, one entry per config under `pytest/` in
ragaudit's cache folder.

An entry is reused while its key is unchanged: ragaudit's version and the sha256 of the config,
the gold set, the corpus, replay recordings, the embedding and support models' files, and the
code of each `python` pipeline (the factory's module file, and every file of the package it is
in) and `command` pipeline (its executable, and every argument that names a file). It is trusted
only once it verifies, as `ragaudit verify` checks a run: its traces and every output unchanged
since they were written. One that does not verify is set aside (`<run>.damaged-<UTC time>`) and
audited again.

A session holds the entry it reads (a lock file of its own in the run's `.held/` folder) until it
ends; an entry is deleted only once it is neither the latest nor held, so `--ragaudit-fresh` in
one session never deletes the run another session is reading. One process at a time chooses,
builds or deletes an entry of a config (the folder's `.lock`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

CACHE_FOLDER = "pytest"
POINTER = "audit.json"  # {"inputs": key, "run_dir": name} of the latest audit of one config
LOCK = ".lock"
HELD = ".held"  # in a run directory: one lock file per session reading it
DAMAGED = ".damaged-"


# ---- the key --------------------------------------------------------------------------------------


def inputs_key(config: Any) -> str:
    """What decides an audit's result: ragaudit's version and the sha256 of every file the config
    names and of each pipeline's code (a missing file counts as absent; the audit itself then says
    what is wrong)."""
    from ragaudit._version import __version__
    from ragaudit.io.files import sha256_file

    named: dict[str, Any] = {
        "config": config.path,
        "gold": config.audit.gold,
        "corpus": config.audit.corpus,
        "embedder": Path(config.embedder.model).expanduser(),  # a model folder; a model's name is in the config
        "support_model": config.support.model,
        "support_params": config.support.params,
    }
    for pipeline in config.pipelines:
        if pipeline.kind == "replay":
            named[f"traces of {pipeline.name}"] = pipeline.options.get("traces")
    hashes: dict[str, Any] = {
        name: sha256_file(Path(p)) if p and Path(p).exists() else None for name, p in named.items()
    }
    folder = Path(config.path).parent.resolve() if config.path else Path.cwd()
    for pipeline in config.pipelines:
        files = code_files(pipeline.kind, pipeline.options, folder)
        if files:
            hashes[f"code of {pipeline.name}"] = {str(p): sha256_file(p) for p in files}
    body = json.dumps({"ragaudit": __version__, **hashes}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def code_files(kind: str, options: dict[str, Any], folder: Path) -> list[Path]:
    """The files of a pipeline's own code, found as the pipeline finds them, without running it."""
    if kind == "python" and isinstance(options.get("factory"), str):
        return _module_files(options["factory"], folder)
    if kind == "command" and isinstance(options.get("command"), list):
        return _command_files([str(a) for a in options["command"]], folder)
    return []


def _module_files(factory: str, folder: Path) -> list[Path]:
    """The factory's module file and, when it is in a package, every file of its top-level package
    (the module may use any of them); for an entry point, those of the module it names."""
    import importlib.machinery
    import importlib.metadata
    import sys

    module = factory.partition(":")[0] if ":" in factory else None
    if module is None:
        from ragaudit.pipelines.python import ENTRY_POINT_GROUP

        found = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == factory]
        module = found[0].value.partition(":")[0].strip() if found else None
    if not module:
        return []
    top, *rest = module.split(".")
    # found as the import finds it: sys.path first, then the config's folder
    spec = importlib.machinery.PathFinder.find_spec(top, [*sys.path, str(folder)])
    if spec is None:
        return []
    locations = list(spec.submodule_search_locations or [])
    if not locations:
        return [Path(spec.origin)] if spec.origin and Path(spec.origin).is_file() else []
    files: set[Path] = set()
    for location in locations:
        for path in Path(location).rglob("*"):
            parts = path.relative_to(location).parts
            if path.is_file() and "__pycache__" not in parts and not any(p.startswith(".") for p in parts):
                files.add(path.resolve())
    name = top
    for part in rest:  # the module itself, should it live outside the package's folders (a namespace)
        name = f"{name}.{part}"
        spec = importlib.machinery.PathFinder.find_spec(name, locations) if locations else None
        if spec is None:
            break
        locations = list(spec.submodule_search_locations or [])
        if spec.origin and Path(spec.origin).is_file():
            files.add(Path(spec.origin).resolve())
    return sorted(files)


def _command_files(command: list[str], folder: Path) -> list[Path]:
    """The executable (found on PATH, or relative to the config's folder, where the command runs)
    and every argument that names a file there."""
    files = []
    program = command[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        executable: str | None = str(folder / program)
    else:
        executable = shutil.which(program)
    if executable and Path(executable).is_file():
        files.append(Path(executable).resolve())
    for argument in command[1:]:
        try:
            path = folder / argument
            if argument and path.is_file():
                files.append(path.resolve())
        except (OSError, ValueError):  # not a path at all (too long, a NUL)
            continue
    return sorted(set(files))


def cache_folder(config_path: Path) -> Path:
    """Where the audits of `config_path` are kept."""
    from ragaudit.checks.metrics.embed import cache_dir

    name = hashlib.sha256(str(Path(config_path).resolve()).encode()).hexdigest()[:16]
    return cache_dir() / CACHE_FOLDER / name


# ---- holding, verifying, setting aside -----------------------------------------------------------


class Hold:
    """A session's hold on a kept run: while it lasts, no other session deletes the run."""

    def __init__(self, run_dir: Path):
        from filelock import FileLock

        folder = run_dir / HELD
        folder.mkdir(exist_ok=True)
        self._lock = FileLock(str(folder / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.lock"))
        self._lock.acquire(timeout=0)

    def release(self) -> None:
        if self._lock.is_locked:
            self._lock.release()
            Path(self._lock.lock_file).unlink(missing_ok=True)


def held(run_dir: Path) -> bool:
    """Whether a live session holds `run_dir`; the lock files of sessions gone are removed."""
    from filelock import FileLock, Timeout

    folder = run_dir / HELD
    if not folder.is_dir():
        return False
    for path in folder.glob("*.lock"):
        lock = FileLock(str(path))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            return True
        lock.release()
        path.unlink(missing_ok=True)
    return False


def unverified(run_dir: Path) -> str | None:
    """Why a kept run cannot be trusted (as `ragaudit verify` checks it, and a report the plugin can
    read), or None when it can."""
    from ragaudit.core.errors import RagauditError
    from ragaudit.io import rundir
    from ragaudit.io.jsonfiles import read_json_file

    try:
        changed = rundir.changes(run_dir)
        outputs = rundir.read_manifest(run_dir).get("outputs") or {}
        if changed:
            return "; ".join(changed)
        if "report.json" not in outputs:
            return "its manifest records no report.json"
        return report_problem(read_json_file(run_dir / "report.json", what="report"))
    except RagauditError as exc:
        return str(exc)
    except OSError as exc:
        return f"{exc.filename}: {exc.strerror}"


def report_problem(report: Any) -> str | None:
    """What a report lacks that the plugin reads, or None."""
    if not isinstance(report, dict):
        return f"expected a report object, found {type(report).__name__}"
    questions = report.get("questions")
    if not isinstance(questions, list):
        return f"expected questions, an array, found {_found(questions)}"
    for i, q in enumerate(questions):
        if not isinstance(q, dict) or not all(isinstance(q.get(k), str) for k in ("pipeline", "qid")):
            return f"expected questions[{i}] to be an object with string pipeline and qid, found {_found(q)}"
    checks = report.get("gate", {}).get("checks") if isinstance(report.get("gate"), dict) else None
    if not isinstance(checks, list):
        return f"expected gate.checks, an array, found {_found(checks)}"
    for i, c in enumerate(checks):
        if not (isinstance(c, dict) and all(isinstance(c.get(k), str) for k in ("pipeline", "name"))) or not (
            isinstance(c.get("passed"), bool)
        ):
            return f"expected gate.checks[{i}] to be an object with pipeline, name and passed, found {_found(c)}"
        named = c.get("questions")
        if named is not None and not (isinstance(named, list) and all(isinstance(q, str) for q in named)):
            return f"expected gate.checks[{i}].questions to be an array of qids, found {_found(named)}"
    return None


def _found(value: Any) -> str:
    return "none" if value is None else type(value).__name__


def set_aside(run_dir: Path) -> Path | None:
    """Move a kept run that does not verify out of the way, unless a session still reads it."""
    if held(run_dir):
        return None
    base = f"{run_dir.name}{DAMAGED}{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    aside, n = run_dir.with_name(base), 1
    while aside.exists():
        n += 1
        aside = run_dir.with_name(f"{base}-{n}")
    os.replace(run_dir, aside)
    return aside


def prune(folder: Path, keep: Path) -> None:
    """Delete every kept run but `keep`, the runs set aside and those a session holds."""
    for old in folder.iterdir():
        if old == keep or not old.is_dir() or DAMAGED in old.name or not (old / "manifest.json").exists():
            continue
        if not held(old):
            shutil.rmtree(old, ignore_errors=True)


# ---- the entry ------------------------------------------------------------------------------------


def kept_audit(config_path: Path, *, fresh: bool = False) -> tuple[Path, Hold, list[str]]:
    """The run directory of an audit of `config_path` with the current inputs, run now if there is
    none that verifies (or when `fresh`), held for the caller; and warnings of what was set aside."""
    from filelock import FileLock

    from ragaudit.core.errors import InputError, Problem
    from ragaudit.flows.app import audit_config
    from ragaudit.io.config import load_config

    config = load_config(config_path)
    key = inputs_key(config)
    folder = cache_folder(config_path)
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK
    if lock.exists() and not lock.is_file():
        raise InputError(Problem(str(lock), "expected the lock file of the kept audits, found a folder (remove it)"))
    warnings: list[str] = []
    with FileLock(str(lock)):
        kept = _kept(folder)
        run_dir = None
        if not fresh and kept.get("inputs") == key and (folder / kept["run_dir"]).is_dir():
            candidate = folder / kept["run_dir"]
            why = unverified(candidate)
            if why is None:
                run_dir = candidate
            else:
                aside = set_aside(candidate)
                where = f"set aside as {aside}" if aside else "left to the session that reads it"
                warnings.append(f"the kept audit {candidate} does not verify ({why}): {where}; audited again")
        if run_dir is None:
            run_dir = audit_config(config, out=folder).run_dir
            temporary = folder / f"{POINTER}.tmp"
            temporary.write_text(json.dumps({"inputs": key, "run_dir": run_dir.name}), encoding="utf-8")
            os.replace(temporary, folder / POINTER)
        hold = Hold(run_dir)
        prune(folder, run_dir)
    return run_dir, hold, warnings


def _kept(folder: Path) -> dict[str, Any]:
    try:
        kept = json.loads((folder / POINTER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    ok = isinstance(kept, dict) and isinstance(kept.get("run_dir"), str) and "/" not in kept["run_dir"]
    return kept if ok and kept["run_dir"] not in ("", ".", "..") else {}
