"""How often ragaudit's verdict agrees with a person's labels (docs/reference.md §12).

A run's verdict on each labelled dimension, as ragaudit decides it (`verdict_of`):

| dimension | ragaudit says yes when |
|---|---|
| `correct` | the run is `correct` |
| `supported` | every claim is supported (`fully_grounded` 1; an answer of no claim asserts nothing unsupported) |
| `citation` | `citation_match` is 1 |
| `good` | `correct` and `supported` |

Against the labels of a run directory's runs (`match`): per dimension the confusion matrix,
Cohen's kappa with a 95% bootstrap interval, and the precision and recall of ragaudit's flags (a
flag is a *no*; it is right when the label says no too); the reliability of the support score
(each labelled run's weakest claim support against the share of its bin labelled supported, and
the expected calibration error); every run where they differ; and, with labels on a random sample,
the good-run rate corrected by the labels (prediction-powered inference: ragaudit's rate on every
run, plus the mean of label minus verdict on the labelled sample) with its 95% interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ragaudit.core.errors import InputError, Problem
from ragaudit.io import rundir, runfiles
from ragaudit.io.labels import DIMENSIONS, Label, LabelsFile, RunKey, read_labels, run_digest

if TYPE_CHECKING:  # types only
    from ragaudit.core.types import Trace

VERDICTS = ("good", *DIMENSIONS)
BOOTSTRAP = 2_000  # resamples of the kappa interval, seeded: the same labels give the same interval
Z95 = 1.959963984540054
BINS = 10  # of the reliability curve


@dataclass(frozen=True)
class RunVerdict:
    """ragaudit's verdict on one run, and what a person reads beside a disagreement."""

    key: RunKey
    digest: str
    correct: bool
    supported: bool
    citation: bool
    support: float | None  # its weakest claim's support (0 for a claim that cites nothing)
    why: str
    query: str
    answer: str
    claims: list[dict[str, Any]] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)

    @property
    def good(self) -> bool:
        return self.correct and self.supported

    def value(self, dimension: str) -> bool:
        return bool(getattr(self, dimension))


def verdict_of(row: dict[str, Any], digest: str) -> RunVerdict:
    """A run's verdict from its row of runs.parquet, as `runstore.iter_runs` reads it."""
    claims = row.get("claims") or []
    metrics = row.get("metrics") or {}
    fully = metrics.get("fully_grounded")
    answered = bool(row.get("answer")) and not row.get("errored")
    supports = [0.0 if c.get("grounding") == "uncited" else c.get("support") for c in claims]
    known = [s for s in supports if s is not None]
    return RunVerdict(
        (row["pipeline"], row["qid"], int(row["variant"]), int(row["seed"])),
        digest,
        bool(row.get("correct")),
        fully == 1 or fully is None and answered,
        metrics.get("citation_match") == 1,
        min(known) if known else None,
        row.get("why") or "",
        row.get("query") or "",
        row.get("answer") or "",
        claims,
        row.get("spans") or [],
    )


def run_verdicts(run_dir: Path) -> dict[RunKey, RunVerdict]:
    """Every run of a run directory, with its digest (from traces.jsonl) and verdict (runs.parquet)."""
    from ragaudit.checks.runstore import RUNS, iter_runs
    from ragaudit.io.stream import stream_trace_file

    run_dir = Path(run_dir)
    rundir.read_manifest(run_dir)  # a folder that is no finished run is an input error naming it
    digests = {
        (t.config or "", t.qid, t.variant, t.seed): run_digest(t) for t in stream_trace_file(run_dir / runfiles.TRACES)
    }
    out = {}
    for batch in iter_runs(run_dir / RUNS):
        for row in batch:
            key = (row["pipeline"], row["qid"], int(row["variant"]), int(row["seed"]))
            if key in digests:
                out[key] = verdict_of(row, digests[key])
    return out


# ---------------------------------------------------------------- labels against runs


@dataclass
class Matched:
    """The labels of a run's runs: the pairs that count, and those that do not."""

    pairs: list[tuple[Label, RunVerdict]]
    stale: list[Label]  # labelled on a run that has changed since (another digest)
    unknown: list[Label]  # naming no run of this run directory
    problems: list[Problem]  # lines of the labels file that are no label
    unlabelled: int  # runs without a label

    def notes(self, path: Path) -> list[str]:
        out = [str(p) for p in self.problems]
        out += [
            f"{path}:{label.line}: stale: {label.qid} v{label.variant} s{label.seed} of {label.pipeline} changed "
            "since it was labelled (another digest): its label does not count"
            for label in self.stale
        ]
        if self.unknown:
            out.append(f"{path}: {len(self.unknown)} labels name no run of this run directory")
        return out


def match(
    labels: LabelsFile, verdicts: dict[RunKey, RunVerdict], run_dir: Path, gold_qids: set[str] | None = None
) -> Matched:
    """The labels of `verdicts`' runs. A labels file none of whose labels is of this run's runs,
    or that labels questions of another gold set, is an input error naming it (exit 3)."""
    pairs, stale, unknown = [], [], []
    for key, label in sorted(labels.labels.items()):
        verdict = verdicts.get(key)
        if verdict is None:
            unknown.append(label)
        elif verdict.digest != label.digest:
            stale.append(label)
        else:
            pairs.append((label, verdict))
    foreign = sorted({lab.qid for lab in unknown if gold_qids is not None and lab.qid not in gold_qids})
    if foreign:
        raise InputError(
            Problem(
                str(labels.path),
                f"expected labels of the questions of {run_dir}'s gold set, found {len(foreign)} other questions "
                f"({', '.join(foreign[:5])}{' …' if len(foreign) > 5 else ''}): a labels file of another gold set",
            )
        )
    if labels.labels and not pairs and not stale:
        raise InputError(
            Problem(
                str(labels.path),
                f"expected labels of runs of {run_dir}, found {len(unknown)} labels of runs it does not hold "
                "(another run's pipelines, variants or seeds)",
            )
        )
    labelled = {lab.key for lab, _ in pairs}
    return Matched(pairs, stale, unknown, list(labels.problems), sum(1 for k in verdicts if k not in labelled))


# ---------------------------------------------------------------- agreement


def kappa(a: np.ndarray, b: np.ndarray) -> float | None:
    """Cohen's kappa of two boolean raters; None when it is undefined (one class only, both)."""
    if len(a) == 0:
        return None
    observed = float(np.mean(a == b))
    pa, pb = float(np.mean(a)), float(np.mean(b))
    expected = pa * pb + (1 - pa) * (1 - pb)
    return None if expected >= 1 else (observed - expected) / (1 - expected)


@dataclass(frozen=True)
class Dimension:
    name: str
    n: int
    matrix: tuple[int, int, int, int]  # label yes & verdict yes, yes & no, no & yes, no & no
    kappa: float | None
    kappa_ci: tuple[float, float] | None
    precision: float | None  # of ragaudit's flags (its no): the label says no too
    recall: float | None  # of the label's no: ragaudit flags it

    @classmethod
    def of(cls, name: str, labels: list[bool], verdicts: list[bool], seed: int = 0) -> Dimension:
        a, b = np.array(labels, dtype=bool), np.array(verdicts, dtype=bool)
        yy, yn = int(np.sum(a & b)), int(np.sum(a & ~b))
        ny, nn = int(np.sum(~a & b)), int(np.sum(~a & ~b))
        found = kappa(a, b)
        interval = None
        if found is not None and len(a) > 1:
            rng = np.random.default_rng(seed)
            draws = [kappa(a[i], b[i]) for i in rng.integers(0, len(a), size=(BOOTSTRAP, len(a)))]
            kept = [d for d in draws if d is not None]
            if kept:
                interval = (float(np.quantile(kept, 0.025)), float(np.quantile(kept, 0.975)))
        return cls(
            name,
            len(a),
            (yy, yn, ny, nn),
            found,
            interval,
            nn / (nn + yn) if nn + yn else None,
            nn / (nn + ny) if nn + ny else None,
        )

    def to_json(self) -> dict[str, Any]:
        yy, yn, ny, nn = self.matrix
        return {
            "dimension": self.name,
            "runs": self.n,
            "matrix": {"label_yes_verdict_yes": yy, "label_yes_verdict_no": yn, "label_no_verdict_yes": ny,
                       "label_no_verdict_no": nn},
            "kappa": self.kappa,
            "kappa_ci": list(self.kappa_ci) if self.kappa_ci else None,
            "precision": self.precision,
            "recall": self.recall,
        }  # fmt: skip


@dataclass(frozen=True)
class Reliability:
    """The support score against the labels: per bin of a run's weakest claim support, the runs,
    their mean score and the share labelled supported; and the expected calibration error."""

    bins: list[tuple[float, float, int, float, float]]  # (low, high, runs, mean score, share supported)
    error: float | None

    @classmethod
    def of(cls, pairs: list[tuple[Label, RunVerdict]]) -> Reliability:
        scored = [(v.support, lab.supported) for lab, v in pairs if v.support is not None]
        bins, error = [], 0.0
        for i in range(BINS):
            low, high = i / BINS, (i + 1) / BINS
            inside = [(s, y) for s, y in scored if low <= s < high or i == BINS - 1 and s == 1.0]
            if inside:
                mean = sum(s for s, _ in inside) / len(inside)
                share = sum(y for _, y in inside) / len(inside)
                bins.append((low, high, len(inside), mean, share))
                error += len(inside) / len(scored) * abs(mean - share)
        return cls(bins, error if scored else None)


@dataclass(frozen=True)
class Estimate:
    """The good-run rate on every run, and corrected by labels on a random sample (PPI)."""

    runs: int
    labelled: int
    rate: float  # ragaudit's good-run rate on every run
    corrected: float | None
    ci: tuple[float, float] | None
    why_not: str | None = None  # why there is no corrected rate

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "labelled": self.labelled,
            "rate": self.rate,
            "corrected": self.corrected,
            "ci": list(self.ci) if self.ci else None,
            "why_not": self.why_not,
        }


MIN_SAMPLE = 10  # labelled runs below which no corrected rate is given


def estimate(verdicts: list[RunVerdict], pairs: list[tuple[Label, RunVerdict]], dimension: str = "good") -> Estimate:
    """Prediction-powered inference of the good-run rate of these runs: ragaudit's rate on every run
    plus the mean label-minus-verdict on the labelled runs, when those were drawn at random
    (`ragaudit label --by random`), with its normal 95% interval. The rate sought is that of these
    N runs, whose verdicts are all known: only the n labelled are a sample, drawn without
    replacement, so the variance is that of the differences over n times (1 - n/N). Differences
    are rare where the verdict is good, and a sample may hold none (variance 0): the variance is
    at least what (k + 1/2) / (n + 1) differing runs of k would give, so an interval is never
    narrower than the sample can tell."""
    f = np.array([v.value(dimension) for v in verdicts], dtype=float)
    rate = float(f.mean()) if len(f) else 0.0
    sample = [(lab, v) for lab, v in pairs if lab.sample == "random"]
    if len(sample) < MIN_SAMPLE:
        reason = (
            f"{len(sample)} runs labelled at random (ragaudit label --by random): a corrected rate needs "
            f"at least {MIN_SAMPLE}"
        )
        return Estimate(len(f), len(sample), rate, None, None, reason)
    d = np.array([float(lab.value(dimension)) - float(v.value(dimension)) for lab, v in sample])
    n, mean = len(d), float(d.mean())
    corrected = rate + mean
    floor = (int(np.count_nonzero(d)) + 0.5) / (n + 1) - mean * mean
    spread = math.sqrt(max(float(d.var(ddof=1)), floor) / n * max(0.0, 1 - n / max(len(f), n)))
    low, high = max(0.0, corrected - Z95 * spread), min(1.0, corrected + Z95 * spread)
    return Estimate(len(f), len(sample), rate, min(1.0, max(0.0, corrected)), (low, high))


@dataclass
class Agreement:
    """Everything `ragaudit agree` says."""

    run_dir: Path
    labels_path: Path
    dimensions: list[Dimension]
    reliability: Reliability
    estimate: Estimate
    disagreements: list[tuple[Label, RunVerdict, list[str]]]
    notes: list[str]
    labelled: int
    unlabelled: int

    def to_json(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir),
            "labels": str(self.labels_path),
            "labelled": self.labelled,
            "unlabelled": self.unlabelled,
            "dimensions": [d.to_json() for d in self.dimensions],
            "reliability": {
                "bins": [
                    {"low": lo, "high": hi, "runs": n, "score": s, "supported": y}
                    for lo, hi, n, s, y in self.reliability.bins
                ],
                "calibration_error": self.reliability.error,
            },
            "estimate": self.estimate.to_json(),
            "disagreements": [
                {
                    "pipeline": lab.pipeline,
                    "qid": lab.qid,
                    "variant": lab.variant,
                    "seed": lab.seed,
                    "dimensions": differs,
                    "label": {d: lab.value(d) for d in VERDICTS},
                    "verdict": {d: v.value(d) for d in VERDICTS},
                    "note": lab.note,
                    "why": v.why,
                    "answer": v.answer,
                    "claims": v.claims,
                }
                for lab, v, differs in self.disagreements
            ],
            "notes": self.notes,
        }


def agreement_of(run_dir: Path, verdicts: dict[RunKey, RunVerdict], matched: Matched, labels_path: Path) -> Agreement:
    pairs = matched.pairs
    dims = [Dimension.of(d, [lab.value(d) for lab, _ in pairs], [v.value(d) for _, v in pairs]) for d in VERDICTS]
    differs = []
    for lab, v in pairs:
        names = [d for d in VERDICTS if lab.value(d) != v.value(d)]
        if names:
            differs.append((lab, v, names))
    return Agreement(
        Path(run_dir),
        Path(labels_path),
        dims,
        Reliability.of(pairs),
        estimate(list(verdicts.values()), pairs),
        differs,
        matched.notes(Path(labels_path)),
        len(pairs),
        matched.unlabelled,
    )


def agree(run_dir: str | Path, labels: str | Path) -> Agreement:
    """How often ragaudit's verdict on the runs of `run_dir` agrees with the labels of `labels`
    (`ragaudit agree`). Raises InputError (exit 3) for a labels file of another gold set or run."""
    run_dir, labels = Path(run_dir), Path(labels)
    verdicts = run_verdicts(run_dir)
    found = read_labels(labels)
    matched = match(found, verdicts, run_dir, _gold_qids(run_dir))
    return agreement_of(run_dir, verdicts, matched, labels)


def _gold_qids(run_dir: Path) -> set[str] | None:
    """The questions of the run's gold set, from its question rows."""
    from ragaudit.checks.questionstore import QUESTIONS

    path = run_dir / QUESTIONS
    if not path.is_file():
        return None
    import pyarrow.parquet as pq

    return set(pq.read_table(path, columns=["qid"]).column("qid").to_pylist())


@dataclass
class LabelSummary:
    """What a run's report says of the labels `[labels] path` names: the agreement with its runs,
    and each pipeline's good-run rate corrected by them."""

    path: Path
    digest: str
    dimensions: list[Dimension]
    estimates: dict[str, Estimate]
    labelled: int
    stale: int
    unknown: int

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "sha256": self.digest,
            "labelled": self.labelled,
            "stale": self.stale,
            "unknown": self.unknown,
            "agreement": [d.to_json() for d in self.dimensions],
            "estimates": {p: e.to_json() for p, e in sorted(self.estimates.items())},
        }


class RunLabels:
    """The labels a config's `[labels] path` names, against the runs of an audit as they stream by:
    a labelled run's digest is taken as it passes (`see`), its verdict read back at the end."""

    def __init__(self, path: Path):
        import hashlib

        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(Problem(str(self.path), "expected a labels file ([labels] path), found none"))
        self.found = read_labels(self.path)
        self.digest = "sha256:" + hashlib.sha256(self.path.read_bytes()).hexdigest()
        self.digests: dict[RunKey, str] = {}

    def see(self, trace: Trace) -> None:
        key = (trace.config or "", trace.qid, trace.variant, trace.seed)
        if key in self.found.labels:
            self.digests[key] = run_digest(trace)

    def summary(self, runs_path: Path) -> LabelSummary:
        from ragaudit.checks.runstore import iter_runs

        verdicts: dict[RunKey, RunVerdict] = {}
        for batch in iter_runs(runs_path):
            for row in batch:
                key = (row["pipeline"], row["qid"], int(row["variant"]), int(row["seed"]))
                verdicts[key] = verdict_of(row, self.digests.get(key, ""))
        pairs, stale, unknown = [], 0, 0
        for key, label in sorted(self.found.labels.items()):
            verdict = verdicts.get(key)
            if verdict is None:
                unknown += 1
            elif verdict.digest != label.digest:
                stale += 1
            else:
                pairs.append((label, verdict))
        dims = [Dimension.of(d, [lab.value(d) for lab, _ in pairs], [v.value(d) for _, v in pairs]) for d in VERDICTS]
        estimates = {}
        for pipeline in sorted({k[0] for k in verdicts}):
            mine = [v for k, v in verdicts.items() if k[0] == pipeline]
            estimates[pipeline] = estimate(mine, [(lab, v) for lab, v in pairs if lab.pipeline == pipeline])
        return LabelSummary(self.path, self.digest, dims, estimates, len(pairs), stale, unknown)
