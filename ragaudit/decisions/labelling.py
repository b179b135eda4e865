"""`ragaudit label` (docs/reference.md §12): a person labels a run directory's runs, one at a time,
blind to ragaudit's verdict until the run is labelled.

The runs to label are those without a label of their current digest, chosen (`--by`):

* `random`: a seeded random sample, so that the labels can correct the good-run rate (`agreement.estimate`);
* `stratified`: in turn from each (pipeline, ragaudit's verdict good or not), so each is seen;
* `uncertainty`: the runs closest to a threshold first (a claim's support near `[support] threshold`,
  its anchor support near `[lambda] anchor_support_min`): where a label teaches the most.

Each task shows what a person needs to judge the run and nothing of ragaudit's judgement: the
question, the answer with its markers and the claims it splits into (each with the passages it
cites), every retrieved passage in its document (the span marked), and the gold anchor with its
reference answer. `record` appends the label to the labels file (never rewrites it) and only then
returns ragaudit's verdict on that run.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ragaudit.checks.metrics.decide import Thresholds
from ragaudit.core.errors import InputError, UsageError
from ragaudit.core.markers import markers
from ragaudit.core.types import Corpus, Trace
from ragaudit.decisions.agreement import RunVerdict, run_verdicts
from ragaudit.io import rundir, runfiles
from ragaudit.io.labels import DIMENSIONS, SAMPLES, Label, RunKey, read_labels

_DEFAULT = Thresholds()  # the config's support threshold and anchor support bar

BY = ("random", "stratified", "uncertainty")
CONTEXT = 240  # characters of the document shown on each side of a passage
LABELS = "labels.jsonl"


def default_labels(run_dir: Path) -> Path:
    """Beside the run directories, never inside one: a run's stamped folder is not written to."""
    return Path(run_dir).resolve().parent / LABELS


def _margin(v: RunVerdict, support: float, anchor: float) -> float:
    """How near a threshold the run's verdict stands (0: on it)."""
    gaps = [abs(c["support"] - support) for c in v.claims if c.get("support") is not None]
    gaps += [abs(c["anchor_support"] - anchor) for c in v.claims if c.get("anchor_support") is not None]
    return min(gaps, default=1.0)


def choose(
    verdicts: dict[RunKey, RunVerdict],
    done: set[RunKey],
    *,
    n: int | None,
    by: str,
    seed: int = 0,
    thresholds: tuple[float, float] = (_DEFAULT.support, _DEFAULT.anchor_support_min),
) -> list[RunKey]:
    """The keys of the runs to label, in the order they are shown."""
    if by not in BY:
        raise UsageError(f"The 'by' parameter must be one of {', '.join(BY)}. Got {by!r} instead.")
    if n is not None and n < 1:
        raise UsageError(f"The 'sample' parameter must be an int in [1, inf). Got {n!r} instead.")
    todo = sorted(k for k in verdicts if k not in done)
    if by == "random":
        random.Random(seed).shuffle(todo)
    elif by == "uncertainty":
        todo.sort(key=lambda k: (_margin(verdicts[k], *thresholds), k))
    else:
        strata: dict[tuple[str, bool], list[RunKey]] = {}
        for k in todo:
            strata.setdefault((k[0], verdicts[k].good), []).append(k)
        rng = random.Random(seed)
        for keys in strata.values():
            rng.shuffle(keys)
        todo = [k for group in _interleave(list(strata.values())) for k in group]
    return todo[:n] if n is not None else todo


def _interleave(groups: list[list[RunKey]]) -> list[list[RunKey]]:
    out = []
    for i in range(max((len(g) for g in groups), default=0)):
        out.append([g[i] for g in groups if i < len(g)])
    return out


@dataclass
class Session:
    """The runs a person labels, and where their labels go."""

    run_dir: Path
    labels_path: Path
    labeller: str
    by: str
    keys: list[RunKey]
    verdicts: dict[RunKey, RunVerdict]
    tasks: list[dict[str, Any]]
    stale: list[Label]
    recorded: int = 0

    def task(self, i: int) -> dict[str, Any]:
        """Task i, blind: nothing of ragaudit's judgement."""
        if not 0 <= i < len(self.tasks):
            raise UsageError(f"expected a task from 0 to {len(self.tasks) - 1}, found {i}")
        return self.tasks[i]

    def record(self, i: int, values: dict[str, Any], note: str = "") -> dict[str, Any]:
        """Append the label of task i to the labels file, then return ragaudit's verdict on the run."""
        task = self.task(i)
        found = {d: values.get(d) for d in DIMENSIONS}
        if not all(isinstance(v, bool) for v in found.values()):
            raise UsageError(f"expected {', '.join(DIMENSIONS)} each true or false, found {found}")
        if not isinstance(note, str):
            raise UsageError("expected the note as text")
        key = self.keys[i]
        verdict = self.verdicts[key]
        label = {
            "pipeline": key[0],
            "qid": key[1],
            "variant": key[2],
            "seed": key[3],
            **found,
            "note": note,
            "labeller": self.labeller,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "digest": verdict.digest,
            "sample": self.by if self.by in SAMPLES else "",
        }
        append_label(self.labels_path, label)
        self.recorded += 1
        task["labelled"] = found
        return {
            "verdict": {d: verdict.value(d) for d in ("good", *DIMENSIONS)},
            "why": verdict.why,
            "claims": [
                {k: c.get(k) for k in ("n", "grounding", "support", "anchor", "contradicts", "hallucinated")}
                for c in verdict.claims
            ],
        }


def append_label(path: Path, label: dict[str, Any]) -> None:
    """One line appended and flushed to disk: a label once written stays, whatever happens next."""
    line = orjson.dumps(label, option=orjson.OPT_SORT_KEYS) + b"\n"
    with open(path, "ab") as sink:
        sink.write(line)
        sink.flush()
        os.fsync(sink.fileno())


def open_session(
    run_dir: str | Path,
    *,
    labels: str | Path | None = None,
    sample: int | None = None,
    by: str = "random",
    seed: int = 0,
    labeller: str | None = None,
) -> Session:
    """The runs of `run_dir` to label: those without a current label in `labels`, chosen `by`."""
    from ragaudit.decisions.agreement import match

    run_dir = Path(run_dir)
    verdicts = run_verdicts(run_dir)
    path = Path(labels) if labels is not None else default_labels(run_dir)
    if path.resolve().is_relative_to(run_dir.resolve()):
        raise UsageError(f"--labels {path}: a run directory is never written to after its run; put labels beside it")
    if path.exists() and not path.is_file():
        raise InputError(f"{path}: expected a labels file, found a folder or a device")
    stale: list[Label] = []
    done: set[RunKey] = set()
    if path.exists():
        found = read_labels(path)
        matched = match(found, verdicts, run_dir)
        done = {lab.key for lab, _ in matched.pairs}
        stale = matched.stale
    config = _thresholds(run_dir)
    keys = choose(verdicts, done, n=sample, by=by, seed=seed, thresholds=config)
    context = _Context.of(run_dir)
    tasks = [context.task(verdicts[k], k) for k in keys]
    who = labeller or os.environ.get("USER") or "labeller"
    return Session(run_dir, path, who, by, keys, verdicts, tasks, stale)


def _thresholds(run_dir: Path) -> tuple[float, float]:
    """The support threshold and the anchor support bar the run's claims were judged with."""
    try:
        meta = orjson.loads((run_dir / "report.json").read_bytes()).get("meta", {})
    except (OSError, orjson.JSONDecodeError, AttributeError):
        meta = {}
    found = meta.get("thresholds") if isinstance(meta.get("thresholds"), dict) else {}
    default = (_DEFAULT.support, _DEFAULT.anchor_support_min)
    support, anchor = found.get("support", default[0]), found.get("anchor_support_min", default[1])
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (support, anchor))
    return (float(support), float(anchor)) if ok else default


@dataclass
class _Context:
    """What a task shows besides the run: its traces' passages and the gold items."""

    corpus: Corpus | None
    traces: dict[tuple[str | None, str, int, int], Trace]  # by (config, qid, variant, seed)
    gold: dict[str, dict[str, Any]]

    @classmethod
    def of(cls, run_dir: Path) -> _Context:
        from ragaudit.checks.questionstore import QUESTIONS
        from ragaudit.io.corpus import load_corpus
        from ragaudit.io.stream import stream_trace_file

        manifest = rundir.read_manifest(run_dir)
        corpus_path = (manifest.get("paths") or {}).get("corpus")
        corpus = load_corpus(corpus_path) if corpus_path and Path(corpus_path).exists() else None
        traces = {(t.config, t.qid, t.variant, t.seed): t for t in stream_trace_file(run_dir / runfiles.TRACES)}
        gold: dict[str, dict[str, Any]] = {}
        if (run_dir / QUESTIONS).is_file():
            import pyarrow.parquet as pq

            for row in pq.read_table(
                run_dir / QUESTIONS, columns=["qid", "question", "doc_id", "section_id", "gold"]
            ).to_pylist():
                gold.setdefault(row["qid"], {**orjson.loads(row["gold"] or "{}"), "doc_id": row["doc_id"],
                                             "section_id": row["section_id"], "question": row["question"]})  # fmt: skip
        return cls(corpus, traces, gold)

    def task(self, verdict: RunVerdict, key: tuple[Any, ...]) -> dict[str, Any]:
        from ragaudit.checks.metrics.delta_s import payload_text

        trace = self.traces.get(key)
        passages = []
        for n, p in enumerate(getattr(trace, "retrieved", ()) or (), start=1):
            text = payload_text(p, self.corpus)
            before = after = ""
            if self.corpus is not None and p.doc_id in self.corpus and p.offsets and p.offsets.unit == "char":
                doc = self.corpus[p.doc_id].text
                before = doc[max(0, p.offsets.start - CONTEXT) : p.offsets.start]
                after = doc[p.offsets.end : p.offsets.end + CONTEXT]
            passages.append(
                {"n": p.k_pos or n, "snippet_id": p.snippet_id, "doc_id": p.doc_id, "section_id": p.section_id,
                 "text": text, "before": before, "after": after}
            )  # fmt: skip
        cited = {c for claim in verdict.claims for c in claim.get("citations") or []}
        for p in passages:
            p["cited"] = p["snippet_id"] in cited
        answer = verdict.answer
        gold = self.gold.get(key[1], {})
        return {
            "pipeline": key[0],
            "qid": key[1],
            "variant": key[2],
            "seed": key[3],
            "question": verdict.query,
            "answer": answer,
            "markers": [[m.start(), m.end()] for m in markers(answer)],
            "claims": [{"n": c.get("n"), "text": c.get("text"), "citations": c.get("citations") or []}
                       for c in verdict.claims],
            "passages": passages,
            "gold": {
                "doc_id": gold.get("doc_id"),
                "section_id": gold.get("section_id"),
                "anchor": (gold.get("anchor") or {}).get("text") if isinstance(gold.get("anchor"), dict) else gold.get("anchor"),
                "reference_answer": gold.get("reference_answer"),
            },
            "labelled": None,
        }  # fmt: skip
