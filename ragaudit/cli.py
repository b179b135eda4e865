"""The `ragaudit` command: a thin click layer, and the only place that maps errors to exit codes."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import click

from ragaudit import __version__
from ragaudit.errors import InputError, RagauditError, UsageError

SPAN_FORMATS = ("otlp", "phoenix", "langfuse")  # ragaudit.spans.SPAN_FORMATS, without importing it
SPANS_FROM = click.option(
    "--from",
    "source",
    type=click.Choice(["traces", *SPAN_FORMATS]),
    default="traces",
    show_default=True,
    help="input format: ragaudit traces, or production spans (OTLP JSON, a Phoenix or a Langfuse export)",
)
ARGV = "ragaudit.argv"
FORMAT = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people, json for tools",
)


class Group(click.Group):
    """Turns RagauditError into its exit code and a one-line (or one-per-problem) message on stderr."""

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except BrokenPipeError:  # `ragaudit --help | head -1`
            _closed_stdout()

    def parse_args(self, ctx, args):
        ctx.meta[ARGV] = list(args)  # the command as given, which a run records in its manifest
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        try:
            try:
                return super().invoke(ctx)
            finally:
                from ragaudit import progress

                progress.close()  # the live display is gone before any message below
                sys.stdout.flush()  # a closed stdout shows here, as BrokenPipeError, not at exit
        except BrokenPipeError as exc:
            if not _stdout_gone():  # another pipe (a worker's, a pipeline's): an error like any other
                click.echo(f"error: input/output: {exc.strerror or exc}", err=True)
                ctx.exit(InputError.exit_code)
            _closed_stdout()
        except RagauditError as exc:
            click.echo(
                f"error: {exc}" if not isinstance(exc, InputError) else "\n".join(f"error: {p}" for p in exc.problems),
                err=True,
            )
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:  # ctrl-C outside a run's own handler (loading, scoring, writing)
            click.echo("error: interrupted by SIGINT", err=True)
            ctx.exit(130)
        except OSError as exc:  # a full disk, a read-only folder: an input/output error, never a traceback
            where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
            click.echo(f"error: input/output: {where}{exc.strerror or exc}", err=True)
            ctx.exit(InputError.exit_code)


CLOSED_STDOUT = 141  # 128 + SIGPIPE, as a shell reports a writer ended by a closed pipe


def _stdout_gone() -> bool:
    """Whether stdout is a pipe (or socket) whose reader has gone. A stdout without a file
    descriptor (an in-process test runner) counts as gone: only a write to it failed."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return True


def _closed_stdout() -> NoReturn:
    """The reader of stdout went away (`ragaudit codes | head -1`): end quietly, as a writer to a
    closed pipe does, with what is still buffered sent nowhere."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # a stdout without a file descriptor (tests)
        pass
    raise click.exceptions.Exit(CLOSED_STDOUT)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ragaudit")
@click.option("--quiet", "-q", is_flag=True, help="no progress on stderr: errors, warnings and results only")
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="every phase, those under a second too, and debug detail (as timestamped lines in a pipe or a file)",
)
def main(quiet: bool, verbose: bool):
    """Offline, deterministic audit of retrieval-augmented generation: citation payloads, ΔS,
    coverage, λ convergence and citation match, as reports and a CI gate.

    Long phases (model load, indexing, embedding, runs, scoring, writing) show their progress on
    stderr: a live display on a terminal, timestamped lines in CI (CI set), nothing in a pipe or a
    file unless --verbose (then timestamped lines). stdout carries results only."""
    from ragaudit import progress

    if quiet and verbose:
        raise click.UsageError("use --quiet or --verbose, not both")
    progress.configure(quiet=quiet, verbose=verbose)
    progress.reset()
    # The command owns its terminal: the model libraries' download bars and warnings stay out of it.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    # Audits allocate millions of short-lived objects and few cycles: collect the youngest
    # generation less often (the default collected every 700 allocations, a fifth of the time).
    gc.set_threshold(50_000, 50, 100)


def _issue_line(issue) -> str:
    where = issue.file or "-"
    if issue.line is not None:
        where += f":{issue.line}"
    run = (
        ""
        if issue.qid is None
        else f" [{issue.qid} v{issue.variant} s{issue.seed}"
        + (f" seg{issue.seg}" if issue.seg is not None else "")
        + "]"
    )
    return f"{where}: {issue.severity} {issue.code}{run} {issue.path}: {issue.message}\n    fix: {issue.fix}"


def _emit(issues, *, fmt: str, records_of, counts_of) -> None:
    """Print issues as they come (text), or as the JSON document of docs/reference.md §7 without holding them in memory."""
    if fmt == "text":
        for issue in issues:
            click.echo(_issue_line(issue))
        return
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        first = True
        for issue in issues:
            spool.write(("" if first else ",\n  ") + json.dumps(issue.to_dict(), sort_keys=True, ensure_ascii=False))
            first = False
        spool.seek(0)
        out = sys.stdout
        out.write('{"records": %d, "issues": [\n  ' % records_of())
        while chunk := spool.read(1 << 16):
            out.write(chunk)
        out.write('\n], "counts": %s}\n' % json.dumps(dict(sorted(counts_of().items())), sort_keys=True))


def _summary(records: int, counts, severity_of) -> str:
    errors = sum(n for c, n in counts.items() if severity_of(c) == "error")
    warnings = sum(counts.values()) - errors
    lines = [f"{records} records, {errors} errors, {warnings} warnings"]
    lines += [f"  {code}: {n}" for code, n in sorted(counts.items())]
    return "\n".join(lines)


@main.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--corpus", type=click.Path(path_type=Path), help="corpus directory or corpus.jsonl (enables corpus rules)"
)
@click.option(
    "--config", "config_path", type=click.Path(path_type=Path), help="config: section policy, offset_unit, corpus"
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="processes that share large inputs (default: the CPUs, at most 8; 1: this process alone)",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "dask"]),
    default="local",
    show_default=True,
    help="dask: shard the inputs over a Dask cluster (they must be readable at the same paths there)",
)
@click.option("--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786")
@SPANS_FROM
@FORMAT
def validate(traces, corpus, config_path, workers, executor, scheduler, source, fmt):
    """Check every citation payload of trace files against the rules of `ragaudit codes`.
    With --from, the inputs are production spans, joined into traces as `ragaudit ingest` joins
    them (read in this process).

    Exit 0: no error-severity issue; 1: error issues found; 3: an input could not be read.
    """
    if source != "traces" and (executor == "dask" or (workers or 1) > 1):
        raise UsageError("--from reads spans in this process: leave out --workers and --executor dask")
    import signal

    from ragaudit.io.corpus import load_corpus
    from ragaudit.progress import phase
    from ragaudit.validate import CODES, Context, Validator
    from ragaudit.validate.shards import default_workers
    from ragaudit.workers import Interrupted

    policy: dict = {}  # without a config: no cross-section whitelist, char offsets (and no config import)
    offset_unit, corpus_path = "char", corpus
    if config_path:
        from ragaudit.io.config import load_config

        config = load_config(config_path)
        policy = {
            "allow_cross_section": config.allow_cross_section,
            "cross_section_whitelist": config.cross_section_whitelist,
        }
        offset_unit, corpus_path = config.offset_unit, corpus or config.corpus
    with phase("loading corpus", counts_as="loading") if corpus_path else contextlib.nullcontext():
        ctx = Context(corpus=load_corpus(corpus_path) if corpus_path else None, **policy)
    validator = Validator(ctx, offset_unit=offset_unit)
    client = None
    if executor == "dask":
        from ragaudit.executors import connect

        client = connect(scheduler)

    def terminated(signum, frame):  # unwinds like ctrl-C: workers stopped, spool files removed
        raise Interrupted(signum, "interrupted by SIGTERM")

    readers: list = []  # the span reader, for its late spans
    try:
        previous = signal.signal(signal.SIGTERM, terminated)
    except ValueError:  # not the main thread: leave signals alone
        previous = None
    try:
        with phase("validating", unit="records", count=lambda: validator.records):
            _emit(
                validator.check_paths(traces, workers=workers or default_workers(), client=client)
                if source == "traces"
                else _span_issues(validator, source, traces, readers),
                fmt=fmt,
                records_of=lambda: validator.records,
                counts_of=lambda: validator.counts,
            )
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if client is not None:
            client.close()
    if fmt == "text":
        click.echo(_summary(validator.records, validator.counts, lambda c: CODES[c].severity))
    for reader in readers:
        _warn_late(reader)
    for exc in validator.unreadable:
        for problem in exc.problems:
            click.echo(f"error: {problem}", err=True)
    for bad in validator.bad_lines:
        click.echo(f"error: {bad.problem}", err=True)
    if validator.unreadable or validator.bad_lines:
        sys.exit(InputError.exit_code)
    sys.exit(1 if validator.errors else 0)


def _span_issues(validator, source: str, paths, readers: list):
    """Issues of span files joined into traces; a file that cannot be read ends the reading."""
    from ragaudit.spans import read_traces

    reader = read_traces(source, paths)
    readers.append(reader)
    try:
        yield from validator.check(reader)
    except InputError as exc:
        validator.unreadable.append(exc)
    if reader.unreadable:
        validator.unreadable.append(InputError(reader.unreadable))


def _warn_late(reader) -> None:
    """A warning per late span (a span of a trace already written, left out), the first few named."""
    for problem in reader.late_problems:
        click.echo(f"warning: {problem}", err=True)
    if reader.late > len(reader.late_problems):
        click.echo(f"warning: {reader.late - len(reader.late_problems)} more late spans left out", err=True)


@main.command()
@click.argument("source", metavar="FORMAT", type=click.Choice(SPAN_FORMATS))
@click.argument("inputs", metavar="INPUT...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", required=True, type=click.Path(path_type=Path, dir_okay=False), help="the traces.jsonl to write")
@click.option("--config-name", help="every trace's config (default: the spans' service name)")
@click.option(
    "--window",
    type=click.IntRange(min=1),
    default=20_000,
    show_default=True,
    help="spans of unfinished traces held at most; spans of one trace further apart are reported late",
)
def ingest(source, inputs, out, config_name, window):
    """Join production spans into ragaudit traces (docs/reference.md §10): one trace per trace id that holds a
    RETRIEVER span. FORMAT: otlp (OTLP JSON lines or document, .gz too), phoenix (a Phoenix span
    export, parquet or JSON lines), langfuse (a Langfuse observations export, JSON or JSON lines).

    A trace's spans may come in any order, across lines, files and services; a span of a trace
    already written (further than --window from the rest) is a late span: a warning, left out.

    Exit 0: every input read; 3: an input or a line of one could not be read (each on stderr;
    the traces of the readable lines are written all the same).
    """
    from ragaudit.io.files import atomic_path, refuse_overwriting
    from ragaudit.io.jsonl import BadLine
    from ragaudit.io.traces import dump_trace
    from ragaudit.progress import phase
    from ragaudit.spans import Ingest

    refuse_overwriting([out], inputs)
    reader = Ingest(source, inputs, config_name=config_name, window=window)
    with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        with phase("ingesting", unit="spans", count=lambda: reader.spans):
            for item in reader:
                if isinstance(item, BadLine):
                    click.echo(f"error: {item.problem}", err=True)
                else:
                    handle.write(dump_trace(item) + "\n")
    _warn_late(reader)
    for problem in reader.unreadable:
        click.echo(f"error: {problem}", err=True)
    click.echo(
        f"{reader.spans} spans, {reader.traces} traces written to {out}, "
        f"{reader.skipped} traces without a RETRIEVER span skipped"
        + (f", {reader.late} late spans left out" if reader.late else "")
        + (f", {reader.bad} defective lines or spans" if reader.bad else "")
        + (f", {len(reader.unreadable)} unreadable inputs" if reader.unreadable else "")
    )
    sys.exit(InputError.exit_code if reader.bad or reader.unreadable else 0)


@main.command("run")
@click.argument("config_path", metavar="CONFIG", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), help="folder for the run directory (default: [audit] out)")
@click.option("--resume", type=click.Path(path_type=Path), help="finish an interrupted run in RUN_DIR")
@click.option("--workers", type=click.IntRange(min=1), help="parallel workers (default: [audit] workers)")
@click.option(
    "--baseline",
    type=click.Path(path_type=Path),
    help="report.json of an earlier run, or last-pass (the history's latest passing run on the same gold set "
    "and corpus): add the drift checks",
)
@click.option("--allow-foreign-baseline", is_flag=True, help="accept a baseline built on another gold set or corpus")
@click.option("--no-gate", is_flag=True, help="write everything but exit 0 whatever the gate says")
@click.option(
    "--no-gold-check",
    is_flag=True,
    help="run even when the gold set disagrees with the corpus (its "
    "findings still go into the report; a duplicate qid still stops the run)",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "processes", "dask"]),
    help="where pipeline calls and scoring run: threads here (local), processes here, a Dask cluster "
    "(default: [executor] kind, else local)",
)
@click.option("--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (default: [executor] scheduler)")
def run_command(
    config_path, out, resume, workers, baseline, allow_foreign_baseline, no_gate, no_gold_check, executor, scheduler
):
    """Replay the gold set across variants, seeds and pipelines; measure, gate and report.

    The gold set is checked against the corpus first, as `ragaudit gold check` does: an error
    there stops the run (exit 3) unless --no-gold-check. A config runs code (`command` and
    `factory` pipelines): trust it like a Makefile.

    Exit 0: gate passed; 1: gate failed; 2: usage; 3: unreadable input, a gold error or a full disk;
    4: a pipeline could not start; 130/143: interrupted (finished runs kept, --resume finishes).
    """
    from ragaudit import rundir
    from ragaudit.app import audit_config
    from ragaudit.io.config import load_config
    from ragaudit.io.corpus import load_corpus

    config = load_config(config_path)
    baseline_report = None
    if baseline:
        corpus = load_corpus(config.corpus) if config.corpus else None
        inputs = rundir.input_record(config, corpus)["inputs"]
        older = rundir.older_hashes(config.corpus, inputs["corpus"])
        if str(baseline) == LAST_PASS:
            baseline, baseline_report = _last_pass(config, Path(resume).parent if resume else out, inputs, older=older)
        else:
            baseline_report = _baseline(baseline, inputs, allow_foreign_baseline, older=older)
    outcome = audit_config(
        config,
        out=out,
        resume=resume,
        workers=workers,
        baseline=baseline_report,
        baseline_path=baseline,
        gold_check=not no_gold_check,
        executor=executor,
        scheduler=scheduler,
        command=["ragaudit", *click.get_current_context().meta.get(ARGV, [])],
    )
    result, report, findings = outcome.result, outcome.report, outcome.findings
    for line in result.warnings:
        click.echo(f"warning: {line}", err=True)
    for name, why in sorted(result.aborted.items()):
        click.echo(f"pipeline {name} aborted (analyzer parity): {why}", err=True)
    if findings:
        errors = sum(1 for f in findings if f.severity == "error")
        click.echo(f"gold check: {errors} errors, {len(findings) - errors} warnings (listed in the report)", err=True)
    from ragaudit import progress

    took = progress.elapsed()
    click.echo(
        f"{result.total:,} runs ({result.executed:,} run now, {result.resumed:,} resumed) in {took:.1f} s, "
        f"{result.executed / took if took > 0 else 0.0:.1f} runs/s ({progress.breakdown(took)})"
    )
    if not (result.run_dir / "report.json").is_file():  # never exit 0 without a report
        raise RagauditError(f"{result.run_dir}: the report was not written")
    _finish(report, result.run_dir, no_gate)


LAST_PASS = "last-pass"


def _last_pass(
    config, out: Path | None, inputs: dict, until: Path | None = None, *, older: Sequence[str] = ()
) -> tuple[Path, dict] | tuple[None, None]:
    """The latest passing run on the same gold set and corpus in the history (recorded before the
    run `until`; the corpus under its hash or an `older` version's): its report.json's path and
    its report, as recorded; (None, None) with a warning while none has passed yet, so that CI can
    gate with `--baseline last-pass` from its first run."""
    from ragaudit import history

    store = history.store_of(config, out)
    corpora = [inputs.get("corpus"), *older]
    try:
        path, found = history.last_pass(store, gold=inputs.get("gold"), corpus=corpora, until=until)
    except history.NoPassingRun as exc:  # a first run, or none has passed yet: gate without a baseline
        click.echo(f"warning: no baseline, so no regression checks this time: {exc}", err=True)
        return None, None
    click.echo(f"baseline: {path} (the latest passing run in {store})", err=True)
    return path, found


def _read_report(path: Path) -> dict:
    from ragaudit.io.jsonl import read_json_file

    report = read_json_file(Path(path), what="report")
    for key, kind in (("summary", dict), ("questions", list)):
        if not isinstance(report.get(key), kind):
            raise InputError(
                f"{path}: expected a ragaudit report with {key}, found "
                f"{'none' if report.get(key) is None else type(report[key]).__name__}"
            )
    return report


def _baseline(path: Path, inputs: dict | None, allow_foreign: bool, *, older: Sequence[str] = ()) -> dict:
    """A baseline report, refused (exit 3) when it was built on another gold set or corpus (the
    corpus named by its hash, or by an `older` version's hash of it)."""
    from ragaudit.gate import foreign_baseline

    report = _read_report(path)
    why = foreign_baseline(inputs, report)
    if why and any(foreign_baseline({**(inputs or {}), "corpus": alias}, report) is None for alias in older):
        why = None
    if why and not allow_foreign:
        raise InputError(f"{path}: {why}; pass --allow-foreign-baseline to compare anyway")
    if why:
        click.echo(f"warning: {path}: {why}", err=True)
    return report


def _build(run_dir: Path, inputs, findings, baseline_report):
    from ragaudit.report import build

    warnings: list[str] = []
    report = build(run_dir, inputs.subject(findings), baseline=baseline_report, warnings=warnings)
    for line in warnings:
        click.echo(f"warning: {line}", err=True)
    if not (Path(run_dir) / "report.json").is_file():  # never exit 0 without a report
        raise RagauditError(f"{run_dir}: the report was not written")
    return report


def _finish(report: dict, run_dir: Path, no_gate: bool) -> None:
    from ragaudit.gate import missing_from_baseline
    from ragaudit.report.markdown import render_summary

    for name in missing_from_baseline(report["gate"]):
        click.echo(f"warning: pipeline {name} is not in the baseline: no drift checks for it", err=True)
    click.echo(render_summary(report), nl=False)
    click.echo(f"\nrun directory: {run_dir}")
    sys.exit(0 if no_gate or report["gate"]["verdict"] == "pass" else 1)


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--no-gate", is_flag=True, help="exit 0 whatever the gate says")
def report(run_dir, no_gate):
    """Rebuild every output of RUN_DIR from its stored traces (which are only read, never rewritten)."""
    from ragaudit import rundir, runner
    from ragaudit.io.config import load_config

    manifest = rundir.read_manifest(run_dir)
    config = load_config(manifest["config_path"])
    inputs = runner.Inputs(config)
    baseline = _baseline(Path(manifest["baseline"]), manifest["inputs"], True) if manifest.get("baseline") else None
    with rundir.locked(run_dir):
        built = _build(run_dir, inputs, inputs.check_gold(strict=False), baseline)
    _finish(built, run_dir, no_gate)


@main.command()
@click.argument("report_path", metavar="REPORT", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--config", "config_path", required=True, type=click.Path(path_type=Path), help="config with [gate]")
@click.option(
    "--baseline",
    type=click.Path(path_type=Path),
    help="report.json of an earlier run, or last-pass (the history's latest passing run on the same gold set "
    "and corpus): add the drift checks",
)
@click.option("--allow-foreign-baseline", is_flag=True, help="accept a baseline built on another gold set or corpus")
@FORMAT
def gate(report_path, config_path, baseline, allow_foreign_baseline, fmt):
    """Apply the [gate] of CONFIG to a report.json. Exit 0: pass; 1: fail; 3: an unreadable report,
    or a baseline built on another gold set or corpus."""
    from ragaudit import rundir
    from ragaudit.gate import evaluate_gate, evaluation_of, missing_from_baseline
    from ragaudit.io.config import load_config

    config = load_config(config_path)
    report = _read_report(report_path)
    inputs = (report.get("meta") or {}).get("inputs")
    if config.calibration is not None:
        from ragaudit.io.calibration import check_inputs

        check_inputs(config.calibration, inputs)
    if baseline and str(baseline) == LAST_PASS:
        run_dir = Path(report_path).resolve().parent
        older = rundir.older_hashes(config.corpus, (inputs or {}).get("corpus"))
        baseline, base = _last_pass(config, run_dir.parent, inputs or {}, until=run_dir, older=older)
    elif baseline:
        older = rundir.older_hashes(config.corpus, (inputs or {}).get("corpus"))
        base = _baseline(baseline, inputs, allow_foreign_baseline, older=older)
    else:
        base = None
    errors: dict[str, int] = {}
    questions: dict[str, set] = {}
    if not isinstance(report.get("issues", []), list) or not isinstance(report.get("pipelines", {}), dict):
        raise InputError(f"{report_path}: expected issues as an array and pipelines as an object")
    for issue in report.get("issues", []):
        if issue.get("severity") == "error":
            errors[issue.get("pipeline")] = errors.get(issue.get("pipeline"), 0) + 1
            questions.setdefault(issue.get("pipeline"), set()).add(issue.get("qid") or f"line {issue.get('line')}")
    aborted = {name: p["aborted"] for name, p in report.get("pipelines", {}).items() if p.get("aborted")}
    from ragaudit import runstore

    runs_file = Path(report_path).parent / runstore.RUNS
    evaluation = evaluation_of(report, runstore.coverage_share(runs_file) if runs_file.is_file() else None)
    if not runs_file.is_file():  # a report moved alone: the runs it carries must be all of them
        if any("runs" not in q for q in report["questions"]):
            raise InputError(
                f"{report_path}: expected {runstore.RUNS} beside the report (the per-run coverage "
                "behind coverage_pass_rate), found none"
            )
        evaluation.runs = [r for q in report["questions"] for r in q["runs"]]
    try:
        result = evaluate_gate(
            evaluation,
            config.gate,
            error_counts=errors,
            aborted=aborted,
            baseline=base,
            error_questions={p: sorted(q) for p, q in questions.items()},
            sources=config.gate_sources,
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # a report edited by hand or damaged
        raise InputError(
            f"{report_path}: expected the shape of a ragaudit report, found a damaged one ({type(exc).__name__}: {exc})"
        ) from None
    for name in missing_from_baseline(result):
        click.echo(f"warning: pipeline {name} is not in the baseline: no drift checks for it", err=True)
    if fmt == "json":
        click.echo(json.dumps(result, indent=1, sort_keys=True))
    else:
        from ragaudit.report.markdown import render_summary

        click.echo(render_summary({**report, "gate": result}), nl=False)
    sys.exit(0 if result["verdict"] == "pass" else 1)


@main.command("compare")
@click.argument(
    "run_dirs", metavar="RUN_A [RUN_B]", nargs=-1, required=True, type=click.Path(path_type=Path, file_okay=False)
)
@click.option(
    "--pair",
    "pairs",
    multiple=True,
    metavar="PIPE_A:PIPE_B",
    help="compare PIPE_B with PIPE_A (repeatable); across two runs, PIPE_A is RUN_A's and PIPE_B RUN_B's "
    "(default: [compare] pairs, else each pipeline with the first, or with its namesake in RUN_A)",
)
@click.option("--margin", type=float, help="non-inferiority margin in (0, 1) (default: [compare] margin, else 0.02)")
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    help="where compare.json/html go (default: the first run directory)",
)
@FORMAT
def compare_command(run_dirs, pairs, margin, out, fmt):
    """Is B better, worse, or no worse than A? Per pair of pipelines and metric: means, the paired
    difference with a 95% CI, p-values (exact sign test for per-run 0/1 outcomes, sign-flip permutation
    otherwise; Holm-adjusted), a non-inferiority test against the margin, win/tie/loss, the noise floor
    of pipelines that sample, λ transitions, and the smallest change in a rate the questions can
    detect. Writes compare.json and compare.html.

    Exit 0; 2: an unknown pipeline in --pair or a margin outside (0, 1); 3: an unreadable report."""
    from ragaudit.io.files import refuse_overwriting
    from ragaudit.progress import phase
    from ragaudit.report import write_comparison
    from ragaudit.report.compare_text import render_text

    if margin is not None and not 0 < margin < 1:
        raise UsageError(f"--margin: expected a number in (0, 1), found {margin}")
    target = Path(out or run_dirs[0])
    refuse_overwriting([target / "compare.json", target / "compare.html"], [Path(d) / "report.json" for d in run_dirs])
    with phase("reading reports", counts_as="loading"):
        reports = [_read_report(Path(d) / "report.json") for d in run_dirs]
    labels = [Path(d).name for d in run_dirs] if len(run_dirs) > 1 else None
    target.mkdir(parents=True, exist_ok=True)
    try:
        with phase("comparing and writing compare.json and compare.html", counts_as="writing"):
            result, notes = write_comparison(
                target, reports, labels, run_dirs=list(run_dirs), pairs=list(pairs), margin=margin
            )
    except (KeyError, TypeError, AttributeError) as exc:  # a report edited by hand or damaged
        raise InputError(
            f"expected the shape of ragaudit reports in {', '.join(map(str, run_dirs))}, found a "
            f"damaged one ({type(exc).__name__}: {exc})"
        ) from None
    if fmt == "json":
        click.echo(json.dumps(result, indent=1, sort_keys=True))
        for note in notes:
            click.echo(f"note: {note}", err=True)
        return
    click.echo(render_text(result, notes), nl=False)
    click.echo(f"wrote {target / 'compare.json'} and {target / 'compare.html'}")


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    help="gate with this config's [gate] (default: the run's own config)",
)
@click.option("--only", help="comma-separated fault names (default: all, controls included)")
@click.option("--rate", type=float, default=0.2, show_default=True, help="share of the questions each fault affects")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the affected questions and the mutations")
@click.option(
    "--out", type=click.Path(path_type=Path, file_okay=False), help="where faults.json/html go (default: RUN_DIR)"
)
def faults(run_dir, config_path, only, rate, seed, out):
    """Inject each fault class into a share of the questions of a finished run and gate every faulty
    copy as `ragaudit report` would, alone and against the clean run as its baseline: does the gate
    pass the clean run and the negative controls (llm_rewrite), and fail every fault?

    No pipeline is called: every fault is a transformation of the recorded traces. Writes faults.json
    and faults.html. Exit 0: the clean run and the controls pass and every fault fails the gate
    against the baseline; 1 otherwise.
    """
    from ragaudit import rundir, runner
    from ragaudit.faults import FAULTS, run_faults
    from ragaudit.io.config import load_config
    from ragaudit.io.files import refuse_overwriting
    from ragaudit.io.traces import read_trace_file
    from ragaudit.progress import phase
    from ragaudit.report import write_json
    from ragaudit.report.faults_html import write_faults_html
    from ragaudit.report.faults_text import render_fault_matrix

    names = None
    if only is not None:
        names = [n.strip() for n in only.split(",")]
        if not all(names) or any(n not in FAULTS for n in names):
            raise UsageError(
                f"--only: expected comma-separated fault names (some of {', '.join(FAULTS)}), found {only!r}"
            )
    manifest = rundir.read_manifest(run_dir)
    config_file = config_path or manifest["config_path"]
    target = Path(out or run_dir)
    refuse_overwriting(
        [target / "faults.json", target / "faults.html"],
        [Path(run_dir) / rundir.TRACES, Path(run_dir) / rundir.MANIFEST, config_file],
    )
    config = load_config(config_file)
    inputs = runner.Inputs(config)
    with phase("reading traces", unit="runs", counts_as="loading") as reading:
        traces = read_trace_file(Path(run_dir) / "traces.jsonl", offset_unit=config.offset_unit)
        reading.advance(len(traces))
    result, _ = run_faults(traces, inputs.subject(inputs.check_gold(strict=False)), only=names, rate=rate, seed=seed)
    target.mkdir(parents=True, exist_ok=True)
    with (
        rundir.locked(run_dir) if target.resolve() == Path(run_dir).resolve() else contextlib.nullcontext(),
        phase("writing faults.json and faults.html", counts_as="writing"),
    ):
        write_json(target / "faults.json", result)
        write_faults_html(target / "faults.html", result)
    click.echo(render_fault_matrix(result), nl=False)
    click.echo(f"wrote {target / 'faults.json'} and {target / 'faults.html'}")
    sys.exit(0 if result["passed"] else 1)


@main.command("calibrate")
@click.argument("config_path", metavar="CONFIG", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="where to write the proposal (default: calibration.json beside the config)",
)
@click.option("--rate", type=float, default=0.2, show_default=True, help="share of the questions each fault affects")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the affected questions and the mutations")
@FORMAT
def calibrate_command(config_path, out, rate, seed, fmt):
    """Propose [gate] thresholds for the gold set and corpus of CONFIG: the first step on a new
    corpus. No pipeline is called: the oracle run (the gold cited, the anchor stated), its answers
    reworded as an LLM writes them, and every fault class are built from the gold set and corpus,
    then audited. Prints per check how well it separates them and the threshold it proposes, and
    writes calibration.json; a config uses it with `[gate] from = "calibration.json"`."""
    from ragaudit import runner
    from ragaudit.calibrate import calibrate
    from ragaudit.io.config import load_config
    from ragaudit.io.files import refuse_overwriting
    from ragaudit.report import write_json
    from ragaudit.report.calibration_text import render_calibration

    if not 0 < rate <= 1:
        raise UsageError(f"expected --rate in (0, 1], found {rate}")
    config = load_config(config_path)
    target = Path(out) if out else Path(config_path).parent / "calibration.json"
    refuse_overwriting([target], [config_path, config.gold, config.corpus])
    result = calibrate(runner.Inputs(config), rate=rate, seed=seed)
    write_json(target, result)
    if fmt == "json":
        click.echo(json.dumps(result, indent=1, sort_keys=True))
    else:
        click.echo(render_calibration(result), nl=False)
        click.echo(f'wrote {target}; use it with [gate] from = "{target.name}"')


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--attestation",
    type=click.Path(path_type=Path, dir_okay=False),
    help="also check every file this attestation (ragaudit attest) lists against its sha256",
)
@click.option(
    "--pubkey",
    type=click.Path(path_type=Path, dir_okay=False),
    help="and check the attestation's signature with this ed25519 public key (PEM)",
)
def verify(run_dir, attestation, pubkey):
    """Check that the inputs (gold set, corpus, config), the traces and every output of RUN_DIR are
    unchanged since the run; with --attestation, that every file it lists has its attested sha256,
    and with --pubkey that it is signed with that key. Exit 0: unchanged; 5: changed or a signature
    that does not verify (each named, corpus documents too); 3: no run directory, a damaged manifest,
    or a damaged or foreign attestation."""
    from ragaudit import rundir
    from ragaudit.errors import InputsChangedError

    if attestation or pubkey:
        from ragaudit import attest

        attest.check_options(attestation, pubkey)
        checked = attest.verify(run_dir, attestation, pubkey)
        for note in checked.notes:
            click.echo(f"note: {note}", err=True)
        if checked.mismatches:
            raise InputsChangedError("; ".join(checked.mismatches))
        signed = f", signature verified with key {checked.verified_with[:16]}…" if checked.verified_with else ""
        click.echo(
            f"unchanged: {'traces and outputs' if checked.absent else 'gold, corpus, config, traces and outputs'} of {run_dir}"
        )
        click.echo(f"attested: {len(checked.statement['subject'])} files match {attestation}{signed}")
        return
    notes: list[str] = []
    changed = rundir.changes(run_dir, notes)
    for note in notes:
        click.echo(f"note: {note}", err=True)
    if changed:
        raise InputsChangedError("; ".join(changed))
    click.echo(f"unchanged: gold, corpus, config, traces and outputs of {run_dir}")


@main.group()
def gold():
    """Gold-set tools."""


@gold.command("check")
@click.argument("gold_path", metavar="GOLD", type=click.Path(path_type=Path))
@click.option("--corpus", required=True, type=click.Path(path_type=Path), help="corpus directory or corpus.jsonl")
@click.option(
    "--paraphrases",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="variants (question + paraphrases) each item must have",
)
@click.option("--model", default=None, help="embedding model for the dS(question, anchor) warning")
@click.option("--no-distance", is_flag=True, help="skip the dS(question, anchor) warning (no model loaded)")
@FORMAT
def gold_check(gold_path, corpus, paraphrases, model, no_distance, fmt):
    """Check that each gold item is answerable from the corpus it names.

    Exit 0: no error; 1: error findings; 3: the gold set or corpus could not be read.
    """
    from collections import Counter

    from ragaudit.io.corpus import load_corpus
    from ragaudit.io.gold import read_gold
    from ragaudit.progress import phase
    from ragaudit.validate import CODES
    from ragaudit.validate.gold import check_gold

    with phase("loading corpus and gold set", counts_as="loading"):
        loaded = load_corpus(corpus)
        items, problems = read_gold(gold_path)
    encoder = None
    if not no_distance:
        from ragaudit.metrics.embed import DEFAULT_MODEL, SentenceTransformerEncoder

        encoder = SentenceTransformerEncoder(model or DEFAULT_MODEL)
    found = check_gold(items, loaded, file=str(gold_path), paraphrases=paraphrases, problems=problems, encoder=encoder)
    counts = Counter(i.code for i in found)
    _emit(found, fmt=fmt, records_of=lambda: len(items) + len(problems), counts_of=lambda: counts)
    if fmt == "text":
        click.echo(_summary(len(items) + len(problems), counts, lambda c: CODES[c].severity))
    for problem in problems:
        click.echo(f"error: {problem}", err=True)
    if problems:
        sys.exit(InputError.exit_code)
    sys.exit(1 if any(i.severity == "error" for i in found) else 0)


@main.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--qid", multiple=True, help="only these questions (repeatable)")
@click.option("--base-url", help="link knowledge-base files under this URL")
def cite(traces, qid, base_url):
    """Render the runs of trace files as markdown: each answer with claim-level footnotes, then its sources."""
    from ragaudit.citations import render_trace
    from ragaudit.io.jsonl import BadLine
    from ragaudit.io.traces import read_traces

    bad = []
    for path in traces:
        for trace in read_traces(path):
            if isinstance(trace, BadLine):
                bad.append(trace)
            elif not qid or trace.qid in qid:
                click.echo(render_trace(trace, base_url=base_url))
    if bad:
        raise InputError([b.problem for b in bad])


@main.command()
@FORMAT
def codes(fmt):
    """List every issue code with its severity, meaning and fix."""
    from ragaudit.validate import CODES

    if fmt == "json":
        click.echo(
            json.dumps(
                [
                    {"code": c.code, "severity": c.severity, "family": c.family, "meaning": c.meaning, "fix": c.fix}
                    for c in CODES.values()
                ],
                indent=2,
            )
        )
        return
    for c in CODES.values():
        click.echo(f"{c.code:<28} {c.severity:<8} {c.meaning}\n{'':<37} fix: {c.fix}")


@main.command("history")
@click.option("--store", type=click.Path(path_type=Path), help="the history file (default: that of --config's runs)")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="config whose runs' history to read")
@click.option("--metric", help="only this metric (e.g. citation_match)")
@click.option("--pipeline", help="only this pipeline")
@click.option("--last", type=click.IntRange(min=1), help="only the last N runs")
@click.option("--plot", type=click.Path(path_type=Path, dir_okay=False), help="also draw the trends to an SVG file")
@FORMAT
def history_command(store, config_path, metric, pipeline, last, plot, fmt):
    """Trends across recorded runs: each pipeline's metrics, run by run (oldest first), with a
    sparkline, the time, the git commit, the run's verdict and the pipeline's gate.

    Every `ragaudit run` records its summary in a history file: $RAGAUDIT_HISTORY, else
    [history] path, else history.sqlite beside the run directories (--config's [audit] out, else
    ./reports). Exit 0; 3 when the history is missing or damaged."""
    from ragaudit import history
    from ragaudit.report import history_text

    if store is None:
        from ragaudit.io.config import load_config

        store = history.store_of(load_config(config_path) if config_path else None)
    if plot:
        from ragaudit.io.files import refuse_overwriting

        refuse_overwriting([plot], [store], option="--plot")
    problems: list = []
    points = history.trend(store, metric=metric, pipeline=pipeline, last=last, problems=problems)
    for problem in problems:
        click.echo(f"warning: {problem}", err=True)
    if not points and (metric or pipeline):
        pipelines, metrics = history.names(store)
        for option, asked, known in (("--pipeline", pipeline, pipelines), ("--metric", metric, metrics)):
            if asked and asked not in known:
                raise UsageError(f"{option}: expected one of {', '.join(sorted(known))}, found {asked!r}")
    if not points:
        raise InputError(
            f"{store}: expected recorded values, found "
            + (
                f"none readable ({len(problems)} stored values of the wrong kind, each named above)"
                if problems
                else "none"
            )
        )
    if plot:
        from ragaudit.io.files import write_atomic

        write_atomic(plot, history_text.render_svg(points))
    click.echo(history_text.render_json(points) if fmt == "json" else history_text.render_text(points, str(store)))


@main.command("metrics")
@FORMAT
def metrics_command(fmt):
    """List every metric with its level, direction, the gate checks that read it, and its definition;
    then which ΔS the gate reads, and why."""
    from ragaudit.metrics.registry import GATED_DELTA_S, METRICS

    if fmt == "json":
        click.echo(
            json.dumps(
                [
                    {
                        "name": m.name,
                        "level": m.level,
                        "higher_is_better": m.higher_is_better,
                        "gated_by": list(m.gated_by),
                        "description": m.description,
                    }
                    for m in METRICS.values()
                ],
                indent=2,
            )
        )
        return
    for m in METRICS.values():
        direction = "higher is better" if m.higher_is_better else "lower is better"
        gated = f" [gated: {', '.join(m.gated_by)}]" if m.gated_by else ""
        click.echo(f"{m.name:<20} {m.level:<9} {direction:<17} {m.description}{gated}")
    click.echo(f"\n{GATED_DELTA_S}")


@main.command("audit-log")
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--corpus", type=click.Path(path_type=Path), help="the corpus snapshot: a folder or a corpus.jsonl")
@SPANS_FROM
@click.option("--window", default="1d", show_default=True, help="window length: 30m, 1h, 1d, 7d, 2w")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), help="default: reports/audit-log-<stamp>")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="model, support, section policy, corpus")
def audit_log_command(traces, corpus, source, window, out, config_path):
    """Audit production traces without a gold set: validate every payload against the corpus
    snapshot, measure ΔS of the cited text, support and hallucinations of each answer segment,
    per time window (by retrieved_at), with index drift between windows and the worst examples.

    Writes audit_log.json, audit_log.html and rag_traces.sqlite. Exit 0: no error-severity issue
    and no drift; 1: some; 3: an input could not be read."""
    from ragaudit.auditlog import run_audit_log
    from ragaudit.report.audit_log_text import render_windows

    result = run_audit_log(traces, corpus=corpus, fmt=source, window=window, out=out, config=config_path)
    click.echo(render_windows(result.model), nl=False)
    click.echo(f"wrote {result.out}")
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    for problem in result.problems:
        click.echo(f"error: {problem}", err=True)
    sys.exit(result.exit_code)


def _register_adapters() -> None:
    from ragaudit.adapters.graphrag.cli import graphrag
    from ragaudit.release_cli import attest, plan

    main.add_command(graphrag)
    main.add_command(plan)
    main.add_command(attest)


_register_adapters()

if __name__ == "__main__":
    main()
