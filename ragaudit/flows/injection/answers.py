"""Answer-style faults (docs/reference.md §9): what an LLM gets wrong in an answer whose retrieval
was right, and the negative control of what it gets right in its own words.

* `same_topic_fact`: the answer states another fact on the gold document's topic instead of the
  anchor's, its citation kept;
* `unsupported_claim` / `unsupported_quantity`: a sentence its cited texts do not support is added
  (without a quantity / with one), citing what the answer cites;
* `wrong_marker`: the marker points at another retrieved snippet;
* `uncited_answer`: the answer's markers and citations are gone;
* `llm_rewrite` (control): the same facts in other words (`rewrite.py`); the gate must pass it.

Sentences brought in from elsewhere are the corpus's own, chosen for their topic: those sharing
the most content words with the question and the anchor, outside every text the run cites.
"""

from __future__ import annotations

import dataclasses
import json

from ragaudit.checks.metrics.claims import answer_segments
from ragaudit.checks.metrics.delta_s import payload_text
from ragaudit.checks.metrics.quantities import mentions
from ragaudit.core.markers import markers, strip_markers
from ragaudit.core.text import content_stems, sentences
from ragaudit.core.types import Answer, Corpus, Segment, Trace
from ragaudit.flows.injection.mutations import Fault, Scene, cited_ids, with_answer
from ragaudit.flows.injection.rewrite import rewrite

Statement = tuple[str, str, frozenset[str], bool]  # (doc_id, text, content stems, has a quantity)
# id(corpus) -> (the corpus, its statements): a corpus is unhashable
_READ: dict[int, tuple[Corpus, tuple[Statement, ...]]] = {}


def _statements(corpus: Corpus) -> tuple[Statement, ...]:
    """Every sentence of the corpus that reads as a claim: (doc_id, text, content stems, has a quantity)."""
    held = _READ.get(id(corpus))
    if held is not None and held[0] is corpus:
        return held[1]
    if len(_READ) >= 4:
        _READ.clear()
    out = []
    for doc_id in sorted(corpus.documents):
        for sentence in sentences(corpus[doc_id].text):
            text = " ".join(sentence.split())
            if text.startswith("#") or len(text.split()) < 6 or next(markers(text), None) is not None:
                continue
            out.append((doc_id, text, frozenset(content_stems(text)), bool(mentions(text))))
    _READ[id(corpus)] = (corpus, tuple(out))
    return _READ[id(corpus)][1]


def _topical(trace: Trace, scene: Scene, *, quantity: bool | None, same_doc: bool) -> list[str]:
    """Sentences outside every text the run cites, most on the question's topic first: of the gold
    document (`same_doc`) or of any other; with or without a quantity (None: either)."""
    cited = cited_ids(trace, scene.k)
    texts = [payload_text(p, scene.corpus) for p in trace.retrieved if p.snippet_id in cited]
    seen = {" ".join(u.split()) for t in texts for u in sentences(t)}
    cited_stems = set(content_stems(" ".join(texts)))
    anchor = set(content_stems(scene.item.anchor.text))
    topic = set(content_stems(scene.item.question)) | anchor
    ranked = []
    for doc_id, text, stems, has_quantity in _statements(scene.corpus):
        if (doc_id == scene.item.doc_id) != same_doc or text in seen or any(text in t for t in texts):
            continue
        if quantity is not None and has_quantity != quantity:
            continue
        if stems and len(stems & cited_stems) / len(stems) > (0.5 if not same_doc else 0.8):
            continue  # what the cited text says anyway (another page may restate it)
        if anchor and len(stems & anchor) / len(anchor | stems) > 0.5:
            continue  # a restatement of the anchor
        ranked.append((-len(stems & topic), text))
    return [text for _, text in sorted(ranked)[:5]]


def _gold_segments(trace: Trace, scene: Scene) -> tuple[list[Segment], set[str]]:
    gold_ids = {p.snippet_id for p in trace.retrieved if scene.in_gold_section(p) and p.snippet_id}
    return list(answer_segments(trace.answer)), gold_ids


def same_topic_fact(trace: Trace, scene: Scene) -> Trace | None:
    segments, gold_ids = _gold_segments(trace, scene)
    if not segments or not gold_ids:
        return None
    options = _topical(trace, scene, quantity=None, same_doc=True) or _topical(
        trace, scene, quantity=None, same_doc=False
    )
    if not options:
        return None
    fact = scene.rng.choice(options[:3])
    changed = [Segment(s.seg, fact, s.citations) if gold_ids & set(s.citations) else s for s in segments]
    return with_answer(trace, changed) if changed != segments else None


def _added(trace: Trace, scene: Scene, *, quantity: bool) -> Trace | None:
    segments, gold_ids = _gold_segments(trace, scene)
    at = next((i for i, s in enumerate(segments) if gold_ids & set(s.citations)), None)
    if at is None:
        return None
    options = _topical(trace, scene, quantity=quantity, same_doc=False) or _topical(
        trace, scene, quantity=quantity, same_doc=True
    )
    if not options:
        return None
    added = Segment(segments[at].seg, scene.rng.choice(options[:3]), segments[at].citations)
    out = [*segments[: at + 1], added, *segments[at + 1 :]]
    return with_answer(trace, [Segment(i, s.text, s.citations) for i, s in enumerate(out, start=1)])


def unsupported_claim(trace: Trace, scene: Scene) -> Trace | None:
    return _added(trace, scene, quantity=False)


def unsupported_quantity(trace: Trace, scene: Scene) -> Trace | None:
    return _added(trace, scene, quantity=True)


def wrong_marker(trace: Trace, scene: Scene) -> Trace | None:
    segments, gold_ids = _gold_segments(trace, scene)
    others = [p.snippet_id for p in trace.retrieved if p.snippet_id and not scene.in_gold_section(p) and p.snippet_id]
    if not segments or not gold_ids or not others:
        return None
    other = scene.rng.choice(others[:3])
    changed = [
        Segment(s.seg, s.text, tuple(other if c in gold_ids else c for c in dict.fromkeys(s.citations)))
        for s in segments
    ]
    return with_answer(trace, changed) if changed != segments else None


def uncited_answer(trace: Trace, scene: Scene) -> Trace | None:
    segments = answer_segments(trace.answer)
    if not segments or not any(s.citations for s in segments):
        return None
    plain = [Segment(s.seg, " ".join(strip_markers(s.text).split()), ()) for s in segments]
    text = " ".join(s.text for s in plain)
    return dataclasses.replace(
        trace,
        answer=Answer(raw=json.dumps({"answer": text}), text=text, segments=tuple(plain), raw_keys=("answer",)),
    )


def llm_rewrite(trace: Trace, scene: Scene) -> Trace | None:
    segments = answer_segments(trace.answer)
    if not segments:
        return None
    texts = {p.snippet_id: payload_text(p, scene.corpus) for p in trace.retrieved}
    out = []
    for i, s in enumerate(segments):
        source = " ".join(strip_markers(s.text).split())
        cited = "\n".join(texts.get(c, "") for c in s.citations)
        out.append(Segment(s.seg, " ".join(rewrite(source, scene.rng, cited_text=cited, first=i == 0)), s.citations))
    return with_answer(trace, out)


ANSWER_FAULTS: tuple[Fault, ...] = (
    Fault(
        "same_topic_fact", "the answer states another fact on the gold document's topic, citation kept", same_topic_fact
    ),
    Fault("unsupported_claim", "a sentence its cited texts do not support is added (no quantity)", unsupported_claim),
    Fault(
        "unsupported_quantity",
        "a sentence with a quantity its cited texts do not support is added",
        unsupported_quantity,
    ),
    Fault("wrong_marker", "the citation marker points at another retrieved snippet", wrong_marker),
    Fault("uncited_answer", "the answer's citation markers and citations are removed", uncited_answer),
    Fault(
        "llm_rewrite",
        "control: the same facts in other words, as an LLM writes them (openers, synonyms, a moved clause, "
        "a neighbouring sentence of the cited text merged in, hedges); must pass",
        llm_rewrite,
        control=True,
    ),
)
