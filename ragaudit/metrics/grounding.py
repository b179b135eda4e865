"""Each claim of each run judged twice (docs/reference.md §3), a batch of runs at a time:

* against its **cited texts** (grounding): `supported` when the support scorer gives at least
  `support.threshold` and it states no quantity or identifier that its cited texts lack (a
  quantity the question itself gives is no hallucination: "the heart rate of 120 you mention");
  `unsupported` otherwise; `uncited` when it cites nothing;
* against the **gold anchor**, for claims citing a payload that matches the gold: `states` when it
  states enough of the anchor's key content and draws enough of its own from the anchor
  (`keycontent.py`), the anchor supports it at least `lambda.anchor_support_min` and it conflicts
  with nothing; `conflicts` when it gives a rival
  quantity or negates the anchor; `other` for any other fact, which is never a fault in itself.

Support is scored once per distinct (claim, texts) pair of the batch, in one call to the scorer.
What a claim states of a key, and the quantities it lacks in its cited texts, are remembered
across batches (`memo.py`): the runs of a question repeat the same claims over the same snippets.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragaudit.metrics.citation import RunView
from ragaudit.metrics.claims import Claim, claims_of
from ragaudit.metrics.keycontent import (
    Bars,
    KeyContent,
    Stated,
    WordVectors,
    closest_to_anchor,
    key_content,
    stated,
    words_to_prepare,
)
from ragaudit.metrics.memo import LONGEST, SIZE, Memo, memo_of
from ragaudit.metrics.quantities import hallucinated

GROUNDING = ("supported", "unsupported", "uncited")
ANCHOR = ("states", "conflicts", "other")


@dataclass(frozen=True, slots=True)
class Judged:
    """One claim and both of its judgements."""

    claim: Claim
    grounding: str  # supported | unsupported | uncited
    support: float | None  # None when it cites nothing, or no scorer ran
    hallucinated: tuple[str, ...]
    anchor: str | None = None  # states | conflicts | other; None when it cites no matching payload
    anchor_support: float | None = None
    key_share: float | None = None  # share of the key content it states
    drawn: float | None = None  # share of its own content (beyond the question) the anchor states
    missing: tuple[str, ...] = ()  # key items it does not state
    conflicts: tuple[str, ...] = ()  # what it states in place of the anchor's

    def to_dict(self) -> dict:
        return {
            "n": self.claim.n,
            "seg": self.claim.seg,
            "text": self.claim.text,
            "citations": list(self.claim.citations),
            "cited_by": self.claim.cited_by,
            "grounding": self.grounding,
            "support": self.support,
            "hallucinated": list(self.hallucinated),
            "anchor": self.anchor,
            "anchor_support": self.anchor_support,
            "key_share": self.key_share,
            "drawn": self.drawn,
            "missing": list(self.missing),
            "conflicts": list(self.conflicts),
        }


class _Pairs:
    """(claim, texts) pairs to score once each, however often they recur across runs."""

    def __init__(self):
        self.index: dict[tuple[str, tuple[str, ...]], int] = {}

    def add(self, claim: str, texts) -> int:
        return self.index.setdefault((claim, tuple(texts)), len(self.index))

    def score(self, support) -> list[float | None]:
        if support is None or not self.index:
            return [None] * len(self.index)
        return [float(v) for v in support.score_many([(c, list(t)) for c, t in self.index])]


def anchor_texts(view: RunView) -> list[str]:
    """The gold text(s) a matching run's answer must state: the item's anchor, or for an
    accept = "any" item the text of each alternative the run matched."""
    if view.item.accept != "any":
        return [view.item.anchor.text] if view.item.anchor.text else []
    out: list[str] = []
    for _, i in view.matched:
        gold = view.gold[i]
        text = gold.text
        if text is None and view.corpus is not None and gold.span.unit == "char" and gold.doc_id in view.corpus:
            text = view.corpus[gold.doc_id].text[gold.span.start : gold.span.end]
        if text and text not in out:
            out.append(text)
    return out


def judge_claims(
    views: list[RunView],
    texts: list[dict[str | None, str]],
    support,
    encoder,
    *,
    support_threshold: float,
    bars: Bars = Bars(),
) -> list[list[Judged]]:
    """Per run, its claims judged. `texts` maps each run's snippet ids to their texts."""
    pairs = _Pairs()
    vectors = WordVectors(encoder)
    plans = []  # per run: [(claim, texts covering its quantities, pair, [(key, about, pair) per anchor] or None)]
    words: list[str] = []
    for i, view in enumerate(views):
        matching = {p.snippet_id for p, _ in view.matched}
        anchors = anchor_texts(view)
        item = view.item
        given = view.trace.query or item.question  # what the question states is no hallucination
        plan = []
        for claim in claims_of(view.trace.answer):
            cited = [texts[i][c] for c in claim.citations if c in texts[i]]
            at = pairs.add(claim.text, cited) if claim.citations else None
            against = None
            if matching.intersection(claim.citations) and anchors:
                against = []
                for anchor in anchors:
                    key = key_content(anchor, item.question, item.reference_answer)
                    words += words_to_prepare(claim.text, key)
                    about = closest_to_anchor(claim.text, anchor, cited)
                    against.append((key, about, pairs.add(claim.text, [anchor])))
            plan.append((claim, [*cited, given], at, against))
        plans.append(plan)
    scores = pairs.score(support)
    vectors.prepare(words)  # every word, remembered judgement or not: a memo may forget one meanwhile
    memo = memo_of(encoder, "stated", SIZE)
    out = []
    for plan in plans:
        judged = []
        for claim, covering, at, against in plan:
            score = None if at is None else scores[at]
            missed = _missed(claim.text, covering) if claim.citations else ()
            if not claim.citations:
                grounding = "uncited"
            elif score is not None and score >= support_threshold and not missed:
                grounding = "supported"
            else:
                grounding = "unsupported"
            best = None
            for key, about, pair in against or ():
                found = _against(claim.text, key, about, scores[pair], vectors, bars, memo)
                if best is None or _rank(found) > _rank(best):
                    best = found
            judged.append(
                Judged(claim, grounding, score, missed)
                if best is None
                else Judged(
                    claim,
                    grounding,
                    score,
                    missed,
                    best[0],
                    best[1],
                    best[2].share,
                    best[2].drawn,
                    best[2].missing,
                    best[2].conflicts,
                )
            )
        out.append(judged)
    return out


def _missed(claim: str, covering: list[str]) -> tuple[str, ...]:
    """The claim's quantities that none of `covering` holds (`quantities.hallucinated`)."""
    texts = tuple(covering)
    if len(claim) + sum(map(len, texts)) > LONGEST:
        return _missing(claim, texts)
    return _MISSED.get((claim, texts), _missing, claim, texts)


_MISSED: Memo[tuple[str, ...]] = Memo(SIZE)


def _missing(claim: str, texts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(hallucinated(claim, texts))


def _against(
    claim: str, key: KeyContent, about: bool, anchor_support: float | None, vectors, bars: Bars, memo=None
) -> tuple[str, float | None, Stated]:
    if memo is None or len(claim) > LONGEST:
        found = stated(claim, key, vectors, about=about)
    else:  # a pure function of the claim, the key and the encoder's word vectors
        found = memo.get((claim, key, about), _stated, claim, key, vectors, about)
    if found.conflicts:
        return "conflicts", anchor_support, found
    ok = (
        (anchor_support is None or anchor_support >= bars.anchor_support_min)  # no scorer: the key content decides
        and (found.share is None or found.share >= bars.key_recall_min)
        and (found.drawn is None or found.drawn >= bars.key_precision_min)
        and (not key.mentions or any(m.surface not in found.missing for m in key.mentions))
    )
    return ("states" if ok else "other"), anchor_support, found


def _stated(claim: str, key: KeyContent, vectors, about: bool) -> Stated:
    return stated(claim, key, vectors, about=about)


def _rank(found: tuple[str, float | None, Stated]) -> tuple:
    verdict, support, stated_ = found
    return (verdict == "states", verdict != "conflicts", stated_.share or 0.0, support or 0.0)
