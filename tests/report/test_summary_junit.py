"""summary.md and junit.xml say, per question, what regressed and which claims their sources do not
support."""

import re
from xml.etree import ElementTree as ET

import pytest

from ragaudit.core.model import Check, Report
from ragaudit.outputs.render.junit import write_junit
from ragaudit.outputs.render.markdown import render_summary


def _claim(n, text, grounding, support=None, hallucinated=()):
    return {"n": n, "text": text, "grounding": grounding, "support": support, "hallucinated": list(hallucinated)}


def report() -> Report:
    run = {
        "variant": 1,
        "seed": 2,
        "correct": True,
        "why": "cites the gold span",
        "claims": [
            _claim(1, "Keys rotate every 12 months.", "supported", 0.93),
            _claim(2, "Lost keys cost 40 dollars.", "unsupported", 0.21, ["40 dollars"]),
            _claim(3, "Badges are blue.", "uncited"),
        ],
    }
    checks = [
        {
            "pipeline": "p",
            "name": "regressions",
            "threshold": 0,
            "bound": "no question loses correct or grounded runs",
            "value": 1,
            "passed": False,
            "questions": ["KEYS-1"],
            "detail": "KEYS-1: 1 runs with unsupported or uncited claims, 0 before",
            "source": "default",
            "reasons": {"KEYS-1": "1 runs with unsupported or uncited claims, 0 before"},
        }
    ]
    document = {
        "gate": {"verdict": "fail", "pipelines": ["p"], "checks": checks},
        "summary": {
            "runs": 1,
            "questions": 1,
            "issues": {"errors": 0, "warnings": 0},
            "pipelines": {
                "p": {
                    "runs": 1,
                    "metrics": {},
                    "lambda": {"convergent": 1},
                    "questions": 1,
                    "errored": 0,
                    "hallucinating_runs": 1,
                }
            },
        },
        "questions": [
            {
                "pipeline": "p",
                "qid": "KEYS-1",
                "lambda": {"state": "convergent", "css": 1.0, "spread": 0.0},
                "metrics": {},
                "stats": {"runs": 1, "correct": 1, "ungrounded": 1},
                "runs": [run],
            }
        ],
    }
    return Report.from_json(document)


def test_summary_names_regressions_and_unsupported_claims():
    text = render_summary(report())
    assert "## Regressions since the baseline" in text
    assert "**p · KEYS-1**: 1 runs with unsupported or uncited claims, 0 before" in text
    assert "## Claims their cited texts do not support" in text
    assert "p · KEYS-1 v1 s2: “Lost keys cost 40 dollars.” (support 0.210; its sources lack 40 dollars)" in text
    assert "“Badges are blue.” (cites nothing)" in text and "Keys rotate" not in text


def test_junit_says_why_for_the_question(tmp_path):
    write_junit(tmp_path / "junit.xml", report())
    [case] = [c for c in ET.parse(tmp_path / "junit.xml").iter("testcase") if c.get("name") == "KEYS-1"]
    failure = case.find("failure")
    assert (
        failure.get("message") == "failed gate checks: regressions: 1 runs with unsupported or uncited claims, 0 before"
    )
    lines = failure.text.splitlines()
    assert "regressions: 1 runs with unsupported or uncited claims, 0 before" in lines
    assert "v1 s2: correct: cites the gold span" in lines
    assert "v1 s2: claim 2 unsupported: Lost keys cost 40 dollars." in lines
    assert "v1 s2: claim 3 uncited: Badges are blue." in lines


def _lambda_report() -> Report:
    """KEYS-1: correct in all 3 runs, λ recursive; the pipeline fails lambda_convergent_min (0.04) and
    passes coverage_pass_rate, which names PWD-1 (one run below coverage_min)."""
    document = report().to_json()
    [question] = document["questions"]
    question["lambda"] = {"state": "recursive", "symbol": "↻", "css": 0.3333, "spread": 0.125}
    question["stats"] = {"runs": 3, "correct": 3}
    question["runs"] = [
        {"variant": v, "seed": 1, "correct": True, "why": f"cites section keys-{v}", "claims": []} for v in range(3)
    ]
    document["gate"]["checks"] = [
        Check("p", "lambda_convergent_min", 0.5, 0.04, False, "0.5", ["KEYS-1"]).to_json(),
        Check("p", "coverage_pass_rate", 0.8, 0.9, True, "0.8 of runs at coverage ≥ 0.7", ["PWD-1"]).to_json(),
    ]
    return Report.from_json(document)


def test_a_question_failing_a_pipeline_wide_check_says_its_own_why(tmp_path):
    """The pipeline's value (0.04) says nothing of this question: its message carries its λ state,
    css and spread, and each run's reason, in junit.xml, the pytest items and summary.md."""
    document = _lambda_report()
    write_junit(tmp_path / "junit.xml", document)
    [case] = [c for c in ET.parse(tmp_path / "junit.xml").iter("testcase") if c.get("name") == "KEYS-1"]
    why = "its λ is recursive (css 0.333, spread 0.125), not convergent"
    assert case.find("failure").get("message") == f"failed gate checks: lambda_convergent_min: {why}"
    lines = case.find("failure").text.splitlines()
    assert f"lambda_convergent_min: {why}" in lines
    assert [line for line in lines if line.startswith("v")] == [
        f"v{v} s1: correct: cites section keys-{v}" for v in range(3)
    ]
    assert f"questions: KEYS-1 ({why})" in render_summary(document).replace("\\", "")


def test_the_gate_table_names_questions_only_under_failing_checks():
    from ragaudit.outputs.render.html import render_html

    page = render_html(_lambda_report().to_json())
    gate = page[page.index('<table class="gate">') : page.index("</table>", page.index('<table class="gate">'))]
    rows = gate.split("<tr")[2:]
    [failing] = [r for r in rows if "lambda_convergent_min" in r]
    [passing] = [r for r in rows if "coverage_pass_rate" in r]
    assert "KEYS-1" in failing and "PWD-1" not in passing


def test_the_threshold_of_every_failing_check_is_shown_as_its_bound(tmp_path):
    """coverage_pass_rate's threshold is a number like every other; its coverage_min shows in its
    bound, never as a dict's text."""
    document = report()
    document.gate.checks.append(
        Check(
            "p", "coverage_pass_rate", 0.9, 0.5, False, "0.9 of runs at coverage ≥ 0.7", settings={"coverage_min": 0.7}
        )
    )
    text = render_summary(document)
    assert "value 0.500, threshold 0.9 of runs at coverage ≥ 0.7" in text and "coverage\\_min" not in text
    write_junit(tmp_path / "junit.xml", document)
    [case] = [c for c in ET.parse(tmp_path / "junit.xml").iter("testcase") if c.get("name") == "coverage_pass_rate"]
    assert (
        case.find("failure").get("message")
        == "coverage_pass_rate: value 0.5000, threshold 0.9 of runs at coverage ≥ 0.7"
    )


def test_a_value_rounding_to_its_threshold_shows_the_digits_that_decide(tmp_path):
    """0.40038 fails a maximum of 0.4: the reports never print it as 0.400 beside 0.4."""
    from ragaudit.outputs.render.html import render_html

    document = report()
    document.gate.checks.append(Check("p", "delta_s_mean_max", 0.4, 0.40038, False, "≤ 0.4"))
    assert "value 0.4004, threshold ≤ 0.4" in render_summary(document)
    write_junit(tmp_path / "junit.xml", document)
    [case] = [c for c in ET.parse(tmp_path / "junit.xml").iter("testcase") if c.get("name") == "delta_s_mean_max"]
    assert case.find("failure").get("message") == "delta_s_mean_max: value 0.4004, threshold ≤ 0.4"
    page = render_html(document.to_json())
    assert ">0.4004<" in page and ">0.400<" not in page


def test_summary_labels_the_ranking_metrics_with_their_cutoff():
    """hit@k is shown at the k the report was scored with; a report without its settings, at the default."""
    scored = report()
    scored.meta["metrics"] = {"k": 3, "ndcg_k": None, "match_tolerance": 30}
    header = next(line for line in render_summary(scored).splitlines() if line.startswith("| pipeline"))
    assert "| hit@3 |" in header and "hit@k" not in header
    assert "| hit@5 |" in render_summary(report())


def test_junit_is_the_document_elementtree_writes_of_its_cases(tmp_path, monkeypatch):
    """However many questions, the cases are written one at a time, as they are made; the file is
    the same indented document an ElementTree of every case would write."""
    import io

    from ragaudit.outputs.render import junit

    document = report()
    failing = document.questions[0]
    document.questions = [
        Report.from_json(
            {"questions": [{**failing.to_json(), "qid": f"Q{n}", "runs": []}], "summary": {"runs": 0, "pipelines": {}}}
        ).questions[0]
        for n in range(30)
    ] + [failing]
    document.gate.checks[0] = Check(**{**document.gate.checks[0].__dict__, "questions": ["KEYS-1", "Q3", "Q7"]})
    made: list[str] = []
    case_of = junit._question_case

    def counted(*args):
        made.append(case_of(*args))
        return made[-1]

    monkeypatch.setattr(junit, "_question_case", counted)
    write_junit(tmp_path / "junit.xml", document)
    assert len(made) == 31

    written = (tmp_path / "junit.xml").read_bytes()
    tree = ET.parse(tmp_path / "junit.xml")
    [questions, gate] = tree.getroot()
    assert (questions.get("tests"), questions.get("failures")) == ("31", "3")
    assert (gate.get("tests"), gate.get("failures")) == ("1", "1")
    failed = sorted(c.get("name") for c in questions if c.find("failure") is not None)
    assert failed == ["KEYS-1", "Q3", "Q7"]
    ET.indent(tree)
    again = io.BytesIO()
    tree.write(again, encoding="utf-8", xml_declaration=True)
    assert written == again.getvalue()


HOSTILE = ["plain", "", 'a "quoted" <b>&amp;</b> > \'', "tab\tnew\nline\r\nreturn", "bell\x07 nul\x00 esc\x1b"]
HOSTILE += ["lone \ud800 surrogate", "\ufffe\uffff", "é λ → 😀", "]]> <!-- x -->", "&#10; &lt;", " spaced  "]


@pytest.mark.parametrize("message", [None, *HOSTILE])
def test_a_testcase_is_escaped_as_elementtree_escapes_it(message):
    """Each case is the text ElementTree writes of the same element, indented at the case's level,
    for every string XML escapes or cannot hold (those become U+FFFD first)."""
    from ragaudit.outputs.render import junit

    not_xml = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

    def safe(text):
        return not_xml.sub("\ufffd", text)

    for name in HOSTILE:
        for detail in HOSTILE:
            case = ET.Element("testcase", classname=safe(f"ragaudit.{detail}"), name=safe(name))
            if message is not None:
                failure = ET.SubElement(case, "failure", message=safe(message))
                failure.text = safe(detail) or None
            ET.indent(case, level=2)
            expected = ET.tostring(case, encoding="unicode")
            assert junit._case(f"ragaudit.{detail}", name, message, detail) == expected


def test_run_on_a_terminal_shows_the_summary_as_text_and_summary_md_keeps_the_markdown(tmp_path):
    """`ragaudit run` with a terminal for stdout: no markdown escapes (delta\\_s\\_excess\\_max) or
    entities (&gt;); summary.md, for a pull request, stays markdown."""
    import os
    import pty
    import subprocess
    import sys

    from helpers import BM25, ROOT, write_config

    config = write_config(tmp_path, BM25, items=6, extra="[gate]\ncoverage_min = 0.99\ncoverage_pass_rate = 1.0\n")
    ours, theirs = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "RAGAUDIT_CACHE": str(tmp_path / "cache")}
    env.pop("CI", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragaudit", "--quiet", "run", str(config)],
        stdout=theirs,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    os.close(theirs)
    shown = b""
    while True:
        try:
            chunk = os.read(ours, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        shown += chunk
    proc.wait(timeout=300)
    os.close(ours)
    text = shown.decode("utf-8").replace("\r\n", "\n")
    assert proc.returncode == 1, (text, proc.stderr.read())
    assert "\nragaudit: gate FAILED ❌\n" in text and "\n- bm25 · citation_match_min: value 0.944," in text
    assert re.search(r"its lowest coverage [\d.]+ < coverage_min 0.99", text) and "(its λ is recursive (css" in text
    assert "\\" not in text and "&lt;" not in text and "**" not in text and "\n#" not in text, text
    run_dir = tmp_path / re.search(r"run directory: (\S+)", text).group(1)
    summary = (run_dir / "summary.md").read_text(encoding="utf-8")
    assert "\n- **bm25 · citation\\_match\\_min**: value 0.944," in summary and "&lt; coverage\\_min 0.99" in summary
