"""`summary.md`: the verdict and the failing checks, for a pull-request comment or a CI summary."""
from __future__ import annotations

from pathlib import Path

SHOWN = ("citation_match", "coverage", "delta_s_qr", "mrr", "ndcg@10", "support")


def _fmt(value) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def render_summary(report: dict) -> str:
    gate = report["gate"]
    lines = [f"# ragaudit: gate {'passed ✅' if gate['verdict'] == 'pass' else 'FAILED ❌'}", ""]
    s = report["summary"]
    lines.append(f"{s['runs']} runs over {s['questions']} questions; "
                 f"{s['issues']['errors']} validation errors, {s['issues']['warnings']} warnings.")
    lines += ["", "| pipeline | " + " | ".join(SHOWN) + " | λ convergent |", "|---" * (len(SHOWN) + 2) + "|"]
    for name, p in sorted(s["pipelines"].items()):
        lam = p["lambda"]
        lines.append(f"| {name} | " + " | ".join(_fmt(p["metrics"].get(m)) for m in SHOWN)
                     + f" | {lam['convergent']}/{p['questions']} |")
    failed = [c for c in gate["checks"] if not c["passed"]]
    if failed:
        lines += ["", "## Failing checks", ""]
        for c in failed:
            qs = c["questions"]
            shown = ", ".join(qs[:10]) + (f" and {len(qs) - 10} more" if len(qs) > 10 else "")
            lines.append(f"- **{c['pipeline']} · {c['name']}**: value {_fmt(c['value'])}, threshold "
                         f"{_fmt(c['threshold'])}" + (f"; questions: {shown}" if qs else "")
                         + (f" ({c['detail']})" if c.get("detail") else ""))
    return "\n".join(lines) + "\n"


def write_summary(path: Path, report: dict) -> None:
    path.write_text(render_summary(report), encoding="utf-8")
