"""The flows that check inputs without auditing them: `validate` trace files (or production spans)
against the payload rules, `ingest` production spans into traces, `check_gold` a gold set against
its corpus. None needs torch: the embedding model loads only for the gold check's distance warning.
Each returns an object the caller reads as it goes (issues, traces) and then for its figures and
the problems it met; nothing is printed."""

from __future__ import annotations

import contextlib
import signal
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ragaudit.core.errors import InputError, Problem, UsageError
from ragaudit.core.types import Issue

if TYPE_CHECKING:
    from types import FrameType

    from ragaudit.auditing.executors import DaskClient
    from ragaudit.checks.validation.engine import Validator
    from ragaudit.io.config import Config
    from ragaudit.io.spans import Ingest

TRACES = "traces"


def late_warnings(reader: Ingest) -> list[str]:
    """A warning per late span (a span of a trace already written, left out), the first few named."""
    out = [str(problem) for problem in reader.late_problems]
    if reader.late > len(reader.late_problems):
        out.append(f"{reader.late - len(reader.late_problems)} more late spans left out")
    return out


class Validation:
    """`validate`'s issues, in input order, as they are found (iterate once, inside `with`); then
    `records`, `counts` by code, `warnings` (late spans) and `problems` (inputs or lines that could
    not be read: exit 3)."""

    def __init__(
        self, validator: Validator, issues: Iterator[Issue], readers: list[Ingest], client: DaskClient | None = None
    ):
        self.validator, self._issues, self._readers, self._client = validator, issues, readers, client
        self._previous: Any = None

    def __enter__(self) -> "Validation":
        from ragaudit.pipelines.workers import Interrupted

        # unwinds like ctrl-C: workers stopped, spool files removed
        def terminated(signum: int, frame: FrameType | None) -> NoReturn:
            raise Interrupted(signum, "interrupted by SIGTERM")

        with contextlib.suppress(ValueError):  # not the main thread: signals are left alone
            self._previous = signal.signal(signal.SIGTERM, terminated)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
        if self._client is not None:
            self._client.close()

    def __iter__(self) -> Iterator[Issue]:
        return self._issues

    @property
    def records(self) -> int:
        return self.validator.records

    @property
    def counts(self) -> Counter[str]:
        return self.validator.counts

    @property
    def errors(self) -> int:
        return self.validator.errors

    @property
    def warnings(self) -> list[str]:
        return [line for reader in self._readers for line in late_warnings(reader)]

    @property
    def problems(self) -> list[str]:
        out = [str(problem) for exc in self.validator.unreadable for problem in exc.problems]
        return out + [str(bad.problem) for bad in self.validator.bad_lines]

    @property
    def exit_code(self) -> int:
        """3: an input or a line could not be read; 1: error issues; 0: neither."""
        return InputError.exit_code if self.problems else 1 if self.errors else 0


def validate(
    paths: Sequence[str | Path],
    *,
    corpus: str | Path | None = None,
    config: str | Path | None = None,
    workers: int | None = None,
    executor: str = "local",
    scheduler: str | None = None,
    source: str = TRACES,
    live_index: bool = False,
) -> Validation:
    """Check every citation payload of trace files (`source` "traces") or of production spans
    joined into traces (`source` one of the span formats) against the rules of `ragaudit codes`.
    `config` gives the section policy, offset unit and corpus; `workers` processes (default: the
    config's `[audit] workers` when above 1, else the CPUs this process may use) or a Dask cluster
    (`executor="dask"`) share large inputs. Spans seldom record the live index: they are asked for
    it (missing_live_index) only with `live_index` or the config's [audit] live_index."""
    from ragaudit.checks.validation import Context, Validator
    from ragaudit.checks.validation.shards import check_paths
    from ragaudit.core.progress import phase
    from ragaudit.io.corpus import load_corpus

    if source != TRACES and (executor == "dask" or (workers or 1) > 1):
        raise UsageError("--from reads spans in this process: leave out --workers and --executor dask")
    loaded = None  # without a config: no cross-section whitelist, char offsets (and no config import)
    offset_unit, corpus_path = "char", corpus
    if config:
        from ragaudit.io.config import load_config

        loaded = load_config(config)
        offset_unit, corpus_path = loaded.audit.offset_unit, corpus or loaded.audit.corpus
    with phase("loading corpus", counts_as="loading") if corpus_path else contextlib.nullcontext():
        ctx = Context.of(
            loaded, load_corpus(corpus_path) if corpus_path else None, spans=source != TRACES, live_index=live_index
        )
    validator = Validator(ctx, offset_unit=offset_unit)  # and the config's marker forms, in ctx
    cluster = None
    if executor == "dask":
        from ragaudit.auditing.executors import WORKER_WAIT_S, DaskClient

        cluster = DaskClient(scheduler, worker_wait_s=loaded.executor.worker_wait_s if loaded else WORKER_WAIT_S)
    readers: list[Ingest] = []
    issues = (
        check_paths(validator, paths, workers=_workers(workers, loaded), executor=cluster)
        if source == TRACES
        else _span_issues(validator, source, paths, readers)
    )
    return Validation(validator, issues, readers, cluster)


def _workers(requested: int | None, config: Config | None) -> int:
    """`--workers`, else the config's `[audit] workers` when above 1, else the CPUs this process may
    use: validating calls no pipeline, so the cores are its own."""
    from ragaudit.core.execution import cpu_workers, worker_count

    if requested or (config is not None and config.audit.workers > 1):
        return worker_count(requested, config)
    return cpu_workers()


def _span_issues(
    validator: Validator, source: str, paths: Sequence[str | Path], readers: list[Ingest]
) -> Iterator[Issue]:
    """Issues of span files joined into traces; a file that cannot be read ends the reading."""
    from ragaudit.io.spans import read_traces

    reader = read_traces(source, paths, markers=validator.ctx.markers)
    readers.append(reader)
    try:
        yield from validator.check(reader)
    except InputError as exc:
        validator.unreadable.append(exc)
    if reader.unreadable:
        validator.unreadable.append(InputError(reader.unreadable))


@dataclass
class Ingested:
    """What `ingest` read and wrote."""

    spans: int
    traces: int
    skipped: int
    late: int
    bad: int
    unreadable: int
    out: Path
    bad_lines: list[str] = field(default_factory=list)  # each defective line or span, located
    warnings: list[str] = field(default_factory=list)  # late spans
    unreadable_inputs: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line: what was read and written, and what was left out."""
        return (
            f"{self.spans} spans, {self.traces} traces written to {self.out}, "
            f"{self.skipped} traces without a RETRIEVER span skipped"
            + (f", {self.late} late spans left out" if self.late else "")
            + (f", {self.bad} defective lines or spans" if self.bad else "")
            + (f", {self.unreadable} unreadable inputs" if self.unreadable else "")
        )

    @property
    def problems(self) -> list[str]:
        return self.bad_lines + self.unreadable_inputs

    @property
    def exit_code(self) -> int:
        """3: an input or a line could not be read; 0: every input read."""
        return InputError.exit_code if self.problems else 0


def ingest(
    source: str,
    inputs: Sequence[str | Path],
    out: str | Path,
    *,
    config_name: str | None = None,
    window: int = 20_000,
) -> Ingested:
    """Join production spans (`source`: otlp, phoenix or langfuse) into ragaudit traces written
    to `out`: one trace per trace id that holds a RETRIEVER span. The traces of readable lines are
    written whatever else fails; each defective line or input is one of `problems`."""
    from ragaudit.core.progress import phase
    from ragaudit.io.files import atomic_path, refuse_overwriting
    from ragaudit.io.jsonl import BadLine
    from ragaudit.io.spans import Ingest
    from ragaudit.io.traces import dump_trace

    out = Path(out)
    refuse_overwriting([out], inputs)
    reader = Ingest(source, inputs, config_name=config_name, window=window)
    problems: list[str] = []
    with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        with phase("ingesting", unit="spans", count=lambda: reader.spans):
            for item in reader:
                if isinstance(item, BadLine):
                    problems.append(str(item.problem))
                else:
                    handle.write(dump_trace(item) + "\n")
    return Ingested(
        reader.spans,
        reader.traces,
        reader.skipped,
        reader.late,
        reader.bad,
        len(reader.unreadable),
        out,
        problems,
        late_warnings(reader),
        [str(problem) for problem in reader.unreadable],
    )


@dataclass
class GoldCheck:
    """A gold set's findings against its corpus; `problems` are items that could not be read."""

    issues: list[Issue]
    records: int
    problems: list[Problem]

    @property
    def counts(self) -> Counter[str]:
        return Counter(i.code for i in self.issues)

    @property
    def errors(self) -> int:
        return sum(1 for i in self.issues if i.severity == "error")

    @property
    def severities(self) -> dict[str, str]:
        """Each code's severity as found: the config's [gold] severity may differ from the code's."""
        return {i.code: i.severity for i in self.issues}

    @property
    def exit_code(self) -> int:
        """3: items that could not be read; 1: error findings; 0: neither."""
        return InputError.exit_code if self.problems else 1 if self.errors else 0


def check_gold(
    gold: str | Path,
    corpus: str | Path,
    *,
    paraphrases: int = 3,
    model: str | None = None,
    distance: bool = True,
    config: str | Path | None = None,
) -> GoldCheck:
    """Check that each gold item is answerable from the corpus it names; with `distance`, warn
    about questions far from their anchor, by the embedding `model` (the default model, or
    `hashing`), through the embedding cache a run uses. `config`'s [gold] table leaves codes out
    (`ignore`) or gives them another severity (`severity`)."""
    from ragaudit.io.config import Config, load_config
    from ragaudit.io.config_schema import AuditSection, EmbedderSection, GoldSection
    from ragaudit.pipelines.inputs import Inputs

    rules = load_config(config).gold if config else GoldSection()
    audit = AuditSection(gold=Path(gold), corpus=Path(corpus), paraphrases=paraphrases)
    embedder = EmbedderSection(model=model) if model else EmbedderSection()
    inputs = Inputs.from_config(Config(audit=audit, embedder=embedder, gold=rules), lenient=True)
    found = inputs.gold_issues(distance=distance)
    return GoldCheck(found, len(inputs.items) + len(inputs.gold_problems), inputs.gold_problems)
