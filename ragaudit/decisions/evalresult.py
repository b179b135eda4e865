"""The gate's checks as in-toto `eval-result` statements, written beside the run's own statement.

`ragaudit attest` writes a bundle (in-toto's JSON Lines of statements, `*.intoto.jsonl`): the
statement of the run (`ragaudit.decisions.attest`), then one statement per gated pipeline whose predicate
type is EVAL_RESULT_TYPE, in the shape of the draft predicate of in-toto/attestation pull request
575 (`spec/predicates/eval-result.md`, v0.1, as revised there up to commit 0c70fc3):

* `claims`: each gate check of the pipeline that holds its value to a bar, as `metric` (the check's
  name, that of its [gate] key), `comparator` (`>=`, `<=`, `>`), `threshold` (a decimal string, as
  the draft requires, never a JSON float) and `passed`, the gate's verdict. A check not gated (no
  threshold) makes no claim; the values measured are in the run's statement and report.json.
* `sampleSize`: the pipeline's runs; `evaluatedAt`: when the run finished.
* `model`: the pipeline, a resource descriptor named after it whose digest is the sha256 of the
  config that defines it (its kind and live index in `annotations`); `dataset`: the gold set and
  its sha256 (the corpus's in `annotations`). Both are public: there are no salted commitments.
* `subjectProfile` `receipt`: the subject is the run's report.json; `evidence`: its manifest.json,
  traces.jsonl and runs.parquet; `assuranceLevel` `self_attested`: the signer's own testimony.
* `harness`: ragaudit, its version and the sha256 of its package files as it wrote the report
  (`harness` in manifest.json).

`check` holds each eval-result statement of a bundle to the run directory: what it says must be
what the run directory says now, pipeline by pipeline.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

from ragaudit.core.errors import InputError
from ragaudit.decisions.gating import bar
from ragaudit.io.files import NotAFile, sha256_within

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"  # every statement of the bundle, the run's too
EVAL_RESULT_TYPE = "https://in-toto.io/attestation/eval-result/v0.1"
EVALUATOR = "https://ragaudit.dev/gate"  # what decided each claim: the gate (the signer is the key)
SUITE = "ragaudit gate"
SUBJECT = "report.json"
EVIDENCE: tuple[tuple[str, str], ...] = (
    ("manifest.json", "application/json"),
    ("traces.jsonl", "application/jsonl"),
    ("runs.parquet", "application/vnd.apache.parquet"),
)


def decimal(value: float) -> str:
    """A number as the draft's decimal string: every digit of its shortest repr, no exponent."""
    return format(Decimal(repr(float(value) + 0.0)), "f")


def claims(checks: list[dict[str, Any]], pipeline: str) -> list[dict[str, Any]]:
    """The claims of one pipeline's gate checks (report.json's), in the gate's order."""
    out = []
    for check in checks:
        if check.get("pipeline") != pipeline:
            continue
        held = bar(str(check.get("name")), check.get("threshold"))
        if held is not None:
            comparator, threshold = held
            out.append(
                {
                    "metric": check["name"],
                    "comparator": comparator,
                    "threshold": decimal(threshold),
                    "passed": bool(check.get("passed")),
                }
            )
    return out


def _file(run_dir: Path, name: str, media_type: str | None = None) -> dict[str, Any] | None:
    try:
        digest = sha256_within(run_dir, name)
    except (NotAFile, OSError):
        return None
    return {"name": name, "digest": {"sha256": digest}, **({"mediaType": media_type} if media_type else {})}


def statements(run_dir: Path, manifest: dict[str, Any], report: dict[str, Any]) -> list[dict[str, Any]]:
    """One eval-result statement per gated pipeline of the run directory (report.json's gate)."""
    run_dir = Path(run_dir)
    subject = _file(run_dir, SUBJECT)
    if subject is None:
        return []
    gate, summary = report["gate"], (report.get("summary") or {}).get("pipelines") or {}
    inputs, paths = manifest.get("inputs") or {}, manifest.get("paths") or {}
    described = report.get("pipelines") or {}
    evidence = [found for name, kind in EVIDENCE if (found := _file(run_dir, name, kind)) is not None]
    harness = manifest.get("harness") or {}
    out = []
    for pipeline in gate.get("pipelines") or []:
        held = claims(gate["checks"], pipeline)
        if not held:  # the draft asks for one claim or more: a pipeline whose checks are all ungated has none
            continue
        about = described.get(pipeline) or {}
        predicate = {
            "evaluator": {"id": EVALUATOR},
            "evaluatedAt": manifest.get("finished") or manifest.get("started"),
            "suite": {"name": SUITE, "version": harness.get("version") or manifest.get("ragaudit_version")},
            "claims": held,
            "sampleSize": int((summary.get(pipeline) or {}).get("runs") or 0),
            "model": {
                "name": pipeline,
                "digest": {"sha256": inputs.get("config")},
                "annotations": {
                    "config": Path(paths.get("config") or "").name,
                    **({"kind": about["kind"]} if about.get("kind") else {}),
                    **({"index": about["index"]} if about.get("index") else {}),
                },
            },
            "dataset": {
                "name": Path(paths.get("gold") or "").name,
                "digest": {"sha256": inputs.get("gold")},
                "annotations": {"corpus_sha256": inputs.get("corpus")},
            },
            "assuranceLevel": "self_attested",
            "subjectProfile": "receipt",
            "evidence": evidence,
            "harness": {
                "name": "ragaudit",
                "version": harness.get("version") or manifest.get("ragaudit_version"),
                **({"digest": {"sha256": harness["sha256"]}} if harness.get("sha256") else {}),
            },
        }
        out.append(
            {"_type": STATEMENT_TYPE, "subject": [subject], "predicateType": EVAL_RESULT_TYPE, "predicate": predicate}
        )
    return out


def check(run_dir: Path, found: list[tuple[dict[str, Any], str]]) -> tuple[list[str], list[str]]:
    """Each eval-result statement of a bundle (statement, where: "line N") held to the run
    directory as it is now: the mismatches (a statement that says what the run does not, or a
    gated pipeline with none), and notes (a bundle with none: an attestation of an older ragaudit)."""
    from ragaudit.io import rundir
    from ragaudit.io.jsonfiles import read_json_file

    if not found:
        return [], ["no eval-result statement (an attestation written before ragaudit emitted them)"]
    run_dir = Path(run_dir)
    try:
        report, manifest = read_json_file(run_dir / SUBJECT, what="report"), rundir.read_manifest(run_dir)
    except InputError as exc:
        return [f"eval-result: not checked, the run directory cannot be read: {exc.problems[0]}"], []
    gate = report.get("gate")
    if (
        not isinstance(gate, dict)
        or not isinstance(gate.get("checks"), list)
        or not isinstance(gate.get("pipelines"), list)
    ):
        return [f"eval-result: not checked, {run_dir / SUBJECT} holds no gate with its checks"], []
    expected = {s["predicate"]["model"]["name"]: s for s in statements(run_dir, manifest, report)}
    mismatches: list[str] = []
    seen: set[str] = set()
    for body, where in found:
        predicate = body["predicate"] if isinstance(body.get("predicate"), dict) else {}
        model = predicate["model"] if isinstance(predicate.get("model"), dict) else {}
        name = model.get("name")
        wanted = expected.get(name) if isinstance(name, str) else None
        if wanted is None or not isinstance(name, str):
            mismatches.append(f"eval-result ({where}): about {name!r}, which is no gated pipeline of the run")
            continue
        seen.add(name)
        differ = [
            k for k in sorted({*predicate, *wanted["predicate"]}) if predicate.get(k) != wanted["predicate"].get(k)
        ]
        differ += ["subject"] if body.get("subject") != wanted["subject"] else []
        if differ:
            mismatches.append(
                f"eval-result of pipeline {name!r} ({where}): {', '.join(differ)} differ from what the run "
                "directory says now"
            )
    for name in expected:
        if name not in seen:
            mismatches.append(f"eval-result: none for gated pipeline {name!r}")
    return mismatches, []
