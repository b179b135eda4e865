"""Benchmark `ragaudit validate` on one generated trace file, side by side with a bare parse.

Each method runs in a process of its own, on the same file, timed from the outside (start-up
included) with the peak RSS of its largest process (the kernel's, from wait4) and of all its
processes together (sampled from /proc):

    bare parse      orjson.loads of every line, nothing else: the ceiling
    library         Validator.check_files in one process
    CLI --workers 1 ragaudit validate, in-process path
    CLI --workers N ragaudit validate sharded over N processes (default N: the CPUs, at most 8)
    CLI default     ragaudit validate with no option but the format (it shares over the CPUs)
    jsonschema      (--jsonschema) a Draft 2020-12 validator checking the required fields only

Targets: at least 200,000 payloads/s for the sharded CLI on a 1M-payload file, with peak RSS
independent of the file size (under 300 MB a process); the CLI with default options at least 10x
jsonschema's speed on 200,000 payloads (`--payloads 200000 --jsonschema`). The machine's load
average is printed before and after: on a shared machine, repeat (`--repeat`) and read it.

    python bench/validate.py [--payloads N] [--workers N] [--repeat R] [--format json|text] [--jsonschema] [--out DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from measure import measure

from ragaudit.core.types import REQUIRED_PAYLOAD_FIELDS

PER_TRACE = 5
DEFECT_RATE = 0.01
SEED = 20261122
TARGET_RATE = 200_000.0
RSS_TARGET_MB = 300.0
BYTES_PER_PAYLOAD = 1_000  # about what `generate` writes; used to check the disk first
CLI = Path(sys.executable).with_name("ragaudit")
if not CLI.exists():
    CLI = Path(shutil.which("ragaudit") or "ragaudit")
WORDS = (
    "key rotation admin hardware policy security token password account access review audit "
    "quarterly annual retention backup restore incident report owner vendor contract laptop "
    "device network firewall encryption certificate expiry renewal approval manager request "
    "ticket escalation onboarding offboarding badge visitor data classification public internal "
    "confidential restricted storage cloud region logging monitoring alert"
).split()
INDEX = {
    "index_hash": "sha256:" + hashlib.sha256(b"bench-index").hexdigest(),
    "analyzer": "lowercase",
    "embed_model": "all-MiniLM-L6-v2:mean",
    "store": "bm25",
}
REQUIRED = REQUIRED_PAYLOAD_FIELDS
_WORD = re.compile(r"\w+")


# ---- the workload -------------------------------------------------------------------------------


def sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + "."


def snippet_pool(rng: random.Random) -> list[list[dict]]:
    """Sections of a synthetic corpus, each a list of snippet payloads (without scores or ranks)."""
    sections = []
    for d in range(40):
        doc_id = f"handbook/{rng.choice(WORDS)}-{d:02d}"
        rev = hashlib.sha256(doc_id.encode()).hexdigest()[:12]
        cursor = 0
        for s in range(8):
            section_id = f"policies/{rng.choice(WORDS)}/{rng.choice(WORDS)}-{s}"
            snippets = []
            for n in range(6):
                text = ""
                while len(text) < 190:
                    text = (text + " " + sentence(rng, rng.randint(5, 12))).strip()
                start = cursor + rng.randint(0, 40)
                cursor = start + len(text)
                snippets.append(
                    {
                        "doc_id": doc_id,
                        "section_id": section_id,
                        "snippet_id": f"hb{d:02d}-s{s}-{n:04d}",
                        "source_url": f"file:///corpus/{doc_id}.md#{section_id}",
                        "offsets": {"start": start, "end": cursor, "unit": "char"},
                        "tokens": len(_WORD.findall(text)),
                        "index_hash": INDEX["index_hash"],
                        "embed_model": INDEX["embed_model"],
                        "analyzer": INDEX["analyzer"],
                        "rev": rev,
                        "text": text,
                    }
                )
            sections.append(snippets)
    return sections


def defect(rng: random.Random, p: dict) -> None:
    kind = rng.randrange(6)
    if kind == 0:
        del p[rng.choice(REQUIRED)]
    elif kind == 1:
        p["offsets"] = {"start": p["offsets"]["end"], "end": p["offsets"]["start"], "unit": "char"}
    elif kind == 2:
        p["offsets"] = [-1, p["offsets"]["end"]]
    elif kind == 3:
        p["tokens"] = str(p["tokens"])
    elif kind == 4:
        p["analyzer"] = "whitespace"
    else:
        del p["k_pos"]


def make_trace(rng: random.Random, pool: list[list[dict]], number: int, count: int) -> dict:
    first = rng.randrange(len(pool))
    candidates = pool[first] + pool[(first + 1) % len(pool)]
    chosen = [dict(p) for p in rng.sample(candidates, count)]
    for p in chosen:
        p["score_raw"] = round(rng.uniform(2.0, 25.0), 4)
    top = max(p["score_raw"] for p in chosen)
    for p in chosen:
        p["score_norm"] = round(p["score_raw"] / top, 4)
    chosen.sort(key=lambda p: (-p["score_norm"], p["section_id"], p["snippet_id"]))
    k_pos = rng.sample(range(1, count + 1), count)
    for i, p in enumerate(chosen):
        p["k_pos"], p["k_final"] = k_pos[i], i + 1
        if rng.random() < DEFECT_RATE:
            defect(rng, p)
    cited = [p for p in chosen if "snippet_id" in p][:2]
    segments = [
        {"seg": i + 1, "text": sentence(rng, rng.randint(6, 10)), "citations": [p["snippet_id"]]}
        for i, p in enumerate(cited)
    ]
    answer_text = " ".join(f"{s['text'][:-1]} [{s['citations'][0]}]." for s in segments)
    return {
        "schema": "ragaudit.trace/1",
        "qid": f"Q-{number // 12:05d}",
        "variant": number % 4,
        "seed": number % 3 + 1,
        "query": sentence(rng, 9)[:-1] + "?",
        "config": "bm25-k5",
        "retriever_name": "bm25",
        "retrieved_at": "2026-11-22T10:00:00Z",
        "index": INDEX,
        "retrieved": chosen,
        "answer": {
            "raw": json.dumps(
                {"citations": [s["citations"][0] for s in segments], "answer": " ".join(s["text"] for s in segments)}
            ),
            "text": answer_text,
            "segments": segments,
        },
        "error": None,
    }


def generate(path: Path, payloads: int) -> Path:
    rng = random.Random(SEED)
    pool = snippet_pool(rng)
    with open(path, "w", encoding="utf-8") as out:
        for number, start in enumerate(range(0, payloads, PER_TRACE)):
            trace = make_trace(rng, pool, number, min(PER_TRACE, payloads - start))
            out.write(json.dumps(trace, ensure_ascii=False) + "\n")
    return path


# ---- what each measured process runs --------------------------------------------------------------


def bare_parse(path: str) -> None:
    import orjson

    loads = orjson.loads
    with open(path, "rb", buffering=1 << 20) as f:
        for line in f:
            loads(line)


def library(path: str) -> None:
    from ragaudit.checks.validation import Context, Validator

    for _ in Validator(Context()).check_files([path]):
        pass


def jsonschema_only(path: str) -> None:
    import jsonschema

    str_, int_ = {"type": "string"}, {"type": "integer"}
    schema = {
        "type": "object",
        "required": ["qid", "retrieved"],
        "properties": {
            "qid": str_,
            "retrieved": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": list(REQUIRED),
                    "properties": {
                        **{k: str_ for k in REQUIRED if k not in ("tokens", "offsets")},
                        "tokens": int_,
                        "offsets": {
                            "oneOf": [
                                {
                                    "type": "object",
                                    "required": ["start", "end", "unit"],
                                    "properties": {"start": int_, "end": int_, "unit": str_},
                                },
                                {"type": "array", "items": int_, "minItems": 2, "maxItems": 2},
                            ]
                        },
                    },
                },
            },
        },
    }
    validator = jsonschema.Draft202012Validator(schema)
    with open(path, "rb") as f:
        for line in f:
            for _ in validator.iter_errors(json.loads(line)):
                pass


IN_PROCESS = {"bare": bare_parse, "library": library, "jsonschema": jsonschema_only}


# ---- measuring ------------------------------------------------------------------------------------


def best_of(repeat: int, command: list[str]) -> tuple[float, float, float, int]:
    runs = [measure(command) for _ in range(repeat)]
    return min(runs, key=lambda r: r[0])


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    ap.add_argument(
        "--payloads",
        type=int,
        default=1_000_000,
        help=f"payloads in the file ({PER_TRACE} per trace, about {DEFECT_RATE * 100:.0f}%% defective)",
    )
    ap.add_argument("--workers", type=int, help="processes of the sharded CLI (default: the CPUs, at most 8)")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per method; the fastest is reported")
    ap.add_argument("--format", dest="fmt", choices=["json", "text"], default="json", help="the CLI's output format")
    ap.add_argument("--jsonschema", action="store_true", help="also time jsonschema checking the required fields")
    ap.add_argument("--out", type=Path, help="keep the generated file in DIR (default: a removed temp dir)")
    ap.add_argument("--measure", nargs=2, metavar=("METHOD", "FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        IN_PROCESS[args.measure[0]](args.measure[1])
        return 0
    if args.payloads < 1 or args.repeat < 1 or (args.workers is not None and args.workers < 1):
        ap.error("--payloads, --workers and --repeat must be positive")

    workdir = args.out or Path(tempfile.mkdtemp(prefix="ragaudit-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        payloads = args.payloads
        free = shutil.disk_usage(workdir).free
        if payloads * BYTES_PER_PAYLOAD > free * 0.8:
            payloads = max(PER_TRACE, int(free * 0.8 / BYTES_PER_PAYLOAD))
            print(
                f"note: {free / 1e9:.1f} GB free in {workdir}: generating {payloads:,} payloads, not {args.payloads:,}"
            )
        t0 = time.perf_counter()
        path = generate(workdir / f"traces-{payloads}.jsonl", payloads)
        print(
            f"generated {path}: {payloads:,} payloads, {path.stat().st_size / 1e6:.1f} MB "
            f"in {time.perf_counter() - t0:.1f}s (seed {SEED})"
        )
        workers = args.workers or min(len(os.sched_getaffinity(0)), 8)
        print(
            f"{os.cpu_count()} CPUs, sharded over {workers} workers, load average before "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n"
        )

        me = [sys.executable, str(Path(__file__).resolve()), "--measure"]
        cli = [str(CLI), "validate", str(path), "--format", args.fmt]
        methods = [
            ("bare parse (orjson.loads)", me + ["bare", str(path)]),
            ("ragaudit library, 1 process", me + ["library", str(path)]),
            ("ragaudit CLI --workers 1", cli + ["--workers", "1"]),
            (f"ragaudit CLI --workers {workers}", cli + ["--workers", str(workers)]),
            ("ragaudit CLI, default options", cli),
        ]
        if args.jsonschema:
            methods.insert(1, ("jsonschema, required fields only", me + ["jsonschema", str(path)]))
        print(
            f"{'method':<36} {'seconds':>8} {'payloads/s':>11} {'x target':>9} {'RSS max MB':>11} "
            f"{'RSS all MB':>11} {'exit':>5}"
        )
        rates = {}
        for name, command in methods:
            seconds, rss, rss_all, code = best_of(args.repeat, command)
            rates[name] = rate = payloads / seconds
            print(
                f"{name:<36} {seconds:>8.2f} {rate:>11,.0f} {rate / TARGET_RATE:>9.2f} {rss:>11.1f} "
                f"{rss_all:>11.1f} {code:>5}",
                flush=True,
            )
        print(f"\nload average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        default_rate = rates[methods[-2][0]]
        print(
            f"CLI sharded / target      = {default_rate / TARGET_RATE:.2f} "
            f"(target {TARGET_RATE:,.0f} payloads/s: {'met' if default_rate >= TARGET_RATE else 'NOT met'})"
        )
        print(f"CLI sharded / --workers 1 = {default_rate / rates[methods[-3][0]]:.2f}")
        print(f"library / bare parse      = {rates[methods[-4][0]] / rates[methods[0][0]]:.2f}")
        if args.jsonschema:
            ratio = rates[methods[-1][0]] / rates[methods[1][0]]
            print(f"CLI default / jsonschema  = {ratio:.2f} (target 10: {'met' if ratio >= 10 else 'NOT met'})")
        print(
            "(times include interpreter start-up; RSS max is the largest single process, "
            f"target < {RSS_TARGET_MB:.0f} MB)"
        )
    finally:
        if args.out is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
