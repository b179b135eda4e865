"""Each claim of each run judged twice (docs/reference.md §3), a batch of runs at a time:

* against its **cited texts** (grounding): `supported` when the support scorer gives at least
  `support.threshold` and it states no quantity, identifier or acronym that its cited texts lack
  (a quantity the question itself gives is no hallucination: "the heart rate of 120 you
  mention"), contradicts none of them (`contradiction.py`), changes none of their names
  (`swaps.py`), draws some of what it adds to the question from them, adds or echoes from the
  question at most two words they lack, cites more than headings, and takes no content from a
  retrieved passage it does not cite; `contradicted` when it says the opposite of a cited text;
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
from typing import TYPE_CHECKING, Any, Iterable

from ragaudit.checks.metrics.citation import RunView
from ragaudit.checks.metrics.claims import DISCOURSE, Claim, claims_of
from ragaudit.checks.metrics.contradiction import contradiction_of
from ragaudit.checks.metrics.decide import AnchorEvidence, Evidence, Thresholds, anchor_verdict, grounding, taken
from ragaudit.checks.metrics.keycontent import (
    NOT_KEY,
    KeyContent,
    Stated,
    WordVectors,
    cited_words,
    closest_to_anchor,
    key_content,
    stated,
    words_to_prepare,
)
from ragaudit.checks.metrics.memo import LONGEST, SIZE, Memo, memo_of
from ragaudit.checks.metrics.quantities import hallucinated, holds, mentions
from ragaudit.checks.metrics.swaps import swaps
from ragaudit.core.text import STOPWORDS, WORD, clean, content_stems, heading_only, names, sentences, stem

if TYPE_CHECKING:
    from ragaudit.checks.metrics.embed import Encoder
    from ragaudit.checks.metrics.support import Scorer

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
    adds: tuple[str, ...] = ()  # its content words that neither its cited texts nor the question hold
    swaps: tuple[str, ...] = ()  # the names of its cited texts it changes, each as "<its> where it says <theirs>"
    echoes: tuple[str, ...] = ()  # the question's words it repeats that its cited texts do not hold
    evidence: Evidence | None = None  # what its grounding read
    against: AnchorEvidence | None = None  # what its judgement against the anchor read

    def to_dict(self) -> dict[str, Any]:
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
            "adds": list(self.adds),
            "swaps": list(self.swaps),
            "echoes": list(self.echoes),
            "evidence": None if self.evidence is None else self.evidence.to_json(),
            "against": None if self.against is None else self.against.to_json(),
        }


class _Pairs:
    """(claim, texts) pairs to score once each, however often they recur across runs."""

    def __init__(self) -> None:
        self.index: dict[tuple[str, tuple[str, ...]], int] = {}

    def add(self, claim: str, texts: Iterable[str]) -> int:
        return self.index.setdefault((claim, tuple(texts)), len(self.index))

    def score(self, support: Scorer | None) -> list[float | None]:
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
        text = view.gold_text(i)
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
    novel: tuple[tuple[str, bool], ...] = ()  # (word, is a name) its cited texts and the question lack
    beyond: tuple[str, ...] = ()  # its content words the question lacks: what it adds to the question
    echoes: tuple[tuple[str, bool], ...] = ()  # (word, is a name) it repeats from the question, its cited texts lack
    beside: tuple[str, ...] = ()  # the words of its cited texts, which a novel word may be like


def judge_claims(
    views: list[RunView],
    texts: list[dict[str | None, str]],
    support: Scorer | None,
    encoder: Encoder | None,
    *,
    thresholds: Thresholds = Thresholds(),
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
                step.novel = novel(claim.text, cited, given)
                step.beyond = tuple(w for w, _ in _own(claim.text, set(content_stems(given))))
                step.echoes = echoed(claim.text, cited, given)
                unnamed = [w for w, is_name in (*step.novel, *step.echoes) if not is_name]
                if unnamed:  # a word like a heading's is no word it states
                    step.beside = tuple(
                        dict.fromkeys(w for t in cited if not heading_only(t) for _, w in cited_words(t))
                    )
                    words += unnamed + list(step.beside)
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
    return [[_judged(step, scores, thresholds, vectors, memo) for step in plan] for plan in plans]


def _judged(
    step: _Plan, scores: list[float | None], thresholds: Thresholds, vectors: WordVectors, memo: Memo[Stated]
) -> Judged:
    claim = step.claim
    score = None if step.at is None else scores[step.at]
    missed = _missed(claim.text, step.covering) if claim.citations else ()
    contradicts = contradiction_of(claim.text, step.cited) if claim.citations else None
    other = None if step.alternative is None else scores[step.alternative]
    evidence = Evidence(
        cited=bool(claim.citations),
        support=score,
        missed=bool(missed),
        contradicted=contradicts is not None,
        said=bool(claim.citations) and not missed and said_in(claim.text, step.cited, step.covering[-1]),
        other_support=other,
        other_missed=bool(step.elsewhere) and bool(_missed(claim.text, step.elsewhere)),
        heading=bool(step.cited) and all(heading_only(t) for t in step.cited),
    )
    adds = tuple(w for w, is_name in step.novel if is_name or not vectors.similar(w, step.beside))
    echoes = tuple(w for w, is_name in step.echoes if is_name or not vectors.similar(w, step.beside))
    changed = swaps(claim.text, step.covering) if claim.citations else ()
    evidence = dataclasses.replace(
        evidence,
        adds=len(adds),
        echoes=len(echoes),
        swapped=len(changed),
        unheld=bool(adds) and set(step.beyond) <= set(adds) and not _quantity_held(claim.text, step.cited),
    )
    elsewhere = taken(evidence)
    judged = Judged(
        claim,
        grounding(evidence, thresholds),
        score,
        missed,
        contradicts=None if contradicts is None else contradicts.describe(),
        lacks=step.lacks if elsewhere else (),
        attributed=step.attributed if elsewhere else (),
        evidence=evidence,
        adds=adds,
        swaps=tuple(c.describe() for c in changed),
        echoes=echoes,
    )
    best: tuple[str, tuple[str, ...], AnchorEvidence, Stated] | None = None
    for key, about, pair, anchor in step.against or ():
        found = _against(claim.text, key, about, scores[pair], vectors, memo)
        if not found.conflicts and (clash := contradiction_of(claim.text, [anchor, *step.cited])):
            if " ".join(clash.statement.split()) in " ".join(anchor.split()):
                found = dataclasses.replace(found, conflicts=(clash.describe(),))
        facts = AnchorEvidence(
            conflicts=bool(found.conflicts),
            support=scores[pair],
            share=found.share,
            drawn=found.drawn,
            answers=found.answers,
            mentioned=not key.mentions or any(m.surface not in found.missing for m in key.mentions),
            missing=found.missing,
            added=found.added,
            mentions=tuple(m.surface for m in key.mentions),
            invented=tuple(w for w, is_name in step.novel if is_name),
        )
        verdict, unmet = anchor_verdict(facts, thresholds)
        if best is None or _rank(verdict, facts) > _rank(best[0], best[2]):
            best = (verdict, unmet, facts, found)
    if best is None:
        return judged
    verdict, unmet, facts, found = best
    return dataclasses.replace(
        judged,
        anchor=verdict,
        anchor_support=facts.support,
        key_share=found.share,
        drawn=found.drawn,
        missing=found.missing,
        conflicts=found.conflicts,
        unmet=unmet,
        against=facts,
    )


def said_in(claim: str, cited: list[str], question: str) -> bool:
    """`_said_in`, remembered: a question's runs repeat their claims over the same texts."""
    texts = tuple(cited)
    if len(claim) + len(question) + sum(map(len, texts)) > LONGEST:
        return _said_in(claim, texts, question)
    return _SAID.get((claim, texts, question), _said_in, claim, texts, question)


_SAID: Memo[bool] = Memo(SIZE)


def _said_in(claim: str, cited: tuple[str, ...], question: str) -> bool:
    """Does one sentence of the cited texts hold every content word of the claim and of the
    question? Then it answers the question in the claim's words, however short the claim ("Within
    7 days [1]." for "… must be patched within 7 days."), where the support scorer may underrate a
    fragment; a fragment that answers another question ("Within 1 hour of the loss being noticed"
    for when Okta access is revoked) is not said there. The words that ask for a name ("What was
    the name of the count of Apulia?") are the question's form, in the claim that echoes them too
    ("The name of the count of Apulia was Robert Guiscard")."""
    stems = set(content_stems(question))
    asked = stems - _ASKING
    mine = {s for s in content_stems(clean(claim)) if s not in _DISCOURSE_STEMS and s not in stems & _NAMING} | asked
    return bool(mine) and any(mine <= set(content_stems(sentence)) for text in cited for sentence in sentences(text))


_DISCOURSE_STEMS = frozenset(stem(w) for w in DISCOURSE)
_NAMING = frozenset(stem(w) for w in "name named called".split())  # "what was the name of", "what is it called"
# "how many", "can you tell me": words of asking, not of what is asked
_ASKING = frozenset(stem(w) for w in "many long often soon quickly frequently far old tell".split()) | _NAMING


def novel(claim: str, cited: list[str], question: str) -> tuple[tuple[str, bool], ...]:
    """The claim's content words (lower-cased, each once) whose stems neither its cited texts nor
    the question hold, each with whether it is a name (a name never passes for a word like it);
    words that relate a fact rather than carry one ("need", "no later than", "solely") aside."""
    return _own(claim, set(content_stems(question)).union(*(content_stems(t) for t in cited)))


def echoed(claim: str, cited: list[str], question: str) -> tuple[tuple[str, bool], ...]:
    """The question's content words (each once, with whether it is a name) that the claim repeats
    and its cited texts do not hold, the words of asking ("how long", "the name of") aside: what
    the claim takes from the question and not from its sources."""
    asked = set(content_stems(question)) - _ASKING
    lacking = _own(claim, set().union(*(content_stems(t) for t in cited)))
    return tuple((w, is_name) for w, is_name in lacking if len(w) > 1 and stem(w) in asked)


def _own(claim: str, held: set[str]) -> tuple[tuple[str, bool], ...]:
    """The claim's content words whose stems `held` lacks, as `novel` reads them."""
    capitalised = names(claim)
    out: dict[str, bool] = {}
    for word in WORD.findall(clean(claim)):
        lower = word.lower()
        if lower in STOPWORDS or lower in NOT_KEY or any(c.isdigit() for c in lower):
            continue
        if stem(lower) not in held and stem(lower) not in _DISCOURSE_STEMS:
            out.setdefault(lower, lower in capitalised)
    return tuple(out.items())


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


def _quantity_held(claim: str, cited: list[str]) -> bool:
    """Does the claim state a quantity, date or identifier that its cited texts hold (which it
    then draws from them, whatever its words)?"""
    return any(holds(m, text) for m in mentions(claim) for text in cited)


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
    claim: str,
    key: KeyContent,
    about: bool,
    anchor_support: float | None,
    vectors: WordVectors,
    memo: Memo[Stated] | None = None,
) -> Stated:
    """What the claim states of the anchor's key content (`keycontent.stated`), remembered."""
    if memo is None or len(claim) > LONGEST:
        return stated(claim, key, vectors, about=about)
    # a pure function of the claim, the key and the encoder's word vectors
    return memo.get((claim, key, about), _stated, claim, key, vectors, about)


def _stated(claim: str, key: KeyContent, vectors: WordVectors, about: bool) -> Stated:
    return stated(claim, key, vectors, about=about)


def _rank(verdict: str, facts: AnchorEvidence) -> tuple[bool, bool, float, float]:
    return (verdict == "states", verdict != "conflicts", facts.share or 0.0, facts.support or 0.0)
