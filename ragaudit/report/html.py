"""`report.html`: the report as one self-contained page (docs/reference.md §6).

Python computes the view model here (numbers, states, chart SVG); `templates/report.html` lays it
out with Jinja2 autoescaping, so every piece of report text is escaped. Only markup this package
built and escaped itself is inserted as it is: the chart SVG, the trend panel, the page's CSS and
script, and the drill-down data, JSON that no trace text can close early (`script_json`). The
question drill-down is built in the browser, with DOM text nodes only, from that JSON.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

from ragaudit.io.config import SCHEMA
from ragaudit.io.files import write_atomic
from ragaudit.metrics.delta_s import ZONES
from ragaudit.metrics.lam import SYMBOLS
from ragaudit.report import charts
from ragaudit.report.formatting import num, pct
from ragaudit.report.templating import asset, render, trusted

# The config's gate defaults, used only for a threshold that no gate check in the report carries.
DEFAULT_GATE = {k: v for k, (_, v) in SCHEMA["gate"].items() if isinstance(v, float)}
STATES = ("convergent", "recursive", "chaotic", "divergent")
RUN_METRICS = (
    "citation_match",
    "coverage",
    "delta_s_qr",
    "delta_s_gold",
    "delta_s_excess",
    "delta_s_topk",
    "delta_s_ra",
    "citation_precision",
    "mrr",
    "support",
    "grounded",
    "anchor_support",
    "key_content",
    "hallucinations",
)
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


def _zone(delta_s) -> str | None:
    if delta_s is None:
        return None
    return next(name for name, upper in ZONES if delta_s < upper)


def _round(value):
    """Floats cut to 4 decimals for the embedded data: enough to display, far smaller. NaN and
    infinity become null, which JSON.parse accepts and they are not."""
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    return value


def thresholds(report: dict) -> dict:
    """The thresholds the report was gated with, read back from its checks."""
    out = dict(DEFAULT_GATE)
    for check in (report.get("gate") or {}).get("checks", []):
        limit = check.get("threshold")
        if check["name"] == "coverage_pass_rate" and isinstance(limit, dict):
            out["coverage_min"] = limit.get("coverage_min", out["coverage_min"])
            out["coverage_pass_rate"] = limit.get("pass_rate", out["coverage_pass_rate"])
        elif check["name"] in out and isinstance(limit, (int, float)) and not isinstance(limit, bool):
            out[check["name"]] = limit
    return out


def _verdict(report: dict) -> str:
    return (report.get("gate") or {}).get("verdict") or report["summary"].get("verdict") or "unknown"


def _pipelines(report: dict) -> list[str]:
    names = list((report.get("gate") or {}).get("pipelines") or [])
    return names + [p for p in report["summary"]["pipelines"] if p not in names]


def _checks_by_pipeline(report: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for check in (report.get("gate") or {}).get("checks", []):
        out[check["pipeline"]].append(check)
    return out


# ---- header, verdict, cards ----------------------------------------------------------------


def _header(report: dict) -> dict:
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


def _banner(report: dict) -> dict:
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


def _kpi(label: str, value: str, gate: str, check: dict | None, hint: str = "") -> dict:
    state = "neutral" if check is None else ("pass" if check["passed"] else "fail")
    return {"label": label, "value": value, "gate": gate, "state": state, "hint": hint or gate}


def _cards(report: dict, t: dict) -> dict:
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
        lam = p.get("lambda") or {}
        n = sum(lam.values()) or p.get("questions") or 0
        conv = lam.get("convergent", 0) / n if n else None
        m = p.get("metrics") or {}
        opts = (pipes.get(name) or {}).get("options") or {}
        kind = [(pipes.get(name) or {}).get("kind"), opts.get("retriever"), opts.get("rerank")]
        kind.append(f"k={opts['k']}" if opts.get("k") else None)
        kpis = [
            _kpi(
                "Citation match",
                pct(p.get("citation_match_rate")),
                f"gate ≥ {t['citation_match_min']:.0%}",
                by.get("citation_match_min"),
            ),
            _kpi(
                f"Coverage ≥ {t['coverage_min']:g}",
                pct(_covered(p, by, t["coverage_min"])),
                f"gate ≥ {t['coverage_pass_rate']:.0%} · mean {num(m.get('coverage'))}",
                by.get("coverage_pass_rate"),
                f"share of runs whose coverage of the gold span is at least {t['coverage_min']:g}",
            ),
            _kpi(
                "ΔS excess",
                num((by.get("delta_s_excess_max") or {}).get("value")),
                _limit("max ≤", t.get("delta_s_excess_max"), "{:g}") + f" · mean {num(m.get('delta_s_excess'))}",
                by.get("delta_s_excess_max"),
                "how much farther from the question the cited text lies than the gold text (worst run)",
            ),
            _kpi(
                "Grounded",
                pct(m.get("fully_grounded")),
                _limit("gate ≥", t.get("grounded_pass_rate"), "{:.0%}"),
                by.get("grounded_pass_rate"),
                "share of answered runs whose every claim its cited texts support",
            ),
            _kpi(
                "λ convergent", pct(conv), f"gate ≥ {t['lambda_convergent_min']:.0%}", by.get("lambda_convergent_min")
            ),
        ]
        cards.append(
            {
                "name": name,
                "verdict": ("fail" if any(not c["passed"] for c in by.values()) else "pass") if by else "neutral",
                "gated": bool(by),
                "kind": " · ".join(str(v) for v in kind if v),
                "runs": p.get("runs"),
                "errored": p.get("errored"),
                "hallucinating": p.get("hallucinating_runs"),
                "kpis": kpis,
            }
        )
    return {"stats": stats, "cards": cards}


# ---- charts and the per-section table --------------------------------------------------------


def _limit(words: str, value, spec: str) -> str:
    return "not gated" if value is None else f"{words} {spec.format(value)}"


def _covered(summary: dict, checks: dict, minimum: float) -> float | None:
    """The share of runs meeting coverage_min, as the gate counted it (a missing coverage does
    not); for an ungated pipeline, from the coverage histogram's bins at or above the bar."""
    check = checks.get("coverage_pass_rate")
    if check is not None:
        return check["value"]
    counts = (summary.get("histograms") or {}).get("coverage")
    if not counts or not sum(counts):
        return None
    bins = len(counts) - 1
    return sum(counts[b] for b in range(bins) if b / bins >= minimum - 1e-9) / sum(counts)


def _charts(report: dict, t: dict) -> dict:
    bands, lo = [], 0.0
    for name, upper in ZONES:
        hi = min(upper, 1.0)
        bands.append((lo, hi, f"z-{name}", name))
        lo = hi
    cov_bands = [
        (0.0, t["coverage_min"], "c-low", f"< {t['coverage_min']:g}"),
        (t["coverage_min"], 1.0, "c-ok", "meets gate"),
    ]
    checks = _checks_by_pipeline(report)
    delta_s, coverage = [], []
    for name in _pipelines(report):
        p = report["summary"]["pipelines"].get(name) or {}
        histograms = p.get("histograms") or {}
        ds = histograms.get("delta_s_qr") or [0]
        worst = next((c["value"] for c in checks.get(name, []) if c["name"] == "delta_s_max"), None)
        caption = (
            f"{sum(ds[:-1])} runs · mean {num((p.get('metrics') or {}).get('delta_s_qr'))} · max {num(worst)}"
            if sum(ds[:-1])
            else "no ΔS values"
        )
        svg = charts.histogram(
            counts=ds[:-1] or [0] * 40,
            bands=bands,
            threshold=t.get("delta_s_max"),
            label=f"ΔS(query, cited text) per run, {name}",
        )
        delta_s.append({"name": name, "caption": caption, "svg": trusted(svg)})
        cov = histograms.get("coverage") or [0]
        bins = max(len(cov) - 1, 1)
        low = sum(cov[b] for b in range(len(cov) - 1) if (b + 1) / bins <= t["coverage_min"] + 1e-9)
        caption = f"{sum(cov[:-1])} runs · {low} below {t['coverage_min']:g}" + (f" · {cov[-1]} n/a" if cov[-1] else "")
        svg = charts.histogram(
            counts=cov[:-1] or [0] * 20,
            bands=cov_bands,
            threshold=t["coverage_min"],
            label=f"coverage per run, {name}",
        )
        coverage.append({"name": name, "caption": caption, "svg": trusted(svg)})
    rows = [
        (name, [(st, (report["summary"]["pipelines"][name].get("lambda") or {}).get(st, 0)) for st in STATES])
        for name in _pipelines(report)
        if name in report["summary"]["pipelines"]
    ]
    lam = charts.stacked_bars(
        rows,
        marker=t["lambda_convergent_min"],
        marker_label=f"gate {t['lambda_convergent_min']:.0%} convergent",
        label="λ states of the questions per pipeline",
        width=1180,
    )
    return {
        "zones": [name for name, _ in ZONES],
        "states": [(st, SYMBOLS[st]) for st in STATES],
        "delta_s": delta_s,
        "coverage": coverage,
        "lambda_svg": trusted(lam),
    }


def section_result(section: dict, t: dict) -> str:
    """pass, warn or fail for one section of one pipeline; the legend under the table says how."""
    m = section.get("metrics") or {}
    match, cov = m.get("citation_match"), m.get("coverage")
    if match is None or match < t["citation_match_min"] or (cov is not None and cov < t["coverage_min"]):
        return "fail"
    share = section.get("convergent", 0) / max(len(section.get("qids") or []), 1)
    if _far(m.get("delta_s_excess"), t) or share < t["lambda_convergent_min"]:
        return "warn"
    return "pass"


def _far(excess: float | None, t: dict) -> bool:
    """A section's mean ΔS excess above the gate's per-run limit."""
    limit = t.get("delta_s_excess_max")
    return excess is not None and limit is not None and excess > limit


def _section_cell(name: str, s: dict | None, t: dict) -> dict | None:
    if s is None:
        return None
    m = s.get("metrics") or {}
    match, cov, ds = m.get("citation_match"), m.get("coverage"), m.get("delta_s_excess")
    return {
        "pipeline": name,
        "result": section_result(s, t),
        "match": match,
        "coverage": cov,
        "delta_s": ds,
        "match_bad": not (match is not None and match >= t["citation_match_min"]),
        "coverage_bad": not (cov is None or cov >= t["coverage_min"]),
        "delta_s_bad": _far(ds, t),
        "convergent": s.get("convergent"),
        "questions": len(s.get("qids") or []),
    }


def _sections(report: dict, t: dict) -> dict:
    sections = report["summary"].get("sections") or []
    names = [n for n in _pipelines(report) if any(s["pipeline"] == n for s in sections)]
    table: dict[tuple, dict] = defaultdict(dict)
    for s in sections:
        table[(s.get("doc_id") or "", s.get("section_id") or "")][s["pipeline"]] = s
    rows = [
        {"doc_id": doc, "section_id": sec, "cells": [_section_cell(n, per.get(n), t) for n in names]}
        for (doc, sec), per in sorted(table.items())
    ]
    return {"pipelines": names, "rows": rows}


# ---- gate checks, questions, issues ----------------------------------------------------------


def _check(c: dict) -> dict:
    """A gate check with every field the page shows (a report may leave some out)."""
    return {
        "pipeline": c["pipeline"],
        "name": c["name"],
        "state": "pass" if c["passed"] else "fail",
        "threshold": c.get("threshold"),
        "value": c.get("value"),
        "questions": c.get("questions") or [],
        "detail": c.get("detail"),
    }


def _gate(report: dict) -> dict:
    checks = list(enumerate((report.get("gate") or {}).get("checks", [])))
    checks.sort(key=lambda ic: (bool(ic[1]["passed"]), ic[0]))
    rows = [_check(c) for _, c in checks]
    return {"rows": rows, "failed": sum(1 for r in rows if r["state"] == "fail")}


def _question_row(i: int, q: dict, t: dict) -> dict:
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
            (match, not (match is None or match >= t["citation_match_min"])),
            (cov, not (cov is None or cov >= t["coverage_min"])),
        ),
        "delta_s": ds,
        "zone": _zone(ds),
    }


def shown_questions(report: dict) -> list[dict]:
    """The question rows the page holds: those with runs to open first, then the others worst
    first (fewest correct runs), at most QUESTION_ROWS; report.json has them all."""
    questions = report.get("questions", [])
    if len(questions) <= QUESTION_ROWS:
        return questions

    def worst(q):
        stats = q.get("stats") or {}
        return ("runs" not in q, (q.get("correct") or 0) / max(stats.get("runs") or 1, 1), q["pipeline"], q["qid"])

    return sorted(questions, key=worst)[:QUESTION_ROWS]


def _questions(report: dict, t: dict) -> dict:
    questions = shown_questions(report)
    return {
        "columns": QUESTION_COLUMNS,
        "pipelines": _pipelines(report),
        "states": [(st, SYMBOLS[st]) for st in STATES],
        "rows": [_question_row(i, q, t) for i, q in enumerate(questions)],
        "total": len(report.get("questions", [])),
    }


def _issues(report: dict) -> dict:
    groups: dict[str, list[dict]] = defaultdict(list)
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


def _footer(report: dict) -> dict:
    meta = report.get("meta") or {}
    inputs = meta.get("inputs") or {}
    return {
        "schema_version": report.get("schema_version"),
        "inputs": [(k, str(v)[:12]) for k, v in sorted(inputs.items())],
        "started": meta.get("started"),
    }


# ---- embedded data and the page --------------------------------------------------------------


def _some(mapping: dict, keys) -> dict:
    """The keys that have a value, floats cut to 4 decimals: the drill-down reads a missing key as null."""
    return {k: _round(mapping[k]) for k in keys if mapping.get(k) is not None}


def drill_data(report: dict, t: dict) -> dict:
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
        "thresholds": t,
    }


def script_json(value) -> str:
    """JSON that is inert inside <script>: no `<`, `>` or `&` survives, so `</script>` cannot appear."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(report: dict, trend: str = "") -> str:
    """The page; `trend` is the trend panel's HTML (`ragaudit.report.trends`, which escapes what it
    shows), placed before the questions."""
    t = thresholds(report)
    return render(
        "report.html",
        verdict=_verdict(report),
        t=t,
        header=_header(report),
        banner=_banner(report),
        summary=_cards(report, t),
        charts=_charts(report, t),
        sections=_sections(report, t),
        gate=_gate(report),
        trend=trusted(trend),
        questions=_questions(report, t),
        issues=_issues(report),
        footer=_footer(report),
        style=trusted(asset("report.css")),
        data=trusted(script_json(drill_data(report, t))),
        script=trusted(asset("report.js")),
    )


def write_html(path: Path, report: dict, trend: str = "") -> None:
    write_atomic(path, render_html(report, trend))
