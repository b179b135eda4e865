"""Benchmark `ragaudit validate` against a bare JSON parse and a jsonschema-only baseline.

Targets: the ragaudit library path is at least 5x faster than jsonschema checking only the
required payload fields, and the CLI's peak RSS stays under 300 MB on a 1M-payload file.

    python bench/validate.py [--payloads N] [--repeat R] [--memory-payloads M] [--skip-memory] [--out DIR]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonschema

from ragaudit.validate import Context, Validator

PER_TRACE = 5
DEFECT_RATE = 0.01
SEED = 20261122
SPEED_TARGET = 5.0
RSS_TARGET_MB = 300.0
CLI = Path(sys.executable).with_name("ragaudit")
if not CLI.exists():
    CLI = Path(shutil.which("ragaudit") or "ragaudit")
WORDS = ("key rotation admin hardware policy security token password account access review audit "
         "quarterly annual retention backup restore incident report owner vendor contract laptop "
         "device network firewall encryption certificate expiry renewal approval manager request "
         "ticket escalation onboarding offboarding badge visitor data classification public internal "
         "confidential restricted storage cloud region logging monitoring alert").split()
INDEX = {"index_hash": "sha256:" + hashlib.sha256(b"bench-index").hexdigest(),
         "analyzer": "lowercase", "embed_model": "all-MiniLM-L6-v2:mean", "store": "bm25"}
REQUIRED = ("doc_id", "section_id", "snippet_id", "source_url", "offsets", "tokens",
            "index_hash", "embed_model", "analyzer", "rev")
_WORD = re.compile(r"\w+")


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
                snippets.append({
                    "doc_id": doc_id, "section_id": section_id,
                    "snippet_id": f"hb{d:02d}-s{s}-{n:04d}",
                    "source_url": f"file:///corpus/{doc_id}.md#{section_id}",
                    "offsets": {"start": start, "end": cursor, "unit": "char"},
                    "tokens": len(_WORD.findall(text)), "index_hash": INDEX["index_hash"],
                    "embed_model": INDEX["embed_model"], "analyzer": INDEX["analyzer"], "rev": rev,
                    "text": text})
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
    segments = [{"seg": i + 1, "text": sentence(rng, rng.randint(6, 10)), "citations": [p["snippet_id"]]}
                for i, p in enumerate(cited)]
    answer_text = " ".join(f"{s['text'][:-1]} [{s['citations'][0]}]." for s in segments)
    return {
        "schema": "ragaudit.trace/1", "qid": f"Q-{number // 12:05d}", "variant": number % 4,
        "seed": number % 3 + 1, "query": sentence(rng, 9)[:-1] + "?", "config": "bm25-k5",
        "retriever_name": "bm25", "retrieved_at": "2026-11-22T10:00:00Z", "index": INDEX,
        "retrieved": chosen,
        "answer": {"raw": json.dumps({"citations": [s["citations"][0] for s in segments],
                                      "answer": " ".join(s["text"] for s in segments)}),
                   "text": answer_text, "segments": segments},
        "error": None}


def generate(path: Path, payloads: int) -> Path:
    rng = random.Random(SEED)
    pool = snippet_pool(rng)
    with open(path, "w", encoding="utf-8") as out:
        for number, start in enumerate(range(0, payloads, PER_TRACE)):
            trace = make_trace(rng, pool, number, min(PER_TRACE, payloads - start))
            out.write(json.dumps(trace, ensure_ascii=False) + "\n")
    return path


_STR = {"type": "string"}
_INT = {"type": "integer"}
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object", "required": ["qid", "retrieved"],
    "properties": {"qid": _STR, "retrieved": {"type": "array", "items": {
        "type": "object", "required": list(REQUIRED),
        "properties": {
            **{k: _STR for k in ("doc_id", "section_id", "snippet_id", "source_url",
                                 "index_hash", "embed_model", "analyzer", "rev")},
            "tokens": _INT,
            "offsets": {"oneOf": [
                {"type": "object", "required": ["start", "end", "unit"],
                 "properties": {"start": _INT, "end": _INT, "unit": _STR}},
                {"type": "array", "items": _INT, "minItems": 2, "maxItems": 2}]}}}}},
}


def bare_parse(path: Path) -> None:
    loads = json.loads
    with open(path, "rb") as f:
        for line in f:
            loads(line)


def jsonschema_only(path: Path) -> int:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    errors = []
    loads = json.loads
    with open(path, "rb") as f:
        for line in f:
            errors.extend(validator.iter_errors(loads(line)))
    return len(errors)


def ragaudit_library(path: Path) -> int:
    validator = Validator(Context())
    return sum(1 for _ in validator.check_files([path]))


def best_of(repeat: int, fn, path: Path) -> tuple[float, int | None]:
    best, found = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        found = fn(path)
        best = min(best, time.perf_counter() - t0)
    return best, found


def run_cli(path: Path, fmt: str) -> tuple[float, float, int]:
    """(seconds, peak RSS in MB, exit code) of `ragaudit validate PATH --format FMT` in its own process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(CLI), "validate", str(path), "--format", fmt],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if proc.returncode not in (0, 1):
        sys.exit(f"ragaudit validate exited {proc.returncode}:\n{stderr}")
    return seconds, usage.ru_maxrss / 1024.0, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--payloads", type=int, default=200_000,
                    help=f"payloads in the speed file ({PER_TRACE} per trace, about {DEFECT_RATE * 100:.0f}%% defective)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per method; the best is reported")
    ap.add_argument("--memory-payloads", type=int, default=1_000_000,
                    help="payloads in the file whose CLI peak RSS is measured")
    ap.add_argument("--skip-memory", action="store_true", help="skip the peak-RSS measurement")
    ap.add_argument("--out", type=Path, help="keep the generated files in DIR (default: a removed temp dir)")
    args = ap.parse_args()
    if args.payloads < 1 or args.repeat < 1 or args.memory_payloads < 1:
        ap.error("--payloads, --repeat and --memory-payloads must be positive")

    workdir = args.out or Path(tempfile.mkdtemp(prefix="ragaudit-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        path = generate(workdir / f"traces-{args.payloads}.jsonl", args.payloads)
        size = path.stat().st_size / 1e6
        print(f"generated {path.name}: {args.payloads:,} payloads, {size:.1f} MB "
              f"in {time.perf_counter() - t0:.1f}s (seed {SEED})\n")

        rows = []
        for name, fn in (("bare parse (json.loads)", bare_parse),
                         ("jsonschema Draft 2020-12", jsonschema_only),
                         ("ragaudit library", ragaudit_library)):
            seconds, found = best_of(args.repeat, fn, path)
            rows.append((name, seconds, found))
        cli_seconds, _, code = run_cli(path, "json")
        rows.append((f"ragaudit CLI --format json (1 run, exit {code})", cli_seconds, None))

        print(f"{'method':<44} {'seconds':>8} {'payloads/s':>12} {'issues':>8}")
        for name, seconds, found in rows:
            print(f"{name:<44} {seconds:>8.2f} {args.payloads / seconds:>12,.0f} "
                  f"{'' if found is None else found:>8}")
        bare, schema, lib = (r[1] for r in rows[:3])
        speedup = schema / lib
        print(f"\njsonschema / ragaudit   = {speedup:.2f}x   "
              f"(target >= {SPEED_TARGET:.0f}x: {'met' if speedup >= SPEED_TARGET else 'NOT met'})")
        print(f"ragaudit / bare parse   = {lib / bare:.2f}x")

        if not args.skip_memory:
            t0 = time.perf_counter()
            mem_path = generate(workdir / f"traces-{args.memory_payloads}.jsonl", args.memory_payloads)
            print(f"\ngenerated {mem_path.name}: {args.memory_payloads:,} payloads, "
                  f"{mem_path.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - t0:.1f}s")
            for fmt in ("json", "text"):
                seconds, rss, code = run_cli(mem_path, fmt)
                verdict = "met" if rss < RSS_TARGET_MB else "NOT met"
                print(f"ragaudit validate --format {fmt:<4}: peak RSS {rss:7.1f} MB in {seconds:6.1f}s "
                      f"(exit {code}; target < {RSS_TARGET_MB:.0f} MB: {verdict})")
    finally:
        if args.out is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
