"""Retrievers over a chunk list. Each scores every chunk for a query; scores are normalised to
[0, 1] per retriever so that `score_norm` means the same thing across queries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ragaudit.core.analyzers import Analyzer
from ragaudit.pipelines.reference.ranking import TieBreak

if TYPE_CHECKING:
    from sklearn.feature_extraction.text import CountVectorizer

    from ragaudit.checks.metrics.embed import Encoder

RRF_K = 60


class Retriever(Protocol):
    store: str

    def scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """(raw, normalised) scores of every chunk, in chunk order."""


def _vectorizer(analyzer: Analyzer, **options: Any) -> CountVectorizer:
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

    kind = TfidfVectorizer if options.pop("tfidf", False) else CountVectorizer
    return kind(analyzer=analyzer.terms, dtype=np.float64, **options)


class BM25:
    """Okapi BM25 (k1=1.2, b=0.75) on a scikit-learn sparse term matrix; normalised by the best score."""

    store = "bm25"

    def __init__(self, texts: Sequence[str], analyzer: Analyzer, *, k1: float = 1.2, b: float = 0.75):
        self.analyzer = analyzer
        self.vectorizer = _vectorizer(analyzer)
        tf = self.vectorizer.fit_transform(texts).tocsr()
        n = tf.shape[0]
        df = np.bincount(tf.indices, minlength=tf.shape[1])
        self.idf = np.log1p((n - df + 0.5) / (df + 0.5))
        lengths = np.asarray(tf.sum(axis=1)).ravel()
        norm = k1 * (1 - b + b * lengths / max(lengths.mean(), 1e-9))
        rows = np.repeat(np.arange(n), np.diff(tf.indptr))
        weights = tf.copy()
        weights.data = self.idf[tf.indices] * tf.data * (k1 + 1) / (tf.data + norm[rows])
        self.weights = weights.T.tocsr()  # terms x chunks, so a query is a sum of rows
        self.columns = dict(self.vectorizer.vocabulary_)  # term -> row of `weights`
        self._starts = self.weights.indptr.tolist()  # plain ints: slicing by them is cheaper per query
        self.size = n

    def term_ids(self, query: str) -> list[int]:
        """The rows of the query's distinct known terms, ascending: what `vectorizer.transform` finds,
        without building a sparse matrix per query."""
        columns = self.columns
        return sorted({columns[t] for t in self.analyzer.terms(query) if t in columns})

    def scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        # Each query term counts once, so a chunk's score is the sum of its weights for those terms.
        # bincount adds in input order, term by term in ascending id from 0.0: the very sums, in the
        # very order, that the sparse product (query row of ones) @ weights computes.
        w, starts, ids = self.weights, self._starts, self.term_ids(query)
        spans = [(starts[t], starts[t + 1]) for t in ids]
        chunks = np.concatenate([w.indices[a:b] for a, b in spans]) if spans else np.empty(0, dtype=np.intp)
        values = np.concatenate([w.data[a:b] for a, b in spans]) if spans else np.empty(0)
        raw = np.bincount(chunks, weights=values, minlength=self.size)
        top = raw.max(initial=0.0)
        return raw, (raw / top if top > 0 else raw)


class TfIdf:
    """Cosine between sublinear tf-idf vectors; already in [0, 1]."""

    store = "tfidf"

    def __init__(self, texts: Sequence[str], analyzer: Analyzer):
        self.vectorizer = _vectorizer(analyzer, tfidf=True, sublinear_tf=True)
        self.matrix = self.vectorizer.fit_transform(texts).tocsr()

    def scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        q = self.vectorizer.transform([query])
        dense = np.zeros(self.matrix.shape[1])
        dense[q.indices] = q.data
        # matrix @ vector sums each chunk's row in its stored order from 0.0, as the sparse product
        # did; a term absent from the query adds weight * 0.0 = +0.0, which leaves the sum as it was
        raw = self.matrix @ dense
        return raw, np.clip(raw, 0.0, 1.0)

    def unit_vectors(self) -> np.ndarray:
        return _unit(self.matrix.toarray())


class Dense:
    """Cosine between sentence embeddings; normalised as (cos + 1) / 2 to keep the order."""

    store = "dense"

    def __init__(self, texts: Sequence[str], encoder: Encoder):
        self.encoder = encoder
        self.matrix = encoder.encode(list(texts))

    def scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        raw = self.matrix @ self.encoder.encode([query])[0]
        return raw, np.clip((raw + 1.0) / 2.0, 0.0, 1.0)

    def unit_vectors(self) -> np.ndarray:
        return _unit(self.matrix)


class Hybrid:
    """Reciprocal rank fusion of several retrievers: sum of 1 / (60 + rank); normalised by its maximum."""

    store = "hybrid"

    def __init__(self, parts: Sequence[Retriever], tiebreak: TieBreak):
        self.parts = parts
        self.tiebreak = tiebreak  # ranks each part with the documented tie-break

    def scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        # RRF gives every chunk a term from its rank in every part, so each part is ranked in full
        fused: np.ndarray | None = None
        for part in self.parts:
            contribution = 1.0 / (RRF_K + self.tiebreak.ranks(part.scores(query)[1]))
            fused = contribution if fused is None else fused + contribution
        assert fused is not None  # a hybrid has parts
        return fused, fused / (len(self.parts) / (RRF_K + 1))

    def unit_vectors(self) -> np.ndarray:
        return next(p.unit_vectors() for p in self.parts if isinstance(p, Dense))


def _unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (a zero row stays zero)."""
    unit: np.ndarray = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return unit


def mmr(
    unit: np.ndarray, candidates: Sequence[int], relevance: np.ndarray, *, k: int, weight: float = 0.7
) -> list[tuple[int, float]]:
    """Maximal marginal relevance over `candidates`: (chunk index, MMR score) in selection order.

    Relevance is the retriever's normalised score; redundancy is the cosine to the chunks chosen
    so far, the largest of the dot products of the `unit` rows. Each pair's dot product is taken
    once: the running maximum over the choices so far is that largest value.
    """
    chosen: list[tuple[int, float]] = []
    pool = list(candidates)
    redundancy: dict[int, float] = {}
    while pool and len(chosen) < k:
        best: int | None = None
        best_score = -np.inf
        for i in pool:  # in retrieval order, so an equal MMR score keeps the earlier candidate
            value = weight * float(relevance[i]) - (1 - weight) * redundancy.get(i, 0.0)
            if value > best_score:
                best, best_score = i, value
        if best is None:  # every score NaN: nothing more can be ranked
            break
        chosen.append((best, best_score))
        pool.remove(best)
        for i in pool:
            similarity = float(unit[i] @ unit[best])
            if i not in redundancy or similarity > redundancy[i]:
                redundancy[i] = similarity
    return chosen
