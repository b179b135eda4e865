"""What a long snippet costs: scoring must grow linearly with a snippet's length.

Builds one recording of the demo (bm25, one paraphrase, one seed, hashing encoder, so there is no
model cost), then replays it with the first run's first snippet replaced by N characters of text,
for N from 10 KB to 1 MB, and measures `ragaudit run` and `ragaudit audit-log` on each: wall and
CPU seconds of the process (CPU is the steadier figure on a shared machine), and the CPU seconds
the long snippet adds to the same command on the recording without it. The text is prose made of
the handbook's own sentences, or with --texts also `symbols`: "a?b!" over and over, a line with
no space and a sentence end every two characters, pysbd's worst case. Beside it, the sentence
splitter alone on the same texts, and pysbd given the whole line at once (what the splitter did
before it cut long lines into blocks), for prose up to 100 KB.

    python bench/long_snippets.py [--sizes 10000,100000,1000000] [--texts prose,symbols]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ragaudit.core.text import sentence_spans, sentences

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
    text, length, i = [], 0, 0
    while length < size:
        text.append(found[i % len(found)])
        length += len(text[-1]) + 1
        i += 1
    return " ".join(text)[:size]


def symbols(size: int) -> str:
    return ("a?b!" * (size // 4 + 1))[:size]


TEXTS = {"prose": prose, "symbols": symbols}


def ragaudit(*args: str | Path) -> tuple[str, float, float]:
    """The command's last line of output, its wall and its CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ragaudit", *map(str, args)], capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):  # 1: the gate or the audit found something, as a long snippet may
        sys.exit(f"ragaudit {' '.join(map(str, args))} failed:\n{done.stderr}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return done.stdout.strip().splitlines()[-1], wall, cpu


def ragaudit_run(config: Path) -> Path:
    return Path(ragaudit("run", config, "--no-gate")[0].split(": ", 1)[1])


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--texts", default="prose", help="comma-separated: prose, symbols")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = CONFIG.format(root=ROOT, out=work / "out")
        (work / "record.toml").write_text(
            base + '[[pipelines]]\nname = "bm25"\nkind = "reference"\nretriever = "bm25"\nk = 5\n'
        )
        (work / "audit-log.toml").write_text('[embedder]\nmodel = "hashing"\n')
        rows = (ragaudit_run(work / "record.toml") / "traces.jsonl").read_text().splitlines()

        def measure(name: str, text: str) -> tuple[float, float, float, float]:
            first = json.loads(rows[0])
            if text:
                first["retrieved"][0]["text"] = text
            traces = work / f"{name}.jsonl"
            traces.write_text("\n".join([json.dumps(first), *rows[1:]]) + "\n")
            (work / f"{name}.toml").write_text(
                base + f'[[pipelines]]\nname = "bm25"\nkind = "replay"\ntraces = "{traces}"\n'
            )
            _, run_wall, run_cpu = ragaudit("run", work / f"{name}.toml", "--no-gate")
            _, log_wall, log_cpu = ragaudit(
                "audit-log", traces, "--corpus", CORPUS, "--config", work / "audit-log.toml", "--out", work / name
            )
            return run_wall, run_cpu, log_wall, log_cpu

        floor = measure("none", "")
        print(
            f"without a long snippet: run {floor[0]:.2f} s wall, {floor[1]:.2f} CPU s; "
            f"audit-log {floor[2]:.2f} s wall, {floor[3]:.2f} CPU s"
        )
        print(
            f"{'text':>8} {'snippet':>10} {'run s':>7} {'CPU s':>6} {'+CPU s':>7} {'log s':>7} {'CPU s':>6} "
            f"{'+CPU s':>7} {'splitter s':>11} {'pysbd whole s':>14}"
        )
        for kind in args.texts.split(","):
            for size in sizes:
                text = TEXTS[kind](size)
                run_wall, run_cpu, log_wall, log_cpu = measure(f"{kind}-{size}", text)
                split = timed(lambda: sentence_spans(text))
                whole = ""
                if kind == "prose" and size <= 100_000:
                    import pysbd

                    whole = f"{timed(lambda: pysbd.Segmenter(language='en', clean=False).segment(text)):.2f}"
                print(
                    f"{kind:>8} {size:>10} {run_wall:>7.2f} {run_cpu:>6.2f} {run_cpu - floor[1]:>7.2f} "
                    f"{log_wall:>7.2f} {log_cpu:>6.2f} {log_cpu - floor[3]:>7.2f} {split:>11.2f} {whole:>14}"
                )
    print("+CPU s: the CPU seconds the long snippet adds to the same command without it; flat past 100 KB = capped")


if __name__ == "__main__":
    main()
