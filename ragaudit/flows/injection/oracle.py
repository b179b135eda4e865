"""The oracle run of a gold set: what a correct pipeline would record, built from the gold set and
the corpus alone (no pipeline is called). `ragaudit calibrate` scores it, its LLM-style rewrites
and its faults to see where a gate on this gold set can stand.

Per gold item, variant and seed: the corpus chunked by sections as the reference pipeline chunks
it, the chunks holding the gold anchor first, then the chunks a dense index over the corpus ranks
highest for the question (the distractors a real retriever brings), and an extractive answer that
states the anchor and cites the chunks holding it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ragaudit.core.markers import strip_markers
from ragaudit.core.progress import phase
from ragaudit.core.types import Corpus, GoldItem, Payload, Segment, Trace
from ragaudit.flows.injection.mutations import with_answer
from ragaudit.pipelines.reference import ReferencePipeline

if TYPE_CHECKING:
    from ragaudit.checks.metrics.embed import Encoder

ORACLE = "oracle"


def _holding(pipeline: ReferencePipeline, item: GoldItem) -> list[int]:
    """Indices of the chunks that overlap the item's anchor (char spans)."""
    a = item.anchor.span
    return [
        i
        for i, c in enumerate(pipeline.chunks)
        if c.doc_id == item.doc_id and a.unit == "char" and c.start < a.end and a.start < c.end
    ]


def oracle_traces(
    items: list[GoldItem],
    corpus: Corpus,
    encoder: Encoder,
    *,
    variants: int,
    seeds: tuple[int, ...],
    k: int = 5,
    name: str = ORACLE,
) -> list[Trace]:
    """The oracle's traces, in plan order (question, variant, seed)."""
    pipeline = ReferencePipeline(name, corpus, retriever="dense", k=k, encoder=encoder)
    queries = [q for item in items for q in item.variants[:variants]]
    pipeline.prepare(queries)
    out: list[Trace] = []
    with phase("oracle runs", total=len(items) * len(seeds) * variants, unit="runs") as running:
        for item in items:
            gold = _holding(pipeline, item)
            statement = " ".join(strip_markers(item.anchor.text).split())  # a footnote "[2]" is not a citation
            for variant, query in enumerate(item.variants[:variants]):
                retrieved = _ranked(pipeline, query, gold, k)
                cited = tuple(p.snippet_id for p in retrieved[: len(gold)] if p.snippet_id)
                for seed in seeds:
                    trace = Trace(
                        qid=item.qid,
                        variant=variant,
                        seed=seed,
                        query=query,
                        config=name,
                        retriever_name="dense",
                        retrieved_at="2026-01-01T00:00:00Z",
                        index=pipeline.index_info(),
                        retrieved=retrieved,
                    )
                    if cited:
                        trace = with_answer(trace, [Segment(1, statement, cited)])
                    out.append(trace)
                    running.advance()
    return out


def _ranked(pipeline: ReferencePipeline, query: str, gold: list[int], k: int) -> tuple[Payload, ...]:
    """The gold chunks first (score 1), then the dense ranking's best others, scores kept below."""
    found = pipeline.retrieve(query, k + len(gold))
    first = [pipeline.payload(pipeline.chunks[i], 1.0, 1.0, 0) for i in gold]
    ids = {p.snippet_id for p in first}
    rest = [p for p in found if p.snippet_id not in ids][: max(0, k - len(first))]
    top = max((p.score_norm or 0.0 for p in rest), default=0.0)
    scale = 0.99 / top if top >= 0.99 else 1.0  # every distractor strictly below the gold chunks
    return tuple(
        dataclasses.replace(p, k_pos=i, score_norm=p.score_norm if i <= len(first) else (p.score_norm or 0.0) * scale)
        for i, p in enumerate([*first, *rest], start=1)
    )
