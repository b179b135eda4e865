"""`summary.md`: the verdict and the failing checks, for a pull-request comment or a CI summary."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ragaudit.checks.metrics.registry import VIEWS, labels
from ragaudit.core.model import Gate, Report
from ragaudit.decisions.gating import question_why
from ragaudit.io.files import write_atomic
from ragaudit.outputs.render.formatting import against

SHOWN = VIEWS["summary"]


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()|~!])")


def md(text: object) -> str:
    """Text from traces and configs as inert markdown: markup characters backslash-escaped, HTML
    special characters as entities, line breaks as spaces (a table row stays one row), control
    characters as U+FFFD."""
    text = plain(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN.sub(r"\\\1", text)


def plain(text: object) -> str:
    """Text as a terminal shows it: line breaks as spaces, control characters as U+FFFD, nothing escaped."""
    return " ".join(_CONTROL.sub("\ufffd", str(text)).split())


class _Marks:
    """How the summary marks its text up: markdown for summary.md, none on a terminal."""

    def __init__(self, terminal: bool):
        self.text = plain if terminal else md
        self.strong = "" if terminal else "**"
        self.head = "" if terminal else "# "
        self.sub = "" if terminal else "## "


def _fmt(value: object) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def render_summary(report: Report, comparison: dict[str, Any] | None = None, *, terminal: bool = False) -> str:
    """summary.md; with `terminal`, the same for a terminal: no markdown escapes, no emphasis marks."""
    m = _Marks(terminal)
    md = m.text
    gate = report.gate
    lines = [f"{m.head}ragaudit: gate {'passed ✅' if gate.passed else 'FAILED ❌'}", ""]
    s = report.summary
    lines.append(
        f"{s.runs} runs over {s.questions} questions; {s.issues.errors} validation errors, {s.issues.warnings} warnings."
    )
    if s.gold_errors or s.gold_warnings:
        lines.append(f"Gold check: {s.gold_errors} errors, {s.gold_warnings} warnings.")
    label = labels(report.meta.get("metrics"))
    lines += [
        "",
        "| pipeline | gate | "
        + " | ".join(label[m] for m in SHOWN)
        + " | errored runs | hallucinating runs | λ convergent |",
        "|---" * (len(SHOWN) + 5) + "|",
    ]
    for name, p in s.pipelines.items():
        mine = gate.of(name)
        verdict = "not gated" if not mine else "passed" if all(c.passed for c in mine) else "failed"
        lines.append(
            f"| {md(name)} | {verdict} | "
            + " | ".join(_fmt(p.metrics.get(m)) for m in SHOWN)
            + f" | {p.errored} | {p.hallucinating_runs} | {p.lam.get('convergent', 0)}/{p.questions} |"
        )
    failed = gate.failed()
    if failed:
        lines += ["", f"{m.sub}Failing checks", ""]
        questions = {q.key: q for q in report.questions}
        for c in failed:
            qs = c.questions
            shown = ", ".join(
                md(qid)
                + (f" ({md(why)})" if (q := questions.get((c.pipeline, qid))) and (why := question_why(c, q)) else "")
                for qid in qs[:10]
            ) + (f" and {len(qs) - 10} more" if len(qs) > 10 else "")
            lines.append(
                f"- {m.strong}{md(c.pipeline)} · {md(c.name)}{m.strong}: value {md(against(c.value, c.threshold))}, "
                f"threshold {md(c.bound)}"
                + (f"; questions: {shown}" if qs else "")
                + (f" ({md(c.detail)})" if c.detail else "")
            )
    lines += _regressions(gate, m) + _unsupported(report, m)
    missing = gate.missing_from_baseline()
    if missing:
        lines += ["", f"Not in the baseline (no drift checks): {', '.join(md(p) for p in missing)}."]
    if comparison:
        lines += decisions(comparison, m)
    return "\n".join(lines) + "\n"


CLAIMS_SHOWN = 20


def _regressions(gate: Gate, m: _Marks) -> list[str]:
    """Each question that lost correct or grounded runs since the baseline, with what it lost."""
    lost = [(c.pipeline, qid, why) for c in gate.checks for qid, why in c.reasons.items()]
    if not lost:
        return []
    md = m.text
    return ["", f"{m.sub}Regressions since the baseline", ""] + [
        f"- {m.strong}{md(pipeline)} · {md(qid)}{m.strong}: {md(why)}" for pipeline, qid, why in lost
    ]


def _unsupported(report: Report, m: _Marks) -> list[str]:
    """The claims their cited texts do not support, or that cite nothing, of the runs the report carries."""
    found = [
        (q.pipeline, q.qid, r, c)
        for q in report.questions
        for r in q.runs or []
        for c in r.get("claims") or []
        if c.get("grounding") != "supported"
    ]
    if not found:
        return []
    md = m.text
    lines = ["", f"{m.sub}Claims their cited texts do not support", ""]
    for pipeline, qid, r, c in found[:CLAIMS_SHOWN]:
        how = "cites nothing" if c["grounding"] == "uncited" else f"support {_fmt(c.get('support'))}"
        if c.get("hallucinated"):
            how += f"; its sources lack {', '.join(c['hallucinated'])}"
        if c.get("contradicts"):
            how += f"; contradicts its source: {c['contradicts']}"
        if c.get("attributed"):
            how += f"; {', '.join(c.get('lacks') or [])} come from {', '.join(c['attributed'])}, which it does not cite"
        lines.append(f"- {md(pipeline)} · {md(qid)} v{r['variant']} s{r['seed']}: “{md(c['text'])}” ({md(how)})")
    if len(found) > CLAIMS_SHOWN:
        lines.append(f"- and {len(found) - CLAIMS_SHOWN} more (report.json has every one)")
    return lines


def decisions(comparison: dict[str, Any], m: _Marks | None = None) -> list[str]:
    """Each compared pair in words (compare.json has the figures)."""
    from ragaudit.outputs.render import compare_text

    m = m or _Marks(False)
    md = m.text
    lines = ["", f"{m.sub}Decisions between pipelines"]
    for pair in comparison["pairs"]:
        lines += ["", f"{m.strong}{md(pair['b'])} vs {md(pair['a'])}{m.strong} ({pair['questions']} questions)", ""]
        lines += [f"- {md(sentence)}" for sentence in compare_text.sentences(pair)]
        lines += [f"- {md(compare_text.noise_line(comparison, pair))}", f"- {md(compare_text.mde_line(pair))}"]
    return lines


def write_summary(path: Path, report: Report, comparison: dict[str, Any] | None = None) -> None:
    write_atomic(path, render_summary(report, comparison))
