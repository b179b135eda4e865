"""Is a sentence that cites passages of two sections a defect? The data behind `cross_section_reuse`.

* The small-LLM recordings (bench/data/llm, SmolLM2 over the handbook and SQuAD) validated against
  their corpora: every validation issue by code and severity, per recording, with the segments
  that cite several sections.
* ExpertQA (../shared/data/expertqa): six systems' answers with `[n]` markers, each claim judged
  by an expert (`support`: Complete, Partial, Incomplete, Missing). Claims that cite two or more
  distinct sources against claims that cite one: how often, and how well supported.

    python bench/cross_section.py [--show 5]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

from ragaudit.checks.validation import Context, validate_trace
from ragaudit.io.corpus import load_corpus
from ragaudit.io.stream import read_trace_file

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "llm"
EXPERTQA = ROOT.parent / "shared" / "data" / "expertqa" / "rand_val.jsonl"
sys.path.insert(0, str(ROOT / "bench"))

from corpora import build  # noqa: E402


def recordings(show: int) -> None:
    corpora = {"handbook": ROOT / "gold_sets" / "handbook" / "corpus"}
    with tempfile.TemporaryDirectory() as work:
        corpora["squad"] = build("squad", Path(work), 40).corpus
        loaded = {name: load_corpus(path) for name, path in corpora.items()}
        total: Counter[tuple[str, str]] = Counter()
        shown = 0
        print(f"{'recording':<42} {'traces':>6}  issues (code, severity)")
        for path in sorted(DATA.glob("*-smollm2-*.jsonl")):
            context = Context(corpus=loaded[path.name.split("-")[0]])
            traces = [t for t in read_trace_file(path) if hasattr(t, "retrieved")]
            found: Counter[tuple[str, str]] = Counter()
            for trace in traces:
                for issue in validate_trace(trace, context):
                    found[(issue.code, issue.severity)] += 1
                    if issue.code == "cross_section_reuse" and shown < show:
                        shown += 1
                        print(f"    {path.name} {trace.qid} v{trace.variant}: {trace.answer.text[:100]!r}")
            total.update(found)
            print(f"{path.name:<42} {len(traces):>6}  {dict(sorted(found.items()))}")
        print(f"{'all':<42} {'':>6}  {dict(sorted(total.items()))}")


def expertqa() -> None:
    if not EXPERTQA.exists():
        print(f"ExpertQA: {EXPERTQA} absent")
        return
    by: dict[str, Counter[str]] = defaultdict(Counter)
    for line in EXPERTQA.open(encoding="utf-8"):
        for answer in json.loads(line)["answers"].values():
            sources = {}
            for named in answer.get("attribution") or []:
                found = re.match(r"\[(\d+)\]\s*(\S*)", named)
                if found:
                    sources[found.group(1)] = found.group(2)
            for claim in answer.get("claims") or []:
                cited = {sources.get(n, n) for n in re.findall(r"\[(\d+)\]", claim["claim_string"])}
                if cited:
                    by["one source" if len(cited) == 1 else "two or more"][str(claim["support"])] += 1
    print("\nExpertQA claims with markers, by the distinct sources they cite: expert support labels")
    for kind in ("one source", "two or more"):
        counts = by[kind]
        n = sum(counts.values())
        labels = ", ".join(f"{label} {c} ({c / n:.0%})" for label, c in counts.most_common())
        print(f"  {kind:<12} {n:>5} claims: {labels}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show", type=int, default=5, help="segments citing several sections to print")
    args = parser.parse_args(argv)
    recordings(args.show)
    expertqa()
    return 0


if __name__ == "__main__":
    sys.exit(main())
