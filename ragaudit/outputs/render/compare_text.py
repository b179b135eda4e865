"""A comparison (`ragaudit.decisions.comparison`) in words: the lines `ragaudit compare` prints, and the sentences
compare.html and summary.md say for each pair ("b is no worse than a by more than 2 points")."""

from __future__ import annotations

from typing import Any


def points(margin: float) -> str:
    """A margin on a 0–1 scale in percentage points: 0.02 is '2 points'."""
    value = round(margin * 100, 6)
    return f"{value:g} point{'' if value == 1 else 's'}"


def p_text(p: float) -> str:
    return "p < 0.0001" if p < 1e-4 else f"p = {p:.4f}"


def noninferiority(pair: dict[str, Any], name: str) -> str:
    m, a, b = pair["metrics"][name], pair["a"], pair["b"]
    ni = m["noninferior"]
    if ni["holds"]:
        return f"{b} is no worse than {a} on {name} by more than {points(ni['margin'])}, {p_text(ni['p_value'])}"
    return (
        f"{b} may be worse than {a} on {name} by more than {points(ni['margin'])} "
        f"(no-worse test {p_text(ni['p_value'])})"
    )


def difference(pair: dict[str, Any], name: str) -> str:
    m = pair["metrics"][name]
    interval = f"{m['difference']:+.3f} (95% CI {m['ci95'][0]:+.3f} to {m['ci95'][1]:+.3f})"
    if m["verdict"] == "noise":
        return f"the difference {m['difference']:+.3f} is inside the noise floor {m['noise_floor']:.3f}: noise"
    if m["verdict"] == "tie":
        why = ci_note(pair, name)
        return f"no significant difference: {interval}, {p_text(m['p_holm'])} (Holm)" + (f"; {why}" if why else "")
    return f"it is {m['verdict']}: {interval}, {p_text(m['p_holm'])} (Holm)"


def ci_note(pair: dict[str, Any], name: str) -> str | None:
    """Why a metric whose 95% CI excludes 0 is a tie, or None when its CI and its verdict agree.

    The verdict is the test's: exact (the sign test; the sign-flip test up to 16 moves) and adjusted
    for the metrics tested beside it (Holm). The CI is a bootstrap interval of this metric alone:
    when few questions move, most resamples hold some of them, so it can exclude 0 where the exact
    test finds nothing (3 of 80 questions up: 95% of resamples hold one or more, p = 0.25)."""
    m = pair["metrics"][name]
    low, high = m["ci95"]
    if m["verdict"] != "tie" or low <= 0 <= high:
        return None
    from ragaudit.decisions.comparison import ALPHA

    tested = len(pair["metrics"])
    if m["p_value"] < ALPHA:
        return (
            f"the CI, of this metric alone, excludes 0, as the test does before Holm's adjustment across the {tested} "
            f"metrics ({p_text(m['p_value'])}), not after it"
        )
    return (
        f"the CI excludes 0 but the exact test does not ({p_text(m['p_value'])} before Holm's adjustment across the "
        f"{tested} metrics): {m['wins']} of {m['questions']} questions better and {m['losses']} worse, too few moves "
        "for a bootstrap CI to hold its level"
    )


def sentences(pair: dict[str, Any]) -> list[str]:
    """One sentence per metric: non-inferiority at the margin, then the difference's verdict."""
    return [f"{noninferiority(pair, name)}; {difference(pair, name)}." for name in pair["metrics"]]


def noise_line(result: dict[str, Any], pair: dict[str, Any]) -> str:
    names = list(dict.fromkeys((pair["a"], pair["b"])))
    parts = []
    for name in names:
        noise = result["noise"][name]
        if noise["state"] == "deterministic":
            parts.append(f"{name} deterministic (floor 0)")
        elif noise["state"] == "sampling":
            moved = ", ".join(f"{k} {v:.3f}" for k, v in noise["floors"].items() if v > 0) or "nothing"
            seeds = ", ".join(map(str, noise["seeds"]))
            parts.append(f"{name} samples (seeds {seeds} move {moved})")
        else:
            parts.append(f"{name} unknown ({noise['note']})")
    return "noise floor: " + "; ".join(parts)


def mde_line(pair: dict[str, Any]) -> str:
    d = pair["mde"]
    design = (
        f"{d['questions']} questions × {d['runs_per_question']:g} runs, {d['power']:.0%} power, α = {d['alpha']:g}; "
        f"assumed discordance {d['discordance']:g}, ICC {d['icc']:g}"
    )
    if d["rate"] is None:
        return f"detectable change in a rate: none up to the discordance ({design})"
    return f"detectable change in a rate: {d['rate']:.3f} or more ({design})"


def metric_line(name: str, m: dict[str, Any]) -> str:
    ni = m["noninferior"]
    return (
        f"  {name:<20} {m['mean_a']:.3f} -> {m['mean_b']:.3f}  diff {m['difference']:+.3f} "
        f"[{m['ci95'][0]:+.3f}, {m['ci95'][1]:+.3f}] {m['ci_method']}  p_holm {m['p_holm']:.4f}  "
        f"w/t/l {m['wins']}/{m['ties']}/{m['losses']}  {m['verdict']:<6}  "
        f"no-worse({ni['margin']:g}) {'yes' if ni['holds'] else 'no '} p {ni['p_value']:.4f}"
    )


def render_text(result: dict[str, Any], notes: list[str] | tuple[str, ...] = ()) -> str:
    lines = []
    for pair in result["pairs"]:
        lines.append(f"{pair['b']} vs {pair['a']} ({pair['questions']} questions)")
        lines += [metric_line(name, m) for name, m in pair["metrics"].items()]
        differing: dict[str, list[str]] = {}  # why a CI and a verdict differ: the metrics it holds for
        for name in pair["metrics"]:
            if why := ci_note(pair, name):
                differing.setdefault(why, []).append(name)
        lines += [f"  {', '.join(names)}: {why}" for why, names in differing.items()]
        lines += [f"  {noise_line(result, pair)}", f"  {mde_line(pair)}"]
    lines += [f"note: {n}" for n in notes]
    return "\n".join(lines) + "\n"
