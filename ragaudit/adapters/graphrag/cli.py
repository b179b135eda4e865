"""`ragaudit graphrag …`: trace GraphRAG answers to their sources.

Exit codes follow docs/reference.md §7: 0 every citation resolves; 1 some cited id is dangling (unknown, or
reaching no text unit); 2 usage error; 3 an input is unreadable or is not a GraphRAG output
folder / answer file.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from ragaudit.cli_options import Group
from ragaudit.types import DEFAULT_MODEL


@click.group("graphrag", cls=Group)
def graphrag():
    """Audit answers of a GraphRAG index: citations → text units → documents."""


@graphrag.command("trace")
@click.argument("output_dir", type=click.Path(path_type=Path))
@click.option(
    "--answer",
    "answer_file",
    required=True,
    type=click.Path(path_type=Path),
    help="the answer: text/markdown, JSON ({'response': ...}) or a notebook (.ipynb) with recorded answers",
)
@click.option("--format", "fmt", type=click.Choice(["markdown", "json"]), default="markdown", show_default=True)
@click.option("--verify", is_flag=True, help="score each claim against the text units of each of its sources")
@click.option(
    "--threshold",
    type=click.FloatRange(0, 1),
    default=None,
    help="support at or above which a source counts as supporting (default 0.5)",
)
@click.option("--model", default=DEFAULT_MODEL, show_default=True, help="encoder for --verify")
def trace(output_dir: Path, answer_file: Path, fmt: str, verify: bool, threshold: float | None, model: str):
    """Resolve every [Data: …] citation of the answer(s) in ANSWER against OUTPUT_DIR.

    Exit 0 when every cited id resolves to a text unit, 1 when some are dangling, 3 when an
    input is unreadable.
    """
    from ragaudit.adapters.graphrag.load import load_index
    from ragaudit.adapters.graphrag.render import to_json, to_markdown
    from ragaudit.adapters.graphrag.trace import trace_file

    index = load_index(output_dir)
    traces = trace_file(index, answer_file, verify=verify, threshold=threshold, model=model)
    if fmt == "json":
        document = to_json(traces, output_dir=str(index.path), layout=index.layout, notes=index.notes)
        click.echo(json.dumps(document, sort_keys=True, ensure_ascii=False, indent=2))
    else:
        click.echo(to_markdown(traces, output_dir=str(index.path), layout=index.layout), nl=False)
    if any(t.dangling for t in traces):
        click.get_current_context().exit(1)
