"""The reference pipeline: a real small RAG over a corpus (docs/reference.md §5).

corpus → section-aware chunks → index with a computed `index_hash` → bm25 / tfidf / dense /
hybrid retrieval → optional MMR rerank → extractive cite-first answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TypeVar, cast

from ragaudit.core.analyzers import ANALYZERS, Analyzer
from ragaudit.core.errors import UsageError
from ragaudit.core.progress import phase
from ragaudit.core.text import sentences
from ragaudit.core.types import Corpus, LiveIndex, Offsets, Payload, Trace
from ragaudit.pipelines.base import Excluded, Request, now
from ragaudit.pipelines.reference.answerer import answer
from ragaudit.pipelines.reference.chunking import Chunk, chunk_corpus, index_hash
from ragaudit.pipelines.reference.ranking import TieBreak
from ragaudit.pipelines.reference.retrievers import BM25, Dense, Hybrid, TfIdf, mmr

if TYPE_CHECKING:
    import numpy as np

    from ragaudit.checks.metrics.embed import Encoder
    from ragaudit.io.config import PipelineConfig
    from ragaudit.pipelines.inputs import Inputs


@dataclass(frozen=True)
class RetrieverKind:
    """A retriever of the reference pipeline (`retriever = "..."`): whether it embeds the chunks (it needs
    the encoder, whose model its index reports) and how it is built over the chunks' texts."""

    dense: bool
    build: Callable[[list[str], Analyzer, Any, TieBreak], BM25 | TfIdf | Dense | Hybrid]


RETRIEVERS: dict[str, RetrieverKind] = {  # the names of ragaudit.io.config_schema._Retriever (tests/test_registries.py)
    "bm25": RetrieverKind(False, lambda texts, analyzer, encoder, tiebreak: _sparse(BM25, texts, analyzer)),
    "tfidf": RetrieverKind(False, lambda texts, analyzer, encoder, tiebreak: _sparse(TfIdf, texts, analyzer)),
    "dense": RetrieverKind(True, lambda texts, analyzer, encoder, tiebreak: Dense(texts, encoder)),  # own progress
    "hybrid": RetrieverKind(
        True,
        lambda texts, analyzer, encoder, tiebreak: Hybrid(
            [_sparse(BM25, texts, analyzer), Dense(texts, encoder)], tiebreak
        ),
    ),
}
RERANKERS = (None, "mmr")
SPARSE_MODEL = "none"  # what a sparse index reports as its embedding model
Sparse = TypeVar("Sparse", BM25, TfIdf)


class ReferencePipeline:
    def __init__(
        self,
        name: str,
        corpus: Corpus,
        *,
        retriever: str = "bm25",
        analyzer: str = "lowercase+ascii_fold",
        k: int = 5,
        chunk_size: int = 64,
        chunk_overlap: int = 0,
        rerank: str | None = None,
        temperature: float = 0.0,
        encoder: Encoder | None = None,
        exclude: tuple[tuple[str, str | None], ...] = (),
    ):
        """`encoder` embeds the index of a dense or hybrid retriever, and for every retriever lets the
        answerer compare the query with the retrieved sentences. The sections of `exclude` (`(doc_id,
        section_id)`, None for the whole document) are left out of the index."""
        if retriever not in RETRIEVERS:
            raise UsageError(
                f"pipeline {name!r}: expected retriever one of {', '.join(RETRIEVERS)}, found {retriever!r}"
            )
        if analyzer not in ANALYZERS:
            raise UsageError(f"pipeline {name!r}: expected analyzer one of {', '.join(ANALYZERS)}, found {analyzer!r}")
        if rerank not in RERANKERS:
            raise UsageError(f"pipeline {name!r}: expected rerank 'mmr' or none, found {rerank!r}")
        if k < 1 or chunk_size < 1:
            raise UsageError(f"pipeline {name!r}: expected k >= 1 and chunk_size >= 1, found {k} and {chunk_size}")
        self.name, self.k, self.rerank, self.temperature = name, k, rerank, temperature
        self.analyzer = ANALYZERS[analyzer]
        with phase("chunking", unit="chunks") as chunking:
            self.chunks: list[Chunk] = [
                c
                for c in chunk_corpus(corpus, self.analyzer, chunk_size=chunk_size, overlap=chunk_overlap)
                if (c.doc_id, c.section_id) not in exclude and (c.doc_id, None) not in exclude
            ]
            chunking.advance(len(self.chunks))
        kind = RETRIEVERS[retriever]
        self.embed_model = cast("Encoder", encoder).model_id if kind.dense else SPARSE_MODEL  # build() gives one
        self._encoder = encoder
        texts = [c.text for c in self.chunks]
        self.tiebreak = TieBreak([(c.section_id, c.snippet_id) for c in self.chunks])
        self.retriever = kind.build(texts, self.analyzer, encoder, self.tiebreak)
        self._unit: np.ndarray | None = None  # the rows MMR compares, scaled once here rather than per query
        if rerank == "mmr":
            embedded = self.retriever if isinstance(self.retriever, (Dense, Hybrid)) else None
            self._unit = embedded.unit_vectors() if embedded else _sparse(TfIdf, texts, self.analyzer).unit_vectors()
        self._index = LiveIndex(
            index_hash=index_hash(
                self.chunks,
                analyzer=analyzer,
                chunk_size=chunk_size,
                chunk_overlap=chunk_overlap,
                retriever=retriever,
                embed_model=self.embed_model,
            ),
            analyzer=analyzer,
            embed_model=self.embed_model,
            store=retriever,
        )

    def prepare(self, queries: list[str]) -> None:
        """Encode every query and chunk sentence of the run in batches up front, so each run finds
        its vectors cached (the answerer compares the query with the retrieved sentences)."""
        if self._encoder is not None:
            self._encoder.encode(list(dict.fromkeys(queries)))
            self._encoder.encode(list(dict.fromkeys(s for c in self.chunks for s in sentences(c.text))))

    def index_info(self) -> LiveIndex:
        return self._index

    def close(self) -> None:
        pass

    def payload(
        self, chunk: Chunk, raw: float, norm: float, k_pos: int, rerank: tuple[int, float] | None = None
    ) -> Payload:
        reranked: dict[str, Any] = {} if rerank is None else {"rerank_score": rerank[1], "k_final": rerank[0]}
        return Payload(
            doc_id=chunk.doc_id,
            section_id=chunk.section_id,
            snippet_id=chunk.snippet_id,
            source_url=chunk.source_url,
            offsets=Offsets(chunk.start, chunk.end, "char"),
            tokens=chunk.tokens,
            index_hash=self._index.index_hash,
            embed_model=self.embed_model,
            analyzer=self._index.analyzer,
            rev=chunk.rev,
            page=chunk.page,
            score_raw=float(raw),
            score_norm=float(norm),
            k_pos=k_pos,
            text=chunk.text,
            **reranked,
        )

    def retrieve(self, query: str, k: int) -> list[Payload]:
        """The best `k` chunks: score_norm desc, then the tie-break of docs/reference.md §1.4 (section_id, snippet_id);
        with MMR, its choice of `k` among the best max(3k, 20)."""
        raw, norm = self.retriever.scores(query)
        if self.rerank is None:
            return [
                self.payload(self.chunks[i], raw[i], norm[i], r + 1) for r, i in enumerate(self.tiebreak.top(norm, k))
            ]
        candidates = self.tiebreak.top(norm, max(3 * k, 20)).tolist()
        rank_of = {i: r + 1 for r, i in enumerate(candidates)}
        assert self._unit is not None  # built with the reranker
        chosen = mmr(self._unit, candidates, norm, k=k)
        return [
            self.payload(self.chunks[i], raw[i], norm[i], rank_of[i], (final, score))
            for final, (i, score) in enumerate(chosen, start=1)
        ]

    def run(self, request: Request) -> Trace:
        payloads = self.retrieve(request.query, request.k or self.k)
        reply = answer(
            request.query,
            payloads,
            self.analyzer,
            seed=request.seed,
            key=f"{request.qid}:{request.variant}",
            temperature=self.temperature,
            encoder=self._encoder,
        )
        return Trace(
            qid=request.qid,
            variant=request.variant,
            seed=request.seed,
            query=request.query,
            config=self.name,
            retriever_name=self._index.store,
            retrieved_at=now(),
            index=self._index,
            retrieved=tuple(payloads),
            answer=reply,
        )


def _sparse(kind: type[Sparse], texts: list[str], analyzer: Analyzer) -> Sparse:
    with phase(f"{kind.store} index", total=len(texts), unit="chunks") as building:
        built = kind(texts, analyzer)
        building.advance(len(texts))
    return built


def build(spec: PipelineConfig, inputs: Inputs, exclude: Excluded = ()) -> ReferencePipeline:
    """The reference pipeline of `spec` over the corpus of `inputs` (`ragaudit.io.config_schema.KINDS`)."""
    o = spec.options
    return ReferencePipeline(
        spec.name,
        inputs.corpus,
        retriever=o["retriever"],
        analyzer=o["analyzer"],
        k=o["k"],
        chunk_size=o["chunk_size"],
        chunk_overlap=o["chunk_overlap"],
        rerank=o["rerank"],
        temperature=o["temperature"],
        encoder=inputs.encoder,
        exclude=exclude,
    )
