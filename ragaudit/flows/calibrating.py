"""`ragaudit calibrate` (docs/reference.md §9): where can a gate on this gold set and corpus stand?

No pipeline is called. The oracle run (`faults/oracle.py`: the gold chunks cited, the anchor
stated) and its LLM-style rewrite (every answer reworded, `llm_rewrite`) are the controls: a
correct pipeline looks like them, extractive or written by an LLM. Every fault class is injected
into a seeded share of the oracle's questions. Each is audited exactly as a real run would be, and
for each gate check:

* its value on every control and every fault (what the gate compares with the threshold);
* how well it separates them: the AUROC of its per-question statistic, controls' questions against
  the questions a fault touched (for the faults the check reacts to);
* a proposed threshold: the strictest that every control passes with a margin (`MARGIN`), and the
  detection it gives on each fault; or none ("not gated") when the check separates nothing here.

The proposals are written as `calibration.json`, which a config reads with `[gate] from`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable

from ragaudit.auditing.audit import Audit, Remembered, audit
from ragaudit.checks.metrics.support import Memoized
from ragaudit.core.errors import UsageError
from ragaudit.core.gatechecks.registry import CHECKS
from ragaudit.core.model import Question
from ragaudit.core.plan import run_order
from ragaudit.core.progress import phase
from ragaudit.core.types import Trace
from ragaudit.flows.injection import inject
from ragaudit.flows.injection.oracle import ORACLE, oracle_traces
from ragaudit.flows.injection.registry import FAULTS
from ragaudit.io.calibration import SCHEMA
from ragaudit.pipelines.inputs import Inputs

MARGIN = {"max": 0.05, "rate": 0.05, "count": 0}
SEPARATES = 0.80  # the AUROC below which a check is not proposed for gating
REACTS = 0.5  # a fault a check reacts to moves its question statistic on at least this share of questions


@dataclass(frozen=True)
class Tuned:
    """A gate check whose threshold calibration proposes."""

    key: str
    kind: str  # "max": a ceiling on each run; "rate": a floor on a pipeline's share; "count": a ceiling on a count
    stat: Callable[[Question], float | None]  # per-question statistic, higher = worse

    def value(self, result: Audit) -> float | None:
        """The check's value on an audit, as the gate computed it."""
        for check in result.gate.checks:
            if check.name == self.key and check.value is not None:
                return float(check.value)
        return None


TUNED = tuple(Tuned(check.name, check.tune.kind, check.tune.stat) for check in CHECKS if check.tune is not None)
# the checks a calibration file sets without tuning them: it keeps their defaults
KEPT = {
    check.name: check.key.default
    for check in CHECKS
    if check.key is not None and check.key.calibrated and check.tune is None
}


def auroc(negatives: list[float], positives: list[float]) -> float | None:
    """P(a positive scores above a negative), ties counting half (the Mann–Whitney statistic)."""
    if not negatives or not positives:
        return None
    ordered = sorted(negatives)
    import bisect

    wins = 0.0
    for p in positives:
        below = bisect.bisect_left(ordered, p)
        equal = bisect.bisect_right(ordered, p) - below
        wins += below + 0.5 * equal
    return wins / (len(positives) * len(negatives))


@dataclass
class Scored:
    """The audits calibration compares: controls by name, faults by name with the questions each touched."""

    controls: dict[str, Audit]
    faults: dict[str, tuple[Audit, list[str]]]


AUDITS = 1 + len(FAULTS)  # the oracle, then each fault class (controls included)


def score(
    traces: list[Trace], subject: Inputs, *, rate: float = 0.2, seed: int = 0, done: Callable[[], object] | None = None
) -> Scored:
    """Audit the oracle, its LLM-style rewrite (every question) and each fault class (a seeded `rate`
    share of the questions). A fault leaves most runs as the oracle ran them: each distinct run is
    scored once, in the first audit that holds it, and its record is read back in the others.
    `done`, when given, is called after each audit (progress)."""
    subject = subject.replace(support=Memoized(subject.support, size=1 << 20))
    traces = sorted(traces, key=run_order)
    controls: dict[str, Audit] = {}
    faults: dict[str, tuple[Audit, list[str]]] = {}
    remembered: Remembered = {}  # each distinct run scored once, in the first audit that holds it
    with phase("oracle", counts_as="calibrate"):
        controls[ORACLE] = audit(traces, subject, remembered=remembered)
    if done is not None:
        done()
    for n, (name, fault) in enumerate(FAULTS.items(), start=1):
        with phase(f"{n}/{len(FAULTS)}: {name}", counts_as="calibrate"):
            injection = inject(fault, traces, subject, rate=1.0 if fault.control else rate, seed=seed)
            result = audit(injection.traces, subject, remembered=remembered)
        if done is not None:
            done()
        if fault.control:
            controls[name] = result
        elif injection.affected:
            faults[name] = (result, injection.affected)
    return Scored(controls, faults)


def _questions(result: Audit, qids: set[str] | None = None) -> list[Question]:
    return [q for q in result.evaluation.questions if qids is None or q.qid in qids]


def _stats(tuned: Tuned, rows: list[Question]) -> list[float]:
    return [v for v in (tuned.stat(q) for q in rows) if v is not None and not math.isnan(v)]


def propose(scored: Scored) -> dict[str, Any]:
    """Per check: values, separation, the proposed threshold and what it catches."""
    checks: dict[str, Any] = {}
    for tuned in TUNED:
        controls = {name: tuned.value(a) for name, a in scored.controls.items()}
        clean = [s for a in scored.controls.values() for s in _stats(tuned, _questions(a))]
        per_fault: dict[str, dict[str, Any]] = {}
        touched: dict[str, list[float]] = {}
        for name, (result, affected) in scored.faults.items():
            mine = touched[name] = _stats(tuned, _questions(result, set(affected)))
            before = _stats(tuned, _questions(scored.controls[ORACLE], set(affected)))
            moved = sum(1 for a, b in zip(mine, before) if a > b + 1e-9)
            per_fault[name] = {
                "value": tuned.value(result),
                "auroc": auroc(clean, mine),
                "reacts": bool(mine) and moved / len(mine) >= REACTS,
            }
        threshold = _threshold(tuned, [v for v in controls.values() if v is not None])
        reacting = [f["auroc"] for f in per_fault.values() if f["reacts"] and f["auroc"] is not None]
        separation = max(reacting, default=None)
        why = None
        if tuned.key == "delta_s_excess_max":
            separation = citation_separation(scored)
            if separation is None or separation < SEPARATES:
                why = (
                    "ΔS relative to the gold does not tell runs citing a wrong text from runs citing the gold "
                    f"on this gold set (AUROC {'–' if separation is None else f'{separation:.2f}'} < "
                    f"{SEPARATES}): wrong texts lie as close to the question as the gold"
                )
                threshold = None
        for name, f in per_fault.items():
            f["fails"] = _fails(tuned, threshold, f["value"])
            f["detection"] = _detection(tuned, threshold, touched[name])
        checks[tuned.key] = {
            "kind": tuned.kind,
            "controls": controls,
            "proposed": threshold,
            "separation": separation,
            "not_gated": why,
            "false_fail": [name for name, v in controls.items() if _fails(tuned, threshold, v)],
            "faults": per_fault,
        }
    return checks


CITING = ("paraphrase_drift", "seed_drift", "retrieval_loss", "wrong_document", "wrong_marker")


def citation_separation(scored: Scored) -> float | None:
    """AUROC of delta_s_excess for runs whose citation match fails against runs where it holds, over
    the controls and the faults that change what a run cites."""
    audits = [*scored.controls.values(), *(scored.faults[n][0] for n in CITING if n in scored.faults)]
    runs = [r for a in audits for r in a.evaluation.runs if not r["errored"]]
    values = [(r["metrics"]["citation_match"], r["metrics"].get("delta_s_excess")) for r in runs]
    right = [v for match, v in values if match == 1.0 and v is not None]
    wrong = [v for match, v in values if match == 0.0 and v is not None]
    return auroc(right, wrong)


def _threshold(tuned: Tuned, controls: list[float]) -> float | None:
    if not controls:
        return None
    margin = MARGIN[tuned.kind]
    if tuned.kind == "max":
        return round(min(1.0, max(controls) + margin), 2)
    if tuned.kind == "rate":
        return round(max(0.0, math.floor((min(controls) - margin) * 100) / 100), 2)
    return float(max(controls))


def _fails(tuned: Tuned, threshold: float | None, value: float | None) -> bool:
    if threshold is None or value is None:
        return False
    return value < threshold if tuned.kind == "rate" else value > threshold


def _detection(tuned: Tuned, threshold: float | None, touched: list[float]) -> float | None:
    """Share of the touched questions the check names at this threshold (its questions are those whose
    statistic shows a defect: above the threshold for a ceiling, any miss for a rate)."""
    if threshold is None or not touched:
        return None
    bar = threshold if tuned.kind == "max" else 0.0
    return sum(1 for v in touched if v > bar) / len(touched)


def calibration(
    checks: dict[str, Any], inputs: dict[str, str], *, model: str, support_model: str | None, questions: int
) -> dict[str, Any]:
    """calibration.json: the proposed [gate] and what supports each figure."""
    gate = {key: c["proposed"] for key, c in checks.items()}
    gate |= KEPT
    return {
        "schema": SCHEMA,
        "inputs": {name: inputs[name] for name in ("gold", "corpus")},
        "model": model,
        "support_model": support_model,
        "questions": questions,
        "gate": gate,
        "not_gated": {key: c["not_gated"] for key, c in checks.items() if c["not_gated"]},
        "checks": checks,
    }


def calibrate(
    inputs: Inputs, *, rate: float = 0.2, seed: int = 0, k: int | None = None, done: Callable[[], object] | None = None
) -> dict[str, Any]:
    """The calibration of `inputs` (config, gold set, corpus, models); `done` is called after each
    of its AUDITS audits (progress)."""
    from ragaudit.io.config import PipelineConfig
    from ragaudit.io.config_schema import GateSection
    from ragaudit.io.files import sha256_file

    config = inputs.config
    # thresholds from an oracle that cannot cite its gold (an unknown document, an anchor off its
    # text) would be those of a broken gold set: a gold error stops it, as it stops a run
    inputs.check_gold(strict=True)
    traces = oracle_traces(
        inputs.items,
        inputs.corpus,
        inputs.encoder,
        variants=config.audit.paraphrases,
        seeds=tuple(config.audit.seeds),
        k=k or config.metrics.k,
    )
    # every tuned check at its default, so that each has a value to compare, whatever the config
    # gates; the oracle is the one pipeline audited (each audit counts its runs)
    gated = dataclasses.replace(
        config, gate=GateSection(pipelines=[ORACLE]), pipelines=(PipelineConfig(ORACLE, "reference"),)
    )
    subject = inputs.replace(config=gated)
    checks = propose(score(traces, subject, rate=rate, seed=seed, done=done))
    if config.audit.gold is None or config.audit.corpus is None:  # Inputs.from_config refuses such a config
        raise UsageError(f"{config.path}: [audit] needs gold and corpus paths")
    hashes = {"gold": sha256_file(config.audit.gold), "corpus": sha256_file(config.audit.corpus)}
    return calibration(
        checks,
        hashes,
        model=getattr(inputs.encoder, "model_id", str(config.embedder.model)),
        support_model=getattr(inputs.support, "model_id", None),
        questions=len(inputs.items),
    )
