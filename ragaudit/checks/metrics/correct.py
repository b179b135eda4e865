"""Is a run correct, and why (not)? docs/reference.md §3: a run is correct when its citation match holds and,
when it has an answer, some claim citing a matching payload states the gold anchor and no claim
conflicts with it. Another fact of the cited text, stated beside the anchor's, is never a fault
here (grounding judges it on its own). The reason is written for people: it names what was cited,
what the gold set expected and what the answer says instead, so a report reader sees the defect
without opening the trace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ragaudit.checks.metrics.citation import RunView
from ragaudit.checks.metrics.grounding import Judged, anchor_texts
from ragaudit.checks.metrics.keycontent import rival_kind
from ragaudit.checks.metrics.quantities import mentions
from ragaudit.core.errors import clip


@dataclass(frozen=True, slots=True)
class Verdict:
    correct: bool
    why: str
    anchor_support: float | None = None
    key_share: float | None = None
    stating: tuple[int, ...] = ()  # the claims (by n) that state the anchor


def _where(doc_id: str | None, section_id: str | None) -> str:
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
        widened = f" (± {view.tolerance})" if view.tolerance else ""
        return f"cites the gold section but not the gold span: {spans}; gold {g.unit} {g.start}–{g.end}{widened}"
    return f"cites {', '.join(cited[:3])}{' …' if len(cited) > 3 else ''}, not the gold {expected}"


def _quote(text: str, size: int = 60) -> str:
    return f"“{clip(' '.join(text.split()), size)}”"


def _clash(claim: Judged) -> str:
    """How a claim contradicts the gold anchor, in words."""
    described = [c for c in claim.conflicts if c.startswith(("says ", "negates", "drops"))]
    if described:
        return described[0]
    kinds = {rival_kind(m) for c in claim.conflicts for m in mentions(c, number_words=True)}
    replaced = [s for s in claim.missing if any(rival_kind(m) in kinds for m in mentions(s, number_words=True))]
    return f"says {', '.join(claim.conflicts[:3])} where it says {', '.join((replaced or list(claim.missing))[:3])}"


DANGLING_SHOWN = 3  # snippet ids a verdict names; it counts the others


def dangling(ids: Iterable[str]) -> str:
    """`the answer cites S1, which was not retrieved`; `cites S1 and S2, which were`; with more than
    DANGLING_SHOWN, the first of them and how many more."""
    ids = list(dict.fromkeys(ids))
    shown = ids[:DANGLING_SHOWN]
    more = len(ids) - len(shown)
    if more:
        listed = f"{', '.join(shown)} and {more} more"
    else:
        listed = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"
    return f"the answer cites {listed}, which {'was' if len(ids) == 1 else 'were'} not retrieved"


def judge(view: RunView, claims: list[Judged], *, scored: bool = True) -> Verdict:
    """The verdict on one run from its judged claims. `scored` says whether claims were judged
    against the anchor at all (a support scorer ran)."""
    trace = view.trace
    if trace.error is not None:
        return Verdict(False, f"errored: {clip(trace.error, 160)}")
    if not trace.retrieved and not (trace.answer and trace.answer.citations):
        return Verdict(False, "no citations: nothing retrieved and nothing cited")
    if view.dangling:
        return Verdict(False, dangling(view.dangling))
    if not view.cited:
        answer = trace.answer
        if answer is not None and answer.text and not answer.segments and not answer.raw_citations:
            return Verdict(
                False, "uncited: the answer's text has no citation marker ([1], [snippet_id]) and no segments"
            )
        return Verdict(False, "the answer cites nothing")
    if not view.matched:
        return Verdict(False, _miss(view))
    p, _ = view.matched[0]
    hit = f"cites the gold span ({p.snippet_id}, {_where(p.doc_id, p.section_id)})"
    if not claims or not anchor_texts(view) or not scored:
        return Verdict(True, hit)
    judged = [c for c in claims if c.anchor is not None]
    if not judged:
        return Verdict(False, f"{hit}, but no claim of the answer cites it")
    best = max(judged, key=lambda c: (c.anchor == "states", c.key_share or 0.0, c.anchor_support or 0.0))
    conflicting = [c for c in judged if c.anchor == "conflicts"]
    if conflicting:
        c = conflicting[0]
        return Verdict(
            False,
            f"{hit}, but claim {c.claim.n} {_quote(c.claim.text)} contradicts the gold anchor: {_clash(c)}",
            best.anchor_support,
            best.key_share,
        )
    stating = tuple(c.claim.n for c in judged if c.anchor == "states")
    if not stating:
        detail = "; ".join(best.unmet) or (
            "" if best.anchor_support is None else f"anchor support {best.anchor_support:.2f}"
        )
        return Verdict(
            False,
            f"{hit}, but no claim states the gold anchor: the closest, claim {best.claim.n} "
            f"{_quote(best.claim.text)}, states another fact" + (f": {detail}" if detail else ""),
            best.anchor_support,
            best.key_share,
        )
    share = "" if best.key_share is None else f"key content {best.key_share:.0%}"
    support = "" if best.anchor_support is None else f"anchor support {best.anchor_support:.2f}"
    detail = ", ".join(x for x in (share, support) if x)
    return Verdict(
        True,
        f"{hit} and claim {stating[0]} states it" + (f" ({detail})" if detail else ""),
        best.anchor_support,
        best.key_share,
        stating,
    )
