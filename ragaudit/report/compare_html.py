"""`compare.html`: the comparison as one self-contained page (tables only, no script)."""

from __future__ import annotations

from html import escape
from pathlib import Path

from ragaudit.io.files import write_atomic

STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#1d2433}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}table{border-collapse:collapse;width:100%;margin:.5rem 0}
th,td{padding:.35rem .6rem;border-bottom:1px solid #e3e6ec;text-align:right}th:first-child,td:first-child{text-align:left}
th{background:#f4f6f9}.better{background:#e3f6e8}.worse{background:#fde7e7}.tie{color:#5b6475}
.note{color:#5b6475}"""


def _num(value, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _pair(c: dict) -> str:
    rows = []
    for name, m in c["metrics"].items():
        low, high = m["ci95"]
        rows.append(
            f"<tr class='{m['verdict']}'><td>{escape(name)}{'' if m['higher_is_better'] else ' (lower is better)'}"
            f"</td><td>{_num(m['mean_reference'])}</td><td>{_num(m['mean_other'])}</td>"
            f"<td>{m['difference']:+.3f}</td><td>[{low:+.3f}, {high:+.3f}]</td><td>{_num(m['p_value'], 4)}</td>"
            f"<td>{_num(m['p_holm'], 4)}</td><td>{m['wins']}/{m['ties']}/{m['losses']}</td>"
            f"<td>{escape(m['verdict'])}</td></tr>"
        )
    states = list(c["lambda_transitions"])
    matrix = "".join(
        f"<tr><td>{escape(s)}</td>" + "".join(f"<td>{c['lambda_transitions'][s][t]}</td>" for t in states) + "</tr>"
        for s in states
    )
    return (
        f"<h2>{escape(c['other'])} vs {escape(c['reference'])}</h2>"
        f"<p class=note>{c['questions']} paired questions; win/tie/loss within ±{c['tolerance']}; "
        "p: paired sign-flip permutation test; Holm-adjusted across metrics.</p>"
        "<table><tr><th>metric</th><th>reference</th><th>other</th><th>difference</th><th>95% CI (bootstrap)</th>"
        f"<th>p</th><th>p (Holm)</th><th>win/tie/loss</th><th>verdict</th></tr>{''.join(rows)}</table>"
        "<h3>λ transitions (rows: reference state, columns: other)</h3>"
        f"<table><tr><th></th>{''.join(f'<th>{escape(t)}</th>' for t in states)}</tr>{matrix}</table>"
    )


def render_compare(result: dict) -> str:
    names = result["systems"]
    metrics = list(next(iter(result["means"].values())))
    means = "".join(
        f"<tr><td>{escape(n)}</td>" + "".join(f"<td>{_num(result['means'][n][m])}</td>" for m in metrics) + "</tr>"
        for n in names
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>ragaudit comparison</title>"
        f"<style>{STYLE}</style></head><body><h1>ragaudit comparison</h1>"
        f"<p>Reference: <b>{escape(names[0])}</b>. Means over questions:</p>"
        f"<table><tr><th>system</th>{''.join(f'<th>{escape(m)}</th>' for m in metrics)}</tr>{means}</table>"
        + "".join(_pair(c) for c in result["comparisons"])
        + "</body></html>\n"
    )


def write_compare_html(path: Path, result: dict) -> None:
    write_atomic(path, render_compare(result))
