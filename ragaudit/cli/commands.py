"""The `ragaudit` command line: a command parses, calls `ragaudit.flows.api` and returns what its Group prints (a `Said`)."""

import sys
from pathlib import Path
from typing import Any

import click

import ragaudit
from ragaudit.cli.options import ARGV, COUNT, DIR, FILE, PATH, SPANS_HELD, Group, arg, flag, opt, shared, show
from ragaudit.core import progress
from ragaudit.core.types import DEFAULT_MODEL, EXECUTORS, SPAN_FORMATS
from ragaudit.outputs.render import issues_text, said


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(ragaudit.__version__, prog_name="ragaudit")
@flag("--quiet -q", "no progress on stderr: errors, warnings and results only")
@flag("--verbose -v", "every phase, those under a second too, and debug detail (as timestamped lines in a pipe or a file)")  # fmt: skip
def main(quiet: bool, verbose: bool) -> None:
    """Offline, deterministic audit of retrieval-augmented generation: citation payloads, ΔS, coverage, λ convergence
    and citation match, as reports and a CI gate. Progress goes to stderr (a live display on a terminal, timestamped
    lines in CI or with --verbose); stdout carries results only."""
    if quiet and verbose:
        raise click.UsageError("use --quiet or --verbose, not both")
    progress.start_command(quiet=quiet, verbose=verbose)


@main.command("run")
@arg("config_path", metavar="CONFIG")
@opt("--out", "folder for the run directory (default: [audit] out)", PATH)
@opt("--resume", "finish an interrupted run in RUN_DIR", PATH)
@opt("--workers", "parallel workers (default: [audit] workers)", COUNT)
@shared("--baseline", "--allow-foreign-baseline")
@flag("--no-gate", "write everything but exit 0 whatever the gate says")
@flag("--no-gold-check", "run even when the gold set disagrees with the corpus (its findings still go into the report; a duplicate qid still stops the run)")  # fmt: skip
@opt("--executor", "where pipeline calls and scoring run: threads here (local), processes here, a Dask cluster (default: [executor] kind, else local)", click.Choice(list(EXECUTORS)))  # fmt: skip
@opt("--scheduler", "Dask scheduler address, e.g. tcp://10.0.0.5:8786 (default: [executor] scheduler)")
def run_command(config_path: Path, baseline: Path | None, allow_foreign_baseline: bool, no_gate: bool, no_gold_check: bool, **options: Any) -> said.Said:  # fmt: skip
    """Replay the gold set across variants, seeds and pipelines; measure, gate and report (the gold set is checked
    first, as `gold check` does). A config runs code: trust it like a Makefile. Exit 0: gate passed; 1: failed;
    2: usage; 3: bad input, a gold error or a full disk; 4: a pipeline could not start; 130/143: interrupted."""
    config = ragaudit.load_config(config_path)
    chosen = ragaudit.run_baseline(config, baseline, allow_foreign_baseline, options["out"], options["resume"])
    show(said.baseline(chosen))
    options.update(baseline=chosen, gold_check=not no_gold_check, command=click.get_current_context().meta[ARGV])
    return said.run(ragaudit.audit(config, **options), no_gate)


@main.command()
@arg("run_dir", DIR)
@flag("--no-gate", "exit 0 whatever the gate says")
def report(run_dir: Path, no_gate: bool) -> said.Said:
    """Rebuild every output of RUN_DIR from its stored traces (which are only read, never rewritten)."""
    return said.rebuilt(ragaudit.report(run_dir), no_gate)


@main.command()
@arg("report_path", FILE, metavar="REPORT")
@opt("--config config_path", "config with [gate]", PATH, required=True)
@shared("--baseline", "--allow-foreign-baseline", "--format")
def gate(report_path: Path, config_path: Path, fmt: str, **options: Any) -> said.Said:
    """Apply the [gate] of CONFIG to a report.json. Exit 0: pass; 1: fail; 3: an unreadable report, or a baseline built
    on another gold set or corpus."""
    return said.gated(ragaudit.gate(report_path, config_path, **options), fmt)


@main.command("compare")
@arg("run_dirs", DIR, metavar="RUN_A [RUN_B]", nargs=-1, required=True)
@opt("--pair pairs", "compare PIPE_B with PIPE_A (repeatable); across two runs, PIPE_A is RUN_A's and PIPE_B RUN_B's (default: [compare] pairs, else each pipeline with the first, or with its namesake in RUN_A)", multiple=True, metavar="PIPE_A:PIPE_B")  # fmt: skip
@opt("--margin", "non-inferiority margin in (0, 1) (default: [compare] margin, else 0.02)", float)
@opt("--out", "write compare.json/html to this folder, never a run directory (default: none written)", DIR)
@shared("--format")
def compare_command(run_dirs: tuple[Path, ...], fmt: str, **options: Any) -> said.Said:
    """Is B better, worse, or no worse than A? Per pair of pipelines and metric: means, the paired difference with a 95%
    CI, p-values (exact sign test for per-run 0/1 outcomes, sign-flip permutation otherwise; Holm-adjusted), a
    non-inferiority test against the margin, win/tie/loss, the noise floor of pipelines that sample, λ transitions,
    and the smallest change in a rate the questions can detect. With --out, writes compare.json and compare.html.

    Exit 0; 2: an unknown --pair pipeline, a margin outside (0, 1), --out a run directory; 3: an unreadable report."""
    return said.compared(*ragaudit.compare(run_dirs, **options), fmt)


@main.command()
@arg("run_dir", DIR)
@opt("--config config_path", "gate with this config's [gate] (default: the run's own config)", PATH)
@opt("--only", "comma-separated fault names (default: all, controls included)")
@shared("--rate", "--seed")
@opt("--out", "where faults.json/html go (default: RUN_DIR)", DIR)
def faults(run_dir: Path, config_path: Path | None, **options: Any) -> said.Said:
    """Inject each fault class into a share of the questions of a finished run and gate every faulty copy as `ragaudit
    report` would, alone and against the clean run as its baseline: does the gate pass the clean run and the negative
    controls (llm_rewrite), and fail every fault?

    No pipeline is called: every fault is a transformation of the recorded traces. Writes faults.json and faults.html.
    Exit 0: the clean run and the controls pass and every fault fails the gate against the baseline; 1 otherwise."""
    return said.faults(ragaudit.faults(run_dir, config=config_path, **options))


@main.command()
@arg("config_path", FILE, metavar="CONFIG")
@opt("--only", "comma-separated pipeline names (default: every pipeline)")
@opt("--sample", "probe N gold questions, a seeded sample (default: all)", COUNT)
@opt("--edits", "comma-separated edit kinds: number, entity, negation (default: all)")
@opt("--resume", "finish an interrupted probe in PROBE_DIR (the probe directory goes to [audit] out)", DIR)
def probe(config_path: Path, **options: Any) -> said.Said:
    """Does each pipeline's answer follow its source? Asks each question again on a corpus copy with its anchor's key
    fact edited, and with the anchor's section left out of retrieval; writes a probe directory with report.json.
    Exit 0: faithful_min passes or is not set; 1: it fails; 2: usage; 3: bad input; 4: a pipeline could not start."""
    return said.probed(ragaudit.probe(config_path, **options))


@main.command("calibrate")
@arg("config_path", FILE, metavar="CONFIG")
@opt("--out", "where to write the proposal (default: calibration.json beside the config)", PATH)
@opt("--labels", "fit the claim thresholds to these labels of RUN's runs (ragaudit label) instead", FILE)
@opt("--run", "the run directory the labels are of (with --labels)", DIR)
@shared("--rate", "--seed", "--format")
def calibrate_command(config_path: Path, fmt: str, labels: Path | None, run: Path | None, **options: Any) -> said.Said:
    """Propose [gate] thresholds for the gold set and corpus of CONFIG (checked first as `run` checks them: a gold error
    exits 3). No pipeline is called: the oracle run (the gold cited, the anchor stated), its LLM-style rewrite and every
    fault class are built from the gold set and corpus, then audited. Prints per check how well it separates them and
    the threshold it proposes, and writes calibration.json; a config uses it with `[gate] from = "calibration.json"`.
    With --labels: fit the claim thresholds to your labels instead (too few labels: exit 1, nothing fitted)."""
    if labels is not None or run is not None:
        return said.fitted(ragaudit.calibrate_labels(config_path, labels, run, **options), fmt)
    return said.calibrated(*ragaudit.calibrate(config_path, **options), fmt)


@main.command()
@arg("run_dir", DIR)
@opt("--labels", "the labels file to append to (default: labels.jsonl beside RUN_DIR)", FILE)
@opt("--sample", "label at most N runs", COUNT)
@opt("--by", "which runs: random (a sample that can correct the good-run rate), stratified (each pipeline and verdict in turn), uncertainty (nearest a threshold first)", click.Choice(["random", "stratified", "uncertainty"]), default="random", show_default=True)  # fmt: skip
@opt("--seed", "seed of the random and stratified orders", int, default=0, show_default=True)
@opt("--labeller", "your name in each label (default: $USER)")
@opt("--port", "port on 127.0.0.1 (default: any free one)", click.IntRange(0, 65535), default=0)
@flag("--no-open", "print the page's address without opening a browser")
def label(run_dir: Path, port: int, no_open: bool, **options: Any) -> said.Said:
    """Label RUN_DIR's runs yourself, blind to ragaudit's verdict until each is labelled, on a page served on this
    machine (keys c, s, t: correct, supported, citation; Enter saves). Labels are appended, never rewritten."""
    session = ragaudit.open_labels(run_dir, **options)
    show(said.labelling(session))
    opened = ragaudit.serve_labels(
        session, port=port, browser=not no_open, opened=lambda url: show(said.label_page(url))
    )
    return said.labelled(opened)


@main.command()
@arg("run_dir", DIR)
@opt("--labels", "the labels file (ragaudit label)", FILE, required=True)
@shared("--format")
def agree(run_dir: Path, labels: Path, fmt: str) -> said.Said:
    """How often ragaudit's verdict on RUN_DIR's runs agrees with your LABELS, per dimension, and where they differ.
    Exit 0; 3: a labels file of another gold set or run, or unreadable."""
    return said.agreed(ragaudit.agree(run_dir, labels), fmt)


@main.command()
@arg("run_dir", DIR)
@opt("--attestation", "also check every file this attestation (ragaudit attest) lists against its sha256", FILE)
@opt("--pubkey", "and check the attestation's signature with this ed25519 public key (PEM)", FILE)
def verify(run_dir: Path, **options: Any) -> said.Said:
    """Check that the inputs (gold set, corpus, config), the traces and every output of RUN_DIR are unchanged since the
    run; with --attestation, that every file it lists has its attested sha256, and with --pubkey that it is signed
    with that key. Exit 0: unchanged; 5: changed or a signature that does not verify (each named, corpus documents
    too); 3: no run directory, a damaged manifest, or a damaged or foreign attestation."""
    return said.verified(ragaudit.verify(run_dir, **options))


@main.command()
@arg("traces", nargs=-1, required=True)
@opt("--corpus", "corpus directory or corpus.jsonl (enables corpus rules)", PATH)
@opt("--config", "config: section policy, offset_unit, corpus", PATH)
@opt("--workers", "processes that share large inputs, this one included (default: [audit] workers of --config when above 1, else the CPUs)", COUNT)  # fmt: skip
@opt("--executor", "dask: shard the inputs over a Dask cluster (they must be readable at the same paths there)", click.Choice([k for k, e in EXECUTORS.items() if e.shards]), default="local", show_default=True)  # fmt: skip
@opt("--scheduler", "Dask scheduler address, e.g. tcp://10.0.0.5:8786")
@shared("--from", "--live-index", "--format")
def validate(traces: tuple[Path, ...], fmt: str, **options: Any) -> said.Said:
    """Check every citation payload of trace files (with --from, production spans joined as `ingest` joins them)
    against the rules of `ragaudit codes`. Exit 0: no error-severity issue; 1: error issues; 3: unreadable input."""
    return said.validated(ragaudit.validate(traces, **options), sys.stdout, fmt)


@main.command(
    help=f"""Join production spans into ragaudit traces (docs/reference.md §10), one per trace id holding a RETRIEVER
    span. FORMAT: {SPANS_HELD}. Exit 0: every input read; 3: an input or a line could not be read (the readable lines'
    traces are written all the same)."""
)
@arg("source", click.Choice(SPAN_FORMATS), metavar="FORMAT")
@arg("inputs", metavar="INPUT...", nargs=-1, required=True)
@opt("--out", "the traces.jsonl to write", PATH, required=True)
@opt("--config-name", "every trace's config (default: the spans' service name)")
@opt("--window", "spans of unfinished traces held at most; spans of one trace further apart are reported late", COUNT, default=20_000, show_default=True)  # fmt: skip
def ingest(source: str, inputs: tuple[Path, ...], out: Path, **options: Any) -> said.Said:
    return said.ingested(ragaudit.ingest(source, inputs, out, **options))


@main.group()
def gold() -> None:
    """Gold-set tools."""


@gold.command("check")
@arg("gold_path", metavar="GOLD")
@shared("--corpus")
@opt("--paraphrases", "variants (question + paraphrases) each item must have", COUNT, default=3, show_default=True)
@opt("--model", "embedding model for the dS(question, anchor) warning")
@flag("--no-distance", "skip the dS(question, anchor) warning (no model loaded)")
@opt("--config", "config whose [gold] ignore and severity apply", PATH)
@shared("--format")
def gold_check(gold_path: Path, corpus: Path, no_distance: bool, fmt: str, **options: Any) -> said.Said:
    """Check that each gold item is answerable from the corpus it names.

    Exit 0: no error; 1: error findings; 3: the gold set or corpus could not be read."""
    found = ragaudit.check_gold(gold_path, corpus, distance=not no_distance, **options)
    return said.gold_checked(found, sys.stdout, fmt)


@gold.command("anchor")
@shared("--corpus")
@opt("--question", "the gold item's question", required=True)
@opt("--answer", "the answer's text, as the corpus has it or close to it", required=True)
@opt("--qid", "the item's qid (default: the question's slug)")
@opt("--paraphrase paraphrases", "a paraphrase of the question (repeatable)", multiple=True)
@opt("--model", f"embedding model for the similarity search (default: {DEFAULT_MODEL})")
def gold_anchor(corpus: Path, question: str, answer: str, model: str | None, **options: Any) -> said.Said:
    """Find where ANSWER is in the corpus (exact, normalised, or the closest sentences by the embedding model): the
    candidates on stderr, a gold line anchored at the first on stdout. Exit 0; 1: nothing found; 3: unreadable."""
    return said.anchored(ragaudit.anchor(corpus, question, answer, model=model), question, answer, **options)


@gold.command("reanchor")
@arg("gold_path", metavar="GOLD")
@opt("--corpus", "the edited corpus", PATH, required=True)
@opt("--from old", "the corpus the gold set was anchored in", PATH)
@opt("--out", "the new gold set to write", PATH, required=True)
@opt("--min-ratio", "difflib ratio a fuzzy match must reach to move an anchor", click.FloatRange(0.0, 1.0, min_open=True), default=0.9, show_default=True)  # fmt: skip
def gold_reanchor(gold_path: Path, corpus: Path, out: Path, **options: Any) -> said.Said:
    """Move the anchors of GOLD to where their text is in the edited corpus (same text, else the most similar
    sentences); items that cannot move are listed and left out. Exit 0; 1: some could not move; 3: unreadable input."""
    return said.reanchored(ragaudit.reanchor(gold_path, corpus, out, **options))


@main.command()
@arg("traces", nargs=-1, required=True)
@opt("--qid", "only these questions (repeatable)", multiple=True)
@opt("--base-url", "link knowledge-base files under this URL")
def cite(traces: tuple[Path, ...], qid: tuple[str, ...], base_url: str | None) -> None:
    """Render the runs of trace files as markdown: each answer with claim-level footnotes, then its sources."""
    for text in ragaudit.cite(traces, qids=qid, base_url=base_url):
        click.echo(text)


@main.command()
@shared("--format")
def codes(fmt: str) -> said.Said:
    """List every issue code with its severity, meaning and fix."""
    return said.listing(issues_text.codes(fmt))


@main.command("history")
@opt("--store", "the history file (default: that of --config's runs)", PATH)
@opt("--config", "config whose runs' history to read", PATH)
@opt("--metric", "only this metric (e.g. citation_match)")
@opt("--pipeline", "only this pipeline")
@opt("--last", "only the last N runs", COUNT)
@opt("--plot", "also draw the trends to an SVG file", PATH)
@flag("--all every", "every recorded metric, not only those the gate reads")
@opt("--rename", "record pipeline OLD's runs under NEW first, joining the two series", metavar="OLD=NEW")
@shared("--format")
def history_command(fmt: str, **options: Any) -> said.Said:
    """Trends across recorded runs ($RAGAUDIT_HISTORY, else [history] path, else history.sqlite beside the run
    directories): each pipeline's metrics run by run, with a sparkline. Exit 0; 3: the history is missing or damaged."""
    return said.history(ragaudit.trends(**options), fmt)


@main.command("metrics")
@shared("--format")
@opt("--config config_path", "config whose [metrics] k the ranking metrics show", PATH)
def metrics_command(fmt: str, config_path: Path | None) -> said.Said:
    """List every metric with its level, direction, the gate checks that read it, and its definition; then which ΔS the
    gate reads, and why. The ranking metrics show their cutoff (hit@5)."""
    return said.listing(issues_text.metrics(fmt, config_path))


@main.command("audit-log")
@arg("traces", nargs=-1, required=True)
@opt("--corpus", "the corpus snapshot: a folder or a corpus.jsonl", PATH)
@shared("--from", "--live-index")
@opt("--window", "window length: 30m, 1h, 1d, 7d, 2w", default="1d", show_default=True)
@opt("--out", "default: reports/audit-log-<stamp>", DIR)
@opt("--config", "model, support, section policy, corpus, [audit_log] thresholds", PATH)
@opt("--baseline", "a window of this log (2026-11-20) or an earlier audit_log.json that every window is compared with")
def audit_log_command(traces: tuple[Path, ...], source: str, **options: Any) -> said.Said:
    """Audit production traces without a gold set, per time window: payloads against the corpus snapshot, ΔS, support,
    hallucinations, index drift, regressions window over window, the worst examples. Exit 0: no error issue, no drift,
    no regression; 1: some; 3: bad input."""
    return said.audit_log(ragaudit.audit_log(traces, fmt=source, **options))


@main.command("plan")
@arg("gold_path", metavar="GOLD")
@opt("--variants", "variants run per question", COUNT, default=3, show_default=True)
@opt("--seeds", "seeds run per variant", COUNT, default=1, show_default=True)
@opt("--effect", "a target change in a rate, e.g. 0.03: how many questions it needs", float)
@opt("--discordance", "assumed share of runs whose outcome differs between the two configurations", float, default=0.10, show_default=True)  # fmt: skip
@opt("--icc", "assumed correlation of that difference between runs of one question (1: a question moves as a unit)", float, default=0.5, show_default=True)  # fmt: skip
@shared("--format")
def plan(gold_path: Path, fmt: str, **options: Any) -> said.Said:
    """The smallest change in each rate a comparison of two configurations on GOLD can detect at 80% power and α = 0.05
    (paired exact sign tests); with --effect, the questions it needs. Exit 0; 2: out of range; 3: unreadable gold."""
    return said.planned(ragaudit.plan_gold(gold_path, **options), fmt)


@main.command()
@arg("run_dir", DIR)
@opt("--key", "sign with this ed25519 private key (PEM; an encrypted one takes its passphrase from $RAGAUDIT_KEY_PASSWORD)", FILE)  # fmt: skip
@opt("--out", "the attestation file (default: RUN_DIR/attestation.intoto.jsonl)", PATH)
def attest(run_dir: Path, key: Path | None, out: Path | None) -> said.Said:
    """Write a release attestation of RUN_DIR (in-toto Statement v1: every file with its sha256, the input hashes, the
    gate's checks, versions and command; with --key, a signed DSSE envelope). Exit 0; 3: no run directory, a damaged
    manifest or report, an unreadable key, an unwritable --out; 5: the run changed since it ran."""
    return said.attested(ragaudit.attest_run(run_dir, key=key, out=out), signed=key is not None)


@main.group(cls=Group)
def graphrag() -> None:
    """Audit answers of a GraphRAG index: citations → text units → documents."""


@graphrag.command("trace")
@arg("output_dir")
@opt("--answer answer_file", "the answer: text/markdown, JSON ({'response': ...}) or a notebook (.ipynb) with recorded answers", PATH, required=True)  # fmt: skip
@opt("--format fmt", "markdown for people, json for tools", click.Choice(["markdown", "json"]), default="markdown", show_default=True)  # fmt: skip
@flag("--verify", "score each claim against the text units of each of its sources")
@opt("--threshold", "support at or above which a source counts as supporting (default 0.5)", click.FloatRange(0, 1))
@opt("--model", "encoder for --verify", default=DEFAULT_MODEL, show_default=True)
def graphrag_trace(output_dir: Path, answer_file: Path, **options: Any) -> said.Said:
    """Resolve every [Data: …] citation of the answer(s) in ANSWER against OUTPUT_DIR.

    Exit 0 when every cited id resolves to a text unit, 1 when some are dangling, 3 when an
    input is unreadable.
    """
    from ragaudit.adapters.graphrag.render import traced

    return said.graphrag_traced(*traced(output_dir, answer_file, **options))
