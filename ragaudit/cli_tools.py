"""The `ragaudit` commands that check, list and attest rather than audit: validate, ingest, gold,
cite, codes, metrics, history, audit-log, plan, attest. Registered on the group by `ragaudit.cli`."""

from __future__ import annotations

import sys

import click

import ragaudit
from ragaudit.cli_options import COUNT, DIR, FILE, PATH, SPAN_FORMATS, Group, arg, flag, opt
from ragaudit.render import issues_text, said

_SHARE = "processes that share large inputs (default: the CPUs, at most 8; 1: this process alone)"
_DASK = "dask: shard the inputs over a Dask cluster (they must be readable at the same paths there)"
_WINDOW = "spans of unfinished traces held at most; spans of one trace further apart are reported late"
_RATIO = "difflib ratio a fuzzy match must reach to move an anchor"
_DISCORDANCE = "assumed share of runs whose outcome differs between the two configurations"
_ICC = "assumed correlation of that difference between runs of one question (1: a question moves as a unit)"
_KEY = "sign with this ed25519 private key (PEM; an encrypted one takes its passphrase from $RAGAUDIT_KEY_PASSWORD)"


@click.command()
@arg("traces", nargs=-1, required=True)
@opt("--corpus", "corpus directory or corpus.jsonl (enables corpus rules)", PATH)
@opt("--config", "config: section policy, offset_unit, corpus", PATH)
@opt("--workers", _SHARE, COUNT)
@opt("--executor", _DASK, click.Choice(["local", "dask"]), default="local", show_default=True)
@opt("--scheduler", "Dask scheduler address, e.g. tcp://10.0.0.5:8786")
@opt("--from")
@opt("--format")
def validate(traces, fmt, **options):
    """Check every citation payload of trace files against the rules of `ragaudit codes`.
    With --from, the inputs are production spans, joined into traces as `ragaudit ingest` joins
    them (read in this process).

    Exit 0: no error-severity issue; 1: error issues found; 3: an input could not be read.
    """
    found = ragaudit.validate(traces, **options)
    issues_text.stream_validation(found, sys.stdout, fmt=fmt)
    return said.issues(found, fmt, found.warnings)


@click.command()
@arg("source", click.Choice(SPAN_FORMATS), metavar="FORMAT")
@arg("inputs", metavar="INPUT...", nargs=-1, required=True)
@opt("--out", "the traces.jsonl to write", FILE, required=True)
@opt("--config-name", "every trace's config (default: the spans' service name)")
@opt("--window", _WINDOW, COUNT, default=20_000, show_default=True)
def ingest(source, inputs, out, **options):
    """Join production spans into ragaudit traces (docs/reference.md §10): one trace per trace id that holds a
    RETRIEVER span. FORMAT: otlp (OTLP JSON lines or document, .gz too), phoenix (a Phoenix span
    export, parquet or JSON lines), langfuse (a Langfuse observations export, JSON or JSON lines).

    A trace's spans may come in any order, across lines, files and services; a span of a trace
    already written (further than --window from the rest) is a late span: a warning, left out.

    Exit 0: every input read; 3: an input or a line of one could not be read (each on stderr;
    the traces of the readable lines are written all the same).
    """
    return said.ingested(ragaudit.ingest(source, inputs, out, **options))


@click.group(cls=Group)
def gold():
    """Gold-set tools."""


@gold.command("check")
@arg("gold_path", metavar="GOLD")
@opt("--corpus")
@opt("--paraphrases", "variants (question + paraphrases) each item must have", COUNT, default=3, show_default=True)
@opt("--model", "embedding model for the dS(question, anchor) warning")
@flag("--no-distance", "skip the dS(question, anchor) warning (no model loaded)")
@opt("--format")
def gold_check(gold_path, corpus, no_distance, fmt, **options):
    """Check that each gold item is answerable from the corpus it names.

    Exit 0: no error; 1: error findings; 3: the gold set or corpus could not be read.
    """
    found = ragaudit.check_gold(gold_path, corpus, distance=not no_distance, **options)
    issues_text.write_checked(found, sys.stdout, fmt=fmt)
    return said.issues(found, fmt)


@gold.command("anchor")
@opt("--corpus")
@opt("--question", "the gold item's question", required=True)
@opt("--answer", "the answer's text, as the corpus has it or close to it", required=True)
@opt("--qid", "the item's qid (default: the question's slug)")
@opt("--paraphrase paraphrases", "a paraphrase of the question (repeatable)", multiple=True)
@opt("--model", "embedding model for the similarity search (default: all-MiniLM-L6-v2)")
def gold_anchor(corpus, question, answer, model, **options):
    """Find where ANSWER is in the corpus: candidate anchor spans on stderr, each labelled how it was
    found (exact, normalised: whitespace, case and markup folded, similar: the closest sentences by
    the embedding model), and a gold line anchored at the first on stdout.

    Exit 0: a gold line printed; 1: nothing found; 2: usage; 3: the corpus could not be read.
    """
    return said.anchored(
        ragaudit.anchor(corpus, question, answer, model=model), question=question, answer=answer, **options
    )


@gold.command("reanchor")
@arg("gold_path", metavar="GOLD")
@opt("--corpus", "the edited corpus", PATH, required=True)
@opt("--from old", "the corpus the gold set was anchored in", PATH)
@opt("--out", "the new gold set to write", FILE, required=True)
@opt("--min-ratio", _RATIO, click.FloatRange(0.0, 1.0, min_open=True), default=0.9, show_default=True)
def gold_reanchor(gold_path, corpus, out, **options):
    """Move the anchors of GOLD to where their text is in the edited corpus: kept where it still
    is, moved to the same text elsewhere, or to the most similar sentences (fuzzy, with the ratio);
    each item that cannot be moved is listed with the reason and left out of --out.

    Exit 0: every item stayed or moved; 1: some could not be moved; 3: an input could not be read.
    """
    from ragaudit.goldtools.reanchor import reanchor_file

    return said.reanchored(*reanchor_file(gold_path, corpus, out, **options))


@click.command()
@arg("traces", nargs=-1, required=True)
@opt("--qid", "only these questions (repeatable)", multiple=True)
@opt("--base-url", "link knowledge-base files under this URL")
def cite(traces, qid, base_url):
    """Render the runs of trace files as markdown: each answer with claim-level footnotes, then its sources."""
    from ragaudit.citations import render_traces

    for text in render_traces(traces, qids=qid, base_url=base_url):
        click.echo(text)


@click.command()
@opt("--format")
def codes(fmt):
    """List every issue code with its severity, meaning and fix."""
    return said.Said().out(issues_text.codes(fmt))


@click.command("history")
@opt("--store", "the history file (default: that of --config's runs)", PATH)
@opt("--config", "config whose runs' history to read", PATH)
@opt("--metric", "only this metric (e.g. citation_match)")
@opt("--pipeline", "only this pipeline")
@opt("--last", "only the last N runs", COUNT)
@opt("--plot", "also draw the trends to an SVG file", FILE)
@opt("--format")
def history_command(fmt, **options):
    """Trends across recorded runs: each pipeline's metrics, run by run (oldest first), with a
    sparkline, the time, the git commit, the run's verdict and the pipeline's gate.

    Every `ragaudit run` records its summary in a history file: $RAGAUDIT_HISTORY, else
    [history] path, else history.sqlite beside the run directories (--config's [audit] out, else
    ./reports). Exit 0; 3 when the history is missing or damaged."""
    return said.history(ragaudit.trends(**options), fmt)


@click.command("metrics")
@opt("--format")
@opt("--config config_path", "config whose [metrics] k the ranking metrics show", PATH)
def metrics_command(fmt, config_path):
    """List every metric with its level, direction, the gate checks that read it, and its definition;
    then which ΔS the gate reads, and why. The ranking metrics show their cutoff (hit@5)."""
    return said.Said().out(issues_text.metrics(fmt, config_path))


@click.command("audit-log")
@arg("traces", nargs=-1, required=True)
@opt("--corpus", "the corpus snapshot: a folder or a corpus.jsonl", PATH)
@opt("--from")
@opt("--window", "window length: 30m, 1h, 1d, 7d, 2w", default="1d", show_default=True)
@opt("--out", "default: reports/audit-log-<stamp>", DIR)
@opt("--config", "model, support, section policy, corpus", PATH)
def audit_log_command(traces, source, **options):
    """Audit production traces without a gold set: validate every payload against the corpus
    snapshot, measure ΔS of the cited text, support and hallucinations of each answer segment,
    per time window (by retrieved_at), with index drift (between windows and within one) and the
    worst examples.

    Writes audit_log.json, audit_log.html and rag_traces.sqlite. Exit 0: no error-severity issue
    and no drift; 1: some; 3: an input could not be read."""
    from ragaudit.auditlog import run_audit_log

    return said.audit_log(run_audit_log(traces, fmt=source, **options))


@click.command("plan")
@arg("gold_path", metavar="GOLD")
@opt("--variants", "variants run per question", COUNT, default=3, show_default=True)
@opt("--seeds", "seeds run per variant", COUNT, default=1, show_default=True)
@opt("--effect", "a target change in a rate, e.g. 0.03: how many questions it needs", float)
@opt("--discordance", _DISCORDANCE, float, default=0.10, show_default=True)
@opt("--icc", _ICC, float, default=0.5, show_default=True)
@opt("--format")
def plan(gold_path, fmt, **options):
    """How small a change in each rate (correct, citation match, coverage pass, grounded) a comparison
    of two configurations on GOLD can detect at 80% power and α = 0.05, paired, with exact sign tests
    as `compare` runs them; with --effect, how many questions that change needs.

    Exit 0; 2: a parameter out of range; 3: an unreadable gold set."""
    from ragaudit import power

    return said.planned(power.plan_gold(gold_path, **options), fmt)


@click.command()
@arg("run_dir", DIR)
@opt("--key", _KEY, FILE)
@opt("--out", "the attestation file (default: RUN_DIR/attestation.intoto.jsonl)", FILE)
def attest(run_dir, key, out):
    """Write a release attestation of RUN_DIR: an in-toto Statement v1 whose subject lists every file
    of the run with its sha256, and whose predicate holds the input hashes (gold set, corpus, config,
    traces, models, indexes), the gate's verdict, each check with its threshold and its source, the
    versions and the command of the run. With --key, a DSSE envelope signed with it. Check it with
    `ragaudit verify RUN_DIR --attestation FILE [--pubkey PUB.pem]`.

    Exit 0; 3: no run directory, a damaged manifest or report, an unreadable key; 5: the run
    changed since it ran (nothing is attested)."""
    from ragaudit import attest as attestation

    return said.attested(*attestation.attest(run_dir, key=key, out=out), signed=key is not None)


COMMANDS = (validate, ingest, gold, cite, codes, history_command, metrics_command, audit_log_command, plan, attest)
