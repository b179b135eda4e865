"""`audit_log.html`: a production audit (`ragaudit audit-log`) as one self-contained page, laid out
by `templates/audit_log.html`.

Verdict and totals, the per-window table, the drift timeline (each index field's values window by
window, changes marked), the ΔS zones per window, and the worst examples, each linked to its
details further down the page. No script and no external resource; the template escapes every
text from a trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragaudit.checks.metrics.delta_s import ZONES
from ragaudit.io.files import write_atomic
from ragaudit.outputs.render import charts
from ragaudit.outputs.render.formatting import num
from ragaudit.outputs.render.templating import render, trusted

INDEX_FIELDS = ("index_hash", "analyzer", "embed_model")
SHORT = 18  # characters of an index value shown in a table cell (all of it on hover)
QUERY = 140  # characters of a query that name a worst example (all of it in its details)
# The page fits a 1280 px window: every table has a fixed set of columns (windows are rows, never
# columns), long unbroken text (hashes, ids, URLs) may break anywhere, and the chart scales down.
STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1400px;padding:0 1.5rem;color:#1d2433}
pre,td.l,li{overflow-wrap:anywhere}svg.chart{max-width:100%;height:auto}li .tid{display:block}
.tid{font:12px/1.4 ui-monospace,monospace;color:#5b6475}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}table{border-collapse:collapse;width:100%;margin:.5rem 0}
th,td{padding:.35rem .6rem;border-bottom:1px solid #e3e6ec;text-align:right;vertical-align:top}
th{background:#f4f6f9}.note{color:#5b6475}.fail{color:#c62828}.pass{color:#1a7f37}td.l,th.l{text-align:left}
.changed{background:#fde7e7;font-weight:600}.cards{display:flex;gap:1rem;flex-wrap:wrap}
.card{border:1px solid #e3e6ec;border-radius:8px;padding:.5rem 1rem}.card b{display:block;font-size:1.3rem}
details{border:1px solid #e3e6ec;border-radius:6px;margin:.5rem 0;padding:.4rem .8rem}
details:target{outline:2px solid #2563eb}pre{white-space:pre-wrap;margin:.2rem 0}
.chart .row-label,.chart .tick,.chart .seg-label{font-size:11px}.chart .seg-label{fill:#1d2433}
svg .s-stable{fill:#9fd4ad}svg .s-transit{fill:#f3d774}svg .s-risk{fill:#f2a86b}svg .s-danger{fill:#e57373}
.sw{display:inline-block;width:.8rem;height:.8rem;margin:0 .3rem 0 .8rem;vertical-align:middle}
.sw.s-stable{background:#9fd4ad}.sw.s-transit{background:#f3d774}.sw.s-risk{background:#f2a86b}
.sw.s-danger{background:#e57373}"""
ZONE_NAMES = [name for name, _ in ZONES]


def _where(example: dict[str, Any]) -> str:
    where = example.get("file") or "-"
    return where if example.get("line") is None else f"{where}:{example['line']}"


def _label(example: dict[str, Any]) -> str:
    """What names an example: its query (clipped), as a reader knows the request."""
    query = " ".join(str(example.get("query") or "").split())
    if not query:
        return "(no query)"
    return query if len(query) <= QUERY else query[: QUERY - 1] + "…"


def _trace_id(example: dict[str, Any]) -> str:
    """The trace as the logs name it: a span trace's id alone (variant and seed 0: spans carry
    none), else its run key, `qid vV sS`."""
    if "qid" not in example:
        return "(no trace)"
    if not example.get("variant") and not example.get("seed"):
        return str(example["qid"])
    return f"{example['qid']} v{example['variant']} s{example['seed']}"


def _window(window: dict[str, Any], changed: set[tuple[str, str, Any]]) -> dict[str, Any]:
    index = {
        field: [
            {
                "value": value,
                "short": value if len(value) <= SHORT else value[: SHORT - 1] + "…",
                "changed": (field, window["window"], value) in changed,
            }
            for value in values
        ]
        for field, values in window["index"].items()
    }
    codes = sorted(window["issues"].items(), key=lambda kv: (-kv[1], kv[0]))
    return {
        **window,
        "index": index,
        "dropped": {field: window["index_values_dropped"].get(field, 0) for field in INDEX_FIELDS},
        "changed": {field: any(v["changed"] for v in index[field]) for field in INDEX_FIELDS},
        "codes": ", ".join(f"{code} {n}" for code, n in codes),
    }


def _entry_value(kind: str, entry: dict[str, Any]) -> str:
    if kind == "delta_s":
        return f"ΔS {num(entry['delta_s'])} ({entry['zone']})"
    if kind == "support":
        return f"segment {entry['seg']}: support {num(entry['support'])}"
    if kind == "hallucinations":
        return f"{entry['hallucinations']}: " + ", ".join(entry["found"])
    return f"{entry['errors']} errors: " + ", ".join(entry["codes"])


def _example(example: dict[str, Any]) -> dict[str, Any]:
    fields = [
        ("where", _where(example)),
        ("trace", _trace_id(example) if "qid" in example else None),
        ("pipeline", example.get("config")),
        ("retrieved at", example.get("retrieved_at")),
        ("window", example.get("window")),
        ("query", example.get("query")),
        ("error", example.get("error")),
        ("ΔS", None if example.get("delta_s") is None else f"{example['delta_s']:.3f} ({example['zone']})"),
        (
            "cited text",
            "the top-k retrieved: the answer records no citations" if example.get("held_to_context") else None,
        ),
    ]
    issues = example.get("issues", [])
    return {
        "id": example["id"],
        "label": _label(example),
        "trace": _trace_id(example),
        "where": _where(example),
        "fields": [(name, value) for name, value in fields if value is not None],
        "segments": example.get("segments", []),
        "cited": example.get("cited", []),
        "issues": issues,
        "more": example.get("issues_total", len(issues)) - len(issues),
    }


def render_audit_log(model: dict[str, Any]) -> str:
    summary = model["summary"]
    changed = {(d["field"], d["window"], d["value"]) for d in model["drift"]}
    windows = [_window(w, changed) for w in model["windows"]]
    by_id = {e["id"]: e for e in model["examples"]}
    worst = [
        {
            "title": title,
            "entries": [
                {
                    "id": e["example"],
                    "label": _label(by_id[e["example"]]),
                    "trace": _trace_id(by_id[e["example"]]),
                    "where": _where(by_id[e["example"]]),
                    "value": _entry_value(kind, e),
                }
                for e in model["worst"].get(kind) or []
            ],
        }
        for kind, title in model["meta"]["lists"].items()
    ]
    chart = charts.stacked_bars(
        [(w["window"], [(z, w["zones"][z]) for z in ZONE_NAMES]) for w in model["windows"]],
        label="ΔS(query, cited text) zones per window",
        width=1100,
        unit="traces",
    )
    return render(
        "audit_log.html",
        style=trusted(STYLE),
        verdict=summary["verdict"],
        why="; ".join(summary["why"]) or "no error-severity issue and no index change",
        summary=summary,
        meta=model["meta"],
        fields=INDEX_FIELDS,
        zones=ZONE_NAMES,
        windows=windows,
        dated=[w for w in windows if w["start"] is not None],
        drift=model["drift"],
        chart=trusted(chart),
        worst=worst,
        examples=[_example(e) for e in model["examples"]],
    )


def write_audit_log_html(path: Path, model: dict[str, Any]) -> None:
    write_atomic(path, render_audit_log(model))
