"""The rule registry. A rule is a function `(trace, context) -> Iterable[Issue]` declared with the
codes it can emit; `ragaudit codes` and the tests read the registry, so every code has an owner.

Nearly every trace is clean, and `ragaudit validate` checks hundreds of thousands of payloads a
second, so a rule usually asks first, in one plain loop that stops at the first doubt, whether
it has anything to say, returns `()` when not, and only then builds its issues (in a generator
that walks the trace again). Creating a generator per rule and trace costs more than that check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable

from ragaudit.core.codes import CODES
from ragaudit.core.markers import ALL_FORMS
from ragaudit.core.types import Corpus, Issue, Trace

if TYPE_CHECKING:
    from ragaudit.io.config import Config


@dataclass(frozen=True)
class Context:
    """What the rules may know besides the trace: the corpus and the config's section policy."""

    corpus: Corpus | None = None
    allow_cross_section: bool = False
    cross_section_whitelist: tuple[frozenset[str], ...] = ()
    # Traces joined from production spans, which seldom record the live index: every trace (`spans`)
    # or those of these pipelines (a trace's `config`). They are not asked for one (missing_live_index).
    spans: bool = False
    span_pipelines: frozenset[str] = frozenset()
    live_index: bool = False  # asked for the live index of every trace (--live-index, [audit] live_index)
    markers: frozenset[str] = ALL_FORMS  # the marker forms an answer's text cites with ([audit] markers)

    @classmethod
    def of(
        cls, config: Config | None, corpus: Corpus | None, *, spans: bool = False, live_index: bool = False
    ) -> "Context":
        """The context of a config's section policy (none: no cross-section whitelist) over `corpus`:
        the one way every command builds it. `spans`: the traces come from production spans, as do
        those of a replay pipeline with a span format; such traces are asked for the live index only
        with `live_index` or the config's [audit] live_index."""
        ask = live_index or bool(config is not None and config.audit.live_index)
        if config is None:
            return cls(corpus=corpus, spans=spans and not ask, live_index=ask)
        from_spans = frozenset(
            p.name for p in config.pipelines if p.kind == "replay" and p.options.get("format", "traces") != "traces"
        )
        return cls(
            corpus,
            config.audit.allow_cross_section,
            config.audit.whitelist,
            spans and not ask,
            frozenset() if ask else from_spans,
            ask,
            config.audit.marker_forms,
        )

    def asks_live_index(self, trace: Trace) -> bool:
        """Whether a trace without a live index is reported (missing_live_index): a trace joined from
        spans (read as spans, from a replay pipeline of spans, or written by `ragaudit ingest`) only
        when asked."""
        if self.live_index:
            return True
        return not self.spans and trace.config not in self.span_pipelines and trace.source != "spans"


# a rule's check: the issues a trace raises, given the context
Check = Callable[[Trace, Context], Iterable[Issue]]


@dataclass(frozen=True)
class Rule:
    name: str
    codes: tuple[str, ...]
    check: Check = field(repr=False)
    needs_corpus: bool = False
    aborts: bool = False  # when it fires, the trace's remaining rules are skipped


RULES: list[Rule] = []


def rule(*codes: str, needs_corpus: bool = False, aborts: bool = False) -> Callable[[Check], Check]:
    for code in codes:
        if code not in CODES:
            raise ValueError(f"rule declares unknown code {code!r}")

    def register(check: Check) -> Check:
        RULES.append(Rule(check.__name__, codes, check, needs_corpus, aborts))
        return check

    return register
