"""The `ragaudit` command: a thin click layer, and the only place that maps errors to exit codes."""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import click

from ragaudit import __version__
from ragaudit.errors import InputError, RagauditError

FORMAT = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
                      help="text for people, json for tools")


class Group(click.Group):
    """Turns RagauditError into its exit code and a one-line (or one-per-problem) message on stderr."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except RagauditError as exc:
            click.echo(f"error: {exc}" if not isinstance(exc, InputError)
                       else "\n".join(f"error: {p}" for p in exc.problems), err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ragaudit")
def main():
    """Offline, deterministic audit of retrieval-augmented generation: citation payloads, ΔS,
    coverage, λ convergence and citation match, as reports and a CI gate."""


def _issue_line(issue) -> str:
    where = issue.file or "-"
    if issue.line is not None:
        where += f":{issue.line}"
    run = "" if issue.qid is None else f" [{issue.qid} v{issue.variant} s{issue.seed}" + (
        f" seg{issue.seg}" if issue.seg is not None else "") + "]"
    return f"{where}: {issue.severity} {issue.code}{run} {issue.path}: {issue.message}\n    fix: {issue.fix}"


def _emit(issues, *, fmt: str, records_of, counts_of) -> None:
    """Print issues as they come (text), or as the JSON document of SPEC §7 without holding them in memory."""
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
@click.option("--corpus", type=click.Path(path_type=Path), help="corpus directory or corpus.jsonl (enables corpus rules)")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="config: section policy, offset_unit, corpus")
@FORMAT
def validate(traces, corpus, config_path, fmt):
    """Check every citation payload of trace files against the rules of `ragaudit codes`.

    Exit 0: no error-severity issue; 1: error issues found; 3: an input could not be read.
    """
    from ragaudit.io.config import default_config, load_config
    from ragaudit.io.corpus import load_corpus
    from ragaudit.validate import CODES, Context, Validator

    config = load_config(config_path) if config_path else default_config()
    corpus_path = corpus or config.corpus
    ctx = Context(corpus=load_corpus(corpus_path) if corpus_path else None,
                  allow_cross_section=config.allow_cross_section,
                  cross_section_whitelist=config.cross_section_whitelist)
    validator = Validator(ctx, offset_unit=config.offset_unit)
    unreadable: list[InputError] = []

    def issues():
        for path in traces:
            try:
                yield from validator.check_files([path])
            except InputError as exc:  # this file is lost; the others are still checked
                unreadable.append(exc)

    _emit(issues(), fmt=fmt, records_of=lambda: validator.records, counts_of=lambda: validator.counts)
    if fmt == "text":
        click.echo(_summary(validator.records, validator.counts, lambda c: CODES[c].severity))
    for exc in unreadable:
        for problem in exc.problems:
            click.echo(f"error: {problem}", err=True)
    for bad in validator.bad_lines:
        click.echo(f"error: {bad.problem}", err=True)
    if unreadable or validator.bad_lines:
        sys.exit(InputError.exit_code)
    sys.exit(1 if validator.errors else 0)


@main.command("run")
@click.argument("config_path", metavar="CONFIG", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), help="folder for the run directory (default: [audit] out)")
@click.option("--resume", type=click.Path(path_type=Path), help="finish an interrupted run in RUN_DIR")
@click.option("--workers", type=click.IntRange(min=1), help="parallel workers (default: [audit] workers)")
def run_command(config_path, out, resume, workers):
    """Replay the gold set across variants, seeds and pipelines, then write the run's outputs."""
    from ragaudit import runner
    from ragaudit.io.config import load_config
    from ragaudit.report import build

    config = load_config(config_path)
    result = runner.run(config, out=out, resume=resume, workers=workers)
    counts = build(result.run_dir, config, runner.Inputs(config).corpus)
    for name, why in sorted(result.aborted.items()):
        click.echo(f"pipeline {name} aborted (analyzer parity): {why}", err=True)
    errors = sum(n for code, n in counts.items() if CODES_SEVERITY(code) == "error")
    click.echo(f"{result.total} runs ({result.executed} run now, {result.resumed} resumed) in "
               f"{result.seconds:.1f} s: {result.rate:.1f} runs/s; {errors} error issues")
    click.echo(f"run directory: {result.run_dir}")


def CODES_SEVERITY(code: str) -> str:
    from ragaudit.validate import CODES
    return CODES[code].severity


@main.group()
def gold():
    """Gold-set tools."""


@gold.command("check")
@click.argument("gold_path", metavar="GOLD", type=click.Path(path_type=Path))
@click.option("--corpus", required=True, type=click.Path(path_type=Path), help="corpus directory or corpus.jsonl")
@click.option("--paraphrases", type=click.IntRange(min=1), default=3, show_default=True,
              help="variants (question + paraphrases) each item must have")
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
    from ragaudit.validate import CODES
    from ragaudit.validate.gold import check_gold

    loaded = load_corpus(corpus)
    items, problems = read_gold(gold_path)
    encoder = None
    if not no_distance:
        from ragaudit.metrics.embed import DEFAULT_MODEL, SentenceTransformerEncoder
        encoder = SentenceTransformerEncoder(model or DEFAULT_MODEL)
    found = check_gold(items, loaded, file=str(gold_path), paraphrases=paraphrases, problems=problems,
                       encoder=encoder)
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
@FORMAT
def codes(fmt):
    """List every issue code with its severity, meaning and fix."""
    from ragaudit.validate import CODES

    if fmt == "json":
        click.echo(json.dumps([{"code": c.code, "severity": c.severity, "family": c.family, "meaning": c.meaning,
                                "fix": c.fix} for c in CODES.values()], indent=2))
        return
    for c in CODES.values():
        click.echo(f"{c.code:<28} {c.severity:<8} {c.meaning}\n{'':<37} fix: {c.fix}")


if __name__ == "__main__":
    main()
