"""Issues as `validate` and `gold check` print them: one located line each with its fix (text), or
one JSON document written as the issues come (json), then the counts; and the lists of `ragaudit
codes` and `ragaudit metrics`."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from ragaudit.auditing.checking import GoldCheck, Validation
    from ragaudit.core.types import Issue


def issue_line(issue: Issue) -> str:
    where = issue.file or "-"
    if issue.line is not None:
        where += f":{issue.line}"
    # a run is named by what it has: a gold item has a qid but no variant or seed
    named = [
        f"{mark}{value}"
        for mark, value in (("", issue.qid), ("v", issue.variant), ("s", issue.seed), ("seg", issue.seg))
        if value is not None
    ]
    run = f" [{' '.join(named)}]" if issue.qid is not None else ""
    return f"{where}: {issue.severity} {issue.code}{run} {issue.path}: {issue.message}\n    fix: {issue.fix}"


def write_issues(
    issues: Iterable[Issue],
    out: IO[str],
    *,
    fmt: str,
    records_of: Callable[[], int],
    counts_of: Callable[[], Mapping[str, int]],
) -> None:
    """Write issues as they come (text), or as one JSON document `{"records", "issues", "counts"}`
    without holding them in memory (json: spooled to a temporary file, then copied)."""
    if fmt == "text":
        for issue in issues:
            out.write(issue_line(issue) + "\n")
        return
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        first = True
        for issue in issues:
            spool.write(("" if first else ",\n  ") + json.dumps(issue.to_dict(), sort_keys=True, ensure_ascii=False))
            first = False
        spool.seek(0)
        out.write('{"records": %d, "issues": [\n  ' % records_of())
        while chunk := spool.read(1 << 16):
            out.write(chunk)
        out.write('\n], "counts": %s}\n' % json.dumps(dict(sorted(counts_of().items())), sort_keys=True))


def summary(records: int, counts: Mapping[str, int], severities: Mapping[str, str] | None = None) -> str:
    """The closing lines of `validate` and `gold check`: records, errors, warnings (and info, when a
    [gold] severity made some), each code's count. `severities` gives codes another severity than
    their own."""
    from ragaudit.core.codes import CODES

    of = {c: (severities or {}).get(c, CODES[c].severity) for c in counts}
    errors = sum(n for c, n in counts.items() if of[c] == "error")
    info = sum(n for c, n in counts.items() if of[c] == "info")
    warnings = sum(counts.values()) - errors - info
    lines = [f"{records} records, {errors} errors, {warnings} warnings" + (f", {info} info" if info else "")]
    lines += [f"  {code}: {n}" for code, n in sorted(counts.items())]
    return "\n".join(lines)


def codes(fmt: str) -> str:
    """Every issue code with its severity, meaning and fix."""
    from ragaudit.core.codes import CODES

    if fmt == "json":
        return json.dumps(
            [
                {"code": c.code, "severity": c.severity, "family": c.family, "meaning": c.meaning, "fix": c.fix}
                for c in CODES.values()
            ],
            indent=2,
        )
    return "\n".join(f"{c.code:<28} {c.severity:<8} {c.meaning}\n{'':<37} fix: {c.fix}" for c in CODES.values())


def metrics(fmt: str, config_path: Path | None = None) -> str:
    """Every metric with its level, direction, the gate checks that read it and its definition;
    then which ΔS the gate reads, and why. The ranking metrics show the cutoff of the config's
    [metrics] (the default's without one)."""
    from ragaudit.checks.metrics.registry import GATED_DELTA_S, METRICS, labels
    from ragaudit.io.config import load_config

    label = labels(load_config(config_path).metrics.model_dump() if config_path else {"k": 5, "ndcg_k": None})

    if fmt == "json":
        return json.dumps(
            [
                {
                    "name": m.name,
                    "label": label[m.name],
                    "level": m.level,
                    "higher_is_better": m.higher_is_better,
                    "gated_by": list(m.gated_by),
                    "description": m.description,
                }
                for m in METRICS.values()
            ],
            indent=2,
        )
    lines = []
    for m in METRICS.values():
        direction = "higher is better" if m.higher_is_better else "lower is better"
        gated = f" [gated: {', '.join(m.gated_by)}]" if m.gated_by else ""
        lines.append(f"{label[m.name]:<20} {m.level:<9} {direction:<17} {m.description}{gated}")
    return "\n".join(lines) + f"\n\n{GATED_DELTA_S}"


def write_checked(found: GoldCheck, out: IO[str], *, fmt: str) -> None:
    """The findings of `gold check` (a `checking.GoldCheck`) written to `out`."""
    write_issues(found.issues, out, fmt=fmt, records_of=lambda: found.records, counts_of=lambda: found.counts)


def stream_validation(found: Validation, out: IO[str], *, fmt: str) -> None:
    """`validate`'s issues (a `checking.Validation`) written to `out` as they are found, inside its
    `with`, shown as the phase `validating`."""
    from ragaudit.core.progress import phase

    with found, phase("validating", unit="records", count=lambda: found.records):
        write_issues(found, out, fmt=fmt, records_of=lambda: found.records, counts_of=lambda: found.counts)
