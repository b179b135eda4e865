"""The corpora of the fault benchmark, each built as a user would bring it: a corpus folder, a gold
set and a config, from externally authored data read in place (`../shared/data`, never copied).

* `handbook`: the built-in demo (14 Markdown documents, 80 hand-written questions, 2 paraphrases).
* `squad`: SQuAD 2.0 dev articles as Markdown, one section per paragraph; one answerable question
  per paragraph; the anchor is the sentence that holds the crowd-marked answer, the reference
  answer is the answer text. Encyclopedic prose, long sentences, answers of a word or two.
* `expertqa`: ExpertQA evidence passages (web pages quoted by six answering systems), one text
  document per passage; one item per question, from a claim that experts judged completely
  supported by its passage. The anchor is the passage sentence that carries the claim; there is
  no reference answer, and the claim itself (an LLM's own wording) is kept for the benchmark's
  LLM-written control. Web prose across 32 expert fields.

Questions carry two rule-made paraphrases where the data has none, so that λ sees variants.

    python bench/corpora.py OUT_DIR [--corpus squad,expertqa] [--questions N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ragaudit.core.text import content_stems, sentence_spans
from ragaudit.io.corpus import slugify

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
HEADER = re.compile(r"^\[\d+\][ \t]+\S*[ \t]*(?:\n|$)")  # "[3] URL" before each ExpertQA evidence passage
MARKERS = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")
CORPORA = ("handbook", "squad", "expertqa")


@dataclass(frozen=True)
class Built:
    name: str
    config: Path
    gold: Path
    corpus: Path
    claims: dict[str, str]  # qid -> an LLM's own claim stating the anchor's fact, where the data has one


def paraphrases(question: str) -> list[str]:
    """Two rewordings a user might type: a request and a terse form."""
    body = question.strip().rstrip("?").strip()
    lowered = body[0].lower() + body[1:] if body[:1].isupper() and not body[1:2].isupper() else body
    return [f"Can you tell me {lowered}?", f"Question: {body}?"]


def _config(folder: Path, *, k_values: tuple[int, ...], chunk_size: int = 64, paraphrases_used: int = 3) -> Path:
    """A config with a dense reference pipeline per k (none: the questions are too broad for one)."""
    pipelines = "\n".join(
        f'[[pipelines]]\nname = "dense-k{k}"\nkind = "reference"\nretriever = "dense"\nk = {k}\n'
        f"chunk_size = {chunk_size}\n"
        for k in k_values
    )
    text = (
        f'[audit]\ngold = "gold.jsonl"\ncorpus = "corpus"\nparaphrases = {paraphrases_used}\nseeds = [1, 2]\n'
        f'out = "reports"\n\n[metrics]\nk = {min(k_values, default=5)}\n\n{pipelines}'
    )
    path = folder / "audit.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _write_gold(folder: Path, items: list[dict]) -> Path:
    path = folder / "gold.jsonl"
    path.write_text("".join(json.dumps(i, ensure_ascii=False, sort_keys=True) + "\n" for i in items), encoding="utf-8")
    return path


def handbook(out: Path, questions: int | None = None) -> Built:
    folder = out / "handbook"
    folder.mkdir(parents=True, exist_ok=True)
    lines = (ROOT / "gold_sets" / "handbook" / "gold.jsonl").read_text(encoding="utf-8").splitlines()
    items = [json.loads(line) for line in lines][:questions]
    gold = _write_gold(folder, items)
    corpus = ROOT / "gold_sets" / "handbook" / "corpus"
    config = folder / "audit.toml"
    config.write_text(
        f'[audit]\ngold = "gold.jsonl"\ncorpus = "{corpus}"\nparaphrases = 3\nseeds = [1, 2]\nout = "reports"\n\n'
        '[[pipelines]]\nname = "dense-k5"\nkind = "reference"\nretriever = "dense"\nk = 5\n',
        encoding="utf-8",
    )
    return Built("handbook", config, gold, corpus, {})


def _sentence_at(text: str, start: int, end: int) -> tuple[int, int] | None:
    for a, b in sentence_spans(text):
        if a <= start and end <= b:
            return a, b
    return None


def _answer_sentences(text: str, base: int, answers: list[dict]) -> list[tuple[dict, tuple[int, int]]]:
    """(answer, its sentence): the first answer's, then each other sentence that at least two of
    SQuAD's annotators marked an answer in (one annotator's answer alone may be a slip: "1064" for
    a question on 1018); an answer whose offsets do not hold its text, or that crosses a sentence
    boundary, is left out."""
    placed: list[tuple[dict, tuple[int, int]]] = []
    for answer in answers:
        start = base + answer["answer_start"]
        end = start + len(answer["text"])
        if text[start:end] != answer["text"]:
            continue
        sentence = _sentence_at(text, start, end)
        if sentence is not None:
            placed.append((answer, sentence))
    votes = Counter(sentence for _, sentence in placed)
    out = placed[:1]
    for answer, sentence in placed[1:]:
        if votes[sentence] >= 2 and all(sentence != s for _, s in out):
            out.append((answer, sentence))
    return out


def squad(out: Path, questions: int | None = 60) -> Built:
    """One Markdown document per article, `## Paragraph n` per paragraph; the first answerable
    question of each paragraph whose first answer lies inside one sentence, articles interleaved.
    That sentence is the anchor; when two annotators marked their answer in another sentence, it is
    an alternative (accept = "any"): "an Italo-Norman named Raoul" beside "Norman mercenary"."""
    folder = out / "squad"
    (folder / "corpus").mkdir(parents=True, exist_ok=True)
    data = json.loads((DATA / "squad" / "small.json").read_text(encoding="utf-8"))["data"]
    per_article: list[list[dict]] = []
    for article in data:
        doc_id = slugify(article["title"])
        title = article["title"].replace("_", " ")
        text = f"# {title}\n\n"
        found = []
        for n, paragraph in enumerate(article["paragraphs"], start=1):
            text += f"## Paragraph {n}\n\n"
            base = len(text)
            context = paragraph["context"]
            text += context + "\n\n"
            for qa in paragraph["qas"]:
                if qa.get("is_impossible") or not qa["answers"]:
                    continue
                spans = _answer_sentences(text, base, qa["answers"])
                if not spans or spans[0][0] is not qa["answers"][0]:
                    continue  # the first answer, SQuAD's reference, must lie inside one sentence
                answer, (a, b) = spans[0][0]["text"], spans[0][1]
                question = qa["question"].strip()
                item = {
                    "qid": f"{doc_id[:4].upper()}-{n:02d}",
                    "question": question,
                    "paraphrases": paraphrases(question),
                    "doc_id": doc_id,
                    "section_id": f"{doc_id}/paragraph-{n}",
                    "anchor": {"start": a, "end": b, "unit": "char", "text": text[a:b]},
                    "reference_answer": answer,
                }
                if len(spans) > 1:  # the annotators marked answers in different sentences: each answers
                    item["accept"] = "any"
                    item["expected_citations"] = [
                        {"doc_id": doc_id, "start": s, "end": e, "unit": "char", "text": text[s:e]}
                        for _, (s, e) in spans
                    ]
                found.append(item)
                break
        (folder / "corpus" / f"{doc_id}.md").write_text(text, encoding="utf-8")
        per_article.append(found)
    items = [item for group in zip(*per_article) for item in group]
    longest = max(per_article, key=len)
    items += longest[len(items) // len(per_article) :]
    gold = _write_gold(folder, items[:questions])
    # a paragraph is a chunk (chunk_size 256 tokens): the unit SQuAD's answers are marked in
    return Built("squad", _config(folder, k_values=(5, 20), chunk_size=256), gold, folder / "corpus", {})


def _clean_claim(text: str) -> str:
    return " ".join(MARKERS.sub("", text).split())


def expertqa(out: Path, questions: int | None = 60) -> Built:
    """One text document per evidence passage; per question, the first claim judged "Complete"
    whose passage holds a sentence sharing at least half of the claim's content stems (that
    sentence is the anchor)."""
    folder = out / "expertqa"
    (folder / "corpus").mkdir(parents=True, exist_ok=True)
    items, claims, written = [], {}, set()
    for n, line in enumerate((DATA / "expertqa" / "rand_val.jsonl").read_text(encoding="utf-8").splitlines()):
        record = json.loads(line)
        chosen = None
        for system, answer in sorted(record["answers"].items()):
            for claim in answer["claims"]:
                if claim.get("support") != "Complete":
                    continue
                stated = _clean_claim(claim["claim_string"])
                wanted = set(content_stems(stated))
                for evidence in claim["evidence"]:
                    passage = HEADER.sub("", evidence, count=1).strip()
                    if len(passage) < 200 or not wanted:
                        continue
                    best = max(
                        sentence_spans(passage),
                        key=lambda s: len(wanted & set(content_stems(passage[s[0] : s[1]]))),
                        default=None,
                    )
                    if best is None or len(passage[best[0] : best[1]].split()) < 6:
                        continue
                    overlap = len(wanted & set(content_stems(passage[best[0] : best[1]]))) / len(wanted)
                    if overlap >= 0.5:
                        chosen = (passage, best, stated)
                        break
                if chosen:
                    break
            if chosen:
                break
        if chosen is None:
            continue
        passage, (a, b), stated = chosen
        doc_id = f"q{n:03d}-" + hashlib.sha256(passage.encode()).hexdigest()[:8]
        if doc_id not in written:
            (folder / "corpus" / f"{doc_id}.txt").write_text(passage + "\n", encoding="utf-8")
            written.add(doc_id)
        qid = f"EQA-{n:03d}"
        question = " ".join(record["question"].split())
        items.append(
            {
                "qid": qid,
                "question": question,
                "paraphrases": paraphrases(question),
                "doc_id": doc_id,
                "section_id": "_preamble",
                "anchor": {"start": a, "end": b, "unit": "char", "text": passage[a:b]},
            }
        )
        claims[qid] = stated
        if questions is not None and len(items) >= questions:
            break
    # the other passages of the chosen questions' answers are the corpus's distractors
    _more_passages(folder / "corpus", {int(i["qid"][4:]) for i in items}, written)
    gold = _write_gold(folder, items)
    return Built("expertqa", _config(folder, k_values=()), gold, folder / "corpus", claims)


def _more_passages(corpus: Path, records: set[int], written: set[str]) -> None:
    for n, line in enumerate((DATA / "expertqa" / "rand_val.jsonl").read_text(encoding="utf-8").splitlines()):
        if n not in records:
            continue
        for _, answer in sorted(json.loads(line)["answers"].items()):
            for claim in answer["claims"]:
                for evidence in claim["evidence"]:
                    passage = HEADER.sub("", evidence, count=1).strip()
                    if len(passage) < 200:
                        continue
                    doc_id = f"q{n:03d}-" + hashlib.sha256(passage.encode()).hexdigest()[:8]
                    if doc_id not in written:
                        (corpus / f"{doc_id}.txt").write_text(passage + "\n", encoding="utf-8")
                        written.add(doc_id)


BUILDERS = {"handbook": handbook, "squad": squad, "expertqa": expertqa}


def build(name: str, out: Path, questions: int | None = None) -> Built:
    if name == "handbook":
        return handbook(out, questions)
    return BUILDERS[name](out, questions) if questions else BUILDERS[name](out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--corpus", default=",".join(CORPORA))
    parser.add_argument("--questions", type=int, default=None)
    args = parser.parse_args(argv)
    for name in args.corpus.split(","):
        built = build(name, args.out, args.questions)
        count = len(built.gold.read_text(encoding="utf-8").splitlines())
        print(f"{name}: {count} questions, config {built.config}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
