"""Is a run correct, and why (not)? SPEC §3 λ: a run is correct when its citation match holds
and, if it has an answer, some answer segment that cites a matching payload is supported by the
matching gold anchor text. The reason is written for people: it names what was cited and what
the gold set expected, so a report reader sees the defect without opening the trace."""

from __future__ import annotations

from dataclasses import dataclass

from ragaudit.errors import clip
from ragaudit.metrics.citation import RunView
from ragaudit.types import Answer, Segment

# How far below the best-supporting sentence of the cited text the anchor may be and still count
# as the source of a segment: a short abstractive answer ("Within 1 hour of the departure.") can
# be supported a little better by a sibling sentence that repeats its words.
ATTRIBUTION_MARGIN = 0.10


@dataclass(frozen=True, slots=True)
class Agreement:
    """How one answer segment agrees with one gold anchor."""

    support: float  # support(segment, [anchor])
    best_other: float  # max support(segment, [s]) over the other sentences it cites
    conflicts: list[str]  # quantities and identifiers it states that the anchor lacks

    def agrees(self, anchor_support_min: float) -> bool:
        return (
            not self.conflicts
            and self.support >= anchor_support_min
            and self.support >= self.best_other - ATTRIBUTION_MARGIN
        )

    def rank(self, anchor_support_min: float) -> tuple:
        return (self.agrees(anchor_support_min), not self.conflicts, self.support - self.best_other, self.support)


@dataclass(frozen=True, slots=True)
class Verdict:
    correct: bool
    why: str
    anchor_support: float | None = None


def answer_segments(answer: Answer | None) -> tuple[Segment, ...]:
    """The answer's segments; an answer with text but no segments is one segment citing what the
    answer cites."""
    if answer is None:
        return ()
    if answer.segments:
        return answer.segments
    if answer.text:
        return (Segment(1, answer.text, answer.citations),)
    return ()


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


def _where(doc_id, section_id) -> str:
    return f"{doc_id or '?'} § {section_id or '?'}"


def _miss(view: RunView) -> str:
    """Why the citation match failed, in terms of what was cited and what was expected."""
    gold = view.gold[0]
    expected = _where(gold.doc_id, gold.section_id)
    if len(view.gold) > 1:
        expected += f" (or {len(view.gold) - 1} more gold span{'s' if len(view.gold) > 2 else ''})"
    cited = sorted({_where(p.doc_id, p.section_id) for p in view.cited})
    in_section = [
        p for p in view.cited if any(p.doc_id == g.doc_id and p.section_id == g.section_id for g in view.gold)
    ]
    if in_section:
        spans = ", ".join(
            f"{p.snippet_id} {p.span.start}–{p.span.end}" if p.span else f"{p.snippet_id} (bad offsets)"
            for p in in_section[:3]
        )
        g = gold.span
        return (
            f"cites the gold section but not the gold span: {spans}; gold {g.unit} {g.start}–{g.end}"
            f" (± {view.tolerance})"
        )
    return f"cites {', '.join(cited[:3])}{' …' if len(cited) > 3 else ''}, not the gold {expected}"


def judge(view: RunView, agreement: Agreement | None, anchor_support_min: float, *, scored: bool = True) -> Verdict:
    """The verdict on one run. `agreement` is that of the answer segment citing a matching payload
    that agrees best with the matched gold anchor. It agrees when the anchor supports it (support
    >= anchor_support_min), no other sentence of its cited texts supports it clearly better (it
    states the anchor, not a sibling sentence of the same chunk), and it states no quantity or
    identifier the anchor lacks. `scored` says whether support was computed at all."""
    trace = view.trace
    if trace.error is not None:
        return Verdict(False, f"errored: {clip(trace.error, 160)}")
    if not trace.retrieved and not (trace.answer and trace.answer.citations):
        return Verdict(False, "no citations: nothing retrieved and nothing cited")
    if view.dangling:
        return Verdict(False, f"the answer cites {', '.join(view.dangling[:3])}, which was not retrieved")
    if not view.cited:
        return Verdict(False, "the answer cites nothing")
    if not view.matched:
        return Verdict(False, _miss(view))
    p, _ = view.matched[0]
    hit = f"cites the gold span ({p.snippet_id}, {_where(p.doc_id, p.section_id)})"
    if not answer_segments(trace.answer) or not anchor_texts(view) or not scored:
        return Verdict(True, hit)
    if agreement is None:
        return Verdict(False, f"{hit}, but no answer segment cites it")
    a = agreement
    if a.conflicts:
        return Verdict(
            False,
            f"{hit}, but the answer states {', '.join(a.conflicts[:3])}, which the gold anchor does not",
            a.support,
        )
    if a.support < anchor_support_min:
        return Verdict(
            False,
            f"{hit}, but the answer states something else: the gold anchor supports it "
            f"{a.support:.2f} < {anchor_support_min:g}",
            a.support,
        )
    if not a.agrees(anchor_support_min):
        return Verdict(
            False,
            f"{hit}, but the answer states another sentence of it: that sentence supports the "
            f"answer {a.best_other:.2f}, the gold anchor {a.support:.2f}",
            a.support,
        )
    return Verdict(True, f"{hit} and states it (anchor support {a.support:.2f})", a.support)
