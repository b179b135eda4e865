"""`ragaudit faults` (docs/reference.md §9): is the gate worth anything? Each fault class is injected into a
seeded share of the questions of a finished run, and each faulty copy is audited exactly as
`ragaudit report` would audit it. The gate should pass the clean run and fail every faulty one,
and its checks should name the affected questions and few others.

A question is *flagged* when some gate check names it as failing that check. Detection rate =
affected questions flagged / affected; false-flag rate = unaffected questions flagged / unaffected.

Each copy is gated twice: alone, as a gate without history sees it, and against the clean run as
its baseline, as CI gates with `--baseline last-pass`. At a low rate the first misses faults that
touch a few questions (no aggregate moves); the second names them as regressions. A fault is
caught when every gated pipeline fails against the baseline. Negative controls (`llm_rewrite`)
must pass both ways.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from ragaudit.auditing.audit import Audit, as_baseline, audit, regate
from ragaudit.checks.metrics.support import Memoized
from ragaudit.core.errors import UsageError
from ragaudit.core.model import Gate
from ragaudit.core.plan import run_order
from ragaudit.core.progress import phase
from ragaudit.core.types import Payload, Trace
from ragaudit.flows.injection.mutations import Fault, Scene
from ragaudit.flows.injection.registry import FAULTS
from ragaudit.pipelines.inputs import Inputs

SCHEMA = "ragaudit.faults/2"


@dataclass
class Injection:
    fault: Fault
    applicable: list[str]  # questions the fault can change
    affected: list[str]  # the seeded sample of them
    changed: dict[str, set[str]]  # per pipeline, the affected questions whose runs changed
    traces: list[Trace]


def _pools(traces: list[Trace]) -> dict[str, list[Payload]]:
    pools: dict[str, dict[str, Payload]] = defaultdict(dict)
    for t in traces:
        for p in t.retrieved:
            if p.snippet_id is not None:
                pools[t.config or ""].setdefault(p.snippet_id, p)
    return {name: list(found.values()) for name, found in pools.items()}


def inject(fault: Fault, traces: list[Trace], subject: Inputs, *, rate: float, seed: int) -> Injection:
    """The traces with `fault` in a seeded `rate` share of the questions (at least one) among those
    it can change. Each run's own randomness is seeded by (seed, fault, run), so the result does
    not depend on the order of the traces."""
    corpus = subject.corpus
    if corpus is None:
        raise UsageError("fault injection needs the corpus: set [audit] corpus in the config")
    gold = {i.qid: i for i in subject.items}
    pools = _pools(traces)
    k = subject.config.metrics.k
    mutated: dict[str, dict[tuple[str, str, int, int], Trace]] = defaultdict(dict)
    for t in traces:
        if t.qid not in gold or t.error is not None:
            continue
        scene = Scene(
            gold[t.qid],
            corpus,
            pools.get(t.config or "", []),
            tuple(subject.config.audit.seeds),
            k,
            random.Random(f"{seed}:{fault.name}:{run_order(t)}"),
        )
        faulty = fault.mutate(t, scene)
        if faulty is not None and faulty != t:
            mutated[t.qid][run_order(t)] = faulty
    questions = sorted({t.qid for t in traces if t.qid in gold})
    applicable = sorted(mutated)
    wanted = max(1, round(rate * len(questions)))
    affected = sorted(random.Random(f"{seed}:{fault.name}").sample(applicable, min(wanted, len(applicable))))
    changes = {key: faulty for qid in affected for key, faulty in mutated[qid].items()}
    changed: dict[str, set[str]] = defaultdict(set)
    for key in changes:
        changed[key[0]].add(key[1])
    out = [changes.get(run_order(t), t) for t in traces]
    return Injection(fault, applicable, affected, dict(changed), out)


def _row(result: Audit, gate: Gate, gated: list[str], affected: dict[str, set[str]]) -> dict[str, Any]:
    flagged = gate.flagged_questions()
    pipelines = {}
    for name in gated:
        questions = {q.qid for q in result.evaluation.questions if q.pipeline == name}
        hit = affected.get(name, set()) & questions
        rest = questions - hit
        mine = flagged.get(name, set())
        pipelines[name] = {
            "verdict": "pass" if all(c.passed for c in gate.of(name)) else "fail",
            "failed_checks": [c.name for c in gate.of(name) if not c.passed],
            "codes": dict(sorted(result.codes_by_pipeline.get(name, Counter()).items())),
            "affected": len(hit),
            "detected": len(hit & mine),
            "detection_rate": len(hit & mine) / len(hit) if hit else None,
            "false_flag_rate": len(rest & mine) / len(rest) if rest else None,
            "flagged": sorted(mine),
        }
    return {"verdict": gate.verdict, "pipelines": pipelines}


def _failed_everywhere(row: dict[str, Any]) -> bool:
    return all(p["verdict"] == "fail" for p in row["pipelines"].values())


def run_faults(
    traces: list[Trace], subject: Inputs, *, only: list[str] | None = None, rate: float = 0.2, seed: int = 0
) -> tuple[dict[str, Any], dict[str, Audit]]:
    """faults.json's content, and the audits behind it by name ("clean" first) for benchmarks."""
    if only is not None and not only:
        raise UsageError(f"expected some of the faults {', '.join(FAULTS)}, found none")
    unknown = sorted(set(only or ()) - set(FAULTS))
    if unknown:
        raise UsageError(f"unknown fault {', '.join(unknown)}; expected some of {', '.join(FAULTS)}")
    if not 0 < rate <= 1:
        raise UsageError(f"expected --rate in (0, 1], found {rate}")
    subject = subject.replace(support=Memoized(subject.support, size=1 << 20))
    traces = sorted(traces, key=run_order)
    chosen = {name: fault for name, fault in FAULTS.items() if not only or name in only}
    with phase("clean run", counts_as="faults"):
        clean = audit(traces, subject)
    gated = list(clean.gate.pipelines)
    baseline = as_baseline(clean)
    audits = {"clean": clean}
    rows = []
    for done, (name, fault) in enumerate(chosen.items(), start=1):
        with phase(f"fault {done}/{len(chosen)}: {name}", counts_as="faults"):
            injection = inject(fault, traces, subject, rate=rate, seed=seed)
            result = audit(injection.traces, subject)
        audits[name] = result
        alone = _row(result, result.gate, gated, injection.changed)
        against = _row(result, regate(result, subject, baseline=baseline), gated, injection.changed)
        if fault.control:
            ok = alone["verdict"] == "pass" and against["verdict"] == "pass"
        else:  # a fault that can change nothing here (no second section to cross into, say) is not missed
            ok = _failed_everywhere(against) or not injection.applicable
        rows.append(
            {
                "fault": name,
                "description": fault.description,
                "control": fault.control,
                "applicable": len(injection.applicable),
                "affected": injection.affected,
                "caught": _failed_everywhere(alone) and bool(injection.affected),
                **alone,
                "with_baseline": {"caught": _failed_everywhere(against) and bool(injection.affected), **against},
                "ok": ok,
            }
        )
    clean_row = _row(clean, clean.gate, gated, {})
    passed = clean_row["verdict"] == "pass" and all(r["ok"] for r in rows)
    return {
        "schema": SCHEMA,
        "rate": rate,
        "seed": seed,
        "questions": len({t.qid for t in traces}),
        "gated": gated,
        "clean": clean_row,
        "faults": rows,
        "controls": [r["fault"] for r in rows if r["control"]],
        "passed": passed,
    }, audits
