"""`ragaudit probe CONFIG`: does each pipeline's answer come from the passage it cites (docs/reference.md §13)?

For each sampled gold question and each edit kind (`edits.py`), a copy of the corpus is written with
the anchor's key fact edited, each pipeline is pointed at it (`targets.py`: one index build), and
the question is asked again under the config's seeds (one call a run); the answer follows the
source, keeps the old fact, or neither (`classify.py`). A second probe leaves the anchor's section
out of what the pipeline retrieves and asks whether the answer still states the fact. Every
finished piece of work is appended to the probe directory's ledger (`ledger.py`), so a probe
killed mid-way loses nothing and `--resume` finishes it. The user's corpus is only ever read.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Iterable, Iterator

from ragaudit.core.errors import UsageError
from ragaudit.core.model import Report
from ragaudit.core.progress import phase
from ragaudit.core.types import GoldItem, Trace
from ragaudit.flows.probing.classify import classify, states_fact, still_states
from ragaudit.flows.probing.edits import KINDS, Cannot, Edit, catalog, make_edit, write_copy
from ragaudit.flows.probing.ledger import Ledger
from ragaudit.flows.probing.summary import ProbeSummary, summarize
from ragaudit.flows.probing.targets import Target, Variant, cannot_exclude, cannot_repoint
from ragaudit.io import rundir
from ragaudit.io.config import Config, PipelineConfig
from ragaudit.io.traces import trace_to_dict
from ragaudit.pipelines.inputs import Inputs
from ragaudit.pipelines.workers import Interrupted, Stopper

SAMPLE_SEED = 0  # which questions `--sample N` draws


@dataclass
class Probed:
    """A finished probe: its report (report.json), what it found, its directory."""

    report: Report
    summary: ProbeSummary
    folder: Path
    resumed: int = 0  # pieces of work a resumed probe found done
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.report.gate.passed


def _listed(value: str | Iterable[str], choices: Collection[str], what: str) -> list[str]:
    names = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)
    unknown = [n for n in names if n not in choices]
    if unknown or not names:
        raise UsageError(
            f"{what}: expected names of {', '.join(choices)}, found {', '.join(map(repr, unknown)) or 'none'}"
        )
    return list(dict.fromkeys(names))


def _sample(items: list[GoldItem], size: int | None) -> list[GoldItem]:
    if size is None or size >= len(items):
        return list(items)
    if size < 1:
        raise UsageError(f"--sample: expected a count >= 1, found {size}")
    chosen = sorted(random.Random(SAMPLE_SEED).sample(range(len(items)), size))
    return [items[i] for i in chosen]


def _folder(config: Config, out: Path | None) -> Path:
    root = Path(out) if out else config.audit.out
    base = root / f"probe-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    folder, n = base, 1
    while True:
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            n += 1
            folder = Path(f"{base}-{n}")


def probe(
    config: str | Path | Config,
    *,
    only: str | list[str] | None = None,
    sample: int | None = None,
    edits: str | list[str] | None = None,
    resume: Path | None = None,
    out: Path | None = None,
) -> Probed:
    """Probe the pipelines of `config` (a path or a loaded Config): `only` these (names, or
    comma-separated), on `sample` gold questions (a seeded sample; all by default), with these `edits`
    (number, entity, negation); `resume` finishes the probe directory of an interrupted probe, else a
    new one goes to `out` (default: [audit] out). Returns what it found (`Probed`), its report written."""
    from ragaudit.io.config import load_config
    from ragaudit.io.files import refuse_overwriting

    config = config if isinstance(config, Config) else load_config(config)

    names = _listed(only, [p.name for p in config.pipelines], "--only") if only else [p.name for p in config.pipelines]
    kinds = _listed(edits, KINDS, "--edits") if edits else list(KINDS)
    inputs = Inputs.from_config(config)
    inputs.check_gold()
    items = _sample(inputs.items, sample)
    if resume is not None and not Path(resume).is_dir():
        raise UsageError(f"--resume {resume}: expected a probe directory, found none")
    refuse_overwriting(
        [Path(resume or out or config.audit.out)], [config.path, config.audit.gold, config.audit.corpus], option="--out"
    )
    header = {
        "inputs": rundir.input_hashes(config),
        "pipelines": names,
        "qids": [i.qid for i in items],
        "edits": kinds,
        "seeds": list(config.audit.seeds),
    }
    folder = Path(resume) if resume is not None else _folder(config, out)
    with rundir.locked(folder):
        ledger = Ledger(folder, header, resume=resume is not None)
        resumed = len(ledger.records)
        by_qid = {i.qid: i for i in inputs.items}
        work = _Work(
            inputs,
            [p for p in config.pipelines if p.name in names],
            [by_qid[q] for q in ledger.header["qids"]],
            kinds,
            ledger,
            folder,
        )
        work.run(f"ragaudit probe {config.path} --resume {folder}")
        from ragaudit.auditing.reporting import write_report
        from ragaudit.flows.probing.report import audited, with_findings

        found = summarize(ledger, names, kinds)
        manifest = {
            "seeds": list(config.audit.seeds),
            "paraphrases": 1,
            "inputs": header["inputs"],
            "config_path": str(Path(config.path).resolve()) if config.path else None,
            "index": work.index,
            "embed_model": config.embedder.model,
            "embed_model_id": inputs.encoder.model_id,
        }
        with phase("auditing the runs on the real corpus and writing report.json", counts_as="writing"):
            report = with_findings(audited(ledger, inputs, folder, manifest, names), found, config.gate)
            write_report(folder / "report.json", report)
    return Probed(report, found, folder, resumed, work.warnings + inputs.cache_warnings())


class _Work:
    """The probe's work, piece by piece, each written to the ledger as it finishes."""

    def __init__(
        self,
        inputs: Inputs,
        specs: list[PipelineConfig],
        items: list[GoldItem],
        kinds: list[str],
        ledger: Ledger,
        folder: Path,
    ):
        self.inputs, self.config, self.specs, self.items, self.kinds = inputs, inputs.config, specs, items, kinds
        self.ledger, self.folder = ledger, folder
        self.real = Variant(Path(self.config.audit.corpus).resolve(), inputs.corpus)  # type: ignore[arg-type]
        names = catalog(inputs.corpus)
        self.edits: dict[tuple[str, str], Edit | Cannot] = {
            (i.qid, kind): make_edit(kind, i, inputs.corpus, names)
            for i in items
            for kind in (*kinds, "number", "entity")
        }
        # as the runs on the real corpus reported it (a resumed probe's too)
        self.index: dict[str, dict[str, Any] | None] = {
            r["pipeline"]: t["index"] for r in ledger.of("before") for t in r["traces"] if t.get("index")
        }
        self.warnings: list[str] = []
        self.target: Target | None = None
        for left in folder.glob(".copy-*"):  # a copy a killed probe left behind
            shutil.rmtree(left, ignore_errors=True)

    def run(self, resume_with: str) -> None:
        seeds = len(self.config.audit.seeds)
        total = len(self.specs) * len(self.items) * seeds * (2 + len(self.kinds))
        with Stopper(self._kill) as self.stopper, phase("probing", total, unit="runs") as self.shown:
            self.shown.advance(0)
            for (qid, kind), edit in self.edits.items():
                if isinstance(edit, Cannot) and kind in self.kinds and not self.ledger.has("cannot", None, qid, kind):
                    self.ledger.add({"record": "cannot", "qid": qid, "kind": kind, "why": edit.why})
            for spec in self.specs:
                self._before(spec)
            for item in self.items:
                for kind in self.kinds:
                    self._edited(item, kind)
            for item in self.items:
                for spec in self.specs:
                    self._excluded(spec, item)
        if self.stopper.stopped:
            signum = self.stopper.signum or signal.SIGTERM
            raise Interrupted(
                signum,
                f"interrupted by {signal.Signals(signum).name}: {len(self.ledger.records)} finished pieces of work "
                f"kept in {self.folder}; finish with: {resume_with}",
            )

    def _kill(self) -> None:
        if self.target is not None:
            self.target.kill()

    def _stopped(self) -> bool:
        return self.stopper.stopped

    def _skipped(self, spec: PipelineConfig) -> bool:
        return self.ledger.has("skip", spec.name)

    def _ask(self, target: Target, item: GoldItem) -> list[Trace]:
        self.target = target
        try:
            out = []
            for seed in self.config.audit.seeds:
                out.append(target.ask(item, seed))
                self.shown.advance(1)
            return out
        finally:
            self.target = None

    def _close(self, target: Target) -> None:
        self.warnings += [w for w in target.close() if w not in self.warnings]

    def _before(self, spec: PipelineConfig) -> None:
        if (why := cannot_repoint(spec, self.config)) is not None:
            if not self._skipped(spec):
                self.ledger.add({"record": "skip", "pipeline": spec.name, "why": why})
            return
        todo = [i for i in self.items if not self.ledger.has("before", spec.name, i.qid)]
        if not todo or self._stopped():
            return
        target = Target(spec, self.inputs, self.real, must_start=True)  # cannot start on the real corpus: exit 4
        try:
            builds = 1  # counted with the first question it answers
            for item in todo:
                if self._stopped():
                    return
                calls = target.calls
                traces = self._ask(target, item)
                self.index[spec.name] = target.index() or self.index.get(spec.name)
                record = {"record": "before", "pipeline": spec.name, "qid": item.qid, "builds": builds}
                self.ledger.add({**record, "calls": target.calls - calls, "traces": [trace_to_dict(t) for t in traces]})
                builds = 0
        finally:
            self._close(target)

    @contextlib.contextmanager
    def _copy(self, edit: Edit) -> Iterator[Variant]:
        folder = self.folder / f".copy-{edit.qid}-{edit.kind}".replace("/", "_")
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        try:
            written = write_copy(Path(self.config.audit.corpus), self.inputs.corpus, edit, folder)  # type: ignore[arg-type]
            variant = Variant.of(written)
            if variant.corpus[edit.doc_id].text[edit.start : edit.end] != edit.edited:
                raise ValueError(f"{edit.doc_id}: the edited copy does not hold the edited anchor")
            yield variant
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _edited(self, item: GoldItem, kind: str) -> None:
        edit = self.edits[(item.qid, kind)]
        todo = [s for s in self.specs if not self._skipped(s) and not self.ledger.has("edit", s.name, item.qid, kind)]
        if isinstance(edit, Cannot) or not todo or self._stopped():
            return
        with self._copy(edit) as variant:
            for spec in todo:
                if self._stopped() or self._skipped(spec):
                    return
                target = Target(spec, self.inputs, variant)
                try:
                    traces = self._ask(target, item)
                finally:
                    self._close(target)
                if (why := self._not_repointed(spec, item, traces)) is not None:
                    self.ledger.add(
                        {"record": "skip", "pipeline": spec.name, "why": why, "builds": 1, "calls": target.calls}
                    )
                    continue
                stated = self._stated_before(spec, item, edit)
                runs = []
                for seed, trace in zip(self.config.audit.seeds, traces):
                    found = classify(edit, trace, variant.corpus)
                    said = {"answer": _answer(trace), "outcome": found.outcome, "why": found.why}
                    runs.append({"seed": seed, **said, "stated_before": stated.get(seed, False)})
                record = {
                    "record": "edit",
                    "pipeline": spec.name,
                    "qid": item.qid,
                    "kind": kind,
                    "edit": edit.to_json(),
                }
                self.ledger.add({**record, "runs": runs, "builds": 1, "calls": target.calls})

    def _not_repointed(self, spec: PipelineConfig, item: GoldItem, traces: list[Trace]) -> str | None:
        """A command that reports the same index on the copy as on the real corpus did not read `corpus`."""
        if spec.kind != "command":
            return None
        before = {
            (t.get("index") or {}).get("index_hash") for r in self.ledger.of("before", spec.name) for t in r["traces"]
        }
        after = {t.index.index_hash for t in traces if t.index is not None and t.error is None}
        same = sorted(h for h in after & before if h is not None)
        if not same:
            return None
        return (
            f"it reported index_hash {same[0]} on the edited copy of {item.doc_id} as on the real corpus: "
            "the program does not read `corpus` from its requests, so it cannot be pointed at an edited copy"
        )

    def _stated_before(self, spec: PipelineConfig, item: GoldItem, fact: Edit) -> dict[int, bool]:
        """Per seed, whether the pipeline's answer on the real corpus stated the fact as it is."""
        before: list[dict[str, Any]] = next(
            (r["traces"] for r in self.ledger.of("before", spec.name) if r["qid"] == item.qid), []
        )
        from ragaudit.checks.metrics.keycontent import key_content

        key = key_content(item.anchor.text, item.question, item.reference_answer)
        bars = {"recall": self.config.lambda_.key_recall_min, "precision": self.config.lambda_.key_precision_min}
        return {t["seed"]: states_fact(fact, _parsed(t, self.config), key, **bars) for t in before}

    def _excluded(self, spec: PipelineConfig, item: GoldItem) -> None:
        if self._skipped(spec) or self.ledger.has("exclude", spec.name, item.qid) or self._stopped():
            return
        if (why := cannot_exclude(spec, self.config)) is not None:
            if not self.ledger.has("no_exclusion", spec.name):
                self.ledger.add({"record": "no_exclusion", "pipeline": spec.name, "why": why})
            return
        fact = next((e for k in ("number", "entity") if isinstance(e := self.edits[(item.qid, k)], Edit)), None)
        if fact is None:
            return  # the anchor states no quantity or name to look for
        stated = self._stated_before(spec, item, fact)
        target = Target(spec, self.inputs, self.real, [(item.doc_id, item.section_id)])
        try:
            traces = self._ask(target, item)
        finally:
            self._close(target)
        runs = []
        for seed, trace in zip(self.config.audit.seeds, traces):
            found = still_states(fact, trace)
            runs.append(
                {
                    "seed": seed,
                    "answer": _answer(trace),
                    "outcome": found.outcome,
                    "why": found.why,
                    "stated_before": stated.get(seed, False),
                }
            )
        record = {
            "record": "exclude",
            "pipeline": spec.name,
            "qid": item.qid,
            "section": [item.doc_id, item.section_id],
        }
        self.ledger.add({**record, "fact": fact.old, "runs": runs, "builds": 1, "calls": target.calls})


def _answer(trace: Trace) -> str | None:
    if trace.error is not None or trace.answer is None:
        return None
    return trace.answer.text or " ".join(s.text for s in trace.answer.segments)


def _parsed(trace: dict[str, Any], config: Config) -> Trace:
    from ragaudit.io.traces import parse_trace

    found = parse_trace(trace, offset_unit=config.audit.offset_unit, markers=config.audit.marker_forms)
    return found if isinstance(found, Trace) else Trace(str(trace.get("qid")), 0, 0, error="unreadable")
