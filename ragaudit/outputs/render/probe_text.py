"""What `ragaudit probe` prints: per pipeline its faithful rate with the 95% interval, by edit kind, the
exclusion probe's necessary rate and the cost; the edits that could not be made; the runs that did
not follow their source (the first of each pipeline), and the gate of faithful_min."""

from __future__ import annotations

from typing import Any

SHOWN = 5  # runs that did not follow, per pipeline


def _rate(rate: dict[str, Any], what: str) -> str:
    if rate["rate"] is None:
        return f"{what} –"
    low, high = rate["ci95"]
    return f"{what} {rate['rate']:.3f} [{low:.3f}, {high:.3f}]"


def render_probe(probe: dict[str, Any], gate: dict[str, Any]) -> str:
    lines = [
        f"probe: {probe['questions']} questions, edits {', '.join(probe['edit_kinds'])}, seeds "
        f"{', '.join(map(str, probe['seeds']))}"
    ]
    for name, p in probe["pipelines"].items():
        cost = p["cost"]
        spent = f"{cost['index_builds']} index builds, {cost['calls']} calls"
        if p["skipped"]:
            lines.append(f"{name}: not probed: {p['skipped']} ({spent})")
            continue
        f = p["faithful"]
        counts = f["counts"]
        lines.append(
            f"{name}: {_rate(f, 'faithful')} over {f['units']} edits, {f['runs']} runs "
            f"({counts.get('follows', 0)} follow, {counts.get('keeps_old', 0)} keep the old fact, "
            f"{counts.get('other', 0)} other); {spent}"
        )
        if f["left_out"]:
            lines.append(f"  {f['left_out']} runs left out: their answer on the real corpus did not state the fact")
        kinds = [_rate(r, kind) + f" ({r['units']})" for kind, r in p["by_kind"].items()]
        lines.append("  by kind: " + "; ".join(kinds))
        n = p["necessary"]
        lines.append(
            f"  citation {_rate(n, 'necessary')} over {n['units']} questions, {n['runs']} runs"
            if not p["no_exclusion"]
            else f"  exclusion probe not run: {p['no_exclusion']}"
        )
        missed = [
            (e, r)
            for e in probe["edits"]
            if e["pipeline"] == name
            for r in e["runs"]
            if r["outcome"] != "follows" and r["stated_before"]
        ]
        for e, r in missed[:SHOWN]:
            lines.append(
                f"  {e['qid']} {e['kind']} {e['edit']['old']!r} → {e['edit']['new']!r} s{r['seed']}: {r['outcome']}: {r['why']}"
            )
        if len(missed) > SHOWN:
            lines.append(f"  … and {len(missed) - SHOWN} more runs that do not follow (report.json: meta.probe.edits)")
    if probe["cannot"]:
        by_kind: dict[str, int] = {}
        for c in probe["cannot"]:
            by_kind[c["kind"]] = by_kind.get(c["kind"], 0) + 1
        lines.append(
            "edits that could not be made: "
            + ", ".join(f"{kind} {n}" for kind, n in by_kind.items())
            + " (each with why in report.json: meta.probe.cannot)"
        )
    for check in gate["checks"]:
        verdict = "pass" if check["passed"] else "FAIL"
        value = "–" if check["value"] is None else f"{check['value']:.3f}"
        lines.append(
            f"[gate] {check['pipeline']} faithful_min {verdict}: {value} >= {check['bound']} {check['detail']}".rstrip()
        )
    if not gate["checks"]:
        lines.append("[gate] faithful_min not set: nothing gated")
    return "\n".join(lines) + "\n"
