"""`junit.xml`: one testcase per question (per pipeline) and one per gate check.

XML 1.0 cannot hold most control characters (nor lone surrogates), even escaped; text that comes
from traces passes through `xml_safe` so one stray byte in a qid cannot make the file invalid.
"""

from __future__ import annotations

import re
from pathlib import Path
from xml.etree import ElementTree as ET

from ragaudit.gating import question_why
from ragaudit.io.files import atomic_path
from ragaudit.model import Check, Question, Report
from ragaudit.render.formatting import against

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text) -> str:
    """`text` without the characters XML 1.0 cannot hold (each becomes U+FFFD)."""
    return _NOT_XML.sub("\ufffd", str(text))


def _fmt(value) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def write_junit(path: Path, report: Report) -> None:
    """junit.xml, written a testcase at a time: memory holds one case, not the document's tree."""
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
                for element in case.iter():
                    element.attrib.update({k: xml_safe(v) for k, v in element.attrib.items()})
                    if element.text:
                        element.text = xml_safe(element.text)
                ET.indent(case, level=2)
                out.write("\n    " + ET.tostring(case, encoding="unicode"))
            out.write("\n  </testsuite>")
        out.write("\n</testsuites>")


def _question_case(q: Question, failing: list[Check] | None) -> ET.Element:
    case = ET.Element("testcase", classname=f"ragaudit.{q.pipeline}", name=q.qid)
    if failing:
        lam = q.lam
        why = [f"{c.name}: {reason}" if (reason := question_why(c, q)) else c.name for c in failing]
        failure = ET.SubElement(case, "failure", message=f"failed gate checks: {'; '.join(why)}")
        runs = [
            f"v{r['variant']} s{r['seed']}: {'correct' if r.get('correct') else 'not correct'}: {r['why']}"
            for r in q.runs or []
        ]
        unsupported = [
            f"v{r['variant']} s{r['seed']}: claim {c['n']} {c['grounding']}: {c['text']}"
            for r in q.runs or []
            for c in r.get("claims") or []
            if c.get("grounding") in ("unsupported", "uncited")
        ]
        failure.text = "\n".join(
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
    return case


def _check_case(check: Check) -> ET.Element:
    case = ET.Element("testcase", classname=f"ragaudit.gate.{check.pipeline}", name=check.name)
    if not check.passed:
        failure = ET.SubElement(
            case,
            "failure",
            message=f"{check.name}: value {against(check.value, check.threshold, 4)}, threshold {check.bound}",
        )
        failure.text = " ".join(
            filter(None, [check.detail, "questions: " + ", ".join(check.questions) if check.questions else ""])
        )
    return case
