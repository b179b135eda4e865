"""The `ragaudit` commands that check and list rather than audit: validate, ingest, gold check,
cite, codes, metrics, history, audit-log. Registered on the `ragaudit` group by `ragaudit.cli`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ragaudit.cli_options import FORMAT, SPAN_FORMATS, SPANS_FROM
from ragaudit.errors import InputError, UsageError


@click.command()
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
    help="processes that share large inputs (default: [audit] workers of --config, else 1: this process alone)",
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
@click.option(
    "--live-index", is_flag=True, help="with --from: warn missing_live_index for spans without the live index"
)
@FORMAT
def validate(traces, corpus, config_path, workers, executor, scheduler, source, live_index, fmt):
    """Check every citation payload of trace files against the rules of `ragaudit codes`.
    With --from, the inputs are production spans, joined into traces as `ragaudit ingest` joins
    them (read in this process).

    Exit 0: no error-severity issue; 1: error issues found; 3: an input could not be read.
    """
    from ragaudit.checking import validate as check
    from ragaudit.progress import phase
    from ragaudit.render import issues_text

    found = check(
        traces,
        corpus=corpus,
        config=config_path,
        workers=workers,
        executor=executor,
        scheduler=scheduler,
        source=source,
        live_index=live_index,
    )
    with found, phase("validating", unit="records", count=lambda: found.records):
        issues_text.write_issues(
            found, sys.stdout, fmt=fmt, records_of=lambda: found.records, counts_of=lambda: found.counts
        )
    if fmt == "text":
        click.echo(issues_text.summary(found.records, found.counts))
    echo_problems(found.warnings, found.problems)
    sys.exit(InputError.exit_code if found.problems else 1 if found.errors else 0)


def echo_problems(warnings, problems) -> None:
    for line in warnings:
        click.echo(f"warning: {line}", err=True)
    for line in problems:
        click.echo(f"error: {line}", err=True)


@click.command()
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
    from ragaudit.checking import ingest as join

    done = join(source, inputs, out, config_name=config_name, window=window)
    echo_problems([], done.bad_lines)
    echo_problems(done.warnings, done.unreadable_inputs)
    click.echo(done.summary())
    sys.exit(InputError.exit_code if done.problems else 0)


@click.group()
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
@click.option(
    "--config", "config_path", type=click.Path(path_type=Path), help="config whose [gold] ignore and severity apply"
)
@FORMAT
def gold_check(gold_path, corpus, paraphrases, model, no_distance, config_path, fmt):
    """Check that each gold item is answerable from the corpus it names.

    Exit 0: no error; 1: error findings; 3: the gold set or corpus could not be read.
    """
    from ragaudit.checking import check_gold
    from ragaudit.render import issues_text

    found = check_gold(
        gold_path, corpus, paraphrases=paraphrases, model=model, distance=not no_distance, config=config_path
    )
    issues_text.write_issues(
        found.issues, sys.stdout, fmt=fmt, records_of=lambda: found.records, counts_of=lambda: found.counts
    )
    if fmt == "text":
        click.echo(issues_text.summary(found.records, found.counts, found.severities))
    echo_problems([], found.problems)
    sys.exit(InputError.exit_code if found.problems else 1 if found.errors else 0)


@gold.command("anchor")
@click.option("--corpus", required=True, type=click.Path(path_type=Path), help="corpus directory or corpus.jsonl")
@click.option("--question", required=True, help="the gold item's question")
@click.option("--answer", required=True, help="the answer's text, as the corpus has it or close to it")
@click.option("--qid", help="the item's qid (default: the question's slug)")
@click.option("--paraphrase", "paraphrases", multiple=True, help="a paraphrase of the question (repeatable)")
@click.option("--model", default=None, help="embedding model for the similarity search (default: all-MiniLM-L6-v2)")
def gold_anchor(corpus, question, answer, qid, paraphrases, model):
    """Find where ANSWER is in the corpus: candidate anchor spans on stderr, each labelled how it was
    found (exact, normalised: whitespace, case and markup folded, similar: the closest sentences by
    the embedding model), and a gold line anchored at the first on stdout.

    Exit 0: a gold line printed; 1: nothing found; 2: usage; 3: the corpus could not be read.
    """
    from ragaudit.goldtools.anchor import describe, find_anchor, gold_line
    from ragaudit.inputs import encoder_for
    from ragaudit.io.corpus import load_corpus

    if not answer.strip() or not question.strip():
        raise UsageError("--question and --answer must hold text")
    found = find_anchor(load_corpus(corpus), answer, lambda: encoder_for(model))
    for i, candidate in enumerate(found.candidates, start=1):
        click.echo(f"candidate {i} {describe(candidate)}", err=True)
    if not found.candidates:
        click.echo("error: no sentence of the corpus to anchor the answer in", err=True)
        sys.exit(1)
    click.echo(gold_line(found.candidates[0], question=question, answer=answer, qid=qid, paraphrases=paraphrases))
    if len(paraphrases) < 2:
        click.echo("note: `ragaudit gold check` asks for 3 variants by default: add --paraphrase twice", err=True)


@gold.command("reanchor")
@click.argument("gold_path", metavar="GOLD", type=click.Path(path_type=Path))
@click.option("--corpus", required=True, type=click.Path(path_type=Path), help="the edited corpus")
@click.option("--from", "old", type=click.Path(path_type=Path), help="the corpus the gold set was anchored in")
@click.option("--out", required=True, type=click.Path(path_type=Path, dir_okay=False), help="the new gold set to write")
@click.option(
    "--min-ratio",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    default=0.9,
    show_default=True,
    help="difflib ratio a fuzzy match must reach to move an anchor",
)
def gold_reanchor(gold_path, corpus, old, out, min_ratio):
    """Move the anchors of GOLD to where their text is in the edited corpus: kept where it still
    is, moved to the same text elsewhere, or to the most similar sentences (fuzzy, with the ratio);
    each item that cannot be moved is listed with the reason and left out of --out.

    Exit 0: every item stayed or moved; 1: some could not be moved; 3: an input could not be read.
    """
    from ragaudit.goldtools.reanchor import reanchor_file

    lines, problems, code = reanchor_file(gold_path, corpus, out, old=old, min_ratio=min_ratio)
    click.echo("\n".join(lines))
    echo_problems([], problems)
    sys.exit(code)


@click.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--qid", multiple=True, help="only these questions (repeatable)")
@click.option("--base-url", help="link knowledge-base files under this URL")
def cite(traces, qid, base_url):
    """Render the runs of trace files as markdown: each answer with claim-level footnotes, then its sources."""
    from ragaudit.citations import render_traces

    for text in render_traces(traces, qids=qid, base_url=base_url):
        click.echo(text)


@click.command()
@FORMAT
def codes(fmt):
    """List every issue code with its severity, meaning and fix."""
    from ragaudit.render.issues_text import codes as listing

    click.echo(listing(fmt))


@click.command("history")
@click.option("--store", type=click.Path(path_type=Path), help="the history file (default: that of --config's runs)")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="config whose runs' history to read")
@click.option("--metric", help="only this metric (e.g. citation_match)")
@click.option("--pipeline", help="only this pipeline")
@click.option("--last", type=click.IntRange(min=1), help="only the last N runs")
@click.option("--plot", type=click.Path(path_type=Path, dir_okay=False), help="also draw the trends to an SVG file")
@click.option("--all", "every", is_flag=True, help="every recorded metric, not only those the gate reads")
@click.option("--rename", metavar="OLD=NEW", help="record pipeline OLD's runs under NEW first, joining the two series")
@FORMAT
def history_command(store, config_path, metric, pipeline, last, plot, every, rename, fmt):
    """Trends across recorded runs: each pipeline's metrics, run by run (oldest first), with a
    sparkline, the time, the git commit, the run's verdict and the pipeline's gate.

    Every `ragaudit run` records its summary in a history file: $RAGAUDIT_HISTORY, else
    [history] path, else history.sqlite beside the run directories (--config's [audit] out, else
    ./reports). Exit 0; 3 when the history is missing or damaged."""
    from ragaudit import history
    from ragaudit.render import history_text

    found = history.trends(
        store,
        config_path=config_path,
        metric=metric,
        pipeline=pipeline,
        last=last,
        plot=plot,
        every=every,
        rename=rename,
    )
    for problem in found.problems:
        click.echo(f"warning: {problem}", err=True)
    found.require(metric=metric, pipeline=pipeline)
    if plot:
        history_text.write_svg(plot, found.points)
    click.echo(
        history_text.render_json(found.points)
        if fmt == "json"
        else history_text.render_text(found.points, str(found.store), found.left_out)
    )


@click.command("metrics")
@FORMAT
@click.option(
    "--config", "config_path", type=click.Path(path_type=Path), help="config whose [metrics] k the ranking metrics show"
)
def metrics_command(fmt, config_path):
    """List every metric with its level, direction, the gate checks that read it, and its definition;
    then which ΔS the gate reads, and why. The ranking metrics show their cutoff (hit@5)."""
    from ragaudit.render.issues_text import metrics as listing

    click.echo(listing(fmt, config_path))


@click.command("audit-log")
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--corpus", type=click.Path(path_type=Path), help="the corpus snapshot: a folder or a corpus.jsonl")
@SPANS_FROM
@click.option("--window", default="1d", show_default=True, help="window length: 30m, 1h, 1d, 7d, 2w")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), help="default: reports/audit-log-<stamp>")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="model, support, section policy, corpus")
@click.option(
    "--live-index", is_flag=True, help="with --from: warn missing_live_index for spans without the live index"
)
def audit_log_command(traces, corpus, source, window, out, config_path, live_index):
    """Audit production traces without a gold set: validate every payload against the corpus
    snapshot, measure ΔS of the cited text, support and hallucinations of each answer segment,
    per time window (by retrieved_at), with index drift (between windows and within one) and the
    worst examples.

    Writes audit_log.json, audit_log.html and rag_traces.sqlite. Exit 0: no error-severity issue
    and no drift; 1: some; 3: an input could not be read."""
    from ragaudit.auditlog import run_audit_log
    from ragaudit.render.audit_log_text import render_windows

    result = run_audit_log(
        traces, corpus=corpus, fmt=source, window=window, out=out, config=config_path, live_index=live_index
    )
    click.echo(render_windows(result.model), nl=False)
    click.echo(f"wrote {result.out}")
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    for problem in result.problems:
        click.echo(f"error: {problem}", err=True)
    sys.exit(result.exit_code)


COMMANDS = (validate, ingest, gold, cite, codes, history_command, metrics_command, audit_log_command)
