"""Brackets in technical documentation that are not citation markers.

An answer over documentation quotes it: `pip install flask[async]`, `[build-system]`,
`requests[socks]`, `>>> r[1]`, a reST footnote `[#]_`. None of these cites a source. This reads
every file of documentation folders (Markdown, reStructuredText, TOML, INI, cfg) as an answer
that quotes it whole, and counts the bracketed candidates of the marker grammar
(`ragaudit.core.markers.MARKER`) and those `ragaudit.core.markers.markers` reads as markers, given the
names of five retrieved sources as a trace would have them (`doc-a:0001` ... and the file's own
document). A documentation set holds no citation markers, so every one read is a false one.

    python bench/markers.py DOCS_DIR [DOCS_DIR ...] [--show 20]

For instance over the docs of Flask, Click and requests (a git checkout of each).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from ragaudit.core.markers import MARKER, markers

SUFFIXES = {".md", ".rst", ".txt", ".toml", ".ini", ".cfg"}
NAMES = frozenset({f"doc-a:000{i}" for i in range(1, 6)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--show", type=int, default=20, help="markers read to print per folder")
    args = parser.parse_args(argv)
    failed = 0
    print(f"{'folder':<28} {'files':>6} {'lines':>10} {'candidates':>10} {'read as markers':>16}")
    for folder in args.folders:
        files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
        counts: Counter[str] = Counter()
        read: list[tuple[Path, str]] = []
        for path in files:
            text = path.read_text(encoding="utf-8", errors="replace")
            counts["lines"] += text.count("\n") + 1
            counts["candidates"] += sum(1 for _ in MARKER.finditer(text))
            for m in markers(text, names=NAMES | {path.stem}):
                read.append((path, text[max(0, m.start() - 30) : m.end() + 10].replace("\n", "⏎")))
        print(
            f"{folder.name or str(folder):<28} {len(files):>6} {counts['lines']:>10} {counts['candidates']:>10} {len(read):>16}"
        )
        for path, context in read[: args.show]:
            print(f"    {path.relative_to(folder)}: …{context}…")
        failed += len(read)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
