"""What one run shares across its pipelines and its audit: the config, the gold set, the corpus,
and (made on first use) the encoder and the support scorer."""

from __future__ import annotations

import threading

from ragaudit.errors import InputError, Problem, UsageError
from ragaudit.io.config import Config
from ragaudit.io.config_schema import SupportSection
from ragaudit.io.corpus import load_corpus
from ragaudit.io.gold import read_gold
from ragaudit.progress import phase
from ragaudit.types import Corpus, Issue


def encoder_for(model: str | None = None, *, memory: int | None = None):
    """The embedding encoder of `model` (the default model when None; `hashing` for no model),
    through the embedding cache: the one way every command builds it."""
    from ragaudit.metrics.embed import DEFAULT_MODEL, make_encoder

    return make_encoder(str(model or DEFAULT_MODEL), memory=memory)


def support_for(section: SupportSection | None, encoder):
    """The support scorer of a config's `[support]` (its model and params; the calibrated one without
    a section), sharing `encoder`."""
    from ragaudit.metrics.support import make_support_scorer

    model, params = (section.model, section.params) if section is not None else (None, None)
    return make_support_scorer(str(model) if model else None, params=str(params) if params else None, encoder=encoder)


class Inputs:
    """The gold set, corpus and (lazily) the encoder and support scorer one run shares across
    its pipelines and its audit."""

    def __init__(self, config: Config, *, encoder=None, support=None):
        if config.gold is None or config.corpus is None:
            raise UsageError(f"{config.path}: [audit] needs gold and corpus paths")
        self.config = config
        with phase("loading corpus and gold set", counts_as="loading"):
            self.corpus: Corpus = load_corpus(config.corpus)
            items, problems = read_gold(config.gold)
        if problems:
            raise InputError(problems)
        self.items = items
        self._encoder = encoder
        self._support = support
        self._lock = threading.Lock()

    @property
    def encoder(self):
        with self._lock:
            if self._encoder is None:
                self._encoder = encoder_for(self.config.model)
            return self._encoder

    @property
    def support(self):
        if self._support is None:
            from ragaudit.metrics.support import Memoized

            self._support = Memoized(support_for(self.config.support, self.encoder))
        return self._support

    def check_gold(self, *, strict: bool = True) -> list[Issue]:
        """The gold set's findings against the corpus, as `ragaudit gold check` reports them.
        With `strict`, an error finding stops the run (InputError); a duplicate qid always does."""
        from ragaudit.validation.gold import check_gold

        found = check_gold(
            self.items,
            self.corpus,
            file=str(self.config.gold),
            paraphrases=self.config.paraphrases,
            encoder=None if "gold_anchor_far" in self.config.gold_check.ignore else self.encoder,
            ignore=self.config.gold_check.ignore,
            severity=self.config.gold_check.severity,
        )
        fatal = [i for i in found if i.severity == "error" and (strict or i.code == "gold_duplicate_qid")]
        if fatal:
            raise InputError(
                [Problem(i.file or str(self.config.gold), f"{i.code}: {i.message}", i.line, i.path) for i in fatal]
            )
        return found

    def subject(self, gold_findings: list[Issue] | tuple[Issue, ...] = ()):
        from ragaudit.auditing import Subject

        return Subject(self.config, self.items, self.corpus, self.encoder, self.support, list(gold_findings))
