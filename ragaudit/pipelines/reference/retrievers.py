"""Retrievers over a chunk list. Each scores every chunk for a query; scores are normalised to
[0, 1] per retriever so that `score_norm` means the same thing across queries."""
from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from ragaudit.analyzers import Analyzer

RRF_K = 60


class Retriever(Protocol):
    store: str

    def scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """(raw, normalised) scores of every chunk, in chunk order."""


def _vectorizer(analyzer: Analyzer, **options):
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
    kind = TfidfVectorizer if options.pop("tfidf", False) else CountVectorizer
    return kind(analyzer=analyzer.terms, dtype=np.float64, **options)


class BM25:
    """Okapi BM25 (k1=1.2, b=0.75) on a scikit-learn sparse term matrix; normalised by the best score."""
    store = "bm25"

    def __init__(self, texts: Sequence[str], analyzer: Analyzer, *, k1: float = 1.2, b: float = 0.75):
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

    def scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        q = self.vectorizer.transform([query])
        q.data[:] = 1.0  # each query term counts once
        raw = np.asarray((q @ self.weights).todense()).ravel()
        top = raw.max(initial=0.0)
        return raw, (raw / top if top > 0 else raw)


class TfIdf:
    """Cosine between sublinear tf-idf vectors; already in [0, 1]."""
    store = "tfidf"

    def __init__(self, texts: Sequence[str], analyzer: Analyzer):
        self.vectorizer = _vectorizer(analyzer, tfidf=True, sublinear_tf=True)
        self.matrix = self.vectorizer.fit_transform(texts).tocsr()

    def scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        raw = np.asarray((self.matrix @ self.vectorizer.transform([query]).T).todense()).ravel()
        return raw, np.clip(raw, 0.0, 1.0)

    def vectors(self) -> np.ndarray:
        return self.matrix.toarray()


class Dense:
    """Cosine between sentence embeddings; normalised as (cos + 1) / 2 to keep the order."""
    store = "dense"

    def __init__(self, texts: Sequence[str], encoder):
        self.encoder = encoder
        self.matrix = encoder.encode(list(texts))

    def scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        raw = self.matrix @ self.encoder.encode([query])[0]
        return raw, np.clip((raw + 1.0) / 2.0, 0.0, 1.0)

    def vectors(self) -> np.ndarray:
        return self.matrix


class Hybrid:
    """Reciprocal rank fusion of several retrievers: sum of 1 / (60 + rank); normalised by its maximum."""
    store = "hybrid"

    def __init__(self, parts: Sequence[Retriever], order):
        self.parts = parts
        self.order = order  # (raw, norm) -> chunk indices best first, with the documented tie-break

    def scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        fused = None
        for part in self.parts:
            ranking = self.order(*part.scores(query))
            ranks = np.empty(len(ranking))
            ranks[ranking] = np.arange(1, len(ranking) + 1)
            contribution = 1.0 / (RRF_K + ranks)
            fused = contribution if fused is None else fused + contribution
        return fused, fused / (len(self.parts) / (RRF_K + 1))

    def vectors(self) -> np.ndarray:
        return next(p.vectors() for p in self.parts if isinstance(p, Dense))


def mmr(vectors: np.ndarray, candidates: list[int], relevance: np.ndarray,
        *, k: int, weight: float = 0.7) -> list[tuple[int, float]]:
    """Maximal marginal relevance over `candidates`: (chunk index, MMR score) in selection order.

    Relevance is the retriever's normalised score; redundancy is the cosine to the chunks chosen so far.
    """
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    chosen: list[tuple[int, float]] = []
    pool = list(candidates)
    while pool and len(chosen) < k:
        best, best_score = None, -np.inf
        for i in pool:  # in retrieval order, so an equal MMR score keeps the earlier candidate
            redundancy = max((float(unit[i] @ unit[j]) for j, _ in chosen), default=0.0)
            value = weight * float(relevance[i]) - (1 - weight) * redundancy
            if value > best_score:
                best, best_score = i, value
        chosen.append((best, best_score))
        pool.remove(best)
    return chosen
