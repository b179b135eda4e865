"""The fault classes of docs/reference.md §9, each a transformation of one recorded trace.

A mutation takes a trace and what it may know (the gold item, the corpus, payloads seen in other
runs of the same pipeline, a seeded generator) and returns the faulty trace, or None when the fault
cannot apply to that run (a retrieval-only run has no answer to alter, say). Every mutation keeps
the rest of the trace valid, so the fault is the only defect a gate could catch.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Callable

from ragaudit.checks.metrics.claims import answer_segments
from ragaudit.checks.metrics.delta_s import payload_text
from ragaudit.checks.metrics.quantities import mentions
from ragaudit.core.analyzers import get_analyzer
from ragaudit.core.text import sentences
from ragaudit.core.types import Answer, Corpus, GoldItem, Offsets, Payload, Segment, Trace


@dataclass
class Scene:
    """What a mutation may use besides the trace."""

    item: GoldItem
    corpus: Corpus
    pool: list[Payload]  # distinct payloads of the same pipeline, in run order
    seeds: tuple[int, ...]
    k: int = 5
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    @functools.cached_property  # asked for each payload a mutation looks at: worked out once a scene
    def gold_sections(self) -> set[tuple[str, str | None]]:
        return {(g.doc_id, g.section_id) for g in self.item.gold_citations}

    def in_gold_section(self, p: Payload) -> bool:
        return (p.doc_id, p.section_id) in self.gold_sections


@dataclass(frozen=True)
class Fault:
    name: str
    description: str
    mutate: Callable[[Trace, Scene], Trace | None]
    control: bool = False  # a negative control: the gate must pass it


# ---- shared pieces -------------------------------------------------------------------------


def cited_ids(trace: Trace, k: int) -> set[str | None]:
    if trace.answer is not None:
        return set(trace.answer.citations)
    return {p.snippet_id for p in trace.retrieved[:k]}


def statement_of(text: str) -> str | None:
    """A sentence of `text` that reads as a claim: not a heading, at least four words."""
    for sentence in sentences(text):
        if not sentence.lstrip().startswith("#") and len(sentence.split()) >= 4:
            return sentence.strip()
    return None


def _tokens(p: Payload, text: str) -> int | None:
    analyzer = get_analyzer(p.analyzer)
    return analyzer.count(text) if analyzer else p.tokens


def with_answer(trace: Trace, segments: list[Segment]) -> Trace:
    """The trace with a cite-first answer made of these segments."""

    def marked(s: Segment) -> str:
        body = s.text.rstrip()
        marks = "".join(f" [{c}]" for c in s.citations)
        return f"{body[:-1]}{marks}{body[-1]}" if body and body[-1] in ".!?" else f"{body}{marks}"

    citations = list(dict.fromkeys(c for s in segments for c in s.citations))
    text = " ".join(marked(s) for s in segments)
    raw = json.dumps({"citations": citations, "answer": text}, ensure_ascii=False)
    return dataclasses.replace(
        trace,
        answer=Answer(
            raw=raw,
            text=text,
            segments=tuple(segments),
            raw_citations=tuple(citations),
            raw_keys=("citations", "answer"),
        ),
    )


def _renumbered(payloads: list[Payload]) -> tuple[Payload, ...]:
    """Payloads with k_pos (and k_final where present) renumbered 1..n in list order."""
    return tuple(
        dataclasses.replace(p, k_pos=i, k_final=i if p.k_final is not None else None)
        for i, p in enumerate(payloads, start=1)
    )


def _candidates(trace: Trace, scene: Scene, *, same_doc: bool) -> list[Payload]:
    """Payloads of a wrong section: from this run's retrieved list first, then the pipeline's pool;
    of the gold document when `same_doc` (and it has other sections), else of another document."""
    gold_docs = {d for d, _ in scene.gold_sections}
    seen, out = set(), []
    for p in (*trace.retrieved, *scene.pool):
        if p.snippet_id in seen or scene.in_gold_section(p) or not payload_text(p, scene.corpus):
            continue
        seen.add(p.snippet_id)
        if (p.doc_id in gold_docs) == same_doc:
            out.append(p)
    return out


def _recite(trace: Trace, scene: Scene, replacement: Payload) -> Trace | None:
    """The run cites `replacement` wherever it cited the gold section: in the answer when there is
    one (the replacement joins the retrieved list in place of a gold payload if it is not there),
    in the top k when the run has no answer."""
    gold_ids = {p.snippet_id for p in trace.retrieved if scene.in_gold_section(p)}
    cited = cited_ids(trace, scene.k)
    if not gold_ids & cited:
        return None
    retrieved = list(trace.retrieved)
    if replacement.snippet_id not in {p.snippet_id for p in retrieved}:
        at = next(i for i, p in enumerate(retrieved) if p.snippet_id in gold_ids & cited)
        old = retrieved[at]
        retrieved[at] = dataclasses.replace(
            replacement,
            k_pos=old.k_pos,
            k_final=old.k_final,
            score_raw=old.score_raw,
            score_norm=old.score_norm,
            rerank_score=old.rerank_score,
        )
    if trace.answer is None:  # a retrieval-only run cites its top k: the gold section leaves it
        kept = [p for p in retrieved if not scene.in_gold_section(p)]
        return dataclasses.replace(trace, retrieved=_renumbered(kept))
    statement = statement_of(payload_text(replacement, scene.corpus)) or payload_text(replacement, scene.corpus)
    segments = [
        Segment(s.seg, statement, tuple(filter(None, (replacement.snippet_id,)))) if gold_ids & set(s.citations) else s
        for s in answer_segments(trace.answer)
    ]
    return with_answer(dataclasses.replace(trace, retrieved=tuple(retrieved)), segments)


def _drift(trace: Trace, scene: Scene) -> Trace | None:
    options = _candidates(trace, scene, same_doc=True) or _candidates(trace, scene, same_doc=False)
    return _recite(trace, scene, options[0]) if options else None


def _shifted(trace: Trace, scene: Scene, *, keep_text: bool) -> Trace | None:
    cited = cited_ids(trace, scene.k)
    shift = scene.rng.choice((-7, -6, -5, -4, -3, 3, 4, 5, 6, 7))
    changed, out = False, []
    for p in trace.retrieved:
        span = p.span
        if (
            p.snippet_id in cited
            and span is not None
            and span.unit == "char"
            and p.doc_id is not None
            and p.doc_id in scene.corpus
        ):
            size = len(scene.corpus[p.doc_id].text)
            start, end = max(0, span.start + shift), min(size, span.end + shift)
            if start < end and (start, end) != (span.start, span.end):
                text = (p.text if p.text is not None else payload_text(p, scene.corpus)) if keep_text else None
                p = dataclasses.replace(p, offsets=Offsets(start, end, "char"), text=text)
                changed = True
        out.append(p)
    return dataclasses.replace(trace, retrieved=tuple(out)) if changed else None


def _each_cited(trace: Trace, scene: Scene, change: Callable[[Payload], Payload | None]) -> Trace | None:
    cited = cited_ids(trace, scene.k)
    out = [(change(p) or p) if p.snippet_id in cited else p for p in trace.retrieved]
    return dataclasses.replace(trace, retrieved=tuple(out)) if out != list(trace.retrieved) else None


# ---- the faults ----------------------------------------------------------------------------


def stale_revision(trace: Trace, scene: Scene) -> Trace | None:
    def stale(p: Payload) -> Payload | None:
        text = payload_text(p, scene.corpus)
        if not text or p.rev is None:
            return None
        old = hashlib.sha256(f"{p.rev}:before".encode()).hexdigest()[:12]
        words = text.split(" ")
        at = scene.rng.randrange(len(words))
        words[at] = "formerly" if words[at] != "formerly" else "previously"
        return dataclasses.replace(p, rev=old, text=" ".join(words))

    return _each_cited(trace, scene, stale)


def offset_shift(trace: Trace, scene: Scene) -> Trace | None:
    return _shifted(trace, scene, keep_text=True)


def offset_shift_no_text(trace: Trace, scene: Scene) -> Trace | None:
    return _shifted(trace, scene, keep_text=False)


def cross_section_span(trace: Trace, scene: Scene) -> Trace | None:
    """The first cited span is stretched 12 characters past its section's end (or before its start
    when the section ends the document); text and tokens follow, so only the section rule can tell."""
    cited = cited_ids(trace, scene.k)
    for i, p in enumerate(trace.retrieved):
        span = p.span
        if p.snippet_id not in cited or span is None or span.unit != "char" or p.doc_id is None:
            continue
        if p.doc_id not in scene.corpus:
            continue
        doc = scene.corpus[p.doc_id]
        section = doc.section(p.section_id or "")
        if section is None:
            continue
        if section.end + 12 <= len(doc.text):
            start, end = span.start, section.end + 12
        elif section.start >= 12:
            start, end = section.start - 12, span.end
        else:
            continue
        text = doc.text[start:end]
        stretched = dataclasses.replace(p, offsets=Offsets(start, end, "char"), text=text, tokens=_tokens(p, text))
        return dataclasses.replace(trace, retrieved=(*trace.retrieved[:i], stretched, *trace.retrieved[i + 1 :]))
    return None


def wrong_index_hash(trace: Trace, scene: Scene) -> Trace | None:
    if trace.index is None or trace.index.index_hash is None:
        return None  # without the live index there is nothing to disagree with
    stale = "sha256:" + hashlib.sha256(f"{trace.index.index_hash}:stale".encode()).hexdigest()
    return dataclasses.replace(
        trace, retrieved=tuple(dataclasses.replace(p, index_hash=stale) for p in trace.retrieved)
    )


def analyzer_mismatch(trace: Trace, scene: Scene) -> Trace | None:
    if trace.index is None or trace.index.analyzer is None or not trace.retrieved:
        return None
    other = "whitespace" if trace.index.analyzer != "whitespace" else "lowercase"
    return dataclasses.replace(trace, retrieved=tuple(dataclasses.replace(p, analyzer=other) for p in trace.retrieved))


def dangling_citation(trace: Trace, scene: Scene) -> Trace | None:
    segments = list(answer_segments(trace.answer))
    if not segments:
        return None
    ghost = f"{segments[0].citations[0] if segments[0].citations else 'snippet'}~unretrieved"
    segments[0] = Segment(segments[0].seg, segments[0].text, (*segments[0].citations, ghost))
    return with_answer(trace, segments)


def paraphrase_drift(trace: Trace, scene: Scene) -> Trace | None:
    return _drift(trace, scene) if trace.variant >= 1 else None


def seed_drift(trace: Trace, scene: Scene) -> Trace | None:
    seeds = sorted(scene.seeds)
    return _drift(trace, scene) if len(seeds) > 1 and trace.seed == seeds[1] else None


def retrieval_loss(trace: Trace, scene: Scene) -> Trace | None:
    kept = [p for p in trace.retrieved if not scene.in_gold_section(p)]
    if len(kept) == len(trace.retrieved):
        return None
    lost = {p.snippet_id for p in trace.retrieved} - {p.snippet_id for p in kept}
    trace = dataclasses.replace(trace, retrieved=_renumbered(kept))
    segments = answer_segments(trace.answer)
    if not segments:
        return trace
    best = kept[0] if kept else None
    statement = statement_of(payload_text(best, scene.corpus)) if best else None
    repointed = [
        s
        if not lost & set(s.citations)
        else Segment(s.seg, statement, tuple(filter(None, (best.snippet_id,))))
        if statement and best is not None
        else Segment(s.seg, s.text, tuple(c for c in s.citations if c not in lost))
        for s in segments
    ]
    return with_answer(trace, repointed)


def wrong_sentence(trace: Trace, scene: Scene) -> Trace | None:
    """Each segment citing the gold section states a sentence of another section instead."""
    segments = answer_segments(trace.answer)
    gold_ids = {p.snippet_id for p in trace.retrieved if scene.in_gold_section(p)}
    if not segments or not gold_ids:
        return None
    options = _candidates(trace, scene, same_doc=True) or _candidates(trace, scene, same_doc=False)
    statements = [s for s in (statement_of(payload_text(p, scene.corpus)) for p in options) if s]
    if not statements:
        return None
    changed = [Segment(s.seg, statements[0], s.citations) if gold_ids & set(s.citations) else s for s in segments]
    return with_answer(trace, changed) if changed != list(segments) else None


def _altered(surface: str) -> str:
    """The mention with its last digit moved by two: 12 days → 14 days, FIDO2 → FIDO4."""
    at = max(i for i, c in enumerate(surface) if c.isdigit())
    return surface[:at] + str((int(surface[at]) + 2) % 10) + surface[at + 1 :]


def number_change(trace: Trace, scene: Scene) -> Trace | None:
    segments = list(answer_segments(trace.answer))
    for i, s in enumerate(segments):
        found = [m for m in mentions(s.text) if any(c.isdigit() for c in m.surface)]
        if found:
            m = found[0]
            text = s.text[: m.start] + _altered(m.surface) + s.text[m.end :]
            segments[i] = Segment(s.seg, text, s.citations)
            return with_answer(trace, segments)
    return None


def wrong_document(trace: Trace, scene: Scene) -> Trace | None:
    options = _candidates(trace, scene, same_doc=False)
    decoy = scene.item.decoy
    if decoy is not None:  # the gold set's own decoy is the most plausible wrong source
        options.sort(key=lambda p: (p.doc_id != decoy.doc_id, p.section_id != decoy.section_id))
    return _recite(trace, scene, options[0]) if options else None


PAYLOAD_FAULTS: tuple[Fault, ...] = (
    Fault(
        "stale_revision",
        "cited payloads carry an older rev and text that no longer matches the corpus",
        stale_revision,
    ),
    Fault("offset_shift", "span offsets moved by a few characters, text kept", offset_shift),
    Fault("offset_shift_no_text", "span offsets moved by a few characters, payload text removed", offset_shift_no_text),
    Fault("cross_section_span", "a span stretched across its section's boundary", cross_section_span),
    Fault("wrong_index_hash", "payload index_hash differs from the live index", wrong_index_hash),
    Fault("analyzer_mismatch", "payload analyzer differs from the live index", analyzer_mismatch),
    Fault("dangling_citation", "the answer cites a snippet that is not in retrieved", dangling_citation),
    Fault(
        "paraphrase_drift",
        "variants >= 1 cite a different, wrong section (same document when it has one)",
        paraphrase_drift,
    ),
    Fault("seed_drift", "the second seed cites a wrong section", seed_drift),
    Fault("retrieval_loss", "the gold section disappears from retrieved and cited payloads", retrieval_loss),
    Fault("wrong_sentence", "the answer keeps the right citation but states a sentence from elsewhere", wrong_sentence),
    Fault(
        "number_change",
        "a quantity or identifier in the answer is altered (12 days -> 14 days, FIDO2 -> FIDO4)",
        number_change,
    ),
    Fault("wrong_document", "citations point to a plausible section of another document", wrong_document),
)
