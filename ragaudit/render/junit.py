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
from ragaudit.model import Check, Report
from ragaudit.render.formatting import against

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text) -> str:
    """`text` without the characters XML 1.0 cannot hold (each becomes U+FFFD)."""
    return _NOT_XML.sub("\ufffd", str(text))


def _fmt(value) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def write_junit(path: Path, report: Report) -> None:
    checks = report.gate.checks
    failed_by: dict[tuple[str, str], list[Check]] = {}
    for check in report.gate.failed():
        for qid in check.questions:
            failed_by.setdefault((check.pipeline, qid), []).append(check)
    root = ET.Element("testsuites", name="ragaudit")
    questions = ET.SubElement(root, "testsuite", name="questions")
    for q in report.questions:
        case = ET.SubElement(questions, "testcase", classname=f"ragaudit.{q.pipeline}", name=q.qid)
        failing = failed_by.get(q.key)
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
    gate = ET.SubElement(root, "testsuite", name="gate")
    for check in checks:
        case = ET.SubElement(gate, "testcase", classname=f"ragaudit.gate.{check.pipeline}", name=check.name)
        if not check.passed:
            failure = ET.SubElement(
                case,
                "failure",
                message=f"{check.name}: value {against(check.value, check.threshold, 4)}, threshold {check.bound}",
            )
            failure.text = " ".join(
                filter(None, [check.detail, "questions: " + ", ".join(check.questions) if check.questions else ""])
            )
    for suite in (questions, gate):
        cases = suite.findall("testcase")
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    for element in root.iter():
        element.attrib.update({k: xml_safe(v) for k, v in element.attrib.items()})
        if element.text:
            element.text = xml_safe(element.text)
    ET.indent(root)
    with atomic_path(path) as tmp:
        ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
