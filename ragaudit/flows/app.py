"""One audit from a config, end to end: check the gold set, run every pipeline while the streaming
audit scores the traces as they come, and write every output of the run directory. The CLI's
`ragaudit run` and the pytest plugin both come through here."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ragaudit.core.errors import InputError
from ragaudit.core.model import Baseline, Report
from ragaudit.core.types import Issue
from ragaudit.io.calibration import check_config
from ragaudit.io.config import Config
from ragaudit.io.files import refuse_overwriting
from ragaudit.pipelines.runner import RunResult

if TYPE_CHECKING:
    from ragaudit.checks.metrics.embed import CachedEncoder, Encoder


@dataclass
class Outcome:
    """A finished audit: the run's figures, the report written to its run directory, and the gold
    set's findings against the corpus."""

    result: RunResult
    report: Report
    findings: list[Issue] = field(default_factory=list)

    @property
    def run_dir(self) -> Path:
        return self.result.run_dir


def audit_config(
    config: Config,
    *,
    out: Path | None = None,
    resume: Path | None = None,
    workers: int | None = None,
    baseline: Baseline | None = None,
    baseline_path: Path | None = None,
    gold_check: bool = True,
    executor: str | None = None,
    scheduler: str | None = None,
    command: list[str] | None = None,
) -> Outcome:
    """Run and audit `config`; `baseline` is an earlier report.json (already read and accepted);
    `command`, the command line that asked for it, goes into the manifest."""
    from ragaudit.auditing import history
    from ragaudit.auditing.audit import StreamingAudit
    from ragaudit.auditing.executors import make_executor
    from ragaudit.core.execution import ClusterLost, worker_count
    from ragaudit.io import rundir
    from ragaudit.outputs.writing import write_outputs
    from ragaudit.pipelines import runner

    store = history.store_of(config, Path(resume).parent if resume else out)
    sources = [config.path, config.audit.gold, config.audit.corpus]
    folder = Path(resume).parent if resume else Path(out or config.audit.out)
    refuse_overwriting([folder], sources, option="--resume" if resume else "--out" if out else "[audit] out")
    refuse_overwriting([store], sources, option="the history")
    history.check(store)  # a damaged history stops the run before any work, not after it
    check_config(config)  # thresholds calibrated on another gold set or corpus stop the run
    inputs = runner.Inputs.from_config(config)
    findings = inputs.check_gold(strict=gold_check)
    workers = worker_count(workers, config)  # one count: the runner's threads and the executor's processes
    cluster = make_executor(
        executor or config.executor.kind,
        scheduler or config.executor.scheduler,
        config.path,
        workers=workers,
        worker_wait_s=config.executor.worker_wait_s,
    )
    audit: dict[str, Any] = {}  # "work": the audit's folder; "auditor": its StreamingAudit, once the run starts

    def start_audit(run_dir: Path) -> None:  # the run is scored as it goes: its traces are read once
        audit["work"] = Path(tempfile.mkdtemp(prefix=".audit-", dir=run_dir))
        audit["auditor"] = StreamingAudit(
            inputs, audit["work"], baseline=baseline, remote=cluster.scorer(keep=False) if cluster else None
        )

    try:
        result = runner.run(
            config,
            inputs=inputs,
            out=out,
            resume=resume,
            workers=workers,
            sink=lambda trace: audit["auditor"].add(trace),
            on_start=start_audit,
            executor=cluster,
        )
        try:
            finished = audit["auditor"].finish()
        except ClusterLost as lost:  # every run is in traces.jsonl: this process can score them
            raise ClusterLost(
                f"{lost}, while it scored the last runs; every run is kept in {result.run_dir}: "
                f"ragaudit report {result.run_dir} scores them here"
            ) from None
        with rundir.locked(result.run_dir):
            rundir.update_manifest(
                result.run_dir,
                gold_checked=gold_check,
                history=str(store.resolve()),
                **({"baseline": str(Path(baseline_path).resolve())} if baseline_path else {}),
                **({"command": command} if command else {}),
            )
            report = write_outputs(
                result.run_dir,
                finished,
                inputs,
                warnings=result.warnings,
                beside=cluster.on_this_machine if cluster is not None else None,
            )
            _record(store, result, report)  # last: the history holds finished runs only
    finally:
        if "work" in audit:
            shutil.rmtree(audit["work"], ignore_errors=True)
        if cluster is not None:
            cluster.close()
    _note_cache(inputs.encoder)
    return Outcome(result, report, findings)


def _record(store: Path, result: RunResult, report: Report) -> None:
    """Append the finished run to the history. A failure to append (the history locked for too
    long, a full disk) costs the run nothing: it is a warning, and the run's verdict stands."""
    from ragaudit.auditing import history

    try:
        history.record(store, result.run_dir, report)
    except (InputError, OSError) as exc:
        why = (
            "; ".join(map(str, exc.problems))
            if isinstance(exc, InputError)
            else f"{exc.filename or store}: {exc.strerror or exc}"
        )
        result.warnings.append(
            f"the run was not recorded in the history ({why}); its run directory {result.run_dir} is complete"
        )


def _note_cache(encoder: Encoder) -> None:
    """With --verbose: what the embedding cache saved."""
    from ragaudit.core import progress

    if hasattr(encoder, "requested"):
        encoder = cast("CachedEncoder", encoder)  # only the embedding cache counts what it was asked
        progress.note(
            f"embedding cache: {encoder.requested:,} texts asked, {encoder.hits:,} found, {encoder.encoded:,} "
            f"encoded in {encoder.encode_seconds:.1f} s ({encoder.path})"
        )
