"""What one run shares across its pipelines and its audit: the config, the gold set, the corpus,
the gold set's findings against the corpus, and (each built on first use, here and nowhere else)
the encoder, the support scorer and the validation context. `Inputs.from_config(config)` loads
them; every command that audits, checks a gold set or scores elsewhere builds them this way."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ragaudit.core.errors import InputError, Problem, UsageError
from ragaudit.core.progress import phase
from ragaudit.core.types import DEFAULT_MODEL, Corpus, GoldItem, Issue
from ragaudit.io.config import Config
from ragaudit.io.config_schema import SupportSection
from ragaudit.io.corpus import load_corpus
from ragaudit.io.gold import read_gold

if TYPE_CHECKING:
    from ragaudit.checks.metrics.cross_encoder import CrossEncoderScorer
    from ragaudit.checks.metrics.embed import Encoder
    from ragaudit.checks.metrics.support import Memoized, SupportScorer
    from ragaudit.checks.validation import Context


VECTORS_HELD = 20_000  # embedding vectors an audit holds in memory (the cache file keeps every one of a model's)


def encoder_for(model: str | None = None, *, memory: int | None = None, on_disk: bool | None = None) -> Encoder:
    """The embedding encoder of `model` (the default model when None; `hashing` for no model),
    through the embedding cache (`on_disk`: the config's `[embedder] cache`): the one way every
    command builds it."""
    from ragaudit.checks.metrics.embed import make_encoder

    return make_encoder(str(model or DEFAULT_MODEL), memory=memory, on_disk=on_disk)


def support_for(section: SupportSection | None, encoder: Encoder) -> SupportScorer | CrossEncoderScorer:
    """The support scorer of a config's `[support]` (its model and params; the calibrated one without
    a section), sharing `encoder`."""
    from ragaudit.checks.metrics.support import make_support_scorer

    model, params = (section.model, section.params) if section is not None else (None, None)
    scorer: SupportScorer | CrossEncoderScorer = make_support_scorer(
        str(model) if model else None, params=str(params) if params else None, encoder=encoder
    )
    return scorer


class Inputs:
    """The config, gold set and corpus of a run, the gold set's findings (`check_gold`), and the
    encoder, support scorer and validation context, each built on first use (thread-safe) unless
    given: the encoder holds at most `memory` vectors in memory (VECTORS_HELD unless told; None:
    every one, so memory grows with the distinct texts of a run), the support
    scorer remembers `memo` scores. Items the gold reader could not read are in `gold_problems`
    (`from_config(..., lenient=True)`)."""

    def __init__(
        self,
        config: Config,
        items: list[GoldItem],
        corpus: Corpus,
        *,
        encoder: Encoder | None = None,
        support: Memoized | None = None,
        gold_findings: list[Issue] | tuple[Issue, ...] = (),
        gold_problems: list[Problem] | tuple[Problem, ...] = (),
        memory: int | None = VECTORS_HELD,
        memo: int = 200_000,
    ) -> None:
        self.config = config
        self.items = list(items)
        self.corpus = corpus
        self.gold_findings: list[Issue] = list(gold_findings)
        self.gold_problems: list[Problem] = list(gold_problems)
        self._encoder = encoder
        self._support = support
        self._context: Context | None = None
        self._memory, self._memo = memory, memo
        self._lock = threading.RLock()

    @classmethod
    def from_config(
        cls, config: Config, *, encoder: Encoder | None = None, support: Memoized | None = None, lenient: bool = False
    ) -> Inputs:
        """Load the gold set and corpus `config` names. An unreadable gold item stops it (InputError)
        unless `lenient`, which keeps it in `gold_problems` for the gold check to report."""
        if config.audit.gold is None or config.audit.corpus is None:
            raise UsageError(f"{config.path}: [audit] needs gold and corpus paths")
        with phase("loading corpus and gold set", counts_as="loading"):
            corpus = load_corpus(config.audit.corpus)
            items, problems = read_gold(config.audit.gold)
        if problems and not lenient:
            raise InputError(problems)
        return cls(config, items, corpus, encoder=encoder, support=support, gold_problems=problems, memory=VECTORS_HELD)

    @property
    def encoder(self) -> Encoder:
        with self._lock:
            if self._encoder is None:
                self._encoder = encoder_for(
                    self.config.embedder.model, memory=self._memory, on_disk=self.config.embedder.cache
                )
            return self._encoder

    def cache_warnings(self) -> list[str]:
        """What went wrong with the embedding cache's file so far (`CachedEncoder.warnings`), if
        anything: the vectors are right all the same."""
        with self._lock:
            encoder = self._encoder
        return encoder.warnings() if encoder is not None and hasattr(encoder, "warnings") else []

    @property
    def support(self) -> Memoized:
        with self._lock:
            if self._support is None:
                from ragaudit.checks.metrics.support import Memoized

                self._support = Memoized(support_for(self.config.support, self.encoder), size=self._memo)
            return self._support

    @property
    def context(self) -> Context:
        """The validation rules' context: the config's section policy over the corpus."""
        with self._lock:
            if self._context is None:
                from ragaudit.checks.validation import Context

                self._context = Context.of(self.config, self.corpus)
            return self._context

    def replace(self, *, config: Config | None = None, support: Memoized | None = None) -> Inputs:
        """These inputs, with another config (another gate, say) or support scorer: the gold set,
        corpus, findings and models loaded so far are shared, never loaded again."""
        return Inputs(
            config or self.config,
            self.items,
            self.corpus,
            encoder=self.encoder,
            support=support if support is not None else self.support,
            gold_findings=self.gold_findings,
            gold_problems=self.gold_problems,
            memory=self._memory,
            memo=self._memo,
        )

    def gold_issues(self, *, distance: bool = True) -> list[Issue]:
        """Every finding of `ragaudit gold check` for the gold set against the corpus, unreadable
        items included; with `distance`, questions far from their anchor (the encoder is built)."""
        from ragaudit.checks.validation.gold import check_gold

        return check_gold(
            self.items,
            self.corpus,
            file=str(self.config.audit.gold),
            paraphrases=self.config.audit.paraphrases,
            problems=self.gold_problems,
            encoder=self.encoder if distance and "gold_anchor_far" not in self.config.gold.ignore else None,
            ignore=self.config.gold.ignore,
            severity=self.config.gold.severity,
        )

    def check_gold(self, *, strict: bool = True) -> list[Issue]:
        """The gold set's findings before a run or an audit, kept in `gold_findings` (the report lists
        them). With `strict`, an error finding stops it (InputError); a duplicate qid always does."""
        found = self.gold_issues()
        fatal = [i for i in found if i.severity == "error" and (strict or i.code == "gold_duplicate_qid")]
        if fatal:
            raise InputError(
                [
                    Problem(i.file or str(self.config.audit.gold), f"{i.code}: {i.message}", i.line, i.path)
                    for i in fatal
                ]
            )
        self.gold_findings = found
        return found
