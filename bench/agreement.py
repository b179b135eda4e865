"""How often ragaudit's verdict agrees with a person's, on a real LLM's answers.

The recordings under `bench/data/llm/` are a real small LLM's answers (SmolLM2-135M-Instruct,
`bench/smollm2.py`) over two corpora (the handbook and SQuAD), each run labelled blind by the
written guide `bench/labelling.md` (`labels-<corpus>.jsonl`). This replays each corpus's
recordings through `ragaudit run` with the shipped defaults (or `--config-extra`, TOML appended
to the config), and prints per corpus and pooled, per dimension, the confusion matrix of label
against verdict, Cohen's kappa, and the precision and recall of ragaudit's flags (a flag is
ragaudit saying *no*; it is right when the label says no too):

| dimension | the label | ragaudit's verdict |
|---|---|---|
| correct | the answer gives the gold fact from the passage holding it | the run is `correct` |
| supported | every claim is supported by what it cites | `fully_grounded` is 1 |
| citation | the answer cites the passage holding the gold fact | `citation_match` is 1 |
| good | all three | correct and fully grounded |

and the same for ExpertQA's expert support labels (../shared/data/expertqa), claim by claim:
the bundled support scorer against the experts' "Complete" (supported) and "Partial" or
"Incomplete" (not). `--disagreements` lists every run where a label and the verdict differ, with
ragaudit's why; `--tasks DIR` writes the blind labelling tasks (no verdict in them) instead.

    python bench/agreement.py [--corpus handbook,squad] [--disagreements] [--expertqa]
    python bench/agreement.py --tasks DIR
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragaudit.io.corpus import load_corpus
from ragaudit.io.stream import read_trace_file
from ragaudit.labels import DIMENSIONS, read_labels, run_digest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "llm"
sys.path.insert(0, str(ROOT / "bench"))

from corpora import build  # noqa: E402

QUESTIONS = {"handbook": None, "squad": 40}  # the gold items the recordings were made on
CHUNK_SIZE = {"handbook": 64, "squad": 256}


@dataclass
class Verdict:
    """ragaudit's verdict on one run, and what a labeller reads of it."""

    key: tuple[str, str, int, int]
    digest: str
    correct: bool
    supported: bool
    citation: bool
    why: str
    claims: list[dict]
    query: str
    answer: str

    @property
    def good(self) -> bool:
        return self.correct and self.supported

    def value(self, dimension: str) -> bool:
        return self.good if dimension == "good" else getattr(self, dimension)


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


def verdicts(config: Path) -> tuple[dict[tuple, Verdict], Path]:
    import ragaudit

    outcome = ragaudit.audit(config)
    run_dir = outcome.run_dir
    report = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    digests = {(t.config, t.qid, t.variant, t.seed): run_digest(t) for t in read_trace_file(run_dir / "traces.jsonl")}
    out = {}
    for question in report["questions"]:
        for run in question["runs"]:
            key = (run["pipeline"], run["qid"], run["variant"], run["seed"])
            metrics = run["metrics"]
            answered = bool(run["answer"]) and not run["errored"]  # an answer of no claim asserts nothing unsupported
            out[key] = Verdict(
                key,
                digests[key],
                bool(run["correct"]),
                metrics.get("fully_grounded") == 1 or metrics.get("fully_grounded") is None and answered,
                metrics.get("citation_match") == 1,
                run["why"],
                run.get("claims") or [],
                run["query"] or "",
                run["answer"] or "",
            )
    return out, run_dir


# ---------------------------------------------------------------- agreement


def kappa(a: np.ndarray, b: np.ndarray) -> float | None:
    """Cohen's kappa of two boolean raters."""
    if len(a) == 0:
        return None
    observed = float(np.mean(a == b))
    pa, pb = float(np.mean(a)), float(np.mean(b))
    expected = pa * pb + (1 - pa) * (1 - pb)
    return None if expected == 1 else (observed - expected) / (1 - expected)


@dataclass
class Agreement:
    n: int
    matrix: tuple[int, int, int, int]  # label yes & verdict yes, label yes & no, label no & yes, label no & no
    kappa: float | None
    precision: float | None  # of ragaudit's flags (verdict no): label no too
    recall: float | None  # of the label's no: flagged

    @classmethod
    def of(cls, labels: list[bool], verdict: list[bool]) -> "Agreement":
        a, b = np.array(labels, dtype=bool), np.array(verdict, dtype=bool)
        yy, yn = int(np.sum(a & b)), int(np.sum(a & ~b))
        ny, nn = int(np.sum(~a & b)), int(np.sum(~a & ~b))
        return cls(
            len(a),
            (yy, yn, ny, nn),
            kappa(a, b),
            nn / (nn + yn) if nn + yn else None,
            nn / (nn + ny) if nn + ny else None,
        )


def _f(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def agreement_rows(pairs: list[tuple], name: str) -> list[str]:
    rows = []
    for dimension in ("good", *DIMENSIONS):
        found = Agreement.of([lab.value(dimension) for lab, _ in pairs], [v.value(dimension) for _, v in pairs])
        yy, yn, ny, nn = found.matrix
        rows.append(
            f"{name:<10} {dimension:<10} {found.n:>4}   {yy:>4} {yn:>4} {ny:>4} {nn:>4}   {_f(found.kappa):>5}"
            f"   {_f(found.precision):>5} {_f(found.recall):>5}"
        )
    return rows


def header() -> str:
    return (
        f"{'corpus':<10} {'dimension':<10} {'runs':>4}   {'y/y':>4} {'y/n':>4} {'n/y':>4} {'n/n':>4}   {'kappa':>5}"
        f"   {'prec':>5} {'rec':>5}\n"
        "  (label/verdict: y/n = the label says yes, ragaudit says no; precision and recall of ragaudit's no)"
    )


def matched(corpus: str, found: dict[tuple, Verdict]) -> tuple[list[tuple], list[str]]:
    path = DATA / f"labels-{corpus}.jsonl"
    labels = read_labels(path)
    notes = [str(p) for p in labels.problems]
    pairs = []
    for key, label in sorted(labels.labels.items()):
        verdict = found.get(key)
        if verdict is None:
            notes.append(f"{path}:{label.line}: no run {key} in the recordings")
        elif verdict.digest != label.digest:
            notes.append(f"{path}:{label.line}: stale: run {key} changed since it was labelled")
        else:
            pairs.append((label, verdict))
    missing = sorted(set(found) - {lab.key for lab, _ in pairs})
    if missing:
        notes.append(f"{corpus}: {len(missing)} runs without a label")
    return pairs, notes


# ---------------------------------------------------------------- tasks


def write_tasks(corpus: str, config: Path, out: Path) -> int:
    """The blind tasks of a corpus's runs: question, gold, passages and answer, no verdict."""
    from ragaudit.io.config import load_config
    from ragaudit.io.gold import read_gold

    loaded = load_config(config)
    docs = load_corpus(loaded.corpus)
    items = {i.qid: i for i in read_gold(loaded.gold)[0]}
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
    from calibrate_support import LABELS, load_claims

    from ragaudit.metrics.quantities import hallucinated
    from ragaudit.metrics.support import load_params, support_scores

    if not EXPERTQA.exists():
        return [f"expertqa: {EXPERTQA} is absent"]
    claims = load_claims(EXPERTQA)
    scores = support_scores([(c.claim, [c.evidence]) for c in claims])
    threshold = 0.7
    verdict = [s >= threshold and not hallucinated(c.claim, [c.evidence]) for c, s in zip(claims, scores)]
    labels = [c.label == 1 for c in claims]
    del LABELS, load_params
    found = Agreement.of(labels, verdict)
    yy, yn, ny, nn = found.matrix
    return [
        f"{'expertqa':<10} {'supported':<10} {found.n:>4}   {yy:>4} {yn:>4} {ny:>4} {nn:>4}   {_f(found.kappa):>5}"
        f"   {_f(found.precision):>5} {_f(found.recall):>5}"
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="handbook,squad")
    parser.add_argument("--tasks", type=Path, help="write the blind labelling tasks here, and nothing else")
    parser.add_argument("--disagreements", action="store_true")
    parser.add_argument("--expertqa", action="store_true", help="also ExpertQA's expert support labels")
    parser.add_argument("--config-extra", default="", help="TOML appended to each corpus's config")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    corpora = args.corpus.split(",")
    with tempfile.TemporaryDirectory(prefix="ragaudit-agreement-") as tmp:
        work = Path(tmp)
        if args.tasks:
            for corpus in corpora:
                n = write_tasks(corpus, prepare(corpus, work, args.config_extra), args.tasks)
                print(f"{corpus}: {n} tasks in {args.tasks / f'tasks-{corpus}.jsonl'}")
            return 0
        pooled: list[tuple] = []
        rows, notes, disagreements = [], [], []
        for corpus in corpora:
            found, _ = verdicts(prepare(corpus, work, args.config_extra))
            pairs, why = matched(corpus, found)
            notes += why
            pooled += pairs
            rows += agreement_rows(pairs, corpus)
            for label, verdict in pairs:
                differs = [d for d in ("good", *DIMENSIONS) if label.value(d) != verdict.value(d)]
                if differs:
                    disagreements.append((corpus, label, verdict, differs))
        rows += agreement_rows(pooled, "pooled")
        if args.expertqa:
            rows += expertqa_rows()
    print(header())
    print("\n".join(rows))
    for note in notes:
        print(f"note: {note}")
    if args.disagreements:
        print(f"\n{len(disagreements)} runs where label and verdict differ:")
        for corpus, label, verdict, differs in disagreements:
            pipeline, qid, variant, seed = label.key
            said = " ".join(f"{d}: label {'yes' if label.value(d) else 'no'}" for d in differs)
            print(f"\n[{corpus}] {pipeline} {qid} v{variant} s{seed} — {said}")
            print(f"  answer: {' '.join(verdict.answer.split())[:300]}")
            print(f"  label note: {label.note}")
            print(f"  ragaudit: {verdict.why}")
            for claim in verdict.claims:
                print(
                    f"    claim {claim['n']} [{claim['grounding']}, support {_f(claim['support'])}, "
                    f"anchor {claim['anchor']}] {' '.join(claim['text'].split())[:160]}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
