"""ΔS: the semantic distance between a query, what was retrieved for it, and the gold anchor."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ragaudit.analyzers import get_analyzer
from ragaudit.metrics.embed import delta_s_pairs
from ragaudit.types import Payload

ZONES = (("stable", 0.40), ("transit", 0.60), ("risk", 0.85), ("danger", float("inf")))
JOIN = "\n\n"


def zone(delta_s: float | None) -> str | None:
    """stable [0, 0.40), transit [0.40, 0.60), risk [0.60, 0.85), danger [0.85, 1]."""
    if delta_s is None:
        return None
    return next(name for name, upper in ZONES if delta_s < upper)


def payload_text(payload: Payload, corpus) -> str:
    """The payload's own text, or its slice of the corpus document."""
    if payload.text is not None:
        return payload.text
    if corpus is None or payload.doc_id not in corpus or payload.span is None:
        return ""
    doc = corpus[payload.doc_id]
    span = corpus.char_span(payload.doc_id, payload.span, get_analyzer(payload.analyzer))
    return doc.text[span.start:span.end] if span is not None else ""


def top_k_text(payloads: Sequence[Payload], corpus, k: int) -> str:
    return JOIN.join(payload_text(p, corpus) for p in payloads[:k])


def delta_s_runs(encoder, queries: Sequence[str], retrieved_texts: Sequence[str],
                 anchors: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(delta_s_qr, delta_s_ra) for many runs at once, each distinct text encoded once.

    A run that retrieved nothing gets NaN for both, so it can be told apart from a perfect 0.
    """
    qr = delta_s_pairs(encoder, list(queries), list(retrieved_texts))
    ra = delta_s_pairs(encoder, list(retrieved_texts), list(anchors))
    empty = np.array([not t for t in retrieved_texts], dtype=bool)
    qr[empty] = np.nan
    ra[empty] = np.nan
    return qr, ra
