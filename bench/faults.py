"""Gate sensitivity on the demo: run the handbook demo, inject every fault class (SPEC §9) and
print the detection matrix; measure both readings of delta_s_qr side by side; and show the
evidence behind lambda.anchor_support_min.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/faults.py [--config configs/default.toml] [--gate dense-k5]
                                                       [--rate 0.2] [--seed 0]

The §4 defaults are the ones that make this clean: the clean pipeline passes, every fault class
fails the gate, question-level detection >= 0.8 for every fault and false flags on unaffected
questions <= 0.15. The script exits 1 when any of these does not hold.

ΔS readings: delta_s_qr compares the query with what the run cites, either the nearest single
cited text or the joined cited texts. For each reading it prints the AUROC with which delta_s_qr
tells the changed runs of the faults that change what is cited (paraphrase_drift, seed_drift,
retrieval_loss, wrong_document) from the clean runs of the same questions, and the gate outcome.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
SEMANTIC = ("paraphrase_drift", "seed_drift", "retrieval_loss", "wrong_document")
DETECTION_MIN, FALSE_FLAGS_MAX = 0.8, 0.15


def auroc(negatives: list[float], positives: list[float]) -> float:
    """P(a positive scores above a negative), ties counting half (the Mann-Whitney statistic)."""
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def changed_runs(clean, faulty, pipeline: str) -> tuple[list[float], list[float]]:
    """delta_s_qr of the runs a fault changed: before (clean) and after (faulty)."""
    key = lambda r: (r["pipeline"], r["qid"], r["variant"], r["seed"])  # noqa: E731
    before = {key(r): r for r in clean.evaluation.runs if r["pipeline"] == pipeline}
    traces = {(t.config, t.qid, t.variant, t.seed): t for t in clean.traces}
    after_traces = {(t.config, t.qid, t.variant, t.seed): t for t in faulty.traces}
    pairs = [
        (before[k], r)
        for r in faulty.evaluation.runs
        if (k := key(r)) in before and r["pipeline"] == pipeline and after_traces[k] != traces[k]
    ]
    return [b["metrics"]["delta_s_qr"] for b, _ in pairs], [a["metrics"]["delta_s_qr"] for _, a in pairs]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "default.toml")
    parser.add_argument("--gate", default="dense-k5", help="comma-separated pipelines to gate")
    parser.add_argument("--rate", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from ragaudit import runner
    from ragaudit.cli import render_fault_matrix
    from ragaudit.faults import run_faults
    from ragaudit.io.config import load_config
    from ragaudit.io.traces import read_trace_file

    config = load_config(args.config)
    gated = [p.strip() for p in args.gate.split(",")]
    config = dataclasses.replace(config, gate={**config.gate, "pipelines": gated})
    inputs = runner.Inputs(config)
    findings = inputs.check_gold()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        result = runner.run(config, inputs=inputs, out=Path(tmp))
        traces = read_trace_file(result.run_dir / "traces.jsonl")
        print(f"demo run: {result.total} runs in {time.perf_counter() - started:.1f} s; gated: {', '.join(gated)}\n")

    ok = True
    outcomes = {}
    for reading in ("nearest", "join"):
        subject = dataclasses.replace(
            inputs.subject(findings), config=dataclasses.replace(config, metrics={**config.metrics, "delta_s": reading})
        )
        started = time.perf_counter()
        matrix, audits = run_faults(traces, subject, rate=args.rate, seed=args.seed)
        seconds = time.perf_counter() - started
        outcomes[reading] = (matrix, audits)
        print(f"== delta_s_qr reading: {reading}  ({seconds:.1f} s for {len(audits)} audits)")
        print(render_fault_matrix(matrix))
        for name in gated:
            clean, faulty = [], []
            for fault in SEMANTIC:
                before, after = changed_runs(audits["clean"], audits[fault], name)
                clean += before
                faulty += after
            ds = [r["metrics"]["delta_s_qr"] for r in audits["clean"].evaluation.runs if r["pipeline"] == name]
            print(
                f"{name}: delta_s_qr clean runs median {median(ds):.3f}, max {max(ds):.3f}; AUROC clean vs "
                f"changed runs of {', '.join(SEMANTIC)}: {auroc(clean, faulty):.3f} "
                f"({len(faulty)} changed runs)"
            )
        print()

    matrix, audits = outcomes[config.metrics["delta_s"]]
    for name in gated:
        failures = []
        if matrix["clean"]["pipelines"][name]["verdict"] != "pass":
            failures.append("the clean run fails the gate")
        for row in matrix["faults"]:
            p = row["pipelines"][name]
            if p["verdict"] != "fail":
                failures.append(f"{row['fault']} passes the gate")
            if p["detection_rate"] is not None and p["detection_rate"] < DETECTION_MIN:
                failures.append(f"{row['fault']} detection {p['detection_rate']:.2f} < {DETECTION_MIN}")
            if p["false_flag_rate"] is not None and p["false_flag_rate"] > FALSE_FLAGS_MAX:
                failures.append(f"{row['fault']} false flags {p['false_flag_rate']:.2f} > {FALSE_FLAGS_MAX}")
        print(
            f"{name} with the shipped reading ({config.metrics['delta_s']}): "
            + (
                "clean passes, every fault fails, detection and false flags within bounds"
                if not failures
                else "; ".join(failures)
            )
        )
        ok &= not failures
    _anchor_support(matrix, audits, inputs, gated)
    return 0 if ok else 1


def _anchor_support(matrix: dict, audits, inputs, gated: list[str]) -> None:
    """What lambda.anchor_support_min and the attribution rule separate (ragaudit.metrics.correct).
    Should agree: the gold set's reference answers (short and abstractive, as an LLM answers).
    Should not: every other sentence of the gold section (the right chunk, the wrong sentence).
    A segment's competitors are the other sentences of the gold section, as when it cites the
    chunk that holds the anchor."""
    from ragaudit.metrics.correct import Agreement
    from ragaudit.metrics.quantities import hallucinated
    from ragaudit.text import sentences

    threshold = inputs.config.lambda_["anchor_support_min"]
    cases = []  # (should agree, segment, anchor, competitors)
    for item in inputs.items:
        section = inputs.corpus.section(item.doc_id, item.section_id)
        units = [
            u
            for u in sentences(inputs.corpus[item.doc_id].text[section.start : section.end])
            if not u.startswith("#") and len(u.split()) >= 3 and u not in item.anchor.text
        ]
        if item.reference_answer:
            cases.append((True, item.reference_answer, item.anchor.text, units))
        cases += [(False, u, item.anchor.text, units) for u in units if len(u.split()) >= 4]
    pairs = list(dict.fromkeys((seg, t) for _, seg, anchor, units in cases for t in (anchor, *units)))
    score = dict(zip(pairs, inputs.support.score_many([(seg, [t]) for seg, t in pairs])))
    agreements = [
        (
            ok,
            Agreement(
                score[(seg, anchor)], max((score[(seg, u)] for u in units), default=0.0), hallucinated(seg, [anchor])
            ),
        )
        for ok, seg, anchor, units in cases
    ]
    pos = [a for ok, a in agreements if ok]
    neg = [a for ok, a in agreements if not ok]
    print(
        f"\nanchor agreement: {len(pos)} reference answers (should agree), {len(neg)} other sentences of the "
        "gold section (should not)"
    )
    print("  anchor_support_min  references agree  other sentences rejected  (support alone: agree / rejected)")
    for t in sorted({0.3, 0.45, 0.5, 0.6, 0.8, threshold}):
        alone = (sum(a.support >= t for a in pos) / len(pos), sum(a.support < t for a in neg) / len(neg))
        print(
            f"  {t:18.2f}  {sum(a.agrees(t) for a in pos) / len(pos):16.1%}  "
            f"{sum(not a.agrees(t) for a in neg) / len(neg):24.1%}  ({alone[0]:.1%} / {alone[1]:.1%})"
            f"{'   <- shipped' if t == threshold else ''}"
        )
    affected = set(next(row["affected"] for row in matrix["faults"] if row["fault"] == "wrong_sentence"))
    wrong = [r for r in audits["wrong_sentence"].evaluation.runs if r["pipeline"] in gated and r["qid"] in affected]
    clean = [r for r in audits["clean"].evaluation.runs if r["pipeline"] in gated]
    print(
        f"  clean runs judged correct: {sum(r['correct'] for r in clean)}/{len(clean)}; wrong_sentence runs "
        f"judged incorrect: {sum(not r['correct'] for r in wrong)}/{len(wrong)}"
    )


if __name__ == "__main__":
    sys.exit(main())
