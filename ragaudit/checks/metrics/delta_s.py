"""ΔS: the semantic distance between a query, what was retrieved for it, and the gold anchor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ragaudit.checks.metrics.embed import delta_s_pairs
from ragaudit.core.analyzers import get_analyzer
from ragaudit.core.text import units
from ragaudit.core.types import Payload

if TYPE_CHECKING:
    from ragaudit.checks.metrics.embed import Encoder
    from ragaudit.core.types import Corpus

# The text of one payload the metrics read: a longer one (a whole document returned as a snippet) is
# scored on its first SCORED_CHARS characters, cut at the last space before them, and noted as
# `text_truncated`; its span checks and stored text stay whole. At about 10 s of scoring per MB,
# this keeps one payload's scoring under a second.
SCORED_CHARS = 100_000
ZONES = (("stable", 0.40), ("transit", 0.60), ("risk", 0.85), ("danger", float("inf")))
JOIN = "\n\n"


def zone(delta_s: float | None) -> str | None:
    """stable [0, 0.40), transit [0.40, 0.60), risk [0.60, 0.85), danger [0.85, 1]."""
    if delta_s is None:
        return None
    return next(name for name, upper in ZONES if delta_s < upper)


def payload_text(payload: Payload, corpus: Corpus | None) -> str:
    """The payload's own text, or its slice of the corpus document."""
    if payload.text is not None:
        return payload.text
    if corpus is None or payload.doc_id is None or payload.doc_id not in corpus or payload.span is None:
        return ""
    doc = corpus[payload.doc_id]
    span = corpus.char_span(payload.doc_id, payload.span, get_analyzer(payload.analyzer))
    return doc.text[span.start : span.end] if span is not None else ""


def scored_text(payload: Payload, corpus: Corpus | None) -> str:
    """The payload's text as the metrics read it: `payload_text` up to SCORED_CHARS characters."""
    return scored_prefix(payload_text(payload, corpus))


def scored_prefix(text: str) -> str:
    """`text` up to SCORED_CHARS characters, cut at the last whitespace before the limit (at the
    limit when there is none)."""
    if len(text) <= SCORED_CHARS:
        return text
    cut = max(text.rfind(" ", 0, SCORED_CHARS + 1), text.rfind("\n", 0, SCORED_CHARS + 1))
    return text[: cut if cut > 0 else SCORED_CHARS]


READINGS = ("nearest", "join")  # what "cited text" means for delta_s_qr; see `ragaudit metrics`
DEFAULT_READING = "nearest"


def join_texts(texts: Sequence[str]) -> str:
    return JOIN.join(texts)


def delta_s_runs(
    encoder: Encoder,
    queries: Sequence[str],
    cited: Sequence[Sequence[str]],
    top_k: Sequence[str],
    anchors: Sequence[str | None],
    golds: Sequence[Sequence[str]] | None = None,
    *,
    reading: str = DEFAULT_READING,
) -> dict[str, np.ndarray]:
    """For many runs at once, each distinct text encoded once:

    * delta_s_qr: the query vs the cited text, in the chosen reading;
    * delta_s_gold: the query vs the closest statement (sentence) of the gold texts;
    * delta_s_excess: max(0, d(cited) - delta_s_gold) with d(cited) the query vs the closest
      statement of the cited texts: how much farther from the question what the run cites lies than
      what the gold says to cite, like compared with like (a cited chunk that holds the gold
      sentence is never farther than it, whatever the chunk's length); NaN without gold texts;
    * delta_s_topk: the query vs the joined top-k texts;
    * delta_s_ra: the joined cited texts vs the anchor.

    Runs with nothing to compare get 1.0: a run that cites nothing is as far from its question as
    a run can be, never a perfect 0. Readings of "cited text": `nearest` = the closest single text
    (min over the cited payloads); `join` = the texts joined (the encoder truncates a long join at
    its max sequence length).
    """
    if reading not in READINGS:
        raise ValueError(f"The 'reading' parameter must be one of {READINGS}. Got {reading!r} instead.")
    n = len(queries)
    golds = golds if golds is not None else [[] for _ in range(n)]
    joined = [join_texts([t for t in texts if t]) for texts in cited]
    left, right, owner = [], [], []
    for i, texts in enumerate(cited):
        kept = [t for t in texts if t]
        for text in kept if reading == "nearest" else ([joined[i]] if joined[i] else []):
            left.append(queries[i])
            right.append(text)
            owner.append((0, i))
    for side, groups in ((1, cited), (2, golds)):  # statement by statement, for the excess
        for i, texts in enumerate(groups):
            for statement in dict.fromkeys(u for t in texts if t for u in units(t)):
                left.append(queries[i])
                right.append(statement)
                owner.append((side, i))
    ra_runs = [i for i, a in enumerate(anchors) if a and joined[i]]
    topk_runs = [i for i, t in enumerate(top_k) if t]
    distances = delta_s_pairs(
        encoder,
        [*left, *(queries[i] for i in topk_runs), *(joined[i] for i in ra_runs)],
        [*right, *(top_k[i] for i in topk_runs), *(anchors[i] or "" for i in ra_runs)],  # ra_runs have one
    )
    nearest = (np.ones(n), np.ones(n), np.full(n, np.nan))
    sides, runs = np.asarray(owner, dtype=np.int64).reshape(-1, 2).T
    for side, values in enumerate(nearest):  # the smallest of each run's distances; fmin passes over NaN
        mine = sides == side
        np.fmin.at(values, runs[mine], distances[: len(left)][mine])
    qr, cited_statement, gold = nearest
    topk, ra = np.ones(n), np.full(n, np.nan)
    topk[topk_runs] = distances[len(left) : len(left) + len(topk_runs)]
    ra[ra_runs] = distances[len(left) + len(topk_runs) :]
    for i, a in enumerate(anchors):
        if a and not joined[i]:
            ra[i] = 1.0
    excess = np.where(np.isnan(gold), np.nan, np.maximum(0.0, cited_statement - np.nan_to_num(gold)))
    return {"delta_s_qr": qr, "delta_s_gold": gold, "delta_s_excess": excess, "delta_s_topk": topk, "delta_s_ra": ra}
