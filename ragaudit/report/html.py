"""`report.html`: the report as one self-contained page (SPEC §6).

Everything that can be static (verdict, cards, charts, tables) is rendered here, with every
piece of report text escaped. The question drill-down is built in the browser, with DOM text
nodes only, from a JSON block that no trace text can close early.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from html import escape
from importlib import resources
from pathlib import Path
from string import Template

from ragaudit.io.config import SCHEMA
from ragaudit.io.files import write_atomic
from ragaudit.metrics.delta_s import ZONES
from ragaudit.metrics.lam import SYMBOLS
from ragaudit.report import charts

# The config's gate defaults, used only for a threshold that no gate check in the report carries.
DEFAULT_GATE = {k: v for k, (_, v) in SCHEMA["gate"].items() if isinstance(v, float)}
STATES = ("convergent", "recursive", "chaotic", "divergent")
RUN_METRICS = (
    "citation_match",
    "coverage",
    "delta_s_qr",
    "delta_s_topk",
    "delta_s_ra",
    "citation_precision",
    "mrr",
    "support",
    "anchor_support",
    "hallucinations",
)
ISSUES_SHOWN = 200  # occurrences listed per code; issues.jsonl keeps every one
QUESTION_ROWS = 2_000  # the page stays a few MB however many questions a run has


def _asset(name: str) -> str:
    return resources.files("ragaudit.report").joinpath("templates", name).read_text(encoding="utf-8")


def _e(value) -> str:
    return escape("" if value is None else str(value))


def _num(value, digits: int = 3) -> str:
    """A number as shown in tables; any other value escaped."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return _e(value)


def _pct(value) -> str:
    return "–" if value is None else f"{value:.1%}"


def _value(value) -> str:
    """A gate threshold or value, which may be a number, a string, a list or a dict."""
    if isinstance(value, dict):
        return ", ".join(f"{_e(k)} {_value(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return _num(value)


def _limit(value) -> str:
    """A threshold as configured: 0.45, not 0.450."""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return ", ".join(f"{_e(k)} {_limit(v)}" for k, v in value.items())
    return _value(value)


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


def _pipelines(report: dict) -> list[str]:
    names = list((report.get("gate") or {}).get("pipelines") or [])
    return names + [p for p in report["summary"]["pipelines"] if p not in names]


def _checks_by_pipeline(report: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for check in (report.get("gate") or {}).get("checks", []):
        out[check["pipeline"]].append(check)
    return out


def _chip(kind: str, text: str) -> str:
    return f'<span class="chip {kind}">{text}</span>'


# ---- header, verdict, cards ----------------------------------------------------------------


def _header(report: dict) -> str:
    meta = report.get("meta") or {}
    facts = [
        ("run", meta.get("run_id")),
        ("finished", meta.get("finished")),
        ("embedder", meta.get("embed_model_id") or meta.get("embed_model")),
        ("seeds", ", ".join(map(str, meta.get("seeds") or [])) or None),
        ("variants", meta.get("paraphrases")),
        ("ragaudit", (meta.get("versions") or {}).get("ragaudit")),
    ]
    line = " · ".join(f"{k} <b>{_e(v)}</b>" for k, v in facts if v not in (None, ""))
    nav = "".join(
        f'<a href="#{a}">{t}</a>'
        for a, t in (
            ("summary", "Summary"),
            ("charts", "Charts"),
            ("sections", "Sections"),
            ("gate", "Gate"),
            ("questions", "Questions"),
            ("issues", "Issues"),
        )
    )
    return (
        f'<header class="top"><div class="brand">ragaudit <span>audit report</span></div>'
        f'<nav aria-label="Sections">{nav}</nav></header><p class="meta">{line}</p>'
    )


def _brief(check: dict) -> str:
    return (
        f"<b>{_e(check['name'])}</b> {_value(check['value'])} "
        f"<span class=muted>(threshold {_limit(check['threshold'])})</span>"
    )


def _banner(report: dict) -> str:
    verdict = (report.get("gate") or {}).get("verdict") or report["summary"].get("verdict") or "unknown"
    checks = _checks_by_pipeline(report)
    pipes = report.get("pipelines") or {}
    lines = []
    for name in _pipelines(report):
        mine = checks.get(name, [])
        failed = [c for c in mine if not c["passed"]]
        aborted = (pipes.get(name) or {}).get("aborted")
        if not mine:
            state, text = "neutral", "not gated"
        elif failed:
            state, text = "fail", "failed " + "; ".join(_brief(c) for c in failed)
        else:
            state, text = "pass", f"all {len(mine)} checks passed"
        if aborted:
            text += f" · <b>aborted</b>: {_e(aborted)}"
        mark = {"pass": "✓", "fail": "✗"}.get(state, "–")
        lines.append(
            f'<li class="{state}"><span class="mark" aria-hidden="true">{mark}</span>'
            f'<span class="pname">{_e(name)}</span><span>{text}</span></li>'
        )
    word = {"pass": "Gate passed", "fail": "Gate failed"}.get(verdict, f"Gate {_e(verdict)}")
    failing = sum(1 for n in _pipelines(report) if any(not c["passed"] for c in checks.get(n, [])))
    note = (
        f"{failing} of {len(_pipelines(report))} pipelines fail at least one check"
        if verdict == "fail"
        else "every gated pipeline meets every threshold"
    )
    return (
        f'<section id="verdict" class="verdict {_e(verdict)}" aria-label="Gate verdict">'
        f'<div class="verdict-head"><h1>{word}</h1><p>{note}</p></div><ul>{"".join(lines)}</ul></section>'
    )


def _kpi(label: str, value: str, gate: str, check: dict | None, hint: str = "") -> str:
    state = "neutral" if check is None else ("pass" if check["passed"] else "fail")
    return (
        f'<div class="kpi {state}" title="{_e(hint or gate)}"><span class="k">{label}</span>'
        f'<span class="v">{value}</span><span class="g">{gate}</span></div>'
    )


def _cards(report: dict, t: dict) -> str:
    s = report["summary"]
    issues = s.get("issues") or {}
    top = [
        ("Runs", s.get("runs"), ""),
        ("Questions", s.get("questions"), ""),
        ("Pipelines", len(s["pipelines"]), ""),
        ("Errors", issues.get("errors", 0), "bad" if issues.get("errors") else ""),
        ("Warnings", issues.get("warnings", 0), "warn" if issues.get("warnings") else ""),
    ]
    if s.get("unmatched_count", len(s.get("unmatched_runs") or [])):
        top.append(("Unmatched runs", s.get("unmatched_count", len(s.get("unmatched_runs") or [])), "warn"))
    cards = "".join(
        f'<div class="stat {cls}"><span class="v">{_num(v)}</span><span class="k">{k}</span></div>' for k, v, cls in top
    )
    checks = _checks_by_pipeline(report)
    pipes = report.get("pipelines") or {}
    per = []
    for name in _pipelines(report):
        p = s["pipelines"].get(name)
        if p is None:
            continue
        by = {c["name"]: c for c in checks.get(name, [])}
        lam = p.get("lambda") or {}
        n = sum(lam.values()) or p.get("questions") or 0
        conv = lam.get("convergent", 0) / n if n else None
        m = p.get("metrics") or {}
        covered = _covered(p, by, t["coverage_min"])
        opts = (pipes.get(name) or {}).get("options") or {}
        kind = " · ".join(
            _e(v)
            for v in (
                (pipes.get(name) or {}).get("kind"),
                opts.get("retriever"),
                opts.get("rerank"),
                f"k={opts['k']}" if opts.get("k") else None,
            )
            if v
        )
        verdict = ("fail" if any(not c["passed"] for c in by.values()) else "pass") if by else "neutral"
        kpis = (
            _kpi(
                "Citation match",
                _pct(p.get("citation_match_rate")),
                f"gate ≥ {t['citation_match_min']:.0%}",
                by.get("citation_match_min"),
            )
            + _kpi(
                f"Coverage ≥ {t['coverage_min']:g}",
                _pct(covered),
                f"gate ≥ {t['coverage_pass_rate']:.0%} · mean {_num(m.get('coverage'))}",
                by.get("coverage_pass_rate"),
                f"share of runs whose coverage of the gold span is at least {t['coverage_min']:g}",
            )
            + _kpi(
                "Mean ΔS", _num(m.get("delta_s_qr")), f"gate ≤ {t['delta_s_mean_max']:g}", by.get("delta_s_mean_max")
            )
            + _kpi(
                "λ convergent", _pct(conv), f"gate ≥ {t['lambda_convergent_min']:.0%}", by.get("lambda_convergent_min")
            )
        )
        per.append(
            f'<article class="pcard {verdict}"><header><h3>{_e(name)}</h3>'
            f'{_chip(verdict, verdict if by else "not gated")}</header><p class="muted small">{kind} · '
            f"{_num(p.get('runs'))} runs · {_num(p.get('errored'))} errored · "
            f"{_num(p.get('hallucinating_runs'))} with hallucinated quantities</p>"
            f'<div class="kpis">{kpis}</div></article>'
        )
    return (
        f'<section id="summary"><h2>Summary</h2><div class="stats">{cards}</div>'
        f'<div class="pcards">{"".join(per)}</div></section>'
    )


# ---- charts and the per-section table --------------------------------------------------------


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


def _charts(report: dict, t: dict) -> str:
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
    ds_figs, cov_figs = [], []
    for name in _pipelines(report):
        p = report["summary"]["pipelines"].get(name) or {}
        histograms = p.get("histograms") or {}
        ds = histograms.get("delta_s_qr") or [0]
        worst = next((c["value"] for c in checks.get(name, []) if c["name"] == "delta_s_max"), None)
        caption = (
            f"{sum(ds[:-1])} runs · mean {_num((p.get('metrics') or {}).get('delta_s_qr'))} · max {_num(worst)}"
            if sum(ds[:-1])
            else "no ΔS values"
        )
        ds_figs.append(
            f'<figure class="chart-card"><figcaption><b>{_e(name)}</b><span>{caption}</span></figcaption>'
            + charts.histogram(
                counts=ds[:-1] or [0] * 40,
                bands=bands,
                threshold=t["delta_s_max"],
                label=f"ΔS(query, cited text) per run, {name}",
            )
            + "</figure>"
        )
        cov = histograms.get("coverage") or [0]
        bins = max(len(cov) - 1, 1)
        low = sum(cov[b] for b in range(len(cov) - 1) if (b + 1) / bins <= t["coverage_min"] + 1e-9)
        caption = f"{sum(cov[:-1])} runs · {low} below {t['coverage_min']:g}" + (f" · {cov[-1]} n/a" if cov[-1] else "")
        cov_figs.append(
            f'<figure class="chart-card"><figcaption><b>{_e(name)}</b><span>{caption}</span></figcaption>'
            + charts.histogram(
                counts=cov[:-1] or [0] * 20,
                bands=cov_bands,
                threshold=t["coverage_min"],
                label=f"coverage per run, {name}",
            )
            + "</figure>"
        )
    rows = [
        (name, [(st, (report["summary"]["pipelines"][name].get("lambda") or {}).get(st, 0)) for st in STATES])
        for name in _pipelines(report)
        if name in report["summary"]["pipelines"]
    ]
    legend = "".join(f'<span><i class="sw s-{st}"></i>{SYMBOLS[st]} {st}</span>' for st in STATES)
    lam = charts.stacked_bars(
        rows,
        marker=t["lambda_convergent_min"],
        marker_label=f"gate {t['lambda_convergent_min']:.0%} convergent",
        label="λ states of the questions per pipeline",
        width=1180,
    )
    zone_legend = "".join(f'<span><i class="sw z-{n}"></i>{n}</span>' for n, _ in ZONES)
    return (
        '<section id="charts"><h2>Distributions</h2>'
        f'<h3>ΔS(query, cited text) per run <span class="legend">{zone_legend}'
        '<span><i class="sw line"></i>gate delta_s_max</span></span></h3>'
        f'<div class="chart-grid">{"".join(ds_figs)}</div>'
        f'<h3>Coverage of the gold span per run <span class="legend"><span><i class="sw c-low"></i>below '
        f'coverage_min</span><span><i class="sw c-ok"></i>meets it</span></span></h3>'
        f'<div class="chart-grid">{"".join(cov_figs)}</div>'
        f'<h3>λ state per question <span class="legend">{legend}</span></h3>'
        f'<figure class="chart-card wide">{lam}</figure></section>'
    )


def section_result(section: dict, t: dict) -> str:
    """pass, warn or fail for one section of one pipeline; the legend under the table says how."""
    m = section.get("metrics") or {}
    match, cov, ds = m.get("citation_match"), m.get("coverage"), m.get("delta_s_qr")
    if match is None or match < t["citation_match_min"] or (cov is not None and cov < t["coverage_min"]):
        return "fail"
    share = section.get("convergent", 0) / max(len(section.get("qids") or []), 1)
    if ds is None or ds > t["delta_s_mean_max"] or share < t["lambda_convergent_min"]:
        return "warn"
    return "pass"


def _sections(report: dict, t: dict) -> str:
    sections = report["summary"].get("sections") or []
    names = [n for n in _pipelines(report) if any(s["pipeline"] == n for s in sections)]
    table: dict[tuple, dict] = defaultdict(dict)
    for s in sections:
        table[(s.get("doc_id") or "", s.get("section_id") or "")][s["pipeline"]] = s
    head1 = "".join(f'<th colspan="4" class="grp">{_e(n)}</th>' for n in names)
    head2 = '<th class="gs">match</th><th>coverage</th><th>ΔS</th><th>λ →</th>' * len(names)
    body = []
    for (doc, sec), per in sorted(table.items()):
        cells = []
        for n in names:
            s = per.get(n)
            if s is None:
                cells.append('<td class="gs none" colspan="4">–</td>')
                continue
            r, m = section_result(s, t), s.get("metrics") or {}
            bad = lambda ok: "" if ok else " bad"  # noqa: E731
            match, cov, ds = m.get("citation_match"), m.get("coverage"), m.get("delta_s_qr")
            cells.append(
                f'<td class="gs r-{r}{bad(match is not None and match >= t["citation_match_min"])}" '
                f'title="{_e(n)}: {r}">{_pct(match)}</td>'
                f'<td class="r-{r}{bad(cov is None or cov >= t["coverage_min"])}">{_pct(cov)}</td>'
                f'<td class="r-{r}{bad(ds is not None and ds <= t["delta_s_mean_max"])}">{_num(ds)}</td>'
                f'<td class="r-{r}">{_num(s.get("convergent"))}/{len(s.get("qids") or [])}</td>'
            )
        body.append(
            f'<tr><th scope="row" title="{_e(doc)}"><span class="sec">{_e(sec)}</span></th>{"".join(cells)}</tr>'
        )
    legend = (
        f'<p class="legend-note"><span class="chip pass">pass</span> match ≥ {t["citation_match_min"]:g}, '
        f"coverage ≥ {t['coverage_min']:g}, mean ΔS ≤ {t['delta_s_mean_max']:g} and ≥ "
        f'{t["lambda_convergent_min"]:.0%} of its questions convergent · <span class="chip fail">fail</span> '
        'match or coverage below its threshold · <span class="chip warn">warn</span> otherwise. '
        "Bold values miss their threshold.</p>"
    )
    if not body:
        return '<section id="sections"><h2>Sections</h2><p class="muted">No per-section results.</p></section>'
    return (
        f'<section id="sections"><h2>Sections</h2>{legend}<div class="scroll-x"><table class="sections">'
        f'<thead><tr><th rowspan="2">section</th>{head1}</tr><tr>{head2}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div></section>"
    )


# ---- gate checks, questions, issues ----------------------------------------------------------


def _qlinks(pipeline: str, qids: list[str]) -> str:
    links = "".join(
        f'<button type="button" class="qlink" data-p="{_e(pipeline)}" data-q="{_e(q)}">{_e(q)}</button>' for q in qids
    )
    return f"<details><summary>{len(qids)} question{'s' if len(qids) != 1 else ''}</summary>{links}</details>"


def _gate_table(report: dict) -> str:
    checks = list(enumerate((report.get("gate") or {}).get("checks", [])))
    checks.sort(key=lambda ic: (bool(ic[1]["passed"]), ic[0]))
    rows = []
    for _, c in checks:
        state = "pass" if c["passed"] else "fail"
        qs = c.get("questions") or []
        rows.append(
            f'<tr class="{state}"><td>{_chip(state, state)}</td><td>{_e(c["pipeline"])}</td>'
            f'<td><code>{_e(c["name"])}</code></td><td class="lim">{_limit(c.get("threshold"))}</td>'
            f'<td class="num">{_value(c.get("value"))}</td><td>{_qlinks(c["pipeline"], qs) if qs else ""}</td>'
            f'<td class="muted">{_e(c.get("detail"))}</td></tr>'
        )
    if not rows:
        return '<section id="gate"><h2>Gate checks</h2><p class="muted">No gate checks were run.</p></section>'
    failed = sum(1 for _, c in checks if not c["passed"])
    return (
        f'<section id="gate"><h2>Gate checks <span class="count">{failed} of {len(checks)} failed</span></h2>'
        '<table class="gate"><thead><tr><th>result</th><th>pipeline</th><th>check</th><th>threshold</th>'
        f"<th>value</th><th>failing questions</th><th>detail</th></tr></thead><tbody>{''.join(rows)}</tbody>"
        "</table></section>"
    )


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


def _question_row(i: int, q: dict, t: dict) -> str:
    lam, m = q.get("lambda") or {}, q.get("metrics") or {}
    state = lam.get("state") or ""
    match, cov, ds = m.get("citation_match"), m.get("coverage"), m.get("delta_s_qr")
    search = " ".join(str(q.get(k) or "") for k in ("pipeline", "qid", "question", "section_id", "doc_id")).lower()
    num = lambda v, cls="": f'<td class="num{cls}" data-v="{"" if v is None else v}">{_num(v)}</td>'  # noqa: E731
    zone = _zone(ds)
    return (
        f'<tr data-i="{i}" data-p="{_e(q["pipeline"])}" data-l="{_e(state)}" data-s="{_e(search)}" tabindex="0">'
        f'<td>{_e(q["pipeline"])}</td><td class="qid">{_e(q["qid"])}</td>'
        f'<td class="qtext" title="{_e(q.get("question"))}">{_e(q.get("question"))}</td>'
        f'<td class="sec" title="{_e(q.get("doc_id"))}">{_e(q.get("section_id"))}</td>'
        f'<td><span class="lam s-{_e(state)}">{_e(lam.get("symbol"))} {_e(state)}</span></td>'
        + _correct_cell(q)
        + num(lam.get("css"))
        + num(lam.get("spread"))
        + num(match, "" if match is None or match >= t["citation_match_min"] else " bad")
        + num(cov, "" if cov is None or cov >= t["coverage_min"] else " bad")
        + f'<td class="num" data-v="{"" if ds is None else ds}">'
        + (f'<span class="zone z-{zone}" title="{zone}">{_num(ds)}</span>' if zone else "–")
        + "</td></tr>"
    )


def _correct_cell(q: dict) -> str:
    runs, correct = (q.get("stats") or {}).get("runs"), q.get("correct")
    share = correct / runs if runs and correct is not None else None
    return (
        f'<td class="num{"" if share in (None, 1.0) else " bad"}" data-v="{"" if share is None else share}">'
        f"{_e(correct)}/{_e(runs)}</td>"
    )


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


def _question_table(report: dict, t: dict) -> str:
    questions = shown_questions(report)
    total = len(report.get("questions", []))
    hidden = (
        f'<p class="muted small">The {len(questions)} questions that need attention most are shown; '
        f"report.json lists all {total}, runs.parquet holds every run.</p>"
        if total > len(questions)
        else ""
    )
    pipes = "".join(f'<option value="{_e(n)}">{_e(n)}</option>' for n in _pipelines(report))
    states = "".join(f'<option value="{s}">{SYMBOLS[s]} {s}</option>' for s in STATES)
    heads = "".join(
        f'<th aria-sort="none"><button type="button" data-col="{i}" data-type="{kind}">{label}</button></th>'
        for i, (label, kind) in enumerate(QUESTION_COLUMNS)
    )
    rows = "".join(_question_row(i, q, t) for i, q in enumerate(questions))
    return (
        '<section id="questions"><h2>Questions</h2>'
        '<div class="controls"><input id="qfilter" type="search" placeholder="Filter by qid, question, section…" '
        'aria-label="Filter questions" autocomplete="off">'
        f'<select id="qpipeline" aria-label="Pipeline"><option value="">All pipelines</option>{pipes}</select>'
        f'<select id="qlambda" aria-label="λ state"><option value="">All λ states</option>{states}</select>'
        f'<span id="qcount" class="muted" aria-live="polite">{len(questions)} of {len(questions)}</span></div>'
        '<p class="muted small">Values are means over the question\'s runs (an errored run counts 0, and ΔS 1.0); '
        "ΔS is ΔS(query, cited text), coloured by zone; correct = runs that cite the gold span and state it. "
        "Click a row (or press Enter on it) for its runs, why each is or is not correct, and the cited spans.</p>"
        f'<div class="table-scroll"><table id="qtable" class="questions"><thead><tr>{heads}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div>"
        f'{hidden}<section id="drill" aria-live="polite" hidden></section></section>'
    )


def _issues(report: dict) -> str:
    groups: dict[str, list[dict]] = defaultdict(list)
    for issue in [*(report.get("gold_check") or []), *(report.get("issues") or [])]:
        groups[issue.get("code") or "?"].append(issue)
    order = sorted(groups, key=lambda c: (groups[c][0].get("severity") != "error", -len(groups[c]), c))
    parts = []
    for code in order:
        items = groups[code]
        sev = items[0].get("severity") or "error"
        fix = next((i["fix"] for i in items if i.get("fix")), "")
        rows = []
        for i in items[:ISSUES_SHOWN]:
            where = ":".join(str(x) for x in (i.get("file"), i.get("line")) if x is not None)
            rows.append(
                f'<tr><td>{_e(i.get("pipeline"))}</td><td class="qid">{_e(i.get("qid"))}</td>'
                f'<td class="num">{_num(i.get("variant"))}</td><td class="num">{_num(i.get("seed"))}</td>'
                f'<td class="num">{_num(i.get("seg"))}</td><td><code>{_e(i.get("path"))}</code>'
                f"{'<br><span class=muted>' + _e(where) + '</span>' if where else ''}</td>"
                f"<td>{_e(i.get('message'))}</td></tr>"
            )
        more = (
            f'<p class="muted small">{len(items) - ISSUES_SHOWN} more in issues.jsonl</p>'
            if len(items) > ISSUES_SHOWN
            else ""
        )
        parts.append(
            f'<details class="issue-group {_e(sev)}"{" open" if len(order) <= 3 else ""}><summary>'
            f'{_chip(_e(sev), _e(sev))}<code>{_e(code)}</code><span class="count">{len(items)}</span>'
            f'<span class="fix"><b>Fix:</b> {_e(fix)}</span></summary>'
            '<table class="issues"><thead><tr><th>pipeline</th><th>qid</th><th>variant</th><th>seed</th>'
            f"<th>seg</th><th>where</th><th>message</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"{more}</details>"
        )
    unmatched = report["summary"].get("unmatched_runs") or []
    note = (
        f'<p class="muted">{len(unmatched)} runs matched no gold question: '
        f"<code>{_e(', '.join(map(str, unmatched[:50])))}</code></p>"
        if unmatched
        else ""
    )
    if not parts:
        parts.append('<p class="ok-note">No validator issues: every record and citation payload passed every rule.</p>')
    return f'<section id="issues"><h2>Validator issues</h2>{"".join(parts)}{note}</section>'


def _footer(report: dict) -> str:
    meta = report.get("meta") or {}
    inputs = meta.get("inputs") or {}
    hashes = " · ".join(f"{_e(k)} <code>{_e(str(v)[:12])}</code>" for k, v in sorted(inputs.items()))
    return (
        f"<footer><span>{_e(report.get('schema_version'))}</span>"
        f"{'<span>inputs: ' + hashes + '</span>' if hashes else ''}"
        f"{'<span>started ' + _e(meta['started']) + '</span>' if meta.get('started') else ''}</footer>"
    )


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
            segments = [
                _some(s, ("seg", "text", "citations", "support", "grounded", "hallucinated"))
                for s in r.get("segments") or []
            ]
            run = _some(r, ("variant", "seed", "query", "error", "zone", "correct", "why", "errored"))
            # The segments carry the answer's text; the whole answer is kept only when there are none.
            run.update(metrics=_some(r.get("metrics") or {}, RUN_METRICS), segments=segments, spans=spans)
            if r.get("steps"):
                run["steps"] = r["steps"]
                run["chain"] = r.get("chain")
                run["attribution"] = r.get("attribution")
            if not segments and r.get("answer") is not None:
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
    """The page; `trend` is the trend panel's HTML (`ragaudit.report.trends`), shown before the questions."""
    t = thresholds(report)
    verdict = (report.get("gate") or {}).get("verdict") or report["summary"].get("verdict") or "unknown"
    body = "".join(
        (
            _header(report),
            "<main>",
            _banner(report),
            _cards(report, t),
            _charts(report, t),
            _sections(report, t),
            _gate_table(report),
            trend,
            _question_table(report, t),
            _issues(report),
            "</main>",
            _footer(report),
        )
    )
    return Template(_asset("report.html")).substitute(
        title=_e(f"ragaudit · {verdict.upper()}"),
        style=_asset("report.css"),
        body=body,
        data=script_json(drill_data(report, t)),
        script=_asset("report.js"),
    )


def write_html(path: Path, report: dict, trend: str = "") -> None:
    write_atomic(path, render_html(report, trend))
