"""`junit.xml`: one testcase per question (per pipeline) and one per gate check.

XML 1.0 cannot hold most control characters (nor lone surrogates), even escaped; text that comes
from traces passes through `xml_safe` so one stray byte in a qid cannot make the file invalid.
The document is written a testcase at a time, as text: the indented document ElementTree would
write of the same elements, at a fraction of its cost (a run of a million runs has hundreds of
thousands of question rows).
"""

from __future__ import annotations

import re
from pathlib import Path

from ragaudit.core.model import Check, Question, Report
from ragaudit.decisions.gating import question_why
from ragaudit.io.files import atomic_path
from ragaudit.outputs.render.formatting import against

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: object) -> str:
    """`text` without the characters XML 1.0 cannot hold (each becomes U+FFFD)."""
    return _NOT_XML.sub("\ufffd", str(text))


# What ElementTree writes for each character it escapes: in text, and in an attribute's value
# (where line ends and tabs become references, so that a parser keeps them).
_IN_TEXT = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))
_IN_ATTRIBUTE = (*_IN_TEXT, ('"', "&quot;"), ("\r", "&#13;"), ("\n", "&#10;"), ("\t", "&#09;"))


def _escaped(value: object, table: tuple[tuple[str, str], ...]) -> str:
    """`value` made XML-safe, then escaped by `table`, as ElementTree escapes it."""
    text = xml_safe(value)
    for char, reference in table:
        if char in text:
            text = text.replace(char, reference)
    return text


def _case(classname: str, name: str, message: str | None = None, detail: str = "") -> str:
    """A testcase, indented as the third level of the document; with a `message`, failed."""
    head = f'<testcase classname="{_escaped(classname, _IN_ATTRIBUTE)}" name="{_escaped(name, _IN_ATTRIBUTE)}"'
    if message is None:
        return head + " />"
    failure = f'<failure message="{_escaped(message, _IN_ATTRIBUTE)}"'
    failure += f">{_escaped(detail, _IN_TEXT)}</failure>" if detail else " />"
    return f"{head}>\n      {failure}\n    </testcase>"


def _fmt(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def write_junit(path: Path, report: Report) -> None:
    """junit.xml, written a testcase at a time: memory holds one case, not the document."""
    failed_by: dict[tuple[str, str], list[Check]] = {}
    for check in report.gate.failed():
        for qid in check.questions:
            failed_by.setdefault((check.pipeline, qid), []).append(check)
    suites = (
        ("questions", len(report.questions), sum(1 for q in report.questions if q.key in failed_by)),
        ("gate", len(report.gate.checks), sum(1 for c in report.gate.checks if not c.passed)),
    )
    cases = {"questions": (_question_case(q, failed_by.get(q.key)) for q in report.questions)}
    cases["gate"] = (_check_case(check) for check in report.gate.checks)
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        out.write("<?xml version='1.0' encoding='utf-8'?>\n<testsuites name=\"ragaudit\">")
        for name, tests, failures in suites:
            out.write(f'\n  <testsuite name="{name}" tests="{tests}" failures="{failures}"')
            if not tests:
                out.write(" />")
                continue
            out.write(">")
            for case in cases[name]:
                out.write("\n    " + case)
            out.write("\n  </testsuite>")
        out.write("\n</testsuites>")


def _question_case(q: Question, failing: list[Check] | None) -> str:
    if not failing:
        return _case(f"ragaudit.{q.pipeline}", q.qid)
    lam = q.lam
    why = [f"{c.name}: {reason}" if (reason := question_why(c, q)) else c.name for c in failing]
    runs = [
        f"v{r['variant']} s{r['seed']}: {'correct' if r.get('correct') else 'not correct'}: {r['why']}"
        for r in q.runs or []
    ]
    unsupported = [
        f"v{r['variant']} s{r['seed']}: claim {c['n']} {c['grounding']}: {c['text']}"
        for r in q.runs or []
        for c in r.get("claims") or []
        if c.get("grounding") != "supported"
    ]
    detail = "\n".join(
        [
            f"lambda {lam.state} (css {_fmt(lam.css)}, spread {_fmt(lam.spread)}); "
            + "; ".join(f"{k}={_fmt(v)}" for k, v in sorted(q.metrics.items()) if v is not None),
            *why,
            *runs[:12],
            *([f"... {len(runs) - 12} more runs"] if len(runs) > 12 else []),
            *unsupported[:12],
            *([f"... {len(unsupported) - 12} more claims not supported"] if len(unsupported) > 12 else []),
        ]
    )
    return _case(f"ragaudit.{q.pipeline}", q.qid, f"failed gate checks: {'; '.join(why)}", detail)


def _check_case(check: Check) -> str:
    if check.passed:
        return _case(f"ragaudit.gate.{check.pipeline}", check.name)
    return _case(
        f"ragaudit.gate.{check.pipeline}",
        check.name,
        f"{check.name}: value {against(check.value, check.threshold, 4)}, threshold {check.bound}",
        " ".join(filter(None, [check.detail, "questions: " + ", ".join(check.questions) if check.questions else ""])),
    )
