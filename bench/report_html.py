"""What report.html costs: its size and the time to render it from a run's report.json, as it is and
with its questions repeated until the page holds its maximum of rows (`html.QUESTION_ROWS`), where
the size bound matters. Render time is the best of --repeat renders (CPU time, the steadier figure
on a shared machine); the page is rendered in memory, nothing is written.

    .venv/bin/python bench/report_html.py [RUN_DIR] [--repeat 5] [--questions 10000]

RUN_DIR defaults to the newest run under reports/ (`make audit` writes one).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

from ragaudit.outputs.render import html

ROOT = Path(__file__).resolve().parents[1]


def _newest_run() -> Path:
    runs = sorted(p.parent for p in (ROOT / "reports").glob("*/report.json"))
    if not runs:
        sys.exit("no run under reports/: run `make audit` first, or name a run directory")
    return runs[-1]


def _scaled(report: dict, questions: int) -> dict:
    """The report with its question rows repeated (qids suffixed) up to `questions` rows."""
    out = copy.copy(report)
    base = report["questions"]
    out["questions"] = [
        {**copy.deepcopy(base[i % len(base)]), "qid": f"{base[i % len(base)]['qid']}~{i // len(base)}"}
        for i in range(questions)
    ]
    return out


def measure(report: dict, repeat: int) -> tuple[int, float, int]:
    """Bytes of the page, best CPU seconds of `repeat` renders, question rows shown."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        page = html.render_html(report)
        best = min(best, time.process_time() - start)
    return len(page.encode("utf-8")), best, page.count('<tr data-i="')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", nargs="?", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--questions", type=int, default=10_000, help="question rows of the scaled report")
    args = parser.parse_args()
    run_dir = args.run_dir or _newest_run()
    report = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    runs = sum(len(q.get("runs") or []) for q in report["questions"])
    print(f"run: {run_dir} ({len(report['questions'])} question rows, {runs} runs in report.json)")
    print(f"{'report':<28} {'rows shown':>10} {'size':>12} {'render':>10}")
    for label, subject in (
        ("as run", report),
        (f"questions x{args.questions // max(len(report['questions']), 1)}", _scaled(report, args.questions)),
    ):
        size, seconds, rows = measure(subject, args.repeat)
        print(f"{label:<28} {rows:>10} {size / 1e6:>9.2f} MB {seconds * 1000:>7.0f} ms")


if __name__ == "__main__":
    main()
