"""An extractive answerer: picks the sentences of the retrieved snippets that best match the query,
and writes a cite-first answer with one segment per sentence.

At `temperature` 0 it always takes the best sentence; above 0 it samples sentences by
softmax(score / temperature) with a generator seeded by (seed, qid, variant), so a seed changes the
answer the way it would for a sampling LLM, and the same seed always gives the same answer.
"""
from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass

from ragaudit.analyzers import Analyzer
from ragaudit.text import sentence_spans
from ragaudit.types import Answer, Payload, Segment

STOPWORDS = frozenset("""a an and are as at be by can do does for from has have how i in is it its
must of on or our should the their them there they this to was we what when where which who why
will with within you your""".split())
MAX_SENTENCES = 2


@dataclass(frozen=True, slots=True)
class Candidate:
    text: str
    snippet_id: str
    score: float


def _candidates(query: str, payloads: list[Payload], analyzer: Analyzer) -> list[Candidate]:
    wanted = {t for t in analyzer.terms(query) if t not in STOPWORDS}
    out = []
    for p in payloads:
        for a, b in sentence_spans(p.text or ""):
            sentence = (p.text or "")[a:b]
            terms = set(analyzer.terms(sentence))
            if not terms or sentence.lstrip().startswith("#"):
                continue  # headings are not answers
            overlap = len(wanted & terms) / max(len(wanted), 1)
            out.append(Candidate(sentence, p.snippet_id, overlap + 0.25 * (p.score_norm or 0.0)))
    return out


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


def answer(query: str, payloads: list[Payload], analyzer: Analyzer, *, seed: int, key: str,
           temperature: float = 0.0) -> Answer | None:
    candidates = _candidates(query, payloads, analyzer)
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
    return Answer(raw=raw, text=text, segments=segments, raw_citations=tuple(citations),
                  raw_keys=("citations", "answer"))
