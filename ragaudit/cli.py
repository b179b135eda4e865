"""The `ragaudit` command: parses, calls `ragaudit.api`, returns what to print (`ragaudit.render.said`);
its group (`ragaudit.cli_options.Group`) prints it and maps errors to exit codes."""

from __future__ import annotations

import click

import ragaudit
from ragaudit.adapters.graphrag.cli import graphrag
from ragaudit.cli_options import COUNT, DIR, FILE, PATH, Group, arg, argv, echo, flag, opt
from ragaudit.cli_tools import COMMANDS
from ragaudit.render import said

_VERBOSE = "every phase, those under a second too, and debug detail (as timestamped lines in a pipe or a file)"
_NO_GOLD_CHECK = "run even when the gold set disagrees with the corpus (its findings still go into the report; a duplicate qid still stops the run)"
_EXECUTOR = "where pipeline calls and scoring run: threads here (local), processes here, a Dask cluster (default: [executor] kind, else local)"
_PAIR = "compare PIPE_B with PIPE_A (repeatable); across two runs, PIPE_A is RUN_A's and PIPE_B RUN_B's (default: [compare] pairs, else each pipeline with the first, or with its namesake in RUN_A)"


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(ragaudit.__version__, prog_name="ragaudit")
@flag("--quiet -q", "no progress on stderr: errors, warnings and results only")
@flag("--verbose -v", _VERBOSE)
def main(quiet: bool, verbose: bool):
    """Offline, deterministic audit of retrieval-augmented generation: citation payloads, ΔS,
    coverage, λ convergence and citation match, as reports and a CI gate.

    Long phases (model load, indexing, embedding, runs, scoring, writing) show their progress on
    stderr: a live display on a terminal, timestamped lines in CI (CI set), nothing in a pipe or a
    file unless --verbose (then timestamped lines). stdout carries results only."""
    from ragaudit import progress

    if quiet and verbose:
        raise click.UsageError("use --quiet or --verbose, not both")
    progress.start_command(quiet=quiet, verbose=verbose)


@main.command("run")
@arg("config_path", metavar="CONFIG")
@opt("--out", "folder for the run directory (default: [audit] out)", PATH)
@opt("--resume", "finish an interrupted run in RUN_DIR", PATH)
@opt("--workers", "parallel workers (default: [audit] workers)", COUNT)
@opt("--baseline")
@opt("--allow-foreign-baseline")
@flag("--no-gate", "write everything but exit 0 whatever the gate says")
@flag("--no-gold-check", _NO_GOLD_CHECK)
@opt("--executor", _EXECUTOR, click.Choice(["local", "processes", "dask"]))
@opt("--scheduler", "Dask scheduler address, e.g. tcp://10.0.0.5:8786 (default: [executor] scheduler)")
def run_command(config_path, baseline, allow_foreign_baseline, no_gate, no_gold_check, **options):
    """Replay the gold set across variants, seeds and pipelines; measure, gate and report.

    The gold set is checked against the corpus first, as `ragaudit gold check` does: an error
    there stops the run (exit 3) unless --no-gold-check. A config runs code (`command` and
    `factory` pipelines): trust it like a Makefile.

    Exit 0: gate passed; 1: gate failed; 2: usage; 3: unreadable input, a gold error or a full disk;
    4: a pipeline could not start; 130/143: interrupted (finished runs kept, --resume finishes).
    """
    config = ragaudit.load_config(config_path)
    chosen = ragaudit.run_baseline(config, baseline, allow_foreign_baseline, options["out"], options["resume"])
    echo(said.baseline(chosen))
    outcome = ragaudit.audit(config, baseline=chosen, gold_check=not no_gold_check, command=argv(), **options)
    return said.run(outcome, no_gate)


@main.command()
@arg("run_dir", DIR)
@flag("--no-gate", "exit 0 whatever the gate says")
def report(run_dir, no_gate):
    """Rebuild every output of RUN_DIR from its stored traces (which are only read, never rewritten)."""
    return said.rebuilt(ragaudit.report(run_dir), no_gate)


@main.command()
@arg("report_path", FILE, metavar="REPORT")
@opt("--config config_path", "config with [gate]", PATH, required=True)
@opt("--baseline")
@opt("--allow-foreign-baseline")
@opt("--format")
def gate(report_path, config_path, fmt, **options):
    """Apply the [gate] of CONFIG to a report.json. Exit 0: pass; 1: fail; 3: an unreadable report,
    or a baseline built on another gold set or corpus."""
    return said.gated(ragaudit.gate(report_path, config_path, **options), fmt)


@main.command("compare")
@arg("run_dirs", DIR, metavar="RUN_A [RUN_B]", nargs=-1, required=True)
@opt("--pair pairs", _PAIR, multiple=True, metavar="PIPE_A:PIPE_B")
@opt("--margin", "non-inferiority margin in (0, 1) (default: [compare] margin, else 0.02)", float)
@opt("--out", "where compare.json/html go (default: the first run directory)", DIR)
@opt("--format")
def compare_command(run_dirs, fmt, **options):
    """Is B better, worse, or no worse than A? Per pair of pipelines and metric: means, the paired
    difference with a 95% CI, p-values (exact sign test for per-run 0/1 outcomes, sign-flip permutation
    otherwise; Holm-adjusted), a non-inferiority test against the margin, win/tie/loss, the noise floor
    of pipelines that sample, λ transitions, and the smallest change in a rate the questions can
    detect. Writes compare.json and compare.html.

    Exit 0; 2: an unknown pipeline in --pair or a margin outside (0, 1); 3: an unreadable report."""
    return said.compared(*ragaudit.compare(run_dirs, **options), fmt)


@main.command()
@arg("run_dir", DIR)
@opt("--config config_path", "gate with this config's [gate] (default: the run's own config)", PATH)
@opt("--only", "comma-separated fault names (default: all, controls included)")
@opt("--rate")
@opt("--seed")
@opt("--out", "where faults.json/html go (default: RUN_DIR)", DIR)
def faults(run_dir, config_path, **options):
    """Inject each fault class into a share of the questions of a finished run and gate every faulty
    copy as `ragaudit report` would, alone and against the clean run as its baseline: does the gate
    pass the clean run and the negative controls (llm_rewrite), and fail every fault?

    No pipeline is called: every fault is a transformation of the recorded traces. Writes faults.json
    and faults.html. Exit 0: the clean run and the controls pass and every fault fails the gate
    against the baseline; 1 otherwise.
    """
    return said.faults(ragaudit.faults(run_dir, config=config_path, **options))


@main.command("calibrate")
@arg("config_path", FILE, metavar="CONFIG")
@opt("--out", "where to write the proposal (default: calibration.json beside the config)", FILE)
@opt("--rate")
@opt("--seed")
@opt("--format")
def calibrate_command(config_path, fmt, **options):
    """Propose [gate] thresholds for the gold set and corpus of CONFIG: the first step on a new
    corpus. No pipeline is called: the oracle run (the gold cited, the anchor stated), its answers
    reworded as an LLM writes them, and every fault class are built from the gold set and corpus,
    then audited. Prints per check how well it separates them and the threshold it proposes, and
    writes calibration.json; a config uses it with `[gate] from = "calibration.json"`."""
    return said.calibrated(*ragaudit.calibrate(config_path, **options), fmt)


@main.command()
@arg("run_dir", DIR)
@opt("--attestation", "also check every file this attestation (ragaudit attest) lists against its sha256", FILE)
@opt("--pubkey", "and check the attestation's signature with this ed25519 public key (PEM)", FILE)
def verify(run_dir, **options):
    """Check that the inputs (gold set, corpus, config), the traces and every output of RUN_DIR are
    unchanged since the run; with --attestation, that every file it lists has its attested sha256,
    and with --pubkey that it is signed with that key. Exit 0: unchanged; 5: changed or a signature
    that does not verify (each named, corpus documents too); 3: no run directory, a damaged manifest,
    or a damaged or foreign attestation."""
    return said.verified(ragaudit.verify(run_dir, **options))


for command in (*COMMANDS, graphrag):
    main.add_command(command)

if __name__ == "__main__":
    main()
