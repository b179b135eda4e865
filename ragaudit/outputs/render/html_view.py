"""The view model of report.html that is not about single questions: the thresholds read back
from the gate, the verdict and pipelines, the charts and the per-section table (`ragaudit.outputs.render.html`
lays them out)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from ragaudit.checks.metrics.delta_s import ZONES
from ragaudit.checks.metrics.lam import STATES, SYMBOLS
from ragaudit.io.config_schema import GateSection
from ragaudit.outputs.render import charts
from ragaudit.outputs.render.formatting import num
from ragaudit.outputs.render.templating import trusted

SECTION_ROWS = 1_000  # sections the page's table shows; report.json lists every one


def _zone(delta_s: float | None) -> str | None:
    if delta_s is None:
        return None
    return next(name for name, upper in ZONES if delta_s < upper)


def _round(value: Any) -> Any:
    """Floats cut to 4 decimals for the embedded data: enough to display, far smaller. NaN and
    infinity become null, which JSON.parse accepts and they are not."""
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    return value


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def thresholds(report: dict[str, Any]) -> GateSection:
    """The thresholds the report was gated with, read back from its checks: each check's own (None:
    not gated) and the settings it read (coverage_min); the defaults for a check it does not carry."""
    defaults, found = GateSection(), {}
    for check in (report.get("gate") or {}).get("checks", []):
        limit = check.get("threshold")
        for key, setting in (check.get("settings") or {}).items():  # coverage_pass_rate's coverage_min
            if key in GateSection.model_fields and _number(setting):
                found[key] = setting
        # a check of the [gate] table whose key holds a number (lambda_forbid's holds states: its
        # threshold is the count it allows); the drift checks and pipeline_ran have no key
        default = getattr(defaults, check["name"], [])
        if (default is None or _number(default)) and (limit is None or _number(limit)):
            found[check["name"]] = limit
    return defaults.model_copy(update=found)


def misses(value: float | None, bar: float | None) -> bool:
    """A value below its threshold (a rate's floor); neither unknown value nor ungated bar misses."""
    return value is not None and bar is not None and value < bar


def _verdict(report: dict[str, Any]) -> str:
    return (report.get("gate") or {}).get("verdict") or report["summary"].get("verdict") or "unknown"


def _pipelines(report: dict[str, Any]) -> list[str]:
    names = list((report.get("gate") or {}).get("pipelines") or [])
    return names + [p for p in report["summary"]["pipelines"] if p not in names]


def _checks_by_pipeline(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for check in (report.get("gate") or {}).get("checks", []):
        out[check["pipeline"]].append(check)
    return out


# ---- charts and the per-section table --------------------------------------------------------


def _limit(words: str, value: object, spec: str) -> str:
    return "not gated" if value is None else f"{words} {spec.format(value)}"


def _charts(report: dict[str, Any], t: GateSection) -> dict[str, Any]:
    bands, lo = [], 0.0
    for name, upper in ZONES:
        hi = min(upper, 1.0)
        bands.append((lo, hi, f"z-{name}", name))
        lo = hi
    cov_bands = [
        (0.0, t.coverage_min, "c-low", f"< {t.coverage_min:g}"),
        (t.coverage_min, 1.0, "c-ok", "meets gate"),
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
            threshold=t.delta_s_max,
            label=f"ΔS(query, cited text) per run, {name}",
        )
        delta_s.append({"name": name, "caption": caption, "svg": trusted(svg)})
        cov = histograms.get("coverage") or [0]
        bins = max(len(cov) - 1, 1)
        low = sum(cov[b] for b in range(len(cov) - 1) if (b + 1) / bins <= t.coverage_min + 1e-9)
        caption = f"{sum(cov[:-1])} runs · {low} below {t.coverage_min:g}" + (f" · {cov[-1]} n/a" if cov[-1] else "")
        svg = charts.histogram(
            counts=cov[:-1] or [0] * 20,
            bands=cov_bands,
            threshold=t.coverage_min,
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
        marker=t.lambda_convergent_min,
        marker_label="" if t.lambda_convergent_min is None else f"gate {t.lambda_convergent_min:.0%} convergent",
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


def section_result(section: dict[str, Any], t: GateSection) -> str:
    """pass, warn or fail for one section of one pipeline; the legend under the table says how."""
    m = section.get("metrics") or {}
    match, cov = m.get("citation_match"), m.get("coverage")
    if match is None or misses(match, t.citation_match_min) or misses(cov, t.coverage_min):
        return "fail"
    share = section.get("convergent", 0) / max(len(section.get("qids") or []), 1)
    if _far(m.get("delta_s_excess"), t) or misses(share, t.lambda_convergent_min):
        return "warn"
    return "pass"


def _far(excess: float | None, t: GateSection) -> bool:
    """A section's mean ΔS excess above the gate's per-run limit."""
    limit = t.delta_s_excess_max
    return excess is not None and limit is not None and excess > limit


def _section_cell(name: str, s: dict[str, Any] | None, t: GateSection) -> dict[str, Any] | None:
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
        "match_bad": match is None or misses(match, t.citation_match_min),
        "coverage_bad": misses(cov, t.coverage_min),
        "delta_s_bad": _far(ds, t),
        "convergent": s.get("convergent"),
        "questions": len(s.get("qids") or []),
    }


def _sections(report: dict[str, Any], t: GateSection) -> dict[str, Any]:
    sections = report["summary"].get("sections") or []
    names = [n for n in _pipelines(report) if any(s["pipeline"] == n for s in sections)]
    table: dict[tuple[str, str], dict[str, Any]] = defaultdict(dict)
    for s in sections:
        table[(s.get("doc_id") or "", s.get("section_id") or "")][s["pipeline"]] = s
    rows: list[dict[str, Any]] = [
        {"doc_id": doc, "section_id": sec, "cells": [_section_cell(n, per.get(n), t) for n in names]}
        for (doc, sec), per in sorted(table.items())
    ]
    total = len(rows)
    if total > SECTION_ROWS:  # the sections that fail first, then those that warn, in section order
        rank = {"fail": 0, "warn": 1}
        worst = sorted(rows, key=lambda r: min((rank.get(c["result"], 2) for c in r["cells"] if c), default=2))
        kept = {id(r) for r in worst[:SECTION_ROWS]}
        rows = [r for r in rows if id(r) in kept]
    return {"pipelines": names, "rows": rows, "total": total}
