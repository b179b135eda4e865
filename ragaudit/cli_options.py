"""Options that several `ragaudit` commands share, declared once."""

from __future__ import annotations

from pathlib import Path

import click

SPAN_FORMATS = ("otlp", "phoenix", "langfuse")  # ragaudit.spans.SPAN_FORMATS, without importing it
SPANS_FROM = click.option(
    "--from",
    "source",
    type=click.Choice(["traces", *SPAN_FORMATS]),
    default="traces",
    show_default=True,
    help="input format: ragaudit traces, or production spans (OTLP JSON, a Phoenix or a Langfuse export)",
)
FORMAT = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people, json for tools",
)
BASELINE = click.option(
    "--baseline",
    type=click.Path(path_type=Path),
    help="report.json of an earlier run, or last-pass (the history's latest passing run on the same gold set "
    "and corpus): add the drift checks",
)
ALLOW_FOREIGN = click.option(
    "--allow-foreign-baseline", is_flag=True, help="accept a baseline built on another gold set or corpus"
)
RATE = click.option(
    "--rate", type=float, default=0.2, show_default=True, help="share of the questions each fault affects"
)
SEED = click.option(
    "--seed", type=int, default=0, show_default=True, help="seed of the affected questions and the mutations"
)
