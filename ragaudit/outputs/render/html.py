"""`report.html`: the report as one self-contained page (docs/reference.md §6).

Python computes the view model here (numbers, states, chart SVG); `templates/report.html` lays it
out with Jinja2 autoescaping, so every piece of report text is escaped. Only markup this package
built and escaped itself is inserted as it is: the chart SVG, the trend panel, the page's CSS and
script, and the drill-down data, JSON that no trace text can close early (`script_json`). The
question drill-down is built in the browser, with DOM text nodes only, from that JSON.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from ragaudit.checks.metrics.lam import STATES, SYMBOLS
from ragaudit.checks.metrics.registry import VIEWS, labels
from ragaudit.core.gatechecks.entry import AT_LEAST, GateCheck
from ragaudit.core.gatechecks.registry import CHECKS
from ragaudit.core.model import Question, Report
from ragaudit.io.config_schema import GateSection
from ragaudit.io.files import atomic_path
from ragaudit.outputs.render import formatting
from ragaudit.outputs.render.formatting import num, pct
from ragaudit.outputs.render.html_view import (
    _charts,
    _checks_by_pipeline,
    _limit,
    _pipelines,
    _round,
    _sections,
    _verdict,
    _zone,
    misses,
    thresholds,
)
from ragaudit.outputs.render.templating import asset, render, stream, trusted

# The config's gate defaults, used only for a threshold that no gate check in the report carries.
# ---- header, verdict, cards ----------------------------------------------------------------


RUN_METRICS = VIEWS["drill"]
CLAIM_FIELDS = (
    "n",
    "text",
    "citations",
    "cited_by",
    "grounding",
    "support",
    "hallucinated",
    "anchor",
    "anchor_support",
    "key_share",
    "missing",
    "conflicts",
)
ISSUES_SHOWN = 200  # occurrences listed per code; issues.jsonl keeps every one
QUESTION_ROWS = 2_000  # the page stays a few MB however many questions a run has
CHECK_LINKS = 200  # failing questions a gate check links to; report.json names every one
QUESTION_COLUMNS = (
    ("pipeline", "text"),
    ("qid", "text"),
    ("question", "text"),
    ("section", "text"),
    ("λ", "text"),
    ("correct", "num"),
    ("css", "num"),
    ("spread", "num"),
    ("match", "num"),
    ("coverage", "num"),
    ("ΔS", "num"),
)


def _header(report: dict[str, Any]) -> dict[str, Any]:
    meta = report.get("meta") or {}
    facts = [
        ("run", meta.get("run_id")),
        ("finished", meta.get("finished")),
        ("embedder", meta.get("embed_model_id") or meta.get("embed_model")),
        ("seeds", ", ".join(map(str, meta.get("seeds") or [])) or None),
        ("variants", meta.get("paraphrases")),
        ("ragaudit", (meta.get("versions") or {}).get("ragaudit")),
    ]
    return {"facts": [(k, v) for k, v in facts if v not in (None, "")]}


def _banner(report: dict[str, Any]) -> dict[str, Any]:
    verdict = _verdict(report)
    checks = _checks_by_pipeline(report)
    pipes = report.get("pipelines") or {}
    lines = []
    for name in _pipelines(report):
        mine = checks.get(name, [])
        failed = [c for c in mine if not c["passed"]]
        state = "neutral" if not mine else "fail" if failed else "pass"
        lines.append(
            {
                "state": state,
                "mark": {"pass": "✓", "fail": "✗"}.get(state, "–"),
                "name": name,
                "checks": len(mine),
                "failed": [_check(c) for c in failed],
                "aborted": (pipes.get(name) or {}).get("aborted"),
            }
        )
    return {
        "verdict": verdict,
        "word": {"pass": "Gate passed", "fail": "Gate failed"}.get(verdict, f"Gate {verdict}"),
        "failing": sum(1 for line in lines if line["failed"]),
        "lines": lines,
    }


def pipeline_label(pipe: dict[str, Any]) -> str:
    """What a pipeline is, from what it was given and what it reported: a reference pipeline by its
    retriever and reranker, any other by the store and model its index named; then its k."""
    opts, index = pipe.get("options") or {}, pipe.get("index") or {}
    if pipe.get("kind") == "reference":
        parts = [pipe.get("kind"), opts.get("retriever"), opts.get("rerank")]
    else:
        parts = [pipe.get("kind"), index.get("store"), index.get("embed_model")]
    parts.append(f"k={opts['k']}" if opts.get("k") else None)
    return " · ".join(str(v) for v in parts if v)


def _kpi(label: str, value: str, gate: str, check: dict[str, Any] | None, hint: str = "") -> dict[str, Any]:
    state = "neutral" if check is None else ("pass" if check["passed"] else "fail")
    return {"label": label, "value": value, "gate": gate, "state": state, "hint": hint or gate}


# the gate checks with a card, in the order the page shows them
CARDS = sorted((c for c in CHECKS if c.card is not None), key=lambda c: c.card.rank if c.card else 0)


def _card(check: GateCheck, p: dict[str, Any], found: dict[str, Any] | None, t: GateSection) -> dict[str, Any]:
    """A check's card: its figure, its bar in force (`gate ≥` a share, `max ≤` a number) and the mean of
    the metric it reads."""
    card = check.card
    assert card is not None
    said = {key: t.threshold(key) for key in check.keys}
    value = card.value(p, found, t)
    words, spec = ("gate ≥", "{:.0%}") if check.op == AT_LEAST else ("max ≤", "{:g}")
    gate = _limit(words, t.threshold(check.name), spec)
    if card.mean is not None:
        gate += f" · mean {num((p.get('metrics') or {}).get(card.mean))}"
    return _kpi(
        card.label.format(**said),
        pct(value) if card.form == "pct" else num(value),
        gate,
        found,
        card.hint.format(**said),
    )


def _cards(report: dict[str, Any], t: GateSection) -> dict[str, Any]:
    s = report["summary"]
    issues = s.get("issues") or {}
    stats = [
        ("Runs", s.get("runs"), ""),
        ("Questions", s.get("questions"), ""),
        ("Pipelines", len(s["pipelines"]), ""),
        ("Errors", issues.get("errors", 0), "bad" if issues.get("errors") else ""),
        ("Warnings", issues.get("warnings", 0), "warn" if issues.get("warnings") else ""),
    ]
    unmatched = s.get("unmatched_count", len(s.get("unmatched_runs") or []))
    if unmatched:
        stats.append(("Unmatched runs", unmatched, "warn"))
    checks = _checks_by_pipeline(report)
    pipes = report.get("pipelines") or {}
    cards = []
    for name in _pipelines(report):
        p = s["pipelines"].get(name)
        if p is None:
            continue
        by = {c["name"]: c for c in checks.get(name, [])}
        kind = pipeline_label(pipes.get(name) or {})
        kpis = [_card(check, p, by.get(check.name), t) for check in CARDS]
        cards.append(
            {
                "name": name,
                "verdict": ("fail" if any(not c["passed"] for c in by.values()) else "pass") if by else "neutral",
                "gated": bool(by),
                "kind": kind,
                "runs": p.get("runs"),
                "errored": p.get("errored"),
                "hallucinating": p.get("hallucinating_runs"),
                "kpis": kpis,
            }
        )
    return {"stats": stats, "cards": cards}


# ---- gate checks, questions, issues ----------------------------------------------------------


def _check(c: dict[str, Any]) -> dict[str, Any]:
    """A gate check with every field the page shows (a report may leave some out)."""
    failing = (c.get("questions") or []) if not c["passed"] else []
    return {
        "pipeline": c["pipeline"],
        "name": c["name"],
        "state": "pass" if c["passed"] else "fail",
        "threshold": c.get("threshold"),
        "bound": c.get("bound") or formatting.limit(c.get("threshold")),
        "value": c.get("value"),
        # a passing check's list (questions below a per-question bar while the rate still passes)
        # flags nothing: the column names the questions that make a check fail, CHECK_LINKS at most
        "questions": failing[:CHECK_LINKS],
        "more": max(0, len(failing) - CHECK_LINKS),
        "detail": c.get("detail"),
    }


def _gate(report: dict[str, Any]) -> dict[str, Any]:
    checks = list(enumerate((report.get("gate") or {}).get("checks", [])))
    checks.sort(key=lambda ic: (bool(ic[1]["passed"]), ic[0]))
    rows = [_check(c) for _, c in checks]
    return {"rows": rows, "failed": sum(1 for r in rows if r["state"] == "fail")}


def _question_row(i: int, q: dict[str, Any], t: GateSection) -> dict[str, Any]:
    lam, m = q.get("lambda") or {}, q.get("metrics") or {}
    match, cov, ds = m.get("citation_match"), m.get("coverage"), m.get("delta_s_qr")
    runs, correct = (q.get("stats") or {}).get("runs"), q.get("correct")
    share = correct / runs if runs and correct is not None else None
    return {
        "i": i,
        "pipeline": q["pipeline"],
        "qid": q["qid"],
        "question": q.get("question"),
        "doc_id": q.get("doc_id"),
        "section_id": q.get("section_id"),
        "search": " ".join(
            str(q.get(k) or "") for k in ("pipeline", "qid", "question", "section_id", "doc_id")
        ).lower(),
        "state": lam.get("state") or "",
        "symbol": lam.get("symbol"),
        "correct": correct,
        "runs": runs,
        "share": share,
        "share_bad": share not in (None, 1.0),
        # css, spread, match and coverage, each with whether it misses its threshold
        "numbers": (
            (lam.get("css"), False),
            (lam.get("spread"), False),
            (match, misses(match, t.citation_match_min)),
            (cov, misses(cov, t.coverage_min)),
        ),
        "delta_s": ds,
        "zone": _zone(ds),
    }


def shown_questions(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The question rows the page holds: those with runs to open first, then the others worst
    first (fewest correct runs), at most QUESTION_ROWS; report.json has them all."""
    questions: list[dict[str, Any]] = report.get("questions", [])
    if len(questions) <= QUESTION_ROWS:
        return questions

    def worst(q: dict[str, Any]) -> tuple[bool, float, str, str]:
        stats = q.get("stats") or {}
        return ("runs" not in q, (q.get("correct") or 0) / max(stats.get("runs") or 1, 1), q["pipeline"], q["qid"])

    return sorted(questions, key=worst)[:QUESTION_ROWS]


def _questions(report: dict[str, Any], t: GateSection) -> dict[str, Any]:
    questions = shown_questions(report)
    return {
        "columns": QUESTION_COLUMNS,
        "pipelines": _pipelines(report),
        "states": [(st, SYMBOLS[st]) for st in STATES],
        "rows": [_question_row(i, q, t) for i, q in enumerate(questions)],
        "total": report["summary"].get("question_rows") or len(report.get("questions", [])),
        "held": len(report.get("questions", [])),
    }


def _issues(report: dict[str, Any]) -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for issue in [*(report.get("gold_check") or []), *(report.get("issues") or [])]:
        groups[issue.get("code") or "?"].append(issue)
    order = sorted(groups, key=lambda c: (groups[c][0].get("severity") != "error", -len(groups[c]), c))
    shown = []
    for code in order:
        found = groups[code]
        rows = [
            {
                **{k: i.get(k) for k in ("pipeline", "qid", "variant", "seed", "seg", "path", "message")},
                "where": ":".join(str(x) for x in (i.get("file"), i.get("line")) if x is not None),
            }
            for i in found[:ISSUES_SHOWN]
        ]
        shown.append(
            {
                "code": code,
                "severity": found[0].get("severity") or "error",
                "fix": next((i["fix"] for i in found if i.get("fix")), ""),
                "count": len(found),
                "rows": rows,
                "more": max(len(found) - ISSUES_SHOWN, 0),
                "open": len(order) <= 3,
            }
        )
    unmatched = report["summary"].get("unmatched_runs") or []
    return {"groups": shown, "unmatched": len(unmatched), "unmatched_shown": ", ".join(map(str, unmatched[:50]))}


def _labels(report: dict[str, Any]) -> dict[str, Any] | None:
    """The agreement with the labels of `[labels] path`, and each pipeline's corrected good-run rate."""
    found = (report.get("meta") or {}).get("labels")
    if not found:
        return None

    def pct(value: float | None) -> str:
        return "–" if value is None else f"{100 * value:.1f}%"

    rows = []
    for d in found.get("agreement") or []:
        m = d.get("matrix") or {}
        ci = d.get("kappa_ci")
        rows.append(
            {
                "dimension": d["dimension"],
                "runs": d["runs"],
                "cells": [m.get(k, 0) for k in ("label_yes_verdict_yes", "label_yes_verdict_no",
                                                 "label_no_verdict_yes", "label_no_verdict_no")],
                "kappa": "–" if d.get("kappa") is None else f"{d['kappa']:.2f}",
                "ci": f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "–",
                "precision": "–" if d.get("precision") is None else f"{d['precision']:.2f}",
                "recall": "–" if d.get("recall") is None else f"{d['recall']:.2f}",
            }
        )  # fmt: skip
    estimates = [
        {
            "pipeline": name,
            "rate": pct(e.get("rate")),
            "corrected": pct(e.get("corrected")),
            "ci": f"[{pct(e['ci'][0])}, {pct(e['ci'][1])}]" if e.get("ci") else "–",
            "labelled": e.get("labelled", 0),
            "why_not": e.get("why_not") or "",
        }
        for name, e in sorted((found.get("estimates") or {}).items())
    ]
    return {
        "path": found.get("path"),
        "sha256": str(found.get("sha256") or "")[:19],
        "labelled": found.get("labelled", 0),
        "stale": found.get("stale", 0),
        "rows": rows,
        "estimates": estimates,
    }


def _footer(report: dict[str, Any]) -> dict[str, Any]:
    meta = report.get("meta") or {}
    inputs = meta.get("inputs") or {}
    return {
        "schema_version": report.get("schema_version"),
        "inputs": [(k, str(v)[:12]) for k, v in sorted(inputs.items())],
        "started": meta.get("started"),
    }


# ---- embedded data and the page --------------------------------------------------------------


def _some(mapping: dict[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """The keys that have a value, floats cut to 4 decimals: the drill-down reads a missing key as null."""
    return {k: _round(mapping[k]) for k in keys if mapping.get(k) is not None}


def drill_data(report: dict[str, Any], t: GateSection) -> dict[str, Any]:
    """What the drill-down shows, and nothing else: the page stays a few MB for thousands of runs."""
    used: set[str] = set()
    questions = []
    for q in shown_questions(report):
        runs = []
        for r in q.get("runs") or []:
            spans = [
                _some(s, ("ref", "snippet_id", "k_pos", "k_final", "score_norm", "rerank_score", "cited"))
                for s in r.get("spans") or []
            ]
            used.update(s["ref"] for s in spans if s.get("ref"))
            claims = [_some(c, CLAIM_FIELDS) for c in r.get("claims") or []]
            run = _some(r, ("variant", "seed", "query", "error", "zone", "correct", "why", "errored"))
            # The claims carry the answer's text; the whole answer is kept only when there are none.
            run.update(metrics=_some(r.get("metrics") or {}, RUN_METRICS), claims=claims, spans=spans)
            if r.get("steps"):
                run["steps"] = r["steps"]
                run["chain"] = r.get("chain")
                run["attribution"] = r.get("attribution")
            if not claims and r.get("answer") is not None:
                run["answer"] = r["answer"]
            runs.append(run)
        questions.append(
            {
                "pipeline": q["pipeline"],
                "qid": q["qid"],
                "question": q.get("question"),
                "section_id": q.get("section_id"),
                "lambda": {k: _round(v) for k, v in (q.get("lambda") or {}).items()},
                "gold": q.get("gold"),
                "runs": runs,
                **({"more": q["runs_omitted"]} if q.get("runs_omitted") else {}),
            }
        )
    snippets = report.get("snippets") or {}
    return {
        "questions": questions,
        "snippets": {ref: snippets[ref] for ref in sorted(used) if ref in snippets},
        "thresholds": t.model_dump(exclude={"from_", "sources", "not_gated", "pipelines"}),
        "labels": {n: shown for n, shown in labels((report.get("meta") or {}).get("metrics")).items() if n != shown},
    }


def script_json(value: object) -> str:
    """JSON that is inert inside <script>: no `<`, `>` or `&` survives, so `</script>` cannot appear."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _page(report: dict[str, Any], trend: str) -> dict[str, Any]:
    """What the page's template reads."""
    t = thresholds(report)
    return dict(
        verdict=_verdict(report),
        t=t,
        header=_header(report),
        banner=_banner(report),
        summary=_cards(report, t),
        charts=_charts(report, t),
        sections=_sections(report, t),
        gate=_gate(report),
        labelled=_labels(report),
        trend=trusted(trend),
        questions=_questions(report, t),
        issues=_issues(report),
        footer=_footer(report),
        style=trusted(asset("report.css")),
        data=trusted(script_json(drill_data(report, t))),
        script=trusted(asset("report.js")),
    )


def render_html(report: dict[str, Any], trend: str = "") -> str:
    """The page; `trend` is the trend panel's HTML (`ragaudit.outputs.render.trends`, which escapes what it
    shows), placed before the questions."""
    return render("report.html", **_page(report, trend))


def write_html(path: Path, report: Report, trend: str = "", questions: list[Question] | None = None) -> None:
    """report.html, written as the template yields it (the text `render_html` gives, never held
    whole). The page's view model reads the report as report.json holds it (`questions`: the rows it
    holds, when not all of them): the same document the page embeds for its drill-down."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        out.writelines(stream("report.html", **_page(report.to_json(questions=questions), trend)))
