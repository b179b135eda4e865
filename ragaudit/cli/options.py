"""The parts of the `ragaudit` command line: options as data (one line an option: `opt`, `flag`, `arg`, and `shared`
for those several commands declare alike); the group that prints what a command says and maps errors to exit codes."""

from functools import reduce
from pathlib import Path
from typing import Any, Callable, TypeVar

import click

from ragaudit.core.errors import RagauditError, failure
from ragaudit.core.types import FORMATS, INPUT_FORMATS
from ragaudit.io import arrow
from ragaudit.io.stdout import end_output, end_quietly, stdout_gone
from ragaudit.outputs.render.said import Said

PATH, FILE, DIR = (click.Path(path_type=Path, **k) for k in ({}, {"dir_okay": False}, {"file_okay": False}))
ARGV, COUNT = "ragaudit.argv", click.IntRange(min=1)  # where the argv is kept; a count
F = TypeVar("F", bound=Callable[..., Any])  # a command, decorated by an option and returned as it was
SPANS_HELD = ", ".join(f"{f.name} ({f.holds})" for f in INPUT_FORMATS.values() if f.reader)  # FORMAT of `ingest --help`


def opt(decls: str, help: str, type: Any = None, **kw: Any) -> Callable[[F], F]:
    """An option: its flags and parameter name, space-separated (`--config config_path`), its help, its type."""
    return click.option(*decls.split(), type=type, help=help, **kw)


def shared(*names: str) -> Callable[[F], F]:
    """The options of these names in SHARED, in this order: `@shared("--rate", "--seed")`."""
    return lambda command: reduce(lambda done, name: SHARED[name](done), reversed(names), command)


def flag(decls: str, help: str) -> Callable[[F], F]:
    return click.option(*decls.split(), is_flag=True, help=help)


def arg(name: str, type: Any = PATH, **kw: Any) -> Callable[[F], F]:
    return click.argument(name, type=type, **kw)


def show(said: Said) -> None:
    """Print what a command says, each text on its stream, in order; then raise the error it ends with, if any."""
    for text, err in said.texts:
        click.echo(text, err=err, nl=False)
    if said.error is not None:
        raise said.error


# fmt: off
SHARED = {  # the options several commands declare alike, one line each
    "--from": opt("--from source", "input format: ragaudit traces, or production spans (OTLP JSON, a Phoenix or a Langfuse export)", click.Choice(FORMATS), default="traces", show_default=True),
    "--format": opt("--format fmt", "text for people, json for tools", click.Choice(["text", "json"]), default="text", show_default=True),
    "--baseline": opt("--baseline", "report.json of an earlier run, or last-pass (the history's latest passing run on the same gold set and corpus): add the drift checks", PATH),
    "--allow-foreign-baseline": flag("--allow-foreign-baseline", "accept a baseline built on another gold set or corpus"),
    "--rate": opt("--rate", "share of the questions each fault affects", float, default=0.2, show_default=True),
    "--seed": opt("--seed", "seed of the affected questions and the mutations", int, default=0, show_default=True),
    "--live-index": flag("--live-index", "with --from: warn missing_live_index for spans without the live index"),
    "--corpus": opt("--corpus", "corpus directory or corpus.jsonl", PATH, required=True),
}
# fmt: on


class Group(click.Group):
    """Prints the `Said` a command returns, ends with its exit code; RagauditError, ctrl-C, OSError: code and message."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except BrokenPipeError:  # `ragaudit --help | head -1`
            end_quietly()

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta.setdefault(ARGV, ["ragaudit", *args])  # the command as given, which a run records in its manifest
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        arrow.use_jemalloc()
        try:
            try:
                said = super().invoke(ctx)
                if not isinstance(said, Said):
                    return said
                show(said)
            finally:
                end_output()  # the live display gone before any message below; a closed stdout shows here
        except (RagauditError, KeyboardInterrupt, OSError) as exc:
            if isinstance(exc, BrokenPipeError) and stdout_gone():  # else another pipe (a worker's)
                end_quietly()
            code, lines = failure(exc)
            click.echo("\n".join(lines), err=True)
            ctx.exit(code)
        ctx.exit(said.exit_code)
