"""`faults.html`: the detection matrix of `ragaudit faults` as one self-contained page. The clean
run is the first row; each fault row says whether every gated pipeline's gate failed it, which
checks fired, and how many of the affected questions the checks named."""

from __future__ import annotations

from html import escape
from pathlib import Path

from ragaudit.io.files import write_atomic
from ragaudit.report.compare_html import STYLE

EXTRA = """body{max-width:1500px}.caught{background:#e3f6e8}.missed{background:#fde7e7}td.l{text-align:left}
td.l:first-child{min-width:16rem}code{font-size:12px}"""


def _rate(value) -> str:
    return "–" if value is None else f"{value:.0%}"


def _cells(row: dict, gated: list[str]) -> str:
    out = []
    for name in gated:
        p = row["pipelines"].get(name) or {}
        checks = ", ".join(p.get("failed_checks") or []) or "none"
        out.append(
            f"<td>{escape(p.get('verdict', '–'))}</td><td>{_rate(p.get('detection_rate'))}</td>"
            f"<td>{_rate(p.get('false_flag_rate'))}</td><td class=l><code>{escape(checks)}</code></td>"
        )
    return "".join(out)


def render_faults(result: dict) -> str:
    gated = result["gated"]
    heads = "".join(f"<th colspan=4>{escape(n)}</th>" for n in gated)
    sub = "<th>verdict</th><th>detected</th><th>false flags</th><th>failed checks</th>" * len(gated)
    clean = result["clean"]
    ok = clean["verdict"] == "pass"
    rows = [
        f"<tr class={'caught' if ok else 'missed'}><td class=l><b>clean run</b></td><td>–</td><td>–</td>"
        f"<td>{'passes' if ok else 'FAILS'}</td>{_cells(clean, gated)}</tr>"
    ]
    for r in result["faults"]:
        rows.append(
            f"<tr class={'caught' if r['caught'] else 'missed'}><td class=l><b>{escape(r['fault'])}</b><br>"
            f"<span class=note>{escape(r['description'])}</span></td><td>{r['applicable']}</td>"
            f"<td>{len(r['affected'])}</td><td>{'caught' if r['caught'] else 'MISSED'}</td>"
            f"{_cells(r, gated)}</tr>"
        )
    verdict = (
        "the gate passes the clean run and fails every fault"
        if result["passed"]
        else "the gate does not tell the clean run from every fault"
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>ragaudit faults</title>"
        f"<style>{STYLE}{EXTRA}</style></head><body><h1>Gate sensitivity: {escape(verdict)}</h1>"
        f"<p class=note>{result['questions']} questions; each fault affects a seeded {result['rate']:.0%} of the "
        f"questions it can change (seed {result['seed']}). Detected: affected questions some gate check names; "
        "false flags: unaffected questions some check names.</p>"
        "<table><tr><th rowspan=2>fault</th><th rowspan=2>applicable</th><th rowspan=2>affected</th>"
        f"<th rowspan=2>gate</th>{heads}</tr><tr>{sub}</tr>{''.join(rows)}</table></body></html>\n"
    )


def write_faults_html(path: Path, result: dict) -> None:
    write_atomic(path, render_faults(result))
