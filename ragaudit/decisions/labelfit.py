"""`ragaudit calibrate CONFIG --labels FILE --run RUN_DIR` (docs/reference.md §12): the thresholds
that decide `correct` and grounded, fitted to a person's labels of a run's runs.

What the scorer found of each claim is in the run (each claim's `evidence` and `against` in
runs.parquet); `metrics/decide.py` says what any thresholds make of it, so a candidate is tried
without scoring anything again. The fit is a coordinate ascent over a grid of each threshold
(`GRID`), from the thresholds the run was judged with, maximising the mean Cohen's kappa of `good`,
`correct` and `supported` (ties go to the value nearest the start). How well it generalises is
measured by cross-validation grouped by question (`FOLDS` folds, seeded): each fold is fitted on
the others and judged with the fitted and with the original thresholds, and the held-out verdicts
of all folds give the agreement before and after. When the fit lowers that held-out agreement, it
does not carry beyond the runs it was fitted on, and the thresholds stay as they were. Too few labels for a stable fit (`MIN_LABELS`
labelled runs, `MIN_EACH` of each answer on correct and on supported) fits nothing and says how
many more are needed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ragaudit.checks.metrics.decide import AnchorEvidence, Evidence, Thresholds, anchor_verdict, grounding
from ragaudit.decisions.agreement import VERDICTS, Dimension, RunVerdict, kappa, match, run_verdicts
from ragaudit.io.labels import Label, read_labels

if TYPE_CHECKING:  # types only
    from ragaudit.io.config import Config

MIN_LABELS = 30
MIN_EACH = 5
FOLDS = 5
GRID = {
    "support": [round(0.4 + 0.05 * i, 2) for i in range(11)],  # 0.40 .. 0.90
    "anchor_support_min": [round(0.2 + 0.05 * i, 2) for i in range(11)],  # 0.20 .. 0.70
    "key_recall_min": [round(0.1 * i, 1) for i in range(1, 8)],  # 0.1 .. 0.7
    "key_precision_min": [round(0.2 + 0.05 * i, 2) for i in range(13)],  # 0.20 .. 0.80
}
MIN_GAIN = 0.005  # of the mean kappa a threshold must add to move: a smaller gain is noise of the labels
FITTED = ("good", "correct", "supported")  # the dimensions the thresholds move (citation is theirs alone)


@dataclass(frozen=True)
class Facts:
    """What a run's verdict reads that thresholds can change."""

    correct: bool | None  # the verdict when no claim decides it (a citation miss, no claim), else None
    citation: bool
    answered: bool
    claims: tuple[tuple[Evidence | None, AnchorEvidence | None], ...]

    @classmethod
    def of(cls, v: RunVerdict, answered: bool) -> Facts:
        claims = tuple(
            (
                Evidence.from_json(c["evidence"]) if c.get("evidence") else None,
                AnchorEvidence.from_json(c["against"]) if c.get("against") else None,
            )
            for c in v.claims
        )
        decides = any(a is not None for _, a in claims)
        return cls(None if decides else v.correct, v.citation, answered, claims)

    def verdict(self, t: Thresholds) -> dict[str, bool]:
        grounded = [grounding(e, t) == "supported" if e is not None else False for e, _ in self.claims]
        supported = all(grounded) if self.claims else self.answered
        if self.correct is not None:
            correct = self.correct
        else:
            verdicts = [anchor_verdict(a, t)[0] for _, a in self.claims if a is not None]
            correct = "states" in verdicts and "conflicts" not in verdicts
        return {"good": correct and supported, "correct": correct, "supported": supported, "citation": self.citation}


def _objective(pairs: list[tuple[Label, Facts]], t: Thresholds) -> float:
    found = [(lab, f.verdict(t)) for lab, f in pairs]
    total = 0.0
    for d in FITTED:
        found_kappa = kappa(np.array([lab.value(d) for lab, _ in found]), np.array([v[d] for _, v in found]))
        total += found_kappa if found_kappa is not None else 0.0
    return total / len(FITTED)


def fit(pairs: list[tuple[Label, Facts]], start: Thresholds) -> Thresholds:
    """Coordinate ascent over `GRID` from `start`; ties go to the value nearest the current one."""
    best, score = start, _objective(pairs, start)
    for _ in range(5):
        moved = False
        for name, values in GRID.items():
            current = getattr(best, name)
            for value in sorted(values, key=lambda v: abs(v - current)):
                candidate = dataclasses.replace(best, **{name: value})
                found = _objective(pairs, candidate)
                if found > score + MIN_GAIN:
                    best, score, moved = candidate, found, True
        if not moved:
            break
    return best


@dataclass
class Fit:
    """What `calibrate --labels` found: the thresholds (None when the labels are too few), and the
    held-out agreement before and after."""

    run_dir: Path
    labels: Path
    digest: str
    labelled: int
    start: Thresholds
    thresholds: Thresholds | None
    before: list[Dimension]
    after: list[Dimension]
    more: str | None = None  # why nothing was fitted, and how many labels more
    kept: str | None = None  # why the thresholds stay as they were
    notes: list[str] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "sha256": self.digest,
            "path": str(self.labels),
            "run": str(self.run_dir),
            "labelled": self.labelled,
            "from": dataclasses.asdict(self.start),
            "agreement": {
                "folds": FOLDS,
                "before": [d.to_json() for d in self.before],
                "after": [d.to_json() for d in self.after],
            },
        }


def _too_few(pairs: list[tuple[Label, Facts]]) -> str | None:
    needs = [f"{max(0, MIN_LABELS - len(pairs))} more labelled runs"] if len(pairs) < MIN_LABELS else []
    for d in ("correct", "supported"):
        for answer in (True, False):
            have = sum(1 for lab, _ in pairs if lab.value(d) is answer)
            if have < MIN_EACH:
                needs.append(f"{MIN_EACH - have} more labelled {d} {'yes' if answer else 'no'}")
    if not needs:
        return None
    return (
        f"{len(pairs)} labelled runs: a stable fit needs at least {MIN_LABELS}, with at least {MIN_EACH} of each "
        f"answer on correct and on supported; label {', '.join(needs)} (ragaudit label RUN_DIR --by uncertainty)"
    )


def _folds(pairs: list[tuple[Label, Facts]], seed: int) -> list[list[int]]:
    qids = sorted({lab.qid for lab, _ in pairs})
    random.Random(seed).shuffle(qids)
    fold_of = {q: i % FOLDS for i, q in enumerate(qids)}
    return [[i for i, (lab, _) in enumerate(pairs) if fold_of[lab.qid] == k] for k in range(FOLDS)]


def fit_labels(run_dir: str | Path, labels: str | Path, start: Thresholds, *, seed: int = 0) -> Fit:
    """The thresholds fitted to the labels of `run_dir`'s runs, and their cross-validated agreement."""
    run_dir, labels = Path(run_dir), Path(labels)
    verdicts = run_verdicts(run_dir)
    found = read_labels(labels)
    matched = match(found, verdicts, run_dir)
    pairs = [(lab, Facts.of(v, bool(v.answer))) for lab, v in matched.pairs]
    digest = "sha256:" + hashlib.sha256(labels.read_bytes()).hexdigest()
    fit_ = Fit(run_dir, labels, digest, len(pairs), start, None, [], [], notes=matched.notes(labels))
    fit_.more = _too_few(pairs)
    if fit_.more is None:
        fit_.thresholds, fit_.before, fit_.after, fit_.kept = cross_fit(pairs, start, seed=seed)
    return fit_


def cross_fit(
    pairs: list[tuple[Label, Facts]], start: Thresholds, *, seed: int = 0
) -> tuple[Thresholds, list[Dimension], list[Dimension], str | None]:
    """`calibrate --labels`'s fit: the thresholds (those of `start` when the fit lowers the held-out
    agreement), the held-out agreement before and after, and why the thresholds stayed."""
    before: dict[int, dict[str, bool]] = {}
    after: dict[int, dict[str, bool]] = {}
    for held in _folds(pairs, seed):
        kept = set(held)
        fitted = fit([p for i, p in enumerate(pairs) if i not in kept], start)
        for i in held:
            before[i] = pairs[i][1].verdict(start)
            after[i] = pairs[i][1].verdict(fitted)
    order = sorted(before)
    was, now = [], []
    for d in VERDICTS:
        truth = [pairs[i][0].value(d) for i in order]
        was.append(Dimension.of(d, truth, [before[i][d] for i in order]))
        now.append(Dimension.of(d, truth, [after[i][d] for i in order]))
    held_before = sum(d.kappa or 0.0 for d in was if d.name in FITTED)
    held_after = sum(d.kappa or 0.0 for d in now if d.name in FITTED)
    if held_after < held_before:  # the fit does not carry to runs it was not fitted on: keep what was
        why = (
            f"the fitted thresholds lower the held-out agreement (mean kappa of {', '.join(FITTED)} "
            f"{held_before / len(FITTED):.2f} -> {held_after / len(FITTED):.2f}): the thresholds stay as they were"
        )
        return start, was, now, why
    return fit(pairs, start), was, now, None


@dataclass
class Calibrated:
    """`calibrate --labels`: the fit, and the calibration file written (None when nothing was fitted)."""

    fit: Fit
    path: Path | None
    content: dict[str, Any] | None


def calibrate_labels(
    config: str | Path | Config,
    labels: str | Path | None,
    run: str | Path | None,
    *,
    out: str | Path | None = None,
    seed: int = 0,
    rate: float | None = None,
) -> Calibrated:
    """Fit the claim thresholds of `config` to the labels of `run`'s runs and write the calibration
    file (default: calibration.json beside the config) that `[gate] from` reads: the thresholds and
    the labels' sha256, beside the [gate] thresholds of the calibration the config already reads.
    Raises InputError when the run was made on another gold set or corpus than the config's;
    UsageError without both the labels and the run (`rate` belongs to the oracle calibration)."""
    from ragaudit.core.errors import UsageError
    from ragaudit.io import rundir

    if labels is None or run is None:
        raise UsageError("--labels and --run go together: the labels, and the run directory they label")
    del rate
    from ragaudit.checks.metrics.evaluate import Settings
    from ragaudit.core.errors import InputError, Problem
    from ragaudit.io.calibration import SCHEMA
    from ragaudit.io.config import load_config
    from ragaudit.io.files import refuse_overwriting, sha256_file, write_json

    loaded = config if not isinstance(config, (str, Path)) else load_config(config)
    run, labels = Path(run), Path(labels)
    if loaded.audit.gold is None or loaded.audit.corpus is None:
        raise InputError(f"{loaded.path}: [audit] needs gold and corpus paths")
    hashes = {"gold": sha256_file(loaded.audit.gold), "corpus": sha256_file(loaded.audit.corpus)}
    made = rundir.read_manifest(run).get("inputs") or {}
    differ = [name for name in ("gold", "corpus") if made.get(name) != hashes[name]]
    if differ:
        raise InputError(
            Problem(str(run), f"expected a run on {loaded.path}'s {' and '.join(differ)}, found a run on another")
        )
    target = Path(out) if out else Path(loaded.path or ".").parent / "calibration.json"
    refuse_overwriting([target], [loaded.path, loaded.audit.gold, loaded.audit.corpus, labels, run])
    found = fit_labels(run, labels, Settings.from_config(loaded).thresholds, seed=seed)
    if found.thresholds is None:
        return Calibrated(found, None, None)
    base = loaded.calibration
    content = {
        "schema": SCHEMA,
        "inputs": hashes,
        "gate": dict(base.gate) if base else {},
        "not_gated": dict(base.not_gated) if base else {},
        "claims": dataclasses.asdict(found.thresholds),
        "labels": found.to_json(),
    }
    write_json(target, content)
    return Calibrated(found, target, content)
