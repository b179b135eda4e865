"""Pointing a configured pipeline at a corpus copy, with sections left out of retrieval (docs/guide.md §3.6).

* `reference`: built on the copy, the excluded sections left out of its index;
* `python`: its factory is called again with `corpus_path` (the copy) and `exclude` when it declares
  those parameters; a factory without `corpus_path` cannot be re-pointed, one without `exclude`
  cannot be told to leave a passage out;
* `command`: started again for the copy, each request naming it (`corpus`, `exclude`); a program that
  does not read them shows it by reporting the same `index_hash` on the copy as on the real corpus;
* `replay`: a recording cannot be re-pointed.

Each build is one index rebuild; each request, one call (through the pipeline's limits, retries and
answer cache, whose key holds the corpus's digest).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ragaudit.core.errors import PipelineStartError, RagauditError
from ragaudit.core.types import Corpus, GoldItem, Trace
from ragaudit.io.config import Config, PipelineConfig
from ragaudit.io.corpus import load_corpus
from ragaudit.pipelines.base import Request, error_trace
from ragaudit.pipelines.inputs import Inputs
from ragaudit.pipelines.pool import PipelinePool


def cannot_repoint(spec: PipelineConfig, config: Config) -> str | None:
    """Why the pipeline cannot be pointed at a corpus copy, or None when it can (as far as ragaudit
    can tell before asking it)."""
    if spec.kind == "replay":
        return "a replay pipeline answers from its recording: it cannot be pointed at an edited copy of the corpus"
    if spec.kind == "python" and "corpus_path" not in _takes(spec, config):
        return (
            f"its factory {spec.options.get('factory')!r} declares no corpus_path parameter: it cannot be "
            "pointed at an edited copy of the corpus (docs/guide.md §3.3)"
        )
    return None


def cannot_exclude(spec: PipelineConfig, config: Config) -> str | None:
    """Why the pipeline cannot be told to leave a passage out of what it retrieves, or None."""
    if spec.kind == "python" and "exclude" not in _takes(spec, config):
        return f"its factory {spec.options.get('factory')!r} declares no exclude parameter (docs/guide.md §3.3)"
    return None


def _takes(spec: PipelineConfig, config: Config) -> tuple[str, ...]:
    from ragaudit.pipelines.python import load_factory, takes

    folder = str(Path(config.path).parent.resolve()) if config.path else None
    return takes(load_factory(spec.name, spec.options["factory"], search_path=folder))


@dataclass
class Variant:
    """A corpus a probe asks a pipeline on: the real one, or a copy with an edit."""

    path: Path
    corpus: Corpus

    @classmethod
    def of(cls, path: Path) -> Variant:
        return cls(Path(path).resolve(), load_corpus(path))


class Target:
    """One pipeline built on one corpus variant, leaving `exclude` out: one index build, then one call
    per request. A build that fails is remembered, and every request then answers with its error."""

    def __init__(
        self,
        spec: PipelineConfig,
        base: Inputs,
        variant: Variant,
        exclude: Iterable[tuple[str, str | None]] = (),
        *,
        must_start: bool = False,
    ):
        self.spec, self.variant, self.exclude = spec, variant, tuple(exclude)
        self.calls, self.failed = 0, None
        inputs = Inputs(
            dataclasses.replace(base.config, audit=base.config.audit.model_copy(update={"corpus": variant.path})),
            base.items,
            variant.corpus,
            encoder=base.encoder,
        )
        try:
            self.pool: PipelinePool | None = PipelinePool(spec, inputs, 1, exclude=self.exclude)
        except RagauditError as exc:
            if must_start:
                raise
            self.pool, self.failed = None, f"it could not start on the edited copy: {exc}"

    def ask(self, item: GoldItem, seed: int) -> Trace:
        request = Request(
            item.qid, 0, seed, item.question, self.spec.options["k"], str(self.variant.path), self.exclude
        )
        if self.pool is None:
            return error_trace(self.spec.name, request, self.failed or "not started")
        self.calls += 1
        try:
            return self.pool.run(request)
        except PipelineStartError as exc:  # a program that never answers on this copy: its runs fail
            return error_trace(self.spec.name, request, f"it could not be reached on the edited copy: {exc}")

    def index(self) -> dict[str, Any] | None:
        found = self.pool.instances[0].index_info() if self.pool is not None and self.pool.instances else None
        return dataclasses.asdict(found) if found is not None else None

    def kill(self) -> None:
        if self.pool is not None:
            self.pool.kill()

    def close(self) -> list[str]:
        return self.pool.close() if self.pool is not None else []
