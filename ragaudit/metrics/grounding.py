"""Each claim of each run judged twice (docs/reference.md §3), a batch of runs at a time:

* against its **cited texts** (grounding): `supported` when the support scorer gives at least
  `support.threshold` and it states no quantity, identifier or acronym that its cited texts lack
  (a quantity the question itself gives is no hallucination: "the heart rate of 120 you
  mention"), contradicts none of them (`contradiction.py`) and takes no content from a retrieved
  passage it does not cite; `contradicted` when it says the opposite of a cited text;
  `misattributed` when another retrieved passage, uncited, holds what its cited texts lack and
  supports it; `unsupported` otherwise; `uncited` when it cites nothing;
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

import dataclasses
from dataclasses import dataclass

from ragaudit.metrics.citation import RunView
from ragaudit.metrics.claims import DISCOURSE, Claim, claims_of
from ragaudit.metrics.contradiction import contradiction_of
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
from ragaudit.text import STOPWORDS, WORD, clean, content_stems, sentences, stem

TAKEN_MARGIN = 0.1  # how much better an uncited passage must support a claim to be where it came from
GROUNDING = ("supported", "unsupported", "contradicted", "misattributed", "uncited")
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
    contradicts: str | None = None  # how it contradicts its cited texts
    lacks: tuple[str, ...] = ()  # its words (beyond the question) that its cited texts do not hold
    attributed: tuple[str, ...] = ()  # uncited retrieved snippets that hold them
    unmet: tuple[str, ...] = ()  # why it does not state the anchor: each bar it misses, in words

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
            "contradicts": self.contradicts,
            "lacks": list(self.lacks),
            "attributed": list(self.attributed),
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


@dataclass(slots=True)
class _Plan:
    """What one claim is judged on, and the (claim, texts) pairs of the batch it reads."""

    claim: Claim
    covering: list[str]  # its cited texts and the question: what holds its quantities
    cited: list[str]
    at: int | None  # its pair with its cited texts
    against: list[tuple[KeyContent, bool, int, str]] | None  # per anchor: key, about, pair, anchor
    lacks: tuple[str, ...] = ()
    attributed: tuple[str, ...] = ()
    alternative: int | None = None  # its pair with the uncited passage that holds what it lacks
    elsewhere: list[str] = dataclasses.field(default_factory=list)  # that passage and the question


def judge_claims(
    views: list[RunView],
    texts: list[dict[str | None, str]],
    support,
    encoder,
    *,
    support_threshold: float,
    bars: Bars = Bars(),
) -> list[list[Judged]]:
    """Per run, its claims judged. `texts` maps each run's snippet ids (every retrieved one) to
    their texts."""
    pairs = _Pairs()
    vectors = WordVectors(encoder)
    plans: list[list[_Plan]] = []
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
                    against.append((key, about, pairs.add(claim.text, [anchor]), anchor))
            step = _Plan(claim, [*cited, given], cited, at, against)
            if claim.citations:
                others = {c: t for c, t in texts[i].items() if c not in claim.citations and c is not None}
                found = lacking(claim.text, cited, others)
                if found is not None:
                    step.lacks, step.attributed = found
                    step.alternative = pairs.add(claim.text, [others[step.attributed[0]]])
                    step.elsewhere = [others[step.attributed[0]], given]
            plan.append(step)
        plans.append(plan)
    scores = pairs.score(support)
    vectors.prepare(words)  # every word, remembered judgement or not: a memo may forget one meanwhile
    memo = memo_of(encoder, "stated", SIZE)
    return [[_judged(step, scores, support_threshold, vectors, bars, memo) for step in plan] for plan in plans]


def _judged(step: _Plan, scores: list[float | None], threshold: float, vectors, bars: Bars, memo) -> Judged:
    claim = step.claim
    score = None if step.at is None else scores[step.at]
    missed = _missed(claim.text, step.covering) if claim.citations else ()
    contradicts = contradiction_of(claim.text, step.cited) if claim.citations else None
    other = None if step.alternative is None else scores[step.alternative]
    # the uncited passage says it better: its content was taken from there
    taken = other is not None and (score is None or other >= score + TAKEN_MARGIN)
    if not claim.citations:
        grounding = "uncited"
    elif contradicts is not None:
        grounding = "contradicted"
    elif taken and other is not None and other >= threshold and not _missed(claim.text, step.elsewhere):
        grounding = "misattributed"
    elif (
        not missed
        and not taken
        and (score is not None and score >= threshold or said_in(claim.text, step.cited, step.covering[-1]))
    ):
        grounding = "supported"
    else:
        grounding = "unsupported"
    best = None
    for key, about, pair, anchor in step.against or ():
        found = _against(claim.text, key, about, scores[pair], vectors, bars, memo)
        if found[0] != "conflicts" and (clash := contradiction_of(claim.text, [anchor, *step.cited])):
            if " ".join(clash.statement.split()) in " ".join(anchor.split()):
                found = ("conflicts", found[1], dataclasses.replace(found[2], conflicts=(clash.describe(),)), ())
        if best is None or _rank(found) > _rank(best):
            best = found
    judged = Judged(
        claim,
        grounding,
        score,
        missed,
        contradicts=None if contradicts is None else contradicts.describe(),
        lacks=step.lacks if taken else (),
        attributed=step.attributed if taken else (),
    )
    if best is None:
        return judged
    verdict, anchor_support, stated_, unmet = best
    return dataclasses.replace(
        judged,
        anchor=verdict,
        anchor_support=anchor_support,
        key_share=stated_.share,
        drawn=stated_.drawn,
        missing=stated_.missing,
        conflicts=stated_.conflicts,
        unmet=unmet,
    )


def said_in(claim: str, cited: list[str], question: str) -> bool:
    """Does one sentence of the cited texts hold every content word of the claim and of the
    question? Then it answers the question in the claim's words, however short the claim ("Within
    7 days [1]." for "… must be patched within 7 days."), where the support scorer may underrate a
    fragment; a fragment that answers another question ("Within 1 hour of the loss being noticed"
    for when Okta access is revoked) is not said there."""
    asked = {s for s in content_stems(question) if s not in _ASKING}
    mine = {s for s in content_stems(clean(claim)) if s not in _DISCOURSE_STEMS} | asked
    return bool(mine) and any(mine <= set(content_stems(sentence)) for text in cited for sentence in sentences(text))


_DISCOURSE_STEMS = frozenset(stem(w) for w in DISCOURSE)
_ASKING = frozenset(stem(w) for w in "many long often soon quickly frequently far old".split())  # "how many"


def lacking(claim: str, cited: list[str], others: dict[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The claim's content words that its cited texts do not hold, and the uncited retrieved
    passage that holds the most of them (at least two), or None."""
    held = set().union(*(content_stems(t) for t in cited))
    lacks: dict[str, str] = {}
    for word in WORD.findall(clean(claim)):
        lower = word.lower()
        if lower in STOPWORDS or lower in DISCOURSE or lower.isdigit():
            continue
        if (root := stem(lower)) not in held:
            lacks.setdefault(root, word)
    if len(lacks) < 2:
        return None
    best, most = None, 1
    for snippet_id, text in others.items():
        count = len(lacks.keys() & set(content_stems(text)))
        if count > most:
            best, most = snippet_id, count
    if best is None:
        return None
    theirs = set(content_stems(others[best]))
    return tuple(w for s, w in lacks.items() if s in theirs), (best,)


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
) -> tuple[str, float | None, Stated, tuple[str, ...]]:
    """How the claim stands to the anchor: `states`, `conflicts` or `other`, with the anchor's
    support, what it states of the key, and each bar of `bars` it misses, in words."""
    if memo is None or len(claim) > LONGEST:
        found = stated(claim, key, vectors, about=about)
    else:  # a pure function of the claim, the key and the encoder's word vectors
        found = memo.get((claim, key, about), _stated, claim, key, vectors, about)
    if found.conflicts:
        return "conflicts", anchor_support, found, ()
    unmet = []
    if not (found.share is None or found.share >= bars.key_recall_min or found.answers):
        unmet.append(
            f"it lacks {', '.join(found.missing[:4])} (key content {found.share:.0%} < {bars.key_recall_min:.0%})"
        )
    if found.drawn is not None and found.drawn < bars.key_precision_min:
        unmet.append(
            f"it adds {', '.join(found.added[:4])}, which the anchor does not state "
            f"({found.drawn:.0%} of its own content < {bars.key_precision_min:.0%})"
        )
    if key.mentions and all(m.surface in found.missing for m in key.mentions):
        unmet.append(f"it states none of {', '.join(m.surface for m in key.mentions[:4])}")
    if anchor_support is not None and anchor_support < bars.anchor_support_min:  # no scorer: the key content decides
        unmet.append(f"anchor support {anchor_support:.2f} < {bars.anchor_support_min:.2f}")
    return ("other" if unmet else "states"), anchor_support, found, tuple(dict.fromkeys(unmet))


def _stated(claim: str, key: KeyContent, vectors, about: bool) -> Stated:
    return stated(claim, key, vectors, about=about)


def _rank(found: tuple[str, float | None, Stated, tuple[str, ...]]) -> tuple:
    verdict, support, stated_, _ = found
    return (verdict == "states", verdict != "conflicts", stated_.share or 0.0, support or 0.0)
