"""An extractive answerer: picks the sentences of the retrieved snippets that best match the query,
and writes a cite-first answer with one segment per sentence.

A sentence scores cos(E(query), E(sentence)) + 0.5 × the share of the query's content stems it
holds: the embedding finds the sentence that answers a paraphrase ("How frequently …" → "… every
12 months"), the stems keep the one that names what was asked ("removal deadline" → "removed
within 5 days"). Without an encoder only the stems count. At `temperature` 0 it always takes the
best sentence; above 0 it samples sentences by softmax(score / temperature) with a generator
seeded by (seed, qid, variant), so a seed changes the answer the way it would for a sampling LLM,
and the same seed always gives the same answer.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from ragaudit.core.analyzers import Analyzer
from ragaudit.core.text import content_stems, sentence_spans
from ragaudit.core.types import Answer, Payload, Segment

if TYPE_CHECKING:
    from ragaudit.checks.metrics.embed import Encoder

MAX_SENTENCES = 2
STEM_WEIGHT = 0.5


@dataclass(frozen=True, slots=True)
class Candidate:
    text: str
    snippet_id: str
    score: float


@lru_cache(maxsize=1 << 15)
def _answerable(text: str, analyzer: Analyzer) -> tuple[tuple[str, frozenset[str]], ...]:
    """The sentences of a snippet that may answer, each with its content stems. The same snippets
    come back for every variant and seed of a question, so each is split and stemmed once."""
    found = []
    for a, b in sentence_spans(text):
        sentence = text[a:b]
        if not analyzer.terms(sentence) or sentence.lstrip().startswith("#"):
            continue  # headings are not answers
        found.append((sentence, frozenset(content_stems(sentence))))
    return tuple(found)


def _candidates(
    query: str, payloads: list[Payload], analyzer: Analyzer, encoder: Encoder | None = None
) -> list[Candidate]:
    wanted = set(content_stems(query))
    found = []
    for p in payloads:
        for sentence, stems in _answerable(p.text or "", analyzer):
            overlap = len(wanted & stems) / max(len(wanted), 1)
            found.append((sentence, p.snippet_id or "", STEM_WEIGHT * overlap))  # reference chunks all have one
    if encoder is not None and found:
        vectors = encoder.encode([query, *(f[0] for f in found)])
        similarity = vectors[1:] @ vectors[0]
        found = [(t, sid, score + float(cos)) for (t, sid, score), cos in zip(found, similarity)]
    return [Candidate(t, sid, score) for t, sid, score in found]


def _pick(candidates: list[Candidate], rng: random.Random, temperature: float) -> Candidate:
    if temperature <= 0:
        return max(candidates, key=lambda c: c.score)  # max keeps the first of equals: retrieval order
    top = max(c.score for c in candidates)
    weights = [math.exp((c.score - top) / temperature) for c in candidates]
    return rng.choices(candidates, weights=weights, k=1)[0]


def _with_marker(sentence: str, snippet_id: str) -> str:
    """The sentence with its citation marker inside it, before the closing punctuation."""
    body = sentence.rstrip()
    if body and body[-1] in ".!?":
        return f"{body[:-1]} [{snippet_id}]{body[-1]}"
    return f"{body} [{snippet_id}]"


def answer(
    query: str,
    payloads: list[Payload],
    analyzer: Analyzer,
    *,
    seed: int,
    key: str,
    temperature: float = 0.0,
    encoder: Encoder | None = None,
) -> Answer | None:
    candidates = _candidates(query, payloads, analyzer, encoder)
    if not candidates:
        return None
    rng = random.Random(f"{seed}:{key}")
    chosen: list[Candidate] = []
    while candidates and len(chosen) < MAX_SENTENCES:
        pick = _pick(candidates, rng, temperature)
        if chosen and pick.score < 0.6 * chosen[0].score:
            break
        chosen.append(pick)
        candidates = [c for c in candidates if c.text != pick.text]
    segments = tuple(Segment(i + 1, c.text, (c.snippet_id,)) for i, c in enumerate(chosen))
    text = " ".join(_with_marker(c.text, c.snippet_id) for c in chosen)
    citations = list(dict.fromkeys(c.snippet_id for c in chosen))
    raw = json.dumps({"citations": citations, "answer": text}, ensure_ascii=False)  # cite-first
    return Answer(
        raw=raw, text=text, segments=segments, raw_citations=tuple(citations), raw_keys=("citations", "answer")
    )
