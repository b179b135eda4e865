"""`ragaudit agree` as text: per dimension the confusion matrix, kappa and the flags' precision and
recall; the support score's reliability; the corrected good-run rate; every disagreement."""

from __future__ import annotations

from ragaudit.decisions.agreement import Agreement
from ragaudit.decisions.labelfit import FOLDS, Fit


def _f(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def render(found: Agreement) -> str:
    lines = [
        f"{found.labelled} labelled runs of {found.run_dir} ({found.unlabelled} without a label), labels {found.labels_path}",
        "",
        f"{'dimension':<10} {'runs':>5}   {'y/y':>4} {'y/n':>4} {'n/y':>4} {'n/n':>4}   {'kappa':>5} {'95% CI':>15}"
        f"   {'prec':>5} {'rec':>5}",
    ]
    for d in found.dimensions:
        yy, yn, ny, nn = d.matrix
        ci = f"[{d.kappa_ci[0]:.2f}, {d.kappa_ci[1]:.2f}]" if d.kappa_ci else "–"
        lines.append(
            f"{d.name:<10} {d.n:>5}   {yy:>4} {yn:>4} {ny:>4} {nn:>4}   {_f(d.kappa):>5} {ci:>15}"
            f"   {_f(d.precision):>5} {_f(d.recall):>5}"
        )
    lines += [
        "(label/verdict: y/n = labelled yes, ragaudit says no; precision and recall of ragaudit's no, its flags)",
        "",
        f"support score reliability (each run's weakest claim), calibration error {_f(found.reliability.error, 3)}:",
    ]
    for low, high, n, score, share in found.reliability.bins:
        lines.append(f"  [{low:.1f}, {high:.1f})  {n:>4} runs  mean score {score:.2f}  labelled supported {share:.2f}")
    e = found.estimate
    lines.append("")
    if e.corrected is None:
        lines.append(f"good-run rate {_pct(e.rate)} over {e.runs} runs; no corrected rate: {e.why_not}")
    else:
        assert e.ci is not None
        lines.append(
            f"good-run rate {_pct(e.rate)} over {e.runs} runs; corrected by {e.labelled} labels on a random sample: "
            f"{_pct(e.corrected)} [{_pct(e.ci[0])}, {_pct(e.ci[1])}] (95%)"
        )
    if found.disagreements:
        lines += ["", f"{len(found.disagreements)} runs where a label and ragaudit's verdict differ:"]
    for label, verdict, differs in found.disagreements:
        said = ", ".join(f"{d}: label {'yes' if label.value(d) else 'no'}" for d in differs)
        lines += [
            "",
            f"{label.pipeline} {label.qid} v{label.variant} s{label.seed} — {said}",
            f"  question: {' '.join(verdict.query.split())}",
            f"  answer: {' '.join(verdict.answer.split())[:400]}",
            f"  label note: {label.note or '–'}",
            f"  ragaudit: {verdict.why}",
        ]
        for c in verdict.claims:
            lines.append(
                f"    claim {c.get('n')} [{c.get('grounding')}, support {_f(c.get('support'))}, anchor {c.get('anchor')}]"
                f" cites {', '.join(c.get('citations') or []) or 'nothing'}: {' '.join(str(c.get('text')).split())[:200]}"
            )
    return "\n".join(lines) + "\n"


def render_fit(fit: Fit) -> str:
    """`calibrate --labels`: the thresholds from and to, the held-out agreement before and after."""
    lines = [f"{fit.labelled} labelled runs of {fit.run_dir} ({fit.labels}, {fit.digest[:19]}…)"]
    if fit.more is not None:
        return "\n".join([*lines, f"nothing fitted: {fit.more}"]) + "\n"
    lines += [
        "",
        f"{'dimension':<10}   held-out kappa before -> after ({len(fit.before) and fit.before[0].n} runs in {FOLDS} folds by question)",
    ]
    for b, a in zip(fit.before, fit.after):
        lines.append(f"{b.name:<10}   {_f(b.kappa)} -> {_f(a.kappa)}")
    lines.append("")
    if fit.kept:
        lines.append(fit.kept)
    for name in ("support", "anchor_support_min", "key_recall_min", "key_precision_min"):
        was, now = getattr(fit.start, name), getattr(fit.thresholds, name)
        key = "[support] threshold" if name == "support" else f"[lambda] {name}"
        lines.append(f"{key:<30} {was:.2f} -> {now:.2f}")
    return "\n".join(lines) + "\n"
