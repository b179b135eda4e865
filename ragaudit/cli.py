"""The `ragaudit` command: a thin click layer, and the only place that maps errors to exit codes."""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path
from typing import NoReturn

import click

from ragaudit._version import __version__
from ragaudit.cli_options import ALLOW_FOREIGN, BASELINE, FORMAT, RATE, SEED
from ragaudit.errors import InputError, RagauditError
from ragaudit.io.stdout import CLOSED_STDOUT, discard_stdout, stdout_gone

ARGV = "ragaudit.argv"


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
            if not stdout_gone():  # another pipe (a worker's, a pipeline's): an error like any other
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


def _closed_stdout() -> NoReturn:
    """The reader of stdout went away (`ragaudit codes | head -1`): end quietly, as a writer to a
    closed pipe does, with what is still buffered sent nowhere."""
    discard_stdout()
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


@main.command("run")
@click.argument("config_path", metavar="CONFIG", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), help="folder for the run directory (default: [audit] out)")
@click.option("--resume", type=click.Path(path_type=Path), help="finish an interrupted run in RUN_DIR")
@click.option("--workers", type=click.IntRange(min=1), help="parallel workers (default: [audit] workers)")
@BASELINE
@ALLOW_FOREIGN
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
    from ragaudit import api, progress
    from ragaudit.io.config import load_config

    config = load_config(config_path)
    chosen = None
    if baseline:
        from ragaudit import rundir

        chosen = api.choose_baseline(
            baseline,
            config,
            rundir.input_hashes(config),
            allow_foreign=allow_foreign_baseline,
            history_dir=Path(resume).parent if resume else out,
        )
        _tell(chosen)
    outcome = api.audit(
        config,
        out=out,
        resume=resume,
        workers=workers,
        baseline=chosen,
        gold_check=not no_gold_check,
        executor=executor,
        scheduler=scheduler,
        command=["ragaudit", *click.get_current_context().meta.get(ARGV, [])],
    )
    from ragaudit.render import run_text

    for line in run_text.notices(outcome.result, outcome.findings):
        click.echo(line, err=True)
    took = progress.elapsed()
    click.echo(run_text.throughput(outcome.result, took, progress.breakdown(took)))
    _finish(outcome.report, outcome.result.run_dir, no_gate)


def _tell(chosen) -> None:
    """What the user should know about the baseline chosen."""
    for line in chosen.warnings:
        click.echo(f"warning: {line}", err=True)
    for line in chosen.notes:
        click.echo(line, err=True)


def _finish(report, run_dir: Path, no_gate: bool) -> None:
    from ragaudit.render.markdown import render_summary
    from ragaudit.render.run_text import baseline_gaps

    for line in baseline_gaps(report.gate):
        click.echo(line, err=True)
    click.echo(render_summary(report), nl=False)
    click.echo(f"\nrun directory: {run_dir}")
    sys.exit(0 if no_gate or report.gate.passed else 1)


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--no-gate", is_flag=True, help="exit 0 whatever the gate says")
def report(run_dir, no_gate):
    """Rebuild every output of RUN_DIR from its stored traces (which are only read, never rewritten)."""
    from ragaudit import api

    built = api.report(run_dir)
    for line in built.warnings:
        click.echo(f"warning: {line}", err=True)
    _finish(built.report, built.run_dir, no_gate)


@main.command()
@click.argument("report_path", metavar="REPORT", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--config", "config_path", required=True, type=click.Path(path_type=Path), help="config with [gate]")
@BASELINE
@ALLOW_FOREIGN
@FORMAT
def gate(report_path, config_path, baseline, allow_foreign_baseline, fmt):
    """Apply the [gate] of CONFIG to a report.json. Exit 0: pass; 1: fail; 3: an unreadable report,
    or a baseline built on another gold set or corpus."""
    from ragaudit import api

    gated = api.gate(report_path, config_path, baseline=baseline, allow_foreign_baseline=allow_foreign_baseline)
    for line in gated.warnings:
        click.echo(f"warning: {line}", err=True)
    for line in gated.notes:
        click.echo(line, err=True)
    from ragaudit.render.run_text import baseline_gaps

    for line in baseline_gaps(gated.gate):
        click.echo(line, err=True)
    if fmt == "json":
        click.echo(json.dumps(gated.gate.to_json(), indent=1, sort_keys=True))
    else:
        from ragaudit.render.markdown import render_summary

        click.echo(render_summary(gated.report), nl=False)
    sys.exit(0 if gated.gate.passed else 1)


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
    from ragaudit import api
    from ragaudit.render.compare_text import render_text

    result, notes, target = api.compare(run_dirs, pairs=pairs, margin=margin, out=out)
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
@RATE
@SEED
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
    from ragaudit import api
    from ragaudit.injection.registry import fault_names
    from ragaudit.render.faults_text import render_fault_matrix

    names = None if only is None else fault_names(only)
    done = api.faults(run_dir, config=config_path, only=names, rate=rate, seed=seed, out=out)
    click.echo(render_fault_matrix(done.result), nl=False)
    click.echo(f"wrote {done.json_path} and {done.html_path}")
    sys.exit(0 if done.passed else 1)


@main.command("calibrate")
@click.argument("config_path", metavar="CONFIG", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="where to write the proposal (default: calibration.json beside the config)",
)
@RATE
@SEED
@FORMAT
def calibrate_command(config_path, out, rate, seed, fmt):
    """Propose [gate] thresholds for the gold set and corpus of CONFIG: the first step on a new
    corpus. No pipeline is called: the oracle run (the gold cited, the anchor stated), its answers
    reworded as an LLM writes them, and every fault class are built from the gold set and corpus,
    then audited. Prints per check how well it separates them and the threshold it proposes, and
    writes calibration.json; a config uses it with `[gate] from = "calibration.json"`."""
    from ragaudit import api
    from ragaudit.render.calibration_text import render_calibration

    result, target = api.calibrate(config_path, out=out, rate=rate, seed=seed)
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
    from ragaudit import api
    from ragaudit.errors import InputsChangedError

    checked = api.verify(run_dir, attestation=attestation, pubkey=pubkey)
    for note in checked.notes:
        click.echo(f"note: {note}", err=True)
    if checked.changed:
        raise InputsChangedError("; ".join(checked.changed))
    for line in checked.checked:
        click.echo(line)


def _register_adapters() -> None:
    from ragaudit.adapters.graphrag.cli import graphrag
    from ragaudit.cli_tools import COMMANDS
    from ragaudit.release_cli import attest, plan

    for command in COMMANDS:
        main.add_command(command)
    main.add_command(graphrag)
    main.add_command(plan)
    main.add_command(attest)


_register_adapters()

if __name__ == "__main__":
    main()
