"""The parts of the `ragaudit` command line: options as data (one line an option: `opt`, `flag`,
`arg`; those several commands share declared once below) and the group that prints what a command
says and maps the project's errors to exit codes, for every command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from ragaudit.errors import RagauditError, failure
from ragaudit.io.stdout import CLOSED_STDOUT, discard_stdout, stdout_gone
from ragaudit.render.said import Said

ARGV = "ragaudit.argv"
PATH, FILE, DIR = (click.Path(path_type=Path, **k) for k in ({}, {"dir_okay": False}, {"file_okay": False}))
COUNT = click.IntRange(min=1)
SPAN_FORMATS = ("otlp", "phoenix", "langfuse")  # ragaudit.spans.SPAN_FORMATS, without importing it


def opt(decls: str, help: str | None = None, type: Any = None, **kw: Any) -> Any:
    """An option: its flags and parameter name, space-separated (`--config config_path`), its help,
    its type; without help, the option of that name in SHARED."""
    return SHARED[decls] if help is None else click.option(*decls.split(), type=type, help=help, **kw)


def flag(decls: str, help: str) -> Any:
    return click.option(*decls.split(), is_flag=True, help=help)


def arg(name: str, type: Any = PATH, **kw: Any) -> Any:
    return click.argument(name, type=type, **kw)


def echo(said: Said) -> None:
    """Print what a command says, each text on its stream, in order."""
    for text, err in said.texts:
        click.echo(text, err=err, nl=False)


def argv() -> list[str]:
    """The command as given, which a run records in its manifest."""
    return ["ragaudit", *click.get_current_context().meta.get(ARGV, [])]


_FORMAT = "text for people, json for tools"
_FOREIGN = "accept a baseline built on another gold set or corpus"
_FROM = "input format: ragaudit traces, or production spans (OTLP JSON, a Phoenix or a Langfuse export)"
_BASELINE = "report.json of an earlier run, or last-pass (the history's latest passing run on the same gold set and corpus): add the drift checks"
SHARED = {  # the options several commands declare alike: `@opt("--format")`
    "--from": opt("--from source", _FROM, click.Choice(["traces", *SPAN_FORMATS]), default="traces", show_default=True),
    "--format": opt("--format fmt", _FORMAT, click.Choice(["text", "json"]), default="text", show_default=True),
    "--baseline": opt("--baseline", _BASELINE, PATH),
    "--allow-foreign-baseline": flag("--allow-foreign-baseline", _FOREIGN),
    "--rate": opt("--rate", "share of the questions each fault affects", float, default=0.2, show_default=True),
    "--seed": opt("--seed", "seed of the affected questions and the mutations", int, default=0, show_default=True),
    "--corpus": opt("--corpus", "corpus directory or corpus.jsonl", PATH, required=True),
}


class Group(click.Group):
    """Prints the `Said` a command returns and ends with its exit code; turns RagauditError (and
    ctrl-C, an input/output error) into its exit code and a one-line (or one-per-problem) message."""

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except BrokenPipeError:  # `ragaudit --help | head -1`
            _closed_stdout()

    def parse_args(self, ctx, args):
        ctx.meta.setdefault(ARGV, list(args))  # the outermost group's: the whole command
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        try:
            try:
                said = super().invoke(ctx)
                if not isinstance(said, Said):
                    return said
                echo(said)
                if said.error is not None:
                    raise said.error
            finally:
                from ragaudit import progress

                progress.close()  # the live display is gone before any message below
                sys.stdout.flush()  # a closed stdout shows here, as BrokenPipeError, not at exit
        except (RagauditError, KeyboardInterrupt, OSError) as exc:
            if isinstance(exc, BrokenPipeError) and stdout_gone():  # else another pipe (a worker's)
                _closed_stdout()
            code, lines = failure(exc)
            click.echo("\n".join(lines), err=True)
            ctx.exit(code)
        ctx.exit(said.exit_code)


def _closed_stdout() -> NoReturn:
    """The reader of stdout went away (`ragaudit codes | head -1`): end quietly, as a writer to a
    closed pipe does, with what is still buffered sent nowhere."""
    discard_stdout()
    raise click.exceptions.Exit(CLOSED_STDOUT)
