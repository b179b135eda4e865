"""A calibration file (`ragaudit calibrate --out calibration.json`) as a config reads it through
`[gate] from`: gate thresholds proposed for one gold set and corpus, the checks it found unable to
separate good runs from bad there (threshold null, with the reason), and the sha256 of the gold set
and corpus it was built on.

A file that cannot be read or is not a calibration is a usage error (exit 2): the config points at
the wrong file. A calibration of another gold set or corpus is an input error (exit 3), found when
the run's inputs are hashed. The calibration decides verdicts, so a run records its sha256 with its
other inputs (`ragaudit verify` names it when it changed), and gating again with a calibration that
changed since says so (`regated`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragaudit.core.errors import InputError, Problem, UsageError
from ragaudit.core.gatechecks.registry import KEYS

if TYPE_CHECKING:
    from ragaudit.io.config import Config

SCHEMA = "ragaudit.calibration/1"
# the [gate] keys a calibration may set, and whether each is a rate in [0, 1] (else a count)
THRESHOLDS = {name: key.kind == "rate" for name, key in KEYS.items() if key.calibrated}
SETTINGS = tuple(name for name, key in KEYS.items() if key.calibrated and not key.nullable)  # never null
# what `calibrate --labels` fits: the thresholds a claim's judgement reads, as their config keys
CLAIMS = {
    "support": ("support", "threshold"),
    "anchor_support_min": ("lambda", "anchor_support_min"),
    "key_recall_min": ("lambda", "key_recall_min"),
    "key_precision_min": ("lambda", "key_precision_min"),
}


@dataclass(frozen=True)
class Calibration:
    path: Path
    gate: dict[str, float | int | None]
    not_gated: dict[str, str] = field(default_factory=dict)  # key -> why it is left ungated
    inputs: dict[str, str] = field(default_factory=dict)  # "gold", "corpus" -> sha256
    claims: dict[str, float] = field(default_factory=dict)  # CLAIMS key -> a threshold fitted to labels
    labels: str | None = None  # the sha256 of the labels they were fitted to
    sha256: str = ""  # of the file as read


def read_calibration(path: Path) -> Calibration:
    """The calibration at `path`, or UsageError naming the file and what is wrong with it."""
    from ragaudit.io.jsonfiles import read_json_file

    try:
        data = read_json_file(path, what="calibration file")
    except InputError as exc:
        raise UsageError(f"[gate] from: {exc}") from None
    where = str(path)
    if data.get("schema") != SCHEMA:
        raise UsageError(f"[gate] from: {where}: expected schema {SCHEMA!r}, found {data.get('schema')!r}")
    gate, inputs = data.get("gate"), data.get("inputs")
    if not isinstance(gate, dict) or not isinstance(inputs, dict):
        raise UsageError(f"[gate] from: {where}: expected objects 'gate' and 'inputs'")
    out: dict[str, float | int | None] = {}
    for key, value in gate.items():
        if key not in THRESHOLDS:
            raise UsageError(f"[gate] from: {where}: $.gate.{key}: expected one of {', '.join(THRESHOLDS)}")
        ok = (value is None and key not in SETTINGS) or (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and (0 <= value <= 1 if THRESHOLDS[key] else value >= 0 and float(value).is_integer())
        )
        if not ok:
            kind = "a number in [0, 1]" if THRESHOLDS[key] else "a count >= 0"
            null = "" if key in SETTINGS else " or null"
            raise UsageError(f"[gate] from: {where}: $.gate.{key}: expected {kind}{null}, found {value!r}")
        out[key] = int(value) if value is not None and not THRESHOLDS[key] else value
    not_gated = data.get("not_gated") or {}
    if not isinstance(not_gated, dict) or not all(isinstance(v, str) for v in not_gated.values()):
        raise UsageError(f"[gate] from: {where}: expected 'not_gated' to map keys to reasons")
    from ragaudit.io.files import sha256_file

    claims = data.get("claims") or {}
    if not isinstance(claims, dict):
        raise UsageError(f"[gate] from: {where}: expected 'claims' to map thresholds to numbers")
    for key, value in claims.items():
        if key not in CLAIMS:
            raise UsageError(f"[gate] from: {where}: $.claims.{key}: expected one of {', '.join(CLAIMS)}")
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (number and math.isfinite(value) and 0 <= value <= 1):
            raise UsageError(f"[gate] from: {where}: $.claims.{key}: expected a number in [0, 1], found {value!r}")
    labels = (data.get("labels") or {}).get("sha256") if isinstance(data.get("labels"), dict) else None
    return Calibration(
        path,
        out,
        dict(not_gated),
        {k: str(v) for k, v in inputs.items()},
        {k: float(v) for k, v in claims.items()},
        labels if isinstance(labels, str) else None,
        sha256_file(path),
    )


def regated(calibration: Calibration | None, recorded: dict[str, Any] | None) -> str | None:
    """What to tell a user who gates a run again with `calibration` (a config's `[gate] from`, or
    None) when the run was gated with another one, as its recorded inputs (`recorded`: a manifest's
    or a report's `inputs`) hash it; None when it is the same, or when the run recorded none."""
    before = (recorded or {}).get("calibration")
    if not isinstance(before, str) or (calibration is not None and calibration.sha256 == before):
        return None
    if calibration is None:
        return f"the run was gated with a calibration (sha256 {before[:12]}…); this config's [gate] reads none"
    return (
        f"[gate] from {calibration.path} changed since the run (sha256 was {before[:12]}…, now "
        f"{calibration.sha256[:12]}…): the gate reads the thresholds it holds now"
    )


def check_inputs(calibration: Calibration, inputs: dict[str, Any] | None) -> None:
    """InputError unless the calibration was built on these gold set and corpus (sha256 by name)."""
    differ = [name for name in ("gold", "corpus") if calibration.inputs.get(name) != (inputs or {}).get(name)]
    if differ:
        raise InputError(
            Problem(
                str(calibration.path),
                f"expected a calibration built on this run's {' and '.join(differ)}, found one built on "
                + ", ".join(f"{n} {str(calibration.inputs.get(n))[:12]}…" for n in differ)
                + "; run ragaudit calibrate again on these inputs",
            )
        )


def check_config(config: Config) -> None:
    """`check_inputs` for a config whose [gate] reads a calibration, against its gold set and corpus."""
    if config.calibration is None:
        return
    from ragaudit.io.files import sha256_file

    if (
        config.audit.gold is None or config.audit.corpus is None
    ):  # nothing to run on: the run refuses it, naming what is missing
        return
    check_inputs(
        config.calibration, {"gold": sha256_file(config.audit.gold), "corpus": sha256_file(config.audit.corpus)}
    )
