"""Which runs an audit consists of: every pipeline × gold item × variant × seed, in a fixed order.
The runner executes this plan; the audit counts a planned run that left no trace as errored."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator, NamedTuple

from ragaudit.core.types import GoldItem, Trace

if TYPE_CHECKING:
    from ragaudit.io.config import Config


class PlannedRun(NamedTuple):
    pipeline: str
    qid: str
    variant: int
    seed: int
    query: str


def planned_runs(config: Config, items: list[GoldItem]) -> Iterator[PlannedRun]:
    """In order: pipeline, question, variant, seed."""
    for pipeline in config.pipelines:
        for item in items:
            for variant, query in enumerate(item.variants[: config.audit.paraphrases]):
                for seed in config.audit.seeds:
                    yield PlannedRun(pipeline.name, item.qid, variant, seed, query)


def run_order(trace: Trace) -> tuple[str, str, int, int]:
    """The one run key: (pipeline, qid, variant, seed); traces are stored and reported in its order."""
    return (trace.config or "", trace.qid, trace.variant, trace.seed)


class PlanIndex:
    """Each planned run's position in plan order, computed rather than stored, and which positions
    are done (one bit each): memory grows with the gold set and the pipelines, not with the runs."""

    def __init__(self, config: Config, items: list[GoldItem]):
        import numpy as np

        self.config, self.items = config, items
        self.pipelines = {p.name: i for i, p in enumerate(config.pipelines)}
        self.seeds = {s: i for i, s in enumerate(config.audit.seeds)}
        self.questions: dict[str, tuple[int, int, GoldItem]] = {}  # qid -> (offset, variants, item)
        offset = 0
        for item in items:
            if item.qid in self.questions:
                continue  # a duplicate qid stops a run before it starts; keep the first for `report`
            variants = len(item.variants[: config.audit.paraphrases])
            self.questions[item.qid] = (offset, variants, item)
            offset += variants * len(self.seeds)
        self.per_pipeline = offset
        self.size = offset * len(self.pipelines)
        self.done = np.zeros(self.size, dtype=bool)

    def position(self, pipeline: str, qid: str, variant: int, seed: int) -> int | None:
        """The run's position in plan order, or None for a run the plan does not hold."""
        p, q, s = self.pipelines.get(pipeline), self.questions.get(qid), self.seeds.get(seed)
        if p is None or q is None or s is None or not isinstance(variant, int) or not 0 <= variant < q[1]:
            return None
        return p * self.per_pipeline + q[0] + variant * len(self.seeds) + s

    def runs_of(self, pipeline: str, qid: str) -> int | None:
        """How many runs the plan holds for a question of a pipeline; None when it holds none."""
        q = self.questions.get(qid)
        return q[1] * len(self.seeds) if q is not None and pipeline in self.pipelines else None

    def order_of(self, pipeline: str, qid: str) -> int | None:
        """Where a question of a pipeline comes in plan order; None when the plan does not hold it."""
        q, p = self.questions.get(qid), self.pipelines.get(pipeline)
        return None if q is None or p is None else p * self.per_pipeline + q[0]

    def mark(self, trace: Trace) -> bool:
        """Mark a trace's run done; False when it was done already (a repeated run)."""
        at = self.position(*run_order(trace))
        if at is None:
            return True
        if self.done[at]:
            return False
        self.done[at] = True
        return True

    def missing(self, pipelines: Iterable[str] | None = None) -> Iterator[PlannedRun]:
        """The planned runs not done, in plan order, for the given pipelines (default all)."""
        wanted = set(self.pipelines) if pipelines is None else set(pipelines)
        for run in planned_runs(self.config, self.items):
            if run.pipeline in wanted:
                at = self.position(run.pipeline, run.qid, run.variant, run.seed)
                if at is not None and not self.done[at]:
                    yield run
