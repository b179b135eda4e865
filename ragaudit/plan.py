"""Which runs an audit consists of: every pipeline × gold item × variant × seed, in a fixed order.
The runner executes this plan; the audit counts a planned run that left no trace as errored."""
from __future__ import annotations

from typing import Iterator, NamedTuple

from ragaudit.types import GoldItem, Trace


class PlannedRun(NamedTuple):
    pipeline: str
    qid: str
    variant: int
    seed: int
    query: str


def planned_runs(config, items: list[GoldItem]) -> Iterator[PlannedRun]:
    """In order: pipeline, question, variant, seed."""
    for pipeline in config.pipelines:
        for item in items:
            for variant, query in enumerate(item.variants[:config.paraphrases]):
                for seed in config.seeds:
                    yield PlannedRun(pipeline.name, item.qid, variant, seed, query)


def run_order(trace: Trace) -> tuple[str, str, int, int]:
    """The one run key: (pipeline, qid, variant, seed); traces are stored and reported in its order."""
    return (trace.config or "", trace.qid, trace.variant, trace.seed)
