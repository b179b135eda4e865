"""What a probe found, from its ledger: per pipeline the faithful rate with its 95% interval (in all and
per edit kind), the necessary rate of the exclusion probe, what it cost; per question the edit and
the answers before and after (docs/reference.md §13). `meta.probe` of the probe's report.json holds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ragaudit.checks.metrics.faithful import FOLLOWS, KEEPS_OLD, OTHER, faithful, necessary, wilson
from ragaudit.flows.probing.ledger import Ledger


@dataclass
class Rate:
    """A share over `units` (edits, or questions for the exclusion probe) holding `runs` runs, with
    its 95% Wilson interval over the units. Only runs whose answer on the real corpus stated the fact
    count: of one that did not, the probe cannot tell whether it follows its source (`left_out`)."""

    value: float | None
    units: int
    runs: int
    counts: dict[str, int] = field(default_factory=dict)
    left_out: int = 0

    @property
    def ci(self) -> tuple[float, float] | None:
        return None if self.value is None or not self.units else wilson(self.value, self.units)

    def to_json(self) -> dict[str, Any]:
        ci = self.ci
        return {
            "rate": self.value,
            "ci95": None if ci is None else [round(ci[0], 4), round(ci[1], 4)],
            "units": self.units,
            "runs": self.runs,
            "counts": dict(sorted(self.counts.items())),
            "left_out": self.left_out,
        }


def _rate(records: list[dict[str, Any]], measure: Callable[..., float | None]) -> Rate:
    """The rate over the records' runs whose answer on the real corpus stated the fact."""
    units = [[run["outcome"] for run in r["runs"] if run.get("stated_before")] for r in records]
    outcomes = [o for unit in units for o in unit]
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o] = counts.get(o, 0) + 1
    left_out = sum(len(r["runs"]) for r in records) - len(outcomes)
    return Rate(measure(probe=outcomes), sum(1 for u in units if u), len(outcomes), counts, left_out)


@dataclass
class PipelineProbe:
    name: str
    skipped: str | None = None  # why it could not be probed at all
    no_exclusion: str | None = None  # why it could not be told to leave a passage out
    faithful: Rate = field(default_factory=lambda: Rate(None, 0, 0))
    by_kind: dict[str, Rate] = field(default_factory=dict)
    necessary: Rate = field(default_factory=lambda: Rate(None, 0, 0))
    builds: int = 0  # index builds: the pipeline started on a corpus (the real one or a copy)
    calls: int = 0  # requests it answered

    def to_json(self) -> dict[str, Any]:
        return {
            "skipped": self.skipped,
            "no_exclusion": self.no_exclusion,
            "faithful": self.faithful.to_json(),
            "by_kind": {kind: rate.to_json() for kind, rate in self.by_kind.items()},
            "necessary": self.necessary.to_json(),
            "cost": {"index_builds": self.builds, "calls": self.calls},
        }


@dataclass
class ProbeSummary:
    pipelines: dict[str, PipelineProbe]
    kinds: list[str]
    seeds: list[int]
    questions: int
    cannot: list[dict[str, Any]]  # {qid, kind, why}: edits that could not be made
    edits: list[dict[str, Any]]  # per pipeline, question and kind: the edit and each run before and after
    exclusions: list[dict[str, Any]]  # per pipeline and question: the section left out and each run
    by_question: dict[tuple[str, str], list[str]]  # (pipeline, qid) -> the outcomes of its edit runs

    def to_json(self) -> dict[str, Any]:
        return {
            "pipelines": {name: p.to_json() for name, p in self.pipelines.items()},
            "edit_kinds": self.kinds,
            "seeds": self.seeds,
            "questions": self.questions,
            "cannot": self.cannot,
            "edits": self.edits,
            "exclusions": self.exclusions,
        }


def _answers(ledger: Ledger, pipeline: str, qid: str) -> dict[int, str | None]:
    """The answer of each seed's run on the real corpus."""
    for record in ledger.of("before", pipeline):
        if record["qid"] == qid:
            return {t["seed"]: _text(t) for t in record["traces"]}
    return {}


def _text(trace: dict[str, Any]) -> str | None:
    if trace.get("error"):
        return None
    answer = trace.get("answer")
    return answer.get("text") if isinstance(answer, dict) else answer if isinstance(answer, str) else None


def summarize(ledger: Ledger, names: list[str], kinds: list[str]) -> ProbeSummary:
    pipelines = {name: PipelineProbe(name) for name in names}
    for record in ledger.records:
        found = pipelines.get(record.get("pipeline"))  # type: ignore[arg-type]
        if found is None:
            continue
        found.builds += record.get("builds", 0)
        found.calls += record.get("calls", 0)
        if record["record"] == "skip":
            found.skipped = record["why"]
        elif record["record"] == "no_exclusion":
            found.no_exclusion = record["why"]
    edits: list[dict[str, Any]] = []
    exclusions: list[dict[str, Any]] = []
    by_question: dict[tuple[str, str], list[str]] = {}
    for name, found in pipelines.items():
        done = ledger.of("edit", name)
        for record in done:
            before = _answers(ledger, name, record["qid"])
            runs = [{**run, "before": before.get(run["seed"])} for run in record["runs"]]
            edits.append(
                {"pipeline": name, "qid": record["qid"], "kind": record["kind"], "edit": record["edit"], "runs": runs}
            )
            kept = [run["outcome"] for run in runs if run.get("stated_before")]
            by_question.setdefault((name, record["qid"]), []).extend(kept)
        found.faithful = _rate(done, faithful)
        found.by_kind = {kind: _rate([r for r in done if r["kind"] == kind], faithful) for kind in kinds}
        excluded = ledger.of("exclude", name)
        exclusions += [
            {"pipeline": name, **{k: v for k, v in r.items() if k not in ("record", "pipeline")}} for r in excluded
        ]
        found.necessary = _rate(excluded, necessary)
        if found.skipped is not None:  # what it answered before it showed it cannot be re-pointed does not count
            found.faithful, found.by_kind = Rate(None, 0, 0), {}
    cannot = [{"qid": r["qid"], "kind": r["kind"], "why": r["why"]} for r in ledger.of("cannot")]
    return ProbeSummary(
        pipelines,
        kinds,
        list(ledger.header["seeds"]),
        len(ledger.header["qids"]),
        cannot,
        edits,
        exclusions,
        by_question,
    )


OUTCOME_WORDS = {FOLLOWS: "follow", KEEPS_OLD: "keep the old fact", OTHER: "other"}
