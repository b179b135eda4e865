"""How often ragaudit's verdict agrees with a person's, on a real LLM's answers.

The recordings under `bench/data/llm/` are a real small LLM's answers (SmolLM2-135M-Instruct,
`bench/smollm2.py`) over two corpora (the handbook and SQuAD), each run labelled blind by the
written guide `bench/labelling.md` (`labels-<corpus>.jsonl`). This replays each corpus's
recordings through `ragaudit run` with the shipped defaults (or `--config-extra`, TOML appended to
the config) and measures them with `ragaudit agree`'s own figures (`ragaudit.decisions.agreement`): per
corpus and pooled, per dimension (good, correct, supported, citation), the confusion matrix of
label against verdict, Cohen's kappa, and the precision and recall of ragaudit's flags (a flag is
ragaudit saying *no*; it is right when the label says no too).

Then, with both corpora:

* **fit across corpora**: the claim thresholds fitted to one corpus's labels (`ragaudit calibrate
  --labels`'s fit, `ragaudit.decisions.labelfit.cross_fit`), applied to the other corpus's runs, beside the
  defaults: a fit must raise or keep the agreement on labels it never saw;
* **the corrected good-run rate**: `--simulations` random samples of `--sample` labelled runs per
  corpus, each giving the prediction-powered estimate and its 95% interval
  (`ragaudit.decisions.agreement.estimate`); how often the interval covers the rate the labels of every run
  give (nominal 95%), corrected from ragaudit's good-run verdict and from a weaker predictor (its
  citation match alone), whose many differences show the interval's own calibration;
* **ExpertQA** (`--expertqa`): the bundled support scorer's verdict on each claim against the
  experts' "Complete" (supported) or "Partial"/"Incomplete" (not).

Where a second person labelled runs blind by the same guide (`labels-<corpus>-second.jsonl`: 60 of
the handbook's runs, every SQuAD run), the kappa between the two people is printed beside each
one's kappa with ragaudit.

`--disagreements` lists every run where a label and the verdict differ, with ragaudit's why;
`--tasks DIR` writes the blind labelling tasks (no verdict in them) instead.

    python bench/agreement.py [--corpus handbook,squad] [--disagreements] [--expertqa]
        [--simulations 400] [--sample 40]
    python bench/agreement.py --tasks DIR
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import sys
import tempfile
from pathlib import Path

import numpy as np

from ragaudit.checks.metrics.decide import Thresholds
from ragaudit.decisions.agreement import VERDICTS, Dimension, RunVerdict, estimate, match, run_verdicts
from ragaudit.decisions.labelfit import FITTED, Facts, cross_fit
from ragaudit.io.corpus import load_corpus
from ragaudit.io.labels import Label, read_labels, run_digest
from ragaudit.io.stream import read_trace_file

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "llm"
sys.path.insert(0, str(ROOT / "bench"))

from corpora import build  # noqa: E402

QUESTIONS = {"handbook": None, "squad": 40}  # the gold items the recordings were made on


def recordings(corpus: str) -> list[Path]:
    return sorted(DATA.glob(f"{corpus}-*.jsonl"))


def prepare(corpus: str, work: Path, extra: str = "") -> Path:
    """The corpus and gold set the recordings of `corpus` answer, and a config replaying them."""
    built = build(corpus, work, QUESTIONS[corpus])
    recorded = {json.loads(line)["qid"] for path in recordings(corpus) for line in path.open(encoding="utf-8")}
    items = [
        line for line in built.gold.read_text(encoding="utf-8").splitlines() if json.loads(line)["qid"] in recorded
    ]
    built.gold.write_text("".join(line + "\n" for line in items), encoding="utf-8")
    pipelines = "".join(
        f'[[pipelines]]\nname = "{path.stem.split("-", 1)[1]}"\nkind = "replay"\ntraces = "{path}"\nk = 3\n\n'
        for path in recordings(corpus)
    )
    config = built.config.parent / "agreement.toml"
    config.write_text(
        f'[audit]\ngold = "gold.jsonl"\ncorpus = "{built.corpus.resolve()}"\nparaphrases = 2\nseeds = [1]\n'
        f'out = "runs"\n\n[metrics]\nk = 3\n\n[gold]\nignore = ["gold_section_item_count", "gold_anchor_far"]\n\n'
        f"{extra}\n\n{pipelines}",
        encoding="utf-8",
    )
    return config


def labelled(corpus: str, work: Path, extra: str = "") -> tuple[list[tuple[Label, RunVerdict]], list[str], list]:
    """The labelled runs of a corpus replayed (label, verdict), the notes, and every run's verdict."""
    import ragaudit

    run_dir = ragaudit.audit(prepare(corpus, work, extra)).run_dir
    verdicts = run_verdicts(run_dir)
    path = DATA / f"labels-{corpus}.jsonl"
    matched = match(read_labels(path), verdicts, run_dir)
    notes = matched.notes(path)
    if matched.unlabelled:
        notes.append(f"{corpus}: {matched.unlabelled} runs without a label")
    return matched.pairs, notes, list(verdicts.values())


# ---------------------------------------------------------------- printing


def _f(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def header() -> str:
    return (
        f"{'corpus':<10} {'dimension':<10} {'runs':>4}   {'y/y':>4} {'y/n':>4} {'n/y':>4} {'n/n':>4}   {'kappa':>5}"
        f"   {'prec':>5} {'rec':>5}\n"
        "  (label/verdict: y/n = the label says yes, ragaudit says no; precision and recall of ragaudit's no)"
    )


def rows(name: str, labels: list[Label], verdicts: list[dict[str, bool]]) -> list[str]:
    out = []
    for d in VERDICTS:
        found = Dimension.of(d, [lab.value(d) for lab in labels], [v[d] for v in verdicts])
        yy, yn, ny, nn = found.matrix
        out.append(
            f"{name:<10} {d:<10} {found.n:>4}   {yy:>4} {yn:>4} {ny:>4} {nn:>4}   {_f(found.kappa):>5}"
            f"   {_f(found.precision):>5} {_f(found.recall):>5}"
        )
    return out


def second_labeller(corpus: str, pairs: list[tuple[Label, RunVerdict]]) -> list[str]:
    """Where a second person labelled some runs blind (`labels-<corpus>-second.jsonl`): per dimension
    the kappa between the two people beside each person's kappa with ragaudit, on those runs."""
    path = DATA / f"labels-{corpus}-second.jsonl"
    if not path.exists():
        return []
    first = {(lab.pipeline, lab.qid, lab.variant, lab.seed): (lab, v) for lab, v in pairs}
    both = [(first[k][0], lab, first[k][1]) for lab in read_labels(path).labels.values() if (k := lab.key) in first]
    out = [f"\n{corpus}: {len(both)} runs labelled by two people ({path.name}); kappa between them and with ragaudit"]
    out.append(f"{'dimension':<10} {'person-person':>13} {'first-ragaudit':>15} {'second-ragaudit':>16}")
    for d in VERDICTS:
        a, b, v = ([x.value(d) for x in col] for col in zip(*both, strict=True))
        kappas = [Dimension.of(d, x, y).kappa for x, y in ((a, b), (a, v), (b, v))]
        out.append(f"{d:<10} {_f(kappas[0]):>13} {_f(kappas[1]):>15} {_f(kappas[2]):>16}")
    return out


def as_shown(v: RunVerdict) -> dict[str, bool]:
    return {d: v.value(d) for d in VERDICTS}


def mean_kappa(pairs: list[tuple[Label, Facts]], t: Thresholds) -> float:
    found = [(lab, f.verdict(t)) for lab, f in pairs]
    kappas = [Dimension.of(d, [lab.value(d) for lab, _ in found], [v[d] for _, v in found]).kappa for d in FITTED]
    return sum(k or 0.0 for k in kappas) / len(FITTED)


# ---------------------------------------------------------------- tasks


def write_tasks(corpus: str, config: Path, out: Path) -> int:
    """The blind tasks of a corpus's runs: question, gold, passages and answer, no verdict."""
    from ragaudit.io.config import load_config
    from ragaudit.io.gold import read_gold

    loaded = load_config(config)
    docs = load_corpus(loaded.audit.corpus)
    items = {i.qid: i for i in read_gold(loaded.audit.gold)[0]}
    out.mkdir(parents=True, exist_ok=True)
    tasks = []
    for path in recordings(corpus):
        pipeline = path.stem.split("-", 1)[1]
        for trace in read_trace_file(path):
            trace = dataclasses.replace(trace, config=pipeline)
            item = items[trace.qid]
            passages = []
            for n, p in enumerate(trace.retrieved, start=1):
                text = docs[p.doc_id].text[p.offsets.start : p.offsets.end] if p.offsets else ""
                passages.append({"n": n, "doc_id": p.doc_id, "section_id": p.section_id, "text": text})
            tasks.append(
                {
                    "pipeline": pipeline,
                    "qid": trace.qid,
                    "variant": trace.variant,
                    "seed": trace.seed,
                    "digest": run_digest(trace),
                    "question": trace.query,
                    "gold": {
                        "doc_id": item.doc_id,
                        "section_id": item.section_id,
                        "anchor": item.anchor.text,
                        "reference_answer": item.reference_answer,
                    },
                    "passages": passages,
                    "answer": trace.answer.text if trace.answer else "",
                }
            )
    with (out / f"tasks-{corpus}.jsonl").open("w", encoding="utf-8") as sink:
        for task in tasks:
            sink.write(json.dumps(task, ensure_ascii=False) + "\n")
    return len(tasks)


# ---------------------------------------------------------------- ExpertQA


def expertqa_rows() -> list[str]:
    from calibrate_support import DATA as EXPERTQA
    from calibrate_support import load_claims

    from ragaudit.checks.metrics.quantities import hallucinated
    from ragaudit.checks.metrics.support import support_scores

    if not EXPERTQA.exists():
        return [f"expertqa: {EXPERTQA} is absent"]
    claims = load_claims(EXPERTQA)
    scores = support_scores([(c.text, list(c.passages)) for c in claims])
    verdict = [
        s >= Thresholds().support and not hallucinated(c.text, list(c.passages))
        for c, s in zip(claims, scores, strict=True)
    ]
    found = Dimension.of("supported", [c.label == 1 for c in claims], verdict)
    yy, yn, ny, nn = found.matrix
    return [
        f"{'expertqa':<10} {'supported':<10} {found.n:>4}   {yy:>4} {yn:>4} {ny:>4} {nn:>4}   {_f(found.kappa):>5}"
        f"   {_f(found.precision):>5} {_f(found.recall):>5}"
    ]


# ---------------------------------------------------------------- the corrected rate


def coverage(
    pairs: list[tuple[Label, RunVerdict]], n: int, simulations: int, seed: int, predictor: str = "good"
) -> tuple[float, float, float, float]:
    """How often the PPI interval from `n` runs labelled at random covers the good-run rate that
    the labels of every run give; its mean width; the rate; the predictor's rate. `predictor`: the
    verdict the labels correct, ragaudit's good-run verdict or a weaker one (its citation match)."""
    truth = float(np.mean([lab.good for lab, _ in pairs]))
    everyone = [dataclasses.replace(v, correct=v.value(predictor), supported=True) for _, v in pairs]
    by_key = {v.key: v for v in everyone}
    rng = random.Random(seed)
    covered, widths = 0, []
    for _ in range(simulations):
        sample = [(dataclasses.replace(lab, sample="random"), by_key[v.key]) for lab, v in rng.sample(pairs, n)]
        found = estimate(everyone, sample)
        assert found.ci is not None
        covered += found.ci[0] <= truth <= found.ci[1]
        widths.append(found.ci[1] - found.ci[0])
    return covered / simulations, float(np.mean(widths)), truth, float(np.mean([v.good for v in everyone]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="handbook,squad")
    parser.add_argument("--tasks", type=Path, help="write the blind labelling tasks here, and nothing else")
    parser.add_argument("--disagreements", action="store_true")
    parser.add_argument("--expertqa", action="store_true", help="also ExpertQA's expert support labels")
    parser.add_argument("--config-extra", default="", help="TOML appended to each corpus's config")
    parser.add_argument("--simulations", type=int, default=400, help="random label samples for the corrected rate")
    parser.add_argument("--sample", type=int, default=40, help="labelled runs per simulated sample")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    corpora = args.corpus.split(",")
    found: dict[str, list[tuple[Label, RunVerdict]]] = {}
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ragaudit-agreement-") as tmp:
        work = Path(tmp)
        if args.tasks:
            for corpus in corpora:
                n = write_tasks(corpus, prepare(corpus, work, args.config_extra), args.tasks)
                print(f"{corpus}: {n} tasks in {args.tasks / f'tasks-{corpus}.jsonl'}")
            return 0
        for corpus in corpora:
            found[corpus], why, _ = labelled(corpus, work, args.config_extra)
            notes += why
        table = []
        for corpus, pairs in found.items():
            table += rows(corpus, [lab for lab, _ in pairs], [as_shown(v) for _, v in pairs])
        pooled = [p for pairs in found.values() for p in pairs]
        if len(found) > 1:
            table += rows("pooled", [lab for lab, _ in pooled], [as_shown(v) for _, v in pooled])
        if args.expertqa:
            table += expertqa_rows()
    print(header())
    print("\n".join(table))
    for note in notes:
        print(f"note: {note}")
    for corpus, pairs in found.items():
        for line in second_labeller(corpus, pairs):
            print(line)
    if len(found) > 1:
        print("\nfit across corpora: the claim thresholds fitted to one corpus's labels, judged on the other's")
        print(f"{'fitted on':<10} {'judged on':<10} {'thresholds':<44} {'mean kappa':>10}   " + "  ".join(FITTED))
        facts = {c: [(lab, Facts.of(v, bool(v.answer))) for lab, v in pairs] for c, pairs in found.items()}
        for source in found:
            fitted, _, _, kept = cross_fit(facts[source], Thresholds())  # as calibrate --labels fits
            if kept:
                print(f"{source}: {kept}")
            for target in found:
                if target == source:
                    continue
                for name, t in (("defaults", Thresholds()), (source, fitted)):
                    shown = ", ".join(f"{getattr(t, k):.2f}" for k in Thresholds.FITTED)
                    per = [
                        Dimension.of(
                            d, [lab.value(d) for lab, _ in facts[target]], [f.verdict(t)[d] for _, f in facts[target]]
                        ).kappa
                        for d in FITTED
                    ]
                    print(
                        f"{name:<10} {target:<10} {shown:<44} {mean_kappa(facts[target], t):>10.3f}   "
                        + "  ".join(_f(k) for k in per)
                    )
    print(f"\nthe corrected good-run rate: {args.simulations} random samples of {args.sample} labelled runs")
    print("  (corrected from ragaudit's good-run verdict, and from a weaker one: its citation match alone)")
    if len(found) > 1:
        found["pooled"] = pooled
    for corpus, pairs in found.items():
        if len(pairs) <= args.sample:
            continue
        for predictor in ("good", "citation"):
            covered, width, truth, raw = coverage(pairs, args.sample, args.simulations, 0, predictor)
            differ = sum(lab.good != (v.value(predictor)) for lab, v in pairs)
            print(
                f"{corpus:<10} {predictor:<9} labelled rate {truth:.3f}, predicted {raw:.3f} ({differ} runs differ): "
                f"the 95% interval covers it in {covered:.1%} of samples (mean width {width:.3f})"
            )
    if args.disagreements:
        for corpus, pairs in found.items():
            for lab, v in pairs:
                differs = [d for d in VERDICTS if lab.value(d) != v.value(d)]
                if not differs:
                    continue
                said = " ".join(f"{d}: label {'yes' if lab.value(d) else 'no'}" for d in differs)
                print(f"\n[{corpus}] {lab.pipeline} {lab.qid} v{lab.variant} s{lab.seed} — {said}")
                print(f"  answer: {' '.join(v.answer.split())[:300]}")
                print(f"  label note: {lab.note}")
                print(f"  ragaudit: {v.why}")
                for claim in v.claims:
                    print(
                        f"    claim {claim['n']} [{claim['grounding']}, support {_f(claim['support'])}, "
                        f"anchor {claim['anchor']}] {' '.join(claim['text'].split())[:160]}"
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
