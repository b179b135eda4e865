"""report.html: self-contained, escaped, and working in a real headless Chromium."""

from __future__ import annotations

import copy
import json
import re

import pytest

from ragaudit.core.model import Report
from ragaudit.outputs.render import charts
from ragaudit.outputs.render.html import drill_data, render_html, write_html
from ragaudit.outputs.render.html_view import section_result, thresholds

PAYLOAD = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1"></script>'
DOC = (
    "# Policies\n\nEvery rule here applies to all staff.\n\n## Keys\n\n"
    "Hardware keys are rotated every 12 months. Admins keep two keys.\n\n## Passwords\n\n"
    f"Passwords rotate every 90 days. {PAYLOAD}\n"
)
GOLD_TEXT = "Hardware keys are rotated every 12 months."
KEYS_TEXT = "## Keys\n\n" + GOLD_TEXT + " Admins keep two keys."
PWD_TEXT = f"## Passwords\n\nPasswords rotate every 90 days. {PAYLOAD}"
METRICS = (
    "citation_match",
    "citation_precision",
    "citation_recall",
    "coverage",
    "delta_s_qr",
    "delta_s_ra",
    "grounded",
    "hallucinations",
    "hit@k",
    "mrr",
    "ndcg@k",
    "recall@k",
    "support",
)


def _context(start: int, end: int) -> dict:
    return {"before": DOC[max(0, start - 40) : start], "after": DOC[end : end + 40]}


def _snippet(snippet_id: str, section: str, text: str) -> dict:
    start = DOC.index(text)
    return {
        "snippet_id": snippet_id,
        "doc_id": "policies",
        "section_id": section,
        "offsets": {"start": start, "end": start + len(text), "unit": "char"},
        "text": text,
        "context": _context(start, start + len(text)),
    }


def _metrics(match: float, ds: float) -> dict:
    m = dict.fromkeys(METRICS, 1.0)
    m.update(citation_match=match, coverage=match, delta_s_qr=ds, delta_s_ra=ds, support=None, grounded=None)
    return m


def _run(pipeline: str, qid: str, variant: int, cited: str, ds: float, match: float) -> dict:
    segment = f"Keys rotate yearly. {PAYLOAD}" if qid == "PWD-1" else "Keys rotate every 12 months."
    return {
        "pipeline": pipeline,
        "qid": qid,
        "variant": variant,
        "seed": 1,
        "error": None,
        "query": f"{qid} variant {variant} {PAYLOAD}",
        "zone": "stable" if ds < 0.4 else "transit",
        "metrics": _metrics(match, ds),
        "citations": [cited],
        "answer": f"{segment} [{cited}]",
        "segments": [{"seg": 1, "text": segment, "citations": [cited]}],
        "claims": [
            {
                "n": 1,
                "seg": 1,
                "text": segment,
                "citations": [cited],
                "cited_by": "segment",
                "grounding": "supported",
                "support": 0.8,
                "hallucinated": [],
                "anchor": "states" if match else None,
                "anchor_support": 0.9 if match else None,
                "key_share": 1.0 if match else None,
                "drawn": 1.0 if match else None,
                "missing": [],
                "conflicts": [],
            }
        ],
        "spans": [
            {
                "ref": "keys",
                "snippet_id": "policies:0002",
                "score_norm": 0.9,
                "score_raw": 3.1,
                "rerank_score": None,
                "k_pos": 1,
                "k_final": None,
                "cited": cited == "policies:0002",
            },
            {
                "ref": "pwd",
                "snippet_id": "policies:0003",
                "score_norm": 0.4,
                "score_raw": 1.2,
                "rerank_score": None,
                "k_pos": 2,
                "k_final": None,
                "cited": cited == "policies:0003",
            },
        ],
    }


def _question(pipeline: str, qid: str, state: str, ds: float) -> dict:
    section = "policies/keys" if qid == "KEYS-1" else "policies/passwords"
    match = 1.0 if qid == "KEYS-1" else 0.0
    cited = "policies:0002" if qid == "KEYS-1" else "policies:0003"
    start = DOC.index(GOLD_TEXT)
    return {
        "pipeline": pipeline,
        "qid": qid,
        "doc_id": "policies",
        "section_id": section,
        "question": f"How often are keys rotated? {PAYLOAD}" if qid == "PWD-1" else "How often are keys rotated?",
        "lambda": {"state": state, "symbol": {"convergent": "→", "chaotic": "×"}[state], "css": 1.0, "spread": 0.02},
        "metrics": _metrics(match, ds),
        "stats": {"runs": 2, "correct": 2 if match else 0, "unmatched": 0 if match else 2},
        "gold": {
            "doc_id": "policies",
            "section_id": "policies/keys",
            "anchor": {"start": start, "end": start + len(GOLD_TEXT), "unit": "char", "text": GOLD_TEXT},
            "context": _context(start, start + len(GOLD_TEXT)),
            "reference_answer": "Every 12 months.",
            "decoy": None,
        },
        "runs": [_run(pipeline, qid, v, cited, ds + v / 100, match) for v in (0, 1)],
    }


def tiny_report() -> dict:
    """Two pipelines × two questions × two runs, with markup-like trace text everywhere it can go."""
    questions = [
        _question(p, q, "convergent" if q == "KEYS-1" else "chaotic", ds)
        for p, base in (("alpha", 0.30), ("beta", 0.50))
        for q, ds in (("KEYS-1", base), ("PWD-1", base + 0.1))
    ]
    summary_pipe = {
        "runs": 4,
        "questions": 2,
        "errors": 1,
        "metrics": _metrics(0.5, 0.4),
        "citation_match_rate": 0.5,
        "lambda": {"convergent": 1, "recursive": 0, "chaotic": 1, "divergent": 0},
        "zones": {"stable": 2, "transit": 2, "risk": 0, "danger": 0},
    }
    checks = [
        {
            "pipeline": p,
            "name": "citation_match_min",
            "threshold": 0.95,
            "value": 0.5,
            "passed": False,
            "questions": ["PWD-1"],
            "detail": PAYLOAD,
        }
        for p in ("alpha", "beta")
    ]
    checks.insert(
        0,
        {
            "pipeline": "alpha",
            "name": "max_errors",
            "threshold": 0,
            "value": 0,
            "passed": True,
            "questions": [],
            "detail": "",
        },
    )
    issue = {
        "code": "dangling_citation",
        "severity": "error",
        "qid": "PWD-1",
        "variant": 0,
        "seed": 1,
        "path": "$.answer.segments[0]",
        "message": f"cites {PAYLOAD} which is not retrieved",
        "fix": "cite only retrieved snippets",
        "pipeline": "alpha",
        "file": "traces.jsonl",
        "line": 3,
    }
    return {
        "schema_version": "ragaudit.report/1",
        "meta": {
            "run_id": "tiny",
            "finished": "2026-01-01T00:00:00Z",
            "seeds": [1],
            "paraphrases": 2,
            "versions": {"ragaudit": "0.1.0"},
            "inputs": {"gold": "ab" * 32},
        },
        "summary": {
            "verdict": "fail",
            "runs": 8,
            "questions": 2,
            "issues": {"errors": 1, "warnings": 0, "by_code": {"dangling_citation": 1}},
            "pipelines": {"alpha": copy.deepcopy(summary_pipe), "beta": copy.deepcopy(summary_pipe)},
            "sections": [
                {
                    "pipeline": p,
                    "doc_id": "policies",
                    "section_id": s,
                    "qids": [q],
                    "convergent": c,
                    "metrics": _metrics(m, 0.3),
                }
                for p in ("alpha", "beta")
                for s, q, c, m in (("policies/keys", "KEYS-1", 1, 1.0), ("policies/passwords", "PWD-1", 0, 0.0))
            ],
            "unmatched_runs": [],
        },
        "gate": {"verdict": "fail", "pipelines": ["alpha", "beta"], "checks": checks},
        "questions": questions,
        "snippets": {
            "keys": _snippet("policies:0002", "policies/keys", KEYS_TEXT),
            "pwd": _snippet("policies:0003", "policies/passwords", PWD_TEXT),
        },
        "issues": [issue],
        "pipelines": {p: {"kind": "replay", "options": {}, "index": None, "aborted": None} for p in ("alpha", "beta")},
    }


def _data_block(page: str) -> str:
    match = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)
    assert match
    return match.group(1)


# ---- without a browser ---------------------------------------------------------------------


def test_page_is_self_contained():
    page = render_html(tiny_report())
    for needle in ("<script src", "<link", "@import", "url(", "http://", "https://", "<iframe", "<img"):
        assert needle not in page.lower(), needle
    assert "default-src 'none'" in page  # the browser itself refuses any fetch


def test_trace_text_only_ever_appears_escaped():
    page = render_html(tiny_report())
    assert PAYLOAD not in page
    assert "window.__pwned=1</script>" not in page
    assert page.count("<script") == 2 and page.count("</script>") == 2  # the data block and the code
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page  # question text, issue message, check detail
    data = _data_block(page)
    assert "<" not in data and ">" not in data and "&" not in data
    assert "\\u003cscript\\u003e" in data


def test_embedded_data_round_trips():
    report = tiny_report()
    data = json.loads(_data_block(render_html(report)))
    assert data == json.loads(json.dumps(drill_data(report, thresholds(report))))
    run = data["questions"][1]["runs"][0]
    assert PAYLOAD in run["query"] and PAYLOAD in run["claims"][0]["text"]
    assert set(data["snippets"]) == {"keys", "pwd"}
    assert data["snippets"]["pwd"]["text"] == PWD_TEXT


def test_non_finite_numbers_do_not_break_the_data_block():
    report = tiny_report()
    report["questions"][0]["runs"][0]["metrics"]["delta_s_qr"] = float("nan")
    report["questions"][0]["lambda"]["spread"] = float("inf")
    data = json.loads(_data_block(render_html(report)), parse_constant=pytest.fail)
    assert data["questions"][0]["runs"][0]["metrics"]["delta_s_qr"] is None


def test_drill_data_keeps_only_what_the_page_shows():
    data = drill_data(tiny_report(), thresholds(tiny_report()))
    run = data["questions"][0]["runs"][0]
    assert "answer" not in run  # its claims carry the text
    assert "drawn" not in run["claims"][0] and "cited_by" in run["claims"][0]
    assert "score_raw" not in run["spans"][0] and "rerank_score" not in run["spans"][0]
    assert "support" not in run["metrics"]  # None values are left out; the page reads them as missing


def test_verdict_comes_first_and_failing_checks_lead_the_gate_table():
    page = render_html(tiny_report())
    order = [
        page.index(f'id="{part}"')
        for part in ("verdict", "summary", "charts", "sections", "gate", "questions", "issues")
    ]
    assert order == sorted(order)
    gate = page[page.index('<table class="gate">') :]
    assert gate.index('<tr class="fail">') < gate.index('<tr class="pass">')
    assert "Gate failed" in page


def test_issues_are_grouped_by_code_with_their_fix():
    report = tiny_report()
    report["issues"].append({**report["issues"][0], "qid": "KEYS-1"})
    report["issues"].append(
        {
            "code": "uncited_segment",
            "severity": "warning",
            "qid": "KEYS-1",
            "variant": 1,
            "seed": 1,
            "path": "$",
            "message": "segment 2 cites nothing",
            "fix": "cite every segment",
        }
    )
    page = render_html(report)
    issues = page[page.index('id="issues"') :]
    assert issues.count('class="issue-group') == 2
    assert issues.index("dangling_citation") < issues.index("uncited_segment")  # errors first
    assert "cite only retrieved snippets" in issues and "cite every segment" in issues
    assert '<span class="count">2</span>' in issues


def test_thresholds_are_read_back_from_the_gate():
    report = tiny_report()
    report["gate"]["checks"].append(
        {
            "pipeline": "alpha",
            "name": "coverage_pass_rate",
            "passed": True,
            "value": 1.0,
            "threshold": 0.8,
            "settings": {"coverage_min": 0.5},
            "questions": [],
        }
    )
    t = thresholds(report)
    assert t.citation_match_min == 0.95 and t.coverage_min == 0.5 and t.coverage_pass_rate == 0.8
    assert thresholds({"summary": {}, "gate": None}).delta_s_excess_max == 0.25


def test_the_page_shows_a_check_as_the_gate_had_it_gated_or_not():
    """A check a calibration left ungated reads "not gated" on the page, not the default bar; the
    absolute ΔS bar is drawn and named only when a check carries it."""
    report = tiny_report()
    plain = render_html(report)
    assert "gate delta_s_max" not in plain and "max ≤ 0.25 · mean" in plain  # the default excess bar
    ungated = {"passed": True, "value": 0.4, "questions": [], "detail": "not gated: does not separate here"}
    gated = {"passed": True, "value": 0.7, "questions": []}
    report["gate"]["checks"] += [
        {**ungated, "pipeline": p, "name": "delta_s_excess_max", "threshold": None} for p in ("alpha", "beta")
    ] + [{**gated, "pipeline": p, "name": "delta_s_max", "threshold": 0.8} for p in ("alpha", "beta")]
    t = thresholds(report)
    assert (t.delta_s_excess_max, t.delta_s_max, t.lambda_forbid) == (None, 0.8, ["divergent"])
    page = render_html(report)
    assert "max ≤ 0.25" not in page and "not gated · mean" in page
    assert "gate delta_s_max" in page


def test_section_result():
    t = thresholds(tiny_report())
    good = {"qids": ["A"], "convergent": 1, "metrics": {"citation_match": 1.0, "coverage": 1.0, "delta_s_excess": 0.0}}
    assert section_result(good, t) == "pass"
    assert section_result({**good, "convergent": 0}, t) == "warn"
    assert section_result({**good, "metrics": {**good["metrics"], "delta_s_excess": 0.3}}, t) == "warn"
    assert section_result({**good, "metrics": {**good["metrics"], "citation_match": 0.5}}, t) == "fail"
    assert section_result({**good, "metrics": {**good["metrics"], "coverage": None}}, t) == "pass"


def test_sparse_report_renders():
    """Retrieval-only runs, errors, token units, no gate, no sections, no snippets: still a page."""
    report = tiny_report()
    report["gate"] = {"verdict": "pass", "pipelines": [], "checks": []}
    report["summary"]["sections"] = []
    report["snippets"] = {
        "keys": {**report["snippets"]["keys"], "context": None, "offsets": {"start": 3, "end": 9, "unit": "token"}}
    }
    run = report["questions"][0]["runs"][0]
    run.update(error=f"boom {PAYLOAD}", answer=None, segments=[], claims=[], metrics=dict.fromkeys(METRICS), zone=None)
    report["questions"][0]["lambda"] = {"state": "divergent", "symbol": "←", "css": None, "spread": None}
    report["questions"][0]["gold"]["context"] = None
    page = render_html(report)
    assert "No gate checks were run." in page and "No per-section results." in page
    assert PAYLOAD not in page


def test_write_html_is_deterministic(tmp_path):
    write_html(tmp_path / "a.html", Report.from_json(tiny_report()))
    write_html(tmp_path / "b.html", Report.from_json(tiny_report()))
    assert (tmp_path / "a.html").read_bytes() == (tmp_path / "b.html").read_bytes()


def test_histogram_bins_and_bands():
    assert charts.bin_counts([0.0, 0.1, 0.4, 0.999, 1.0], 4) == [2, 1, 0, 2]
    svg = charts.histogram(
        [0.1, 0.5, 0.5], bins=10, bands=[(0, 0.4, "z-stable", "stable <b>")], threshold=0.45, label="a <label>"
    )
    assert svg.count('class="bar"') == 2 and 'class="band z-stable"' in svg
    assert "<b>" not in svg and "&lt;label&gt;" in svg
    bars = charts.stacked_bars([("p<1>", [("convergent", 3), ("chaotic", 1)])], marker=0.8, marker_label="gate")
    assert 'class="s-convergent"' in bars and "p&lt;1&gt;" in bars


# ---- in headless Chromium ------------------------------------------------------------------


@pytest.fixture(scope="module")
def driver():
    from helpers import chromium

    with chromium(1400, 1000, browser_logs=True) as browser:
        yield browser


def _click(driver, element) -> None:
    """Click after centring: the sticky page header must not sit over the target."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center', behavior: 'instant'})", element)
    element.click()


def _visible_rows(driver) -> list:
    return [r for r in driver.find_elements("css selector", "#qtable tbody tr") if r.is_displayed()]


@pytest.mark.browser
def test_page_in_chromium(driver, tmp_path):
    from selenium.webdriver.common.by import By

    path = tmp_path / "report.html"
    write_html(path, Report.from_json(tiny_report()))
    driver.get(path.as_uri())
    assert driver.find_element(By.ID, "verdict").text.startswith("Gate failed")
    assert len(_visible_rows(driver)) == 4

    box = driver.find_element(By.ID, "qfilter")
    box.send_keys("keys-1")
    assert len(_visible_rows(driver)) == 2
    assert driver.find_element(By.ID, "qcount").text == "2 of 4"
    driver.find_element(By.CSS_SELECTOR, "#qpipeline option[value='beta']").click()
    assert [r.get_attribute("data-p") for r in _visible_rows(driver)] == ["beta"]
    box.clear()
    driver.execute_script("document.getElementById('qfilter').dispatchEvent(new Event('input'))")
    driver.find_element(By.CSS_SELECTOR, "#qlambda option[value='chaotic']").click()
    rows = _visible_rows(driver)
    assert len(rows) == 1 and rows[0].find_element(By.CSS_SELECTOR, ".qid").text == "PWD-1"
    assert PAYLOAD in rows[0].find_element(By.CSS_SELECTOR, ".qtext").get_attribute("textContent")

    _click(driver, rows[0])  # beta / PWD-1: cites the payload snippet, which does not overlap the gold span
    drill = driver.find_element(By.ID, "drill")
    assert drill.is_displayed()
    assert len(drill.find_elements(By.CSS_SELECTOR, "table.runs tbody tr")) == 2
    cited = drill.find_element(By.CSS_SELECTOR, "mark.hl-cited")
    assert cited.get_attribute("textContent") == PWD_TEXT
    assert drill.find_element(By.CSS_SELECTOR, "mark.hl-gold").get_attribute("textContent") == GOLD_TEXT
    retrieved = drill.find_element(By.CSS_SELECTOR, "mark.hl-retrieved")
    assert retrieved.get_attribute("textContent") == KEYS_TEXT
    assert retrieved.find_element(By.CSS_SELECTOR, ".in-gold").get_attribute("textContent") == GOLD_TEXT
    assert PAYLOAD in drill.find_element(By.CSS_SELECTOR, ".seg .t").get_attribute("textContent")

    _click(driver, drill.find_elements(By.CSS_SELECTOR, "table.runs tbody tr")[1])
    assert "variant 1" in drill.find_element(By.CSS_SELECTOR, ".run-detail h4").text.lower()

    header = driver.find_element(By.CSS_SELECTOR, "#qtable thead th:nth-child(10) button")
    pipeline = driver.find_element(By.CSS_SELECTOR, "#qpipeline option[value='']")
    pipeline.click()
    driver.find_element(By.CSS_SELECTOR, "#qlambda option[value='']").click()
    _click(driver, header)
    _click(driver, header)
    assert header.find_element(By.XPATH, "..").get_attribute("aria-sort") == "descending"
    values = [float(r.find_elements(By.TAG_NAME, "td")[9].get_attribute("data-v")) for r in _visible_rows(driver)]
    assert values == sorted(values, reverse=True) and len(values) == 4

    _click(driver, driver.find_element(By.CSS_SELECTOR, "#gate details summary"))
    _click(driver, driver.find_element(By.CSS_SELECTOR, "#gate .qlink"))
    assert [r.get_attribute("data-p") for r in _visible_rows(driver)] == ["alpha"]
    assert "PWD-1" in driver.find_element(By.CSS_SELECTOR, "#drill h3").text

    assert driver.execute_script("return window.__pwned") is None
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
    shot = tmp_path / "report.png"
    assert driver.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


@pytest.mark.browser
def test_reasoning_chains_are_shown_in_the_drill_down(driver, tmp_path):
    """A chain-of-thought run end to end: runner → step attribution and chain λ → report.html."""
    import sys

    from click.testing import CliRunner
    from helpers import DEMO, FIXTURES, run_dir_of, write_config
    from selenium.webdriver.common.by import By

    from ragaudit.cli.commands import main

    config = write_config(
        tmp_path,
        f'[[pipelines]]\nname = "cot"\nkind = "python"\nfactory = "cot_rag:make"\n'
        f'options = {{corpus = "{DEMO / "corpus"}"}}\n',
        items=2,
        seeds="[1]",
    )
    sys.path.insert(0, str(FIXTURES))
    try:
        result = CliRunner().invoke(main, ["run", str(config), "--no-gate"])
    finally:
        sys.path.remove(str(FIXTURES))
    assert result.exit_code == 0, result.output
    run_dir = run_dir_of(result)
    report = json.loads((run_dir / "report.json").read_text())
    run = report["questions"][0]["runs"][0]
    assert len(run["chain"]["delta_s"]) == 3 and len(run["chain"]["states"]) == 2
    assert run["attribution"]["usage_by_step"]["2"] and run["attribution"]["primary_sources"]
    driver.get((run_dir / "report.html").as_uri())
    _click(driver, _visible_rows(driver)[0])
    chain = driver.find_element(By.CSS_SELECTOR, "#drill .chain")
    assert chain.text.lower().startswith("reasoning chain · λ " + run["chain"]["state"])  # h4 is set in capitals
    assert "Primary sources:" in chain.text and run["attribution"]["primary_sources"][0]["doc_id"] in chain.text
    assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_the_drill_down_labels_the_ranking_metrics_with_their_cutoff():
    report = tiny_report()
    report.setdefault("meta", {})["metrics"] = {"k": 3, "ndcg_k": 7}
    data = drill_data(report, thresholds(report))
    assert data["labels"] == {"hit@k": "hit@3", "recall@k": "recall@3", "ndcg@k": "ndcg@7"}
    assert {"hit@k", "recall@k", "ndcg@k"} <= set(data["questions"][0]["runs"][0]["metrics"])
    assert "DATA.labels['hit@k']" in render_html(report)


def test_a_failing_check_links_to_a_bounded_number_of_its_questions(monkeypatch):
    from ragaudit.outputs.render import html

    monkeypatch.setattr(html, "CHECK_LINKS", 3)
    report = tiny_report()
    failing = [f"Q-{n:02d}" for n in range(8)]
    report["gate"]["checks"][1]["questions"] = failing
    page = render_html(report)
    gate = page[page.index('<table class="gate">') : page.index('id="questions"')]
    linked = re.findall(r'class="qlink" data-p="alpha" data-q="([^"]+)"', gate)
    assert linked == failing[:3]
    assert "<summary>8 questions</summary>" in gate and "and 5 more (report.json lists every one)" in gate
    page = render_html(tiny_report())  # under the bound: every failing question, nothing more said
    assert "more (report.json lists every one)" not in page


def test_the_page_is_written_as_the_template_yields_it(tmp_path, monkeypatch):
    from ragaudit.outputs.render import html

    report = Report.from_json(tiny_report())
    expected = render_html(report.to_json())

    def whole(*args, **kwargs):
        raise AssertionError("write_html rendered the whole page at once")

    monkeypatch.setattr(html, "render", whole)
    html.write_html(tmp_path / "report.html", report)
    assert (tmp_path / "report.html").read_text(encoding="utf-8") == expected


def test_the_section_table_shows_a_bounded_number_of_sections_failing_first(monkeypatch):
    from ragaudit.outputs.render import html_view

    report = tiny_report()
    [template] = [s for s in report["summary"]["sections"] if s["pipeline"] == "alpha"][:1]
    good = {**template["metrics"], "citation_match": 1.0, "coverage": 1.0, "delta_s_excess": 0.0}
    bad = {**good, "citation_match": 0.1}
    report["summary"]["sections"] = [
        {**template, "section_id": f"s{n:02d}", "qids": ["Q"], "convergent": 1, "metrics": bad if n in (4, 7) else good}
        for n in range(10)
    ]
    monkeypatch.setattr(html_view, "SECTION_ROWS", 3)
    page = render_html(report)
    table = page[
        page.index('<table class="sections">') : page.index("</table>", page.index('<table class="sections">'))
    ]
    shown = re.findall(r'<span class="sec">(s\d\d)</span>', table)
    assert shown == ["s00", "s04", "s07"]  # the two failing, then the first of the rest, in section order
    assert "report.json lists all 10" in page
    monkeypatch.setattr(html_view, "SECTION_ROWS", 10)
    assert "report.json lists all" not in render_html(report)
