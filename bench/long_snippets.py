"""What a long snippet costs: scoring must grow linearly with a snippet's length.

Builds one recording of the demo (bm25, one paraphrase, one seed, hashing encoder, so there is no
model cost), then replays it with the first run's first snippet replaced by N characters of prose
made of the handbook's own sentences, for N from 10 KB to 1 MB, and times `ragaudit run` on each.
Beside it, the sentence splitter alone on the same texts, and pysbd given the whole line at once
(what the splitter did before it cut long lines into blocks), up to 100 KB.

    python bench/long_snippets.py [--sizes 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ragaudit.text import sentence_spans, sentences

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "gold_sets" / "handbook" / "corpus"
CONFIG = """[audit]
gold = "{root}/gold_sets/handbook/gold.jsonl"
corpus = "{root}/gold_sets/handbook/corpus"
paraphrases = 1
seeds = [1]
out = "{out}"
[embedder]
model = "hashing"
"""


def prose(size: int) -> str:
    found = [s for path in sorted(CORPUS.glob("*.md")) for s in sentences(path.read_text()) if s[0].isupper()]
    text, i = [], 0
    while sum(map(len, text)) < size:
        text.append(found[i % len(found)])
        i += 1
    return " ".join(text)[:size]


def ragaudit_run(config: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "ragaudit", "run", str(config), "--no-gate"], capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"ragaudit run {config} failed:\n{done.stderr}")
    return Path(done.stdout.strip().splitlines()[-1].split(": ", 1)[1])


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = CONFIG.format(root=ROOT, out=work / "out")
        (work / "record.toml").write_text(
            base + '[[pipelines]]\nname = "bm25"\nkind = "reference"\nretriever = "bm25"\nk = 5\n'
        )
        rows = (ragaudit_run(work / "record.toml") / "traces.jsonl").read_text().splitlines()
        print(f"{'snippet':>10} {'run s':>8} {'s/MB':>8} {'splitter s':>11} {'pysbd whole s':>14}")
        for size in [0, *sizes]:
            first = json.loads(rows[0])
            text = prose(size)
            if size:
                first["retrieved"][0]["text"] = text
            (work / f"{size}.jsonl").write_text("\n".join([json.dumps(first), *rows[1:]]) + "\n")
            (work / f"{size}.toml").write_text(
                base + f'[[pipelines]]\nname = "bm25"\nkind = "replay"\ntraces = "{work / f"{size}.jsonl"}"\n'
            )
            run = timed(lambda: ragaudit_run(work / f"{size}.toml"))
            if not size:
                floor = run
                print(f"{0:>10} {run:>8.2f} {'':>8} {'':>11} {'':>14}")
                continue
            split = timed(lambda: sentence_spans(text))
            whole = ""
            if size <= 100_000:
                import pysbd

                whole = f"{timed(lambda: pysbd.Segmenter(language='en', clean=False).segment(text)):.2f}"
            print(f"{size:>10} {run:>8.2f} {(run - floor) / size * 1e6:>8.1f} {split:>11.2f} {whole:>14}")
    print("s/MB: the run's time beyond the run without a long snippet, per MB of snippet; flat = linear")


if __name__ == "__main__":
    main()
