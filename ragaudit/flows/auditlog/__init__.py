"""`ragaudit audit-log`: the gold-free audit of production traces against a corpus snapshot.

No gold set: every trace is validated against the corpus (every rule of `ragaudit codes`), its
cited text measured against its query (ΔS), and each answer segment scored for support by its
cited texts and for quantities and identifiers they lack. Results add up per time window
(`windows.py`), every index change is drift (between windows and within one), and the worst
examples are kept in bounded lists. Outputs: `audit_log.json`, `audit_log.html` and `rag_traces.sqlite`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from ragaudit.core.errors import InputError, Problem, UsageError
from ragaudit.core.markers import ALL_FORMS
from ragaudit.core.types import Trace
from ragaudit.flows.auditlog.health import Tally
from ragaudit.flows.auditlog.regression import Thresholds
from ragaudit.flows.auditlog.scoring import Scoring
from ragaudit.flows.auditlog.stream import BATCH, LogAudit
from ragaudit.flows.auditlog.windows import parse_window, window_of
from ragaudit.flows.auditlog.worst import KINDS, LIMIT
from ragaudit.io.jsonl import BadLine

if TYPE_CHECKING:
    from ragaudit.checks.metrics.embed import Encoder

SCHEMA = "ragaudit.audit_log/1"
JSON_NAME, HTML_NAME, TABLE_NAME = "audit_log.json", "audit_log.html", "rag_traces.sqlite"
SUPPORT_MEMO = 5_000  # (segment, cited texts) pairs remembered across batches
ENCODER_MEMORY = 20_000  # vectors held in memory (the embedding cache file keeps every one)


@dataclass
class AuditLogResult:
    model: dict[str, Any]  # what audit_log.json holds
    out: Path
    problems: list[Problem | str] = field(default_factory=list)  # unreadable files and lines that are not traces
    warnings: list[Problem | str] = field(default_factory=list)  # late spans, left out

    @property
    def exit_code(self) -> int:
        """0: no error-severity issue and no drift; 1: some; 3: an input could not be read."""
        if self.problems:
            return InputError.exit_code
        return 0 if self.model["summary"]["verdict"] == "pass" else 1


def default_out(base: Path) -> Path:
    return base / f"audit-log-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}"


def read_records(
    fmt: str,
    paths: Sequence[Path],
    *,
    offset_unit: str,
    markers: frozenset[str] = ALL_FORMS,
    problems: list[Problem | str],
    warnings: list[Problem | str] | None = None,
    window: int | None = None,
) -> Iterator[Trace | BadLine]:
    """The records of the inputs: ragaudit's own trace files one by one (a file that cannot be
    read goes to `problems` and the others are still read), or production spans joined into
    traces across every file (`ragaudit.io.spans`; late spans go to `warnings`), whose run keys hold
    the `window` (seconds) a trace falls in: gold-tagged traffic of two days is two sets of runs."""
    if fmt != "traces":
        from ragaudit.io.spans import read_traces as read_spans

        reader = read_spans(fmt, paths, markers=markers, period=None if window is None else window_of(window))
        try:
            yield from reader
        except InputError as exc:  # the traces joined so far are kept
            problems.extend(exc.problems)
        problems.extend(reader.unreadable)
        if warnings is not None:
            warnings.extend(reader.late_problems)
            if reader.late > len(reader.late_problems):
                warnings.append(f"{reader.late - len(reader.late_problems)} more late spans left out")
        return
    from ragaudit.io.traces import read_traces

    for path in paths:
        try:
            yield from read_traces(path, offset_unit=offset_unit, markers=markers)
        except InputError as exc:
            problems.extend(exc.problems)


def read_baseline(path: Path) -> tuple[str, dict[str, Tally]]:
    """An earlier audit_log.json as a baseline: its dated windows' health pooled per pipeline."""
    from ragaudit.io.jsonfiles import read_json_file

    model = read_json_file(path, what="baseline audit log")
    try:
        if model.get("schema") != SCHEMA:
            raise ValueError(f"expected a {SCHEMA} file")
        pooled: dict[str, Tally] = {}
        for i, window in enumerate(model.get("windows") or []):
            if window.get("start") is None:
                continue
            for pipeline, data in (window.get("health") or {}).items():
                try:
                    pooled.setdefault(pipeline, Tally()).merge(Tally.from_dict(data))
                except ValueError as exc:
                    raise ValueError(f"$.windows[{i}].health[{pipeline!r}]: {exc}") from None
    except (ValueError, TypeError, AttributeError) as exc:
        raise InputError([Problem(str(path), f"--baseline: {exc}")]) from None
    if not pooled:
        raise InputError([Problem(str(path), "--baseline: expected an audit log with dated windows, found none")])
    return str(path), pooled


def run_audit_log(
    paths: Sequence[str | os.PathLike[str]],
    *,
    corpus: str | os.PathLike[str] | None = None,
    fmt: str = "traces",
    window: str = "1d",
    out: str | os.PathLike[str] | None = None,
    config: str | os.PathLike[str] | None = None,
    limit: int = LIMIT,
    batch: int = BATCH,
    encoder: Encoder | None = None,
    live_index: bool = False,
    baseline: str | os.PathLike[str] | None = None,
) -> AuditLogResult:
    """Audit production traces in `paths` and write the three outputs to `out`. `config` supplies
    the embedding model, the support model and threshold, `metrics.k`, the ΔS reading, the section
    policy, `offset_unit` and (without `corpus`) the corpus. `encoder` replaces the configured one.
    Spans (`fmt` other than traces) are asked for the live index only with `live_index` or the
    config's [audit] live_index. `baseline`: a window of this log (`2026-11-20`) or an earlier
    audit_log.json that every window is compared with, besides the window before it; the config's
    [audit_log] sets what a regression must reach."""
    from ragaudit._version import __version__
    from ragaudit.io.config import default_config, load_config
    from ragaudit.io.corpus import load_corpus
    from ragaudit.io.files import refuse_overwriting, write_json
    from ragaudit.outputs.render.audit_log_html import write_audit_log_html
    from ragaudit.outputs.render.trace_table import TraceTable
    from ragaudit.pipelines.inputs import Inputs

    length = parse_window(window)
    settings = load_config(Path(config)) if config else default_config()
    corpus_path = Path(corpus) if corpus else settings.audit.corpus
    if corpus_path is None:
        raise UsageError("ragaudit audit-log needs --corpus SNAPSHOT (or a --config whose [audit] names a corpus)")
    target = Path(out) if out else default_out(settings.audit.out)
    refuse_overwriting(
        [target / JSON_NAME, target / HTML_NAME, target / TABLE_NAME], [*paths, corpus_path, config], option="--out"
    )
    thresholds = Thresholds(settings.audit_log.alpha, settings.audit_log.min_effect, settings.audit_log.min_traces)
    earlier = read_baseline(Path(baseline)) if baseline is not None and Path(baseline).is_file() else None
    snapshot = load_corpus(corpus_path)
    inputs = Inputs(settings, [], snapshot, encoder=encoder, memory=ENCODER_MEMORY, memo=SUPPORT_MEMO)
    scoring = Scoring(
        inputs.encoder,
        inputs.support,
        k=settings.metrics.k,
        reading=settings.metrics.delta_s,
        threshold=settings.support.threshold,
    )
    context = inputs.context
    target.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc)
    problems: list[Problem | str] = []
    warnings: list[Problem | str] = []
    table = TraceTable(target / TABLE_NAME)
    try:
        audit = LogAudit(snapshot, scoring, window=length, context=context, table=table.add, limit=limit, batch=batch)
        records = read_records(
            fmt,
            [Path(p) for p in paths],
            offset_unit=settings.audit.offset_unit,
            markers=settings.audit.marker_forms,
            problems=problems,
            warnings=warnings,
            window=length,
        )
        for item in records:
            if isinstance(item, BadLine):
                problems.append(item.problem)
            audit.add(item)
        model = audit.finish(
            thresholds, earlier if earlier is not None else (None if baseline is None else str(baseline))
        )
    except BaseException:
        table.abandon()
        raise
    table.close()
    warnings += inputs.cache_warnings()  # the vectors are right all the same
    model = {
        "schema": SCHEMA,
        "meta": {
            "ragaudit_version": __version__,
            "started": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
            "inputs": [str(p) for p in paths],
            "format": fmt,
            "corpus": str(corpus_path),
            "documents": len(snapshot),
            "config": None if config is None else str(config),
            "window": window,
            "window_seconds": length,
            "embed_model": getattr(inputs.encoder, "model_id", settings.embedder.model),
            "support_model": getattr(inputs.support, "model_id", None),
            "support_threshold": settings.support.threshold,
            "delta_s_reading": settings.metrics.delta_s,
            "k": settings.metrics.k,
            "examples_per_list": limit,
            "lists": KINDS,
            "baseline": None if baseline is None else str(baseline),
        },
        **model,
    }
    write_json(target / JSON_NAME, model)
    write_audit_log_html(target / HTML_NAME, model)
    return AuditLogResult(model, target, problems, warnings)
