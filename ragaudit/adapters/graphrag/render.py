"""Traces as markdown (the answer with numbered markers and a Sources list) or as a JSON document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragaudit.adapters.graphrag.resolve import Resolution
from ragaudit.adapters.graphrag.trace import GraphRAGTrace
from ragaudit.core.errors import clip

SCHEMA = "ragaudit.graphrag.trace/1"
_UNITS_SHOWN = 10


def to_json(
    traces: list[GraphRAGTrace], *, output_dir: str, layout: str, notes: list[str] | None = None
) -> dict[str, Any]:
    """One document for every traced answer of a file; totals summed over them."""
    return {
        "schema": SCHEMA,
        "output_dir": output_dir,
        "layout": layout,
        "notes": list(notes or []),
        "counts": total_counts(traces),
        "answers": [t.to_dict() for t in traces],
    }


def total_counts(traces: list[GraphRAGTrace]) -> dict[str, Any]:
    total: dict[str, Any] = {"answers": len(traces), "citations": 0, "resolved": 0, "dangling": 0, "by_kind": {}}
    for trace in traces:
        counts = trace.counts()
        for key in ("citations", "resolved", "dangling"):
            total[key] += counts[key]
        for kind, row in counts["by_kind"].items():
            into = total["by_kind"].setdefault(kind, {"citations": 0, "resolved": 0, "dangling": 0})
            for key, value in row.items():
                into[key] += value
    return total


def marked_answer(trace: GraphRAGTrace) -> str:
    """The answer with each `[Data: …]` block replaced by its source numbers, marked when verified."""
    claim_of = {id(b): c for c in trace.claims for b in c.claim.blocks}
    parts, cursor = [], 0
    for block, numbers in zip(trace.blocks, trace.block_sources):
        claim = claim_of.get(id(block))
        marks = [f"{n}{trace.mark(n, claim)}" for n in dict.fromkeys(numbers)]
        if any(c.more for c in block.citations):
            marks.append("+more")
        parts += [trace.answer[cursor : block.start], f"[{','.join(marks)}]" if marks else ""]
        cursor = block.end
    parts.append(trace.answer[cursor:])
    return "".join(parts)


def source_line(number: int, source: Resolution) -> list[str]:
    head = f"{number}. **{source.kind} ({source.key})**"
    if source.dangling:
        return [f"{head} — dangling ({source.reason}): {source.message}"]
    lines = [f"{head} {clip(source.title, 100)}" if source.title else head]
    for doc in source.documents:
        units = [f"{u} (`{_short(source, u)}`)" for u in doc.units[:_UNITS_SHOWN]]
        more = len(doc.units) - _UNITS_SHOWN
        text = f"   - {doc.title or doc.id}: text unit{'s' if len(doc.units) > 1 else ''} {', '.join(units)}"
        text += f" and {more} more" if more > 0 else ""
        if doc.pages:
            text += f"; page{'s' if len(doc.pages) > 1 else ''} {', '.join(map(str, doc.pages))}"
        lines.append(text)
    unowned = [u for u in source.units if not u.document_ids]
    if unowned:
        lines.append(f"   - no document: text units {', '.join(str(u.position) for u in unowned)}")
    return lines


def _short(source: Resolution, position: int) -> str:
    unit = next(u for u in source.units if u.position == position)
    return unit.id[:12]


def to_markdown(traces: list[GraphRAGTrace], *, output_dir: str, layout: str) -> str:
    total = total_counts(traces)
    out = [
        "# GraphRAG trace",
        "",
        f"- output: `{output_dir}` (layout {layout})",
        f"- answers: {total['answers']}; citations: {total['citations']} "
        f"({total['resolved']} resolved, {total['dangling']} dangling)",
    ]
    for number, trace in enumerate(traces, 1):
        out += ["", f"## Answer {number}" + (f" — {trace.origin}" if trace.origin else ""), ""]
        out += _answer_section(trace)
    return "\n".join(out).rstrip() + "\n"


def _answer_section(trace: GraphRAGTrace) -> list[str]:
    counts = trace.counts()
    kinds = ", ".join(f"{k} {v['citations']}" for k, v in sorted(counts["by_kind"].items()))
    out = []
    if trace.query:
        out.append(f"- query: {trace.query}")
    out.append(
        f"- citations: {counts['citations']} ({counts['resolved']} resolved, {counts['dangling']} dangling)"
        + (f" — {kinds}" if kinds else "")
    )
    out.append(f"- claims: {counts['claims']}, {counts['cited_claims']} cited")
    if trace.verified:
        out.append(
            f"- verified: {counts['supported']} of {counts['checked']} claim–source pairs supported "
            f"(support ≥ {trace.threshold:.2f})"
        )
    out += ["", marked_answer(trace).strip(), "", "### Sources", ""]
    out += [line for n, s in enumerate(trace.sources, 1) for line in source_line(n, s)] or ["(none cited)"]
    warnings = [f"- {s.kind} ({s.key}): {w}" for s in trace.sources for w in s.warnings]
    if trace.dangling:
        out += ["", "### Dangling citations", ""]
        out += [f"- [{n}] {s.kind} ({s.key}): {s.reason} — {s.message}" for n, s in trace.dangling]
    if warnings:
        out += ["", "### Broken links", "", *warnings]
    return out


def traced(
    output_dir: str | Path, answer_file: str | Path, *, fmt: str, verify: bool, threshold: float | None, model: str
) -> tuple[str, bool]:
    """`ragaudit graphrag trace`: every `[Data: …]` citation of the answer(s) in `answer_file`
    resolved against `output_dir`, as markdown or JSON text, and whether some cited id dangles."""
    import json

    from ragaudit.adapters.graphrag.load import load_index
    from ragaudit.adapters.graphrag.trace import trace_file

    index = load_index(output_dir)
    traces = trace_file(index, answer_file, verify=verify, threshold=threshold, model=model)
    if fmt == "json":
        document = to_json(traces, output_dir=str(index.path), layout=index.layout, notes=index.notes)
        text = json.dumps(document, sort_keys=True, ensure_ascii=False, indent=2) + "\n"
    else:
        text = to_markdown(traces, output_dir=str(index.path), layout=index.layout)
    return text, any(t.dangling for t in traces)
