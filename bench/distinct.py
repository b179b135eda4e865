"""A replay workload of distinct questions: N perturbed copies of the handbook and its gold set.

Copy `c` renames every document (`security-policy` → `security-policy-cab`), and with it every
section, snippet id, source url and citation; it starts every paragraph of every document with
a word of its own (`Cab `) and ends its title with it, so the corpus texts, the snippets and their revisions all differ
between copies (every offset is moved to match), and tags every question and paraphrase with
the same word; qids get the copy's suffix. The recorded runs of the demo's pipelines are copied
the same way, one recording per pipeline. Gold anchors keep their text (they start after the
inserted word), so every copy audits like the handbook, over distinct ids and texts.

    python bench/distinct.py COPIES OUT   # writes OUT/corpus, OUT/gold.jsonl, OUT/<pipeline>.jsonl
"""

from __future__ import annotations

import bisect
import re
import sys
from pathlib import Path

import orjson

from ragaudit.core.analyzers import get_analyzer
from ragaudit.io.corpus import revision, slugify

ROOT = Path(__file__).resolve().parents[1]
GOLD = ROOT / "gold_sets" / "handbook"
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def tag(copy: int) -> str:
    """A word of letters only (no quantity to match), distinct per copy: 0 → Caaa."""
    word = ""
    for _ in range(3):
        copy, digit = divmod(copy, 26)
        word = LETTERS[digit] + word
    return "C" + word


class Copy:
    """One copy of the corpus: its texts, and where each original offset moved."""

    def __init__(self, copy: int, documents: dict[str, str]):
        self.tag = tag(copy)
        self.suffix = "-" + self.tag.lower()
        self.texts: dict[str, str] = {}
        self.inserted: dict[str, list[int]] = {}  # doc → original offsets where a word went in
        self.shifts: dict[str, list[int]] = {}  # doc → characters inserted up to each of them
        for doc_id, text in documents.items():
            words = []
            if text.startswith("# "):  # the title: its slug prefixes every section id
                words.append((text.index("\n"), " " + self.tag))
            elif text:
                words.append((0, self.tag + " "))
            words += [(m.end(), self.tag + " ") for m in re.finditer(r"\n\n(?=[^#\n])", text)]
            parts, last, shift = [], 0, 0
            self.inserted[doc_id], self.shifts[doc_id] = [], []
            for at, word in words:
                parts += [text[last:at], word]
                last, shift = at, shift + len(word)
                self.inserted[doc_id].append(at)
                self.shifts[doc_id].append(shift)
            parts.append(text[last:])
            self.texts[doc_id + self.suffix] = "".join(parts)
        self.revs = {doc: revision(text) for doc, text in self.texts.items()}
        titles = {slugify(t.split("\n", 1)[0][2:]) for t in documents.values() if t.startswith("# ")}
        ids = sorted(set(documents) | titles, key=len, reverse=True)  # section ids start with a title's slug
        self._ids = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, ids)) + r")(?=[:/\"#.\]]|$)")

    def offset(self, doc_id: str, at: int) -> int:
        before = bisect.bisect_right(self.inserted[doc_id], at)
        return at + (self.shifts[doc_id][before - 1] if before else 0)

    def rename(self, text: str) -> str:
        return self._ids.sub(lambda m: m.group(1) + self.suffix, text)

    def question(self, text: str) -> str:
        return f"{text} ({self.tag})"


def documents() -> dict[str, str]:
    return {p.stem: p.read_text() for p in sorted((GOLD / "corpus").glob("*.md"))}


def write_corpus(copies: list[Copy], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for copy in copies:
        for doc_id, text in copy.texts.items():
            (out / f"{doc_id}.md").write_text(text)


def gold_line(copy: Copy, item: dict) -> dict:
    item = dict(item)
    doc = item["doc_id"]
    item["qid"] = item["qid"] + copy.suffix
    item["question"] = copy.question(item["question"])
    item["paraphrases"] = [copy.question(p) for p in item.get("paraphrases", [])]
    item["doc_id"] = doc + copy.suffix
    item["section_id"] = copy.rename(item["section_id"])
    if item.get("decoy"):
        item["decoy"] = {k: copy.rename(v) if isinstance(v, str) else v for k, v in item["decoy"].items()}
    anchor = item.get("anchor")
    if anchor and anchor.get("unit", "char") == "char":
        start, end = copy.offset(doc, anchor["start"]), copy.offset(doc, anchor["end"])
        item["anchor"] = {**anchor, "start": start, "end": end, "text": copy.texts[item["doc_id"]][start:end]}
    return item


def trace_line(copy: Copy, trace: dict, payloads: dict) -> dict:
    trace = dict(trace)
    trace["qid"] = trace["qid"] + copy.suffix
    trace["query"] = copy.question(trace["query"])
    if trace.get("answer") is not None:
        trace["answer"] = orjson.loads(copy.rename(orjson.dumps(trace["answer"]).decode()))
    if trace.get("index"):
        trace["index"] = dict(trace["index"])
    trace["retrieved"] = [payload(copy, p, payloads) for p in trace.get("retrieved", [])]
    return trace


def payload(copy: Copy, p: dict, cache: dict) -> dict:
    """The payload in the copy: what depends on its span is worked out once per copy and index."""
    key = (p.get("index_hash"), p.get("snippet_id"), p["doc_id"], p["offsets"]["start"], p["offsets"]["end"])
    moved = cache.get(key)
    if moved is None:
        doc = p["doc_id"]
        moved = {k: copy.rename(v) for k, v in p.items() if isinstance(v, str) and k != "text"}
        start, end = copy.offset(doc, p["offsets"]["start"]), copy.offset(doc, p["offsets"]["end"])
        text = copy.texts[doc + copy.suffix][start:end]
        moved.update(offsets={**p["offsets"], "start": start, "end": end}, text=text, rev=copy.revs[doc + copy.suffix])
        if p.get("tokens") is not None and (analyzer := get_analyzer(p.get("analyzer"))) is not None:
            moved["tokens"] = analyzer.count(text)
        cache[key] = moved
    return {**p, **moved}


def build(copies: int, traces: Path, out: Path) -> dict[str, Path]:
    """The corpus, gold set and one recording per pipeline of `copies` copies, from the demo's
    traces; returns the recordings by pipeline name."""
    base = documents()
    out.mkdir(parents=True, exist_ok=True)
    gold = [orjson.loads(line) for line in (GOLD / "gold.jsonl").read_bytes().splitlines() if line.strip()]
    runs = [orjson.loads(line) for line in traces.read_bytes().splitlines() if line.strip()]
    pipelines = list(dict.fromkeys(t["config"] for t in runs))
    files = {name: open(out / f"{name}.jsonl", "wb") for name in pipelines}
    try:
        with open(out / "gold.jsonl", "wb") as gold_out:
            for c in range(copies):
                copy = Copy(c, base)
                write_corpus([copy], out / "corpus")
                gold_out.write(b"".join(orjson.dumps(gold_line(copy, item)) + b"\n" for item in gold))
                cache: dict = {}
                for trace in runs:
                    files[trace["config"]].write(orjson.dumps(trace_line(copy, trace, cache)) + b"\n")
    finally:
        for f in files.values():
            f.close()
    return {name: out / f"{name}.jsonl" for name in pipelines}


if __name__ == "__main__":
    build(
        int(sys.argv[1]),
        Path(sys.argv[3]) if len(sys.argv) > 3 else Path(sys.argv[2]) / "traces.jsonl",
        Path(sys.argv[2]),
    )
