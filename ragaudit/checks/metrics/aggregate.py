"""Run → question → section → pipeline, one run at a time: memory grows with the questions, not
with the runs. Each question keeps running sums and the few extremes the gate needs (the worst
ΔS, the lowest coverage, how many runs missed the gold, stated a hallucination or errored) and
the intersection and union of the sections its runs cite, from which λ follows.

Means are over runs; a metric that is null for a run (coverage with unreconcilable units, support
without an answer) is left out of its mean, as it always was; an errored run counts as 0 on every
rate and 1.0 on ΔS (it arrives scored that way), so no mean rises because runs failed.
"""

from __future__ import annotations

import heapq
import itertools
import math
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from ragaudit.checks.metrics.lam import STATES, SYMBOLS, lambda_state
from ragaudit.checks.metrics.spill import InOrder, entries
from ragaudit.core.model import Lambda, PipelineSummary, Question, QuestionStats

if TYPE_CHECKING:
    from ragaudit.core.types import GoldItem

ZONES = ("stable", "transit", "risk", "danger")
HELD_RUNS = 100_000  # runs of unfinished questions held in memory before they go to a sorted spill file
HISTOGRAMS = {"delta_s_qr": 40, "coverage": 20}  # per-run distributions the report draws, as bin counts on [0, 1]


def bin_of(value: float, bins: int) -> int:
    """The equal-width bin of a value in [0, 1]; the last bin is closed so 1.0 lands in it."""
    return min(bins - 1, max(0, int(value * bins + 1e-9)))


@dataclass
class _Sums:
    total: dict[str, float] = field(default_factory=dict)
    count: dict[str, int] = field(default_factory=dict)

    def add(self, metrics: dict[str, Any]) -> None:
        for name, value in metrics.items():
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                self.total[name] = self.total.get(name, 0.0) + float(value)
                self.count[name] = self.count.get(name, 0) + 1

    def merge(self, other: "_Sums") -> None:
        for name, value in other.total.items():
            self.total[name] = self.total.get(name, 0.0) + value
            self.count[name] = self.count.get(name, 0) + other.count[name]

    def means(self, names: Iterable[str]) -> dict[str, float | None]:
        return {n: (self.total[n] / self.count[n] if self.count.get(n) else None) for n in names}


@dataclass
class QuestionRuns:
    """What a question's metrics read of its runs: counts, extremes and the sections cited, kept one
    run at a time."""

    runs: int = 0
    errored: int = 0
    correct: int = 0
    unmatched: int = 0  # runs whose citation match failed
    hallucinating: int = 0  # runs stating a quantity no cited text holds
    ungrounded: int = 0  # answered runs with a claim their cited texts do not support (or uncited)
    coverage_missing: int = 0  # runs whose coverage could not be computed
    min_coverage: float | None = None
    max_delta_s: float | None = None
    min_delta_s: float | None = None
    max_delta_s_excess: float | None = None
    empty: bool = False  # some run cited no section at all
    common: frozenset[tuple[str, ...]] | None = None
    cited: set[tuple[str, ...]] = field(default_factory=set)
    sums: _Sums = field(default_factory=_Sums)
    zones: dict[str, int] = field(default_factory=dict)

    def add(self, run: dict[str, Any]) -> None:
        m = run["metrics"]
        self.runs += 1
        self.errored += bool(run["errored"])
        self.correct += bool(run["correct"])
        self.unmatched += m.get("citation_match") != 1.0
        self.hallucinating += (m.get("hallucinations") or 0) > 0
        self.ungrounded += m.get("fully_grounded") == 0.0
        coverage, ds = m.get("coverage"), m.get("delta_s_qr")
        if coverage is None:
            self.coverage_missing += 1
        else:
            self.min_coverage = coverage if self.min_coverage is None else min(self.min_coverage, coverage)
        if ds is not None:
            self.max_delta_s = ds if self.max_delta_s is None else max(self.max_delta_s, ds)
            self.min_delta_s = ds if self.min_delta_s is None else min(self.min_delta_s, ds)
        excess = m.get("delta_s_excess")
        if excess is not None:
            self.max_delta_s_excess = (
                excess if self.max_delta_s_excess is None else max(self.max_delta_s_excess, excess)
            )
        self.empty |= not run["sections"]
        # λ's css: the sections cited by the claims that state the anchor, all cited sections when none does
        sections = frozenset(tuple(s) for s in (run.get("stated_sections") or run["sections"]))
        self.common = sections if self.common is None else self.common & sections
        self.cited |= sections
        self.sums.add(m)
        if run.get("zone"):
            self.zones[run["zone"]] = self.zones.get(run["zone"], 0) + 1

    def merge(self, other: "QuestionRuns") -> None:
        """Fold in the accumulators of the same question's runs from another batch."""
        for name in ("runs", "errored", "correct", "unmatched", "hallucinating", "ungrounded", "coverage_missing"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name, pick in (
            ("min_coverage", min),
            ("max_delta_s", max),
            ("min_delta_s", min),
            ("max_delta_s_excess", max),
        ):
            mine, theirs = getattr(self, name), getattr(other, name)
            setattr(self, name, theirs if mine is None else mine if theirs is None else pick(mine, theirs))
        self.empty |= other.empty
        if other.common is not None:
            self.common = other.common if self.common is None else self.common & other.common
        self.cited |= other.cited
        self.sums.merge(other.sums)
        for zone_name, n in other.zones.items():
            self.zones[zone_name] = self.zones.get(zone_name, 0) + n

    def lam(self, css_min: float) -> tuple[str, float, float | None]:
        return lambda_(question=self, css_min=css_min), css(question=self), delta_s_spread(question=self)

    def stats(self) -> QuestionStats:
        return QuestionStats(
            runs=self.runs,
            errored=self.errored,
            correct=self.correct,
            unmatched=self.unmatched,
            hallucinating=self.hallucinating,
            ungrounded=self.ungrounded,
            coverage_missing=self.coverage_missing,
            min_coverage=self.min_coverage,
            max_delta_s=self.max_delta_s,
            max_delta_s_excess=self.max_delta_s_excess,
        )


def css(*, question: QuestionRuns) -> float:
    """|∩ S_r| / |∪ S_r| over the question's runs (S_r: the sections run r cites to state the anchor)."""
    return len(question.common or ()) / len(question.cited) if question.cited else 0.0


def delta_s_spread(*, question: QuestionRuns) -> float | None:
    """max − min delta_s_qr over the question's runs; null when no run has one."""
    if question.max_delta_s is None or question.min_delta_s is None:
        return None
    return question.max_delta_s - question.min_delta_s


def lambda_(*, question: QuestionRuns, css_min: float = 0.50) -> str:
    """The question's λ state (ragaudit.checks.metrics.lam.lambda_state)."""
    return lambda_state(
        runs=question.runs,
        failed=question.errored > 0 or question.empty,
        correct=question.correct,
        css=css(question=question),
        css_min=css_min,
    )


LIGHT = ("variant", "seed", "metrics", "errored", "correct", "sections", "stated_sections", "zone")


def _light(run: dict[str, Any]) -> dict[str, Any]:
    """What a question's aggregates read of a run."""
    return {k: run.get(k) for k in LIGHT}


def _run_key(run: dict[str, Any]) -> tuple[int, int, int, str, str]:
    variant, seed = run["variant"], run["seed"]
    if isinstance(variant, int) and isinstance(seed, int):
        return (0, variant, seed, "", "")
    return (1, 0, 0, repr(variant), repr(seed))


class Aggregates:
    """Feed scored runs with `add`; `finish` gives the question, section and pipeline rows.

    A question's runs are folded in (variant, seed) order, and the questions into their pipeline
    in plan order (`order`), so the figures do not depend on the order runs arrive in (a shuffled
    recording gives the same report) nor on how they were batched. With `planned` (pipeline, qid
    -> runs the plan holds), a question is folded as soon as its last run arrives and its
    accumulators leave memory for a spill file in `spill` (`released` counts them): memory holds
    the questions still running, not every question seen. Runs in another order (a replay of a
    shuffled recording) leave memory too: once more than `limit` runs of unfinished questions are
    held, they go to a spill file of their own sorted by question (`spilled_runs` counts them),
    and a question finished after some of its runs went there leaves memory when its last run
    arrives; `finish` merges the sorted files, so it sees each question's runs together."""

    def __init__(
        self,
        averaged: tuple[str, ...],
        css_min: float,
        *,
        planned: Callable[[str, str], int | None] | None = None,
        order: Callable[[str, str], int | None] | None = None,
        spill: Path | None = None,
        limit: int | None = None,
    ):
        self.averaged, self.css_min = averaged, css_min
        self.planned, self.order, self.spill = planned, order, spill
        self.limit = HELD_RUNS if limit is None else limit
        self._pending: dict[tuple[str, str], list[dict[str, Any]]] = {}  # runs of questions not folded yet
        self._held_runs = 0  # the runs in `_pending`
        self._chunks: list[Path] = []  # spill files of unfinished questions' runs, each sorted by question
        self._chunked: dict[tuple[str, str], int] = {}  # runs of a question in those files
        self._late: Any = None  # the open file of finished questions' last runs, whose first are in a chunk
        self.spilled_runs = 0
        self._histograms: dict[str, dict[str, list[int]]] = {}
        self._spilled: Any = None  # the open spill file, once a question has left memory
        self._released: set[tuple[str, str]] = set()
        self._extra: set[tuple[str, str]] = set()  # released questions that got runs beyond their plan
        self.released = 0  # questions folded and spilled
        self.seen: list[str] = []  # pipelines in the order they were first seen

    @property
    def held(self) -> int:
        """Questions whose runs are held in memory."""
        return len(self._pending)

    @property
    def held_runs(self) -> int:
        """Runs held in memory, of the questions not finished yet."""
        return self._held_runs

    def add(self, run: dict[str, Any]) -> None:
        key = (run["pipeline"], run["qid"])
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = []
            if run["pipeline"] not in self._histograms:
                self.seen.append(run["pipeline"])
                self._histograms[run["pipeline"]] = {name: [0] * (bins + 1) for name, bins in HISTOGRAMS.items()}
        pending.append(_light(run))
        self._held_runs += 1
        if key in self._released:
            self._extra.add(key)
        histograms = self._histograms[run["pipeline"]]
        for name, bins in HISTOGRAMS.items():  # the extra last slot counts runs without a value
            value = run["metrics"].get(name)
            ok = value is not None and not (isinstance(value, float) and math.isnan(value))
            histograms[name][bin_of(value, bins) if ok else bins] += 1
        self._release(key)

    def merge(self, other: "Aggregates") -> None:
        """Fold in another Aggregates (a later batch of the same audit): the result is the same as
        if its runs had been added here."""
        for pipeline in other.seen:
            if pipeline not in self._histograms:
                self.seen.append(pipeline)
                self._histograms[pipeline] = {name: list(v) for name, v in other._histograms[pipeline].items()}
            else:
                for name, counts in other._histograms[pipeline].items():
                    mine_counts = self._histograms[pipeline][name]
                    for i, n in enumerate(counts):
                        mine_counts[i] += n
        for key, runs in other._pending.items():
            self._pending.setdefault(key, []).extend(runs)
            self._held_runs += len(runs)
            if key in self._released:
                self._extra.add(key)
            self._release(key)

    def _release(self, key: tuple[str, str]) -> None:
        """Fold and spill a question whose planned runs have all arrived; spill the runs held when
        there are more than `limit`."""
        if self.planned is None or self.spill is None:
            return
        runs = self._pending[key]
        chunked = self._chunked.get(key, 0)
        if len(runs) + chunked == self.planned(*key) and key not in self._released:
            del self._pending[key]
            self._held_runs -= len(runs)
            self._released.add(key)
            self.released += 1
            if chunked:  # its first runs are in a sorted file: its last join them in `finish`
                if self._late is None:
                    self._late = open(self._part("late"), "wb")
                pickle.dump((key, runs), self._late, protocol=pickle.HIGHEST_PROTOCOL)
                self.spilled_runs += len(runs)
                return
            if self._spilled is None:
                self._spilled = open(self.spill, "wb")
            pickle.dump((key, _fold(runs)), self._spilled, protocol=pickle.HIGHEST_PROTOCOL)
        # else a run beyond the plan, after its question was spilled, is folded in at the end
        if self._held_runs > self.limit:
            for held, runs in self._pending.items():
                self._chunked[held] = self._chunked.get(held, 0) + len(runs)
            self._write_chunk(sorted(self._pending.items()))
            self.spilled_runs += self._held_runs
            self._pending, self._held_runs = {}, 0

    def _part(self, name: str) -> Path:
        assert self.spill is not None
        return self.spill.with_name(f"{self.spill.name}.{name}")

    def _write_chunk(self, entries: Iterable[tuple[tuple[str, str], list[dict[str, Any]]]]) -> None:
        """A spill file of (question, runs) entries, in question order."""
        path = self._part(str(len(self._chunks)))
        with open(path, "wb") as out:
            for entry in entries:
                pickle.dump(entry, out, protocol=pickle.HIGHEST_PROTOCOL)
        self._chunks.append(path)

    def _merged(self) -> Iterator[tuple[tuple[str, str], list[dict[str, Any]]]]:
        """Every question of the sorted spill files, its runs together: the finished questions'
        last runs sorted into files of their own (`limit` runs at a time), then all files merged."""
        if self._late is not None:
            self._late.close()
            late, self._late = self._part("late"), None
            with open(late, "rb") as read:
                found = entries(read)
                while part := list(itertools.islice(found, max(1, self.limit // 8))):
                    self._write_chunk(sorted(part))
            late.unlink()
        if self._pending:
            self._write_chunk(sorted(self._pending.items()))
            self._pending, self._held_runs = {}, 0
        files = [open(path, "rb") for path in self._chunks]
        try:
            merged = heapq.merge(*(entries(f) for f in files), key=lambda entry: entry[0])
            for key, group in itertools.groupby(merged, key=lambda entry: entry[0]):
                yield key, [run for _, runs in group for run in runs]
        finally:
            for f in files:
                f.close()
            for path in self._chunks:
                path.unlink()
            self._chunks = []

    def _questions(self) -> Iterator[tuple[tuple[str, str], QuestionRuns]]:
        """Every question's accumulators: the spilled ones read back, then those still held."""
        if self._spilled is not None:
            self._spilled.close()
            self._spilled = None
            assert self.spill is not None
            with open(self.spill, "rb") as spilled:
                for _ in range(self.released):
                    yield pickle.load(spilled)
            self.spill.unlink()
        if self._chunks or self._late is not None:
            for key, runs in self._merged():
                yield key, _fold(runs)
        for key, runs in self._pending.items():
            yield key, _fold(runs)

    def finish(
        self, gold: dict[str, GoldItem]
    ) -> tuple[list[Question], list[dict[str, Any]], dict[str, PipelineSummary]]:
        """Question, section and pipeline rows; `gold` (qid -> item) names each question.

        Each question's accumulators become its row as they are read back, and leave memory but
        for their sums, which go to a file beside the spill (when there is one) to be added into
        their pipeline's in plan order: memory holds the rows, not every question's accumulators."""
        extra: dict[tuple[str, str], QuestionRuns] = {}  # questions with runs beyond the plan: merged first
        questions: list[Question] = []
        parts: dict[str, _Parts] = {}
        sums = InOrder(self.spill.with_name(f"{self.spill.name}.sums") if self.spill is not None else None)
        rank: dict[tuple[str, str], int] = {}  # without a plan: the order questions finished

        def planned(key: tuple[str, str]) -> tuple[int, int, str, str]:
            at = self.order(*key) if self.order is not None else None
            return (0, at, "", "") if at is not None else (1, rank.setdefault(key, len(rank)), *key)

        def row(key: tuple[str, str], q: QuestionRuns) -> None:
            pipeline, qid = key
            item = gold[qid]
            state, css, spread = q.lam(self.css_min)
            questions.append(
                Question(
                    pipeline=pipeline,
                    qid=qid,
                    doc_id=item.doc_id,
                    section_id=item.section_id,
                    question=item.question,
                    errored=q.errored,
                    correct=q.correct,
                    lam=Lambda(state, SYMBOLS[state], css, spread),
                    metrics=q.sums.means(self.averaged),
                    stats=q.stats(),
                )
            )
            parts.setdefault(pipeline, _Parts()).add(q, state)
            sums.add(planned(key), pipeline, (q.sums.total, q.sums.count))

        try:
            for key, question in self._questions():
                if key in self._extra:
                    if key in extra:
                        extra[key].merge(question)
                    else:
                        extra[key] = question
                else:
                    row(key, question)
            for key, question in extra.items():
                row(key, question)
            pipeline_sums: dict[str, _Sums] = {}
            for pipeline, (total, count) in sums.in_order():
                pipeline_sums.setdefault(pipeline, _Sums()).merge(_Sums(total, count))
        finally:
            sums.close()
        self._released, self._extra = set(), set()  # every question is a row now: what was released no longer matters
        questions.sort(key=lambda q: q.key)
        sections: dict[tuple[str, str | None, str | None], list[Question]] = {}
        for q in questions:
            sections.setdefault((q.pipeline, q.doc_id, q.section_id), []).append(q)
        section_rows = [
            {
                "pipeline": pipeline,
                "doc_id": doc_id,
                "section_id": section_id,
                "qids": [q.qid for q in rows],
                "convergent": sum(q.lam.state == "convergent" for q in rows),
                "metrics": {n: _mean([q.metrics[n] for q in rows]) for n in self.averaged},
            }
            for (pipeline, doc_id, section_id), rows in sorted(sections.items())
        ]
        pipelines = {}
        for name in sorted(self.seen):
            mine = parts.get(name, _Parts())
            means = pipeline_sums.get(name, _Sums()).means(self.averaged)
            pipelines[name] = PipelineSummary(
                runs=mine.runs,
                questions=mine.questions,
                errored=mine.errored,
                hallucinating_runs=mine.hallucinating,
                metrics=means,
                citation_match_rate=means.get("citation_match"),
                lam={s: mine.states.get(s, 0) for s in STATES},
                zones={z: mine.zones.get(z, 0) for z in ZONES},
                histograms=self._histograms[name],
            )
        return questions, section_rows, pipelines


@dataclass
class _Parts:
    """A pipeline's counts over its questions (sums of integers: their order does not matter)."""

    questions: int = 0
    runs: int = 0
    errored: int = 0
    hallucinating: int = 0
    states: dict[str, int] = field(default_factory=dict)
    zones: dict[str, int] = field(default_factory=dict)

    def add(self, q: QuestionRuns, state: str) -> None:
        self.questions += 1
        self.runs += q.runs
        self.errored += q.errored
        self.hallucinating += q.hallucinating
        self.states[state] = self.states.get(state, 0) + 1
        for zone, n in q.zones.items():
            self.zones[zone] = self.zones.get(zone, 0) + n


def _fold(runs: list[dict[str, Any]]) -> QuestionRuns:
    """A question's accumulators from its runs, added in (variant, seed) order."""
    question = QuestionRuns()
    for run in sorted(runs, key=_run_key):
        question.add(run)
    return question


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None
