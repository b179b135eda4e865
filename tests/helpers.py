"""What several test modules share: the handbook fixture texts, run configs and the CLI, trace
files with every kind of defect, and the path to the shared data. Tests import from here, never
from each other."""

import copy
import io
import json
import os
import random
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragaudit.checks.validation import Context, Validator
from ragaudit.cli.commands import main
from ragaudit.core.analyzers import ANALYZERS
from ragaudit.core.types import Anchor, GoldItem, Span

SHARED = Path(__file__).resolve().parents[1].parent / "shared"

POLICIES = """# Policies

Every rule here applies to all staff.

## Security

### Keys

Hardware keys are rotated every 12 months. Administrators keep two registered keys.

### Passwords

Passwords are rotated every 90 days. Reuse of the last 5 passwords is blocked.
"""

ONCALL = """# On-call

## Paging

A SEV1 page must be acknowledged within 5 minutes.
"""


def shared_path(*parts: str) -> Path:
    """A path under ../shared/data; skips when absent unless RAGAUDIT_REQUIRE_SHARED=1, where it fails."""
    path = SHARED.joinpath("data", *parts)
    if not path.exists():
        if os.environ.get("RAGAUDIT_REQUIRE_SHARED") == "1":
            pytest.fail(f"{path} is required (RAGAUDIT_REQUIRE_SHARED=1) but missing")
        pytest.skip(f"shared data not present: {path}")
    return path


def payload_for(
    corpus,
    doc_id: str,
    sentence: str,
    *,
    snippet_id: str,
    section_id: str,
    score: float,
    rank: int,
    analyzer: str = "lowercase",
) -> dict:
    doc = corpus[doc_id]
    start = doc.text.index(sentence)
    return {
        "doc_id": doc_id,
        "section_id": section_id,
        "snippet_id": snippet_id,
        "source_url": f"file:///corpus/{doc_id}.md#{section_id}",
        "offsets": {"start": start, "end": start + len(sentence), "unit": "char"},
        "tokens": ANALYZERS[analyzer].count(sentence),
        "index_hash": "sha256:abc",
        "embed_model": "all-MiniLM-L6-v2:mean",
        "analyzer": analyzer,
        "rev": doc.rev,
        "score_norm": score,
        "score_raw": score * 10,
        "k_pos": rank,
        "text": sentence,
    }


KEYS_SENTENCE = "Hardware keys are rotated every 12 months."
PASSWORDS_SENTENCE = "Passwords are rotated every 90 days."


ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "gold_sets" / "handbook"
FIXTURES = Path(__file__).resolve().parent / "pipelines" / "fixtures"


def write_config(tmp_path, pipelines: str, *, items: int = 6, seeds="[1, 2]", extra: str = "") -> Path:
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join((DEMO / "gold.jsonl").read_text().splitlines(keepends=True)[:items]))
    config = tmp_path / "audit.toml"
    config.write_text(f"""
[audit]
gold = "gold.jsonl"
corpus = "{DEMO / "corpus"}"
paraphrases = 3
seeds = {seeds}
out = "runs"
{extra}
[embedder]
model = "hashing"

{pipelines}
""")
    return config


BM25 = '[[pipelines]]\nname = "bm25"\nkind = "reference"\nretriever = "bm25"\n'
TFIDF = '[[pipelines]]\nname = "tfidf"\nkind = "reference"\nretriever = "tfidf"\nrerank = "mmr"\ntemperature = 0.5\n'


def stalling(*, answered: int, go) -> str:
    """A python pipeline (the stalling_rag fixture) for a config of `write_config`: the runs of its
    first `answered` questions answer at once, the others wait until the file `go` exists; no call
    times out meanwhile."""
    gold = [json.loads(line) for line in (DEMO / "gold.jsonl").read_text().splitlines()]
    stall = sorted({q for item in gold[answered:] for q in [item["question"], *item["paraphrases"]]})
    return (
        '[[pipelines]]\nname = "slow"\nkind = "python"\nfactory = "stalling_rag:make"\ntimeout_s = 3600\n'
        f"options = {{stall = {json.dumps(stall)}, go = {json.dumps(str(go))}}}\n"
    )


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def run_dir_of(result) -> Path:
    return Path(result.output.strip().splitlines()[-1].split("run directory: ")[1])


def replayed_runs(tmp: Path, recordings: dict[str, Path], gold: Path, corpus: Path, extra: str = "") -> dict:
    """Recorded traces (pipeline name -> recording) replayed through `ragaudit run` with the shipped
    defaults over the items of `gold` they answer: every run by (pipeline, qid, variant), as
    report.json has it. `extra`: more config tables."""
    recorded = {
        json.loads(line)["qid"] for p in recordings.values() for line in p.read_text(encoding="utf-8").splitlines()
    }
    items = [line for line in gold.read_text(encoding="utf-8").splitlines() if json.loads(line)["qid"] in recorded]
    (tmp / "gold.jsonl").write_text("\n".join(items) + "\n", encoding="utf-8")
    pipelines = "".join(
        f'[[pipelines]]\nname = "{name}"\nkind = "replay"\nk = 3\ntraces = "{path}"\n\n'
        for name, path in recordings.items()
    )
    config = tmp / "replayed.toml"
    config.write_text(
        f'[audit]\ngold = "gold.jsonl"\ncorpus = "{corpus}"\nparaphrases = 2\nseeds = [1]\nout = "runs"\n\n'
        f"[metrics]\nk = 3\n\n{extra}{pipelines}",
        encoding="utf-8",
    )
    result = invoke("run", config, "--no-gate", "--no-gold-check")
    assert result.exit_code == 0, result.output
    report = json.loads((run_dir_of(result) / "report.json").read_text(encoding="utf-8"))
    return {(r["pipeline"], r["qid"], r["variant"]): r for q in report["questions"] for r in q["runs"]}


def comparable(report: dict) -> dict:
    """A report without the parts that may differ between identical runs: meta (times, versions)."""
    return {k: v for k, v in report.items() if k != "meta"}


ANCHOR = Span(POLICIES.index(KEYS_SENTENCE), POLICIES.index(KEYS_SENTENCE) + len(KEYS_SENTENCE))
ITEM = GoldItem(
    "SEC-KEYS-1",
    "How often are hardware keys rotated?",
    "policies",
    "policies/security/keys",
    Anchor(ANCHOR, KEYS_SENTENCE),
)


MUTATIONS = [
    lambda t: None,
    lambda t: None,
    lambda t: t["retrieved"][0].pop("rev"),
    lambda t: t["retrieved"][1].update(offsets=[9, 3]),
    lambda t: t["retrieved"][0].update(score_norm=1.5, k_pos="1"),
    lambda t: t["retrieved"].reverse() or [p.update(score_norm=0.5) for p in t["retrieved"]],
    lambda t: t["index"].update(analyzer="whitespace"),
    lambda t: t.pop("index"),
    lambda t: t.update(error="timeout", retrieved=[]),
    lambda t: t["answer"]["segments"][0].update(citations=["nope", "pol-pw-1", "pol-keys-1"]),
    lambda t: t["retrieved"][1].update(snippet_id="pol-keys-1", text="not the slice"),
]
ODD_LINES = [
    b"",
    b"   ",
    b"not json",
    b'{"qid": "a", "qid": "b"}',
    b'{"qid": "q", "retrieved": [{"score_norm": NaN}]}',
    b"[" * 300 + b"]" * 300,
    b'{"qid": 7}',
    b"[1, 2]",
    b'{"qid": "\\ud800", "retrieved": []}',
]


def trace_lines(valid_trace, count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    lines = []
    for number in range(count):
        if rng.random() < 0.15:
            lines.append(rng.choice(ODD_LINES))
            continue
        trace = copy.deepcopy(valid_trace)
        trace["qid"] = f"Q{number}"
        rng.choice(MUTATIONS)(trace)
        lines.append(json.dumps(trace, ensure_ascii=rng.random() < 0.5).encode())
    return lines


def write(path: Path, lines: list[bytes], *, newline: bytes = b"\n", torn: bool = False, bom: bool = False) -> Path:
    data = newline.join(lines) + (b"" if torn else newline)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)
    return path


def outcome(validator: Validator, issues) -> dict:
    found = [i.to_dict() for i in issues]
    return {
        "issues": found,
        "records": validator.records,
        "counts": dict(validator.counts),
        "errors": validator.errors,
        "bad": [str(b.problem) for b in validator.bad_lines],
        "unreadable": [str(e) for e in validator.unreadable],
    }


def sequential(paths, ctx=None, offset_unit="char") -> dict:
    validator = Validator(ctx or Context(), offset_unit=offset_unit)
    return outcome(validator, validator.check_paths(paths))


# a [gate] every run passes: for tests of what happens when the gate passes
LENIENT = """[gate]
delta_s_excess_max = 1.0
coverage_min = 0.0
coverage_pass_rate = 0.0
citation_match_min = 0.0
lambda_convergent_min = 0.0
lambda_forbid = []
hallucination_max = 100000
grounded_pass_rate = 0.0
max_errors = 100000
"""


STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"  # a progress line's UTC timestamp


class Terminal(io.StringIO):
    """A stream that says it is a terminal: the live progress display draws on it."""

    def isatty(self):
        return True


# ---- production spans: real OpenTelemetry spans, written the ways production exports them ----


def span_recorder(service: str = "handbook-rag"):
    """An OpenTelemetry SDK TracerProvider (resource service.name = `service`) that keeps every
    finished span in memory: (provider, exporter); `exporter.get_finished_spans()` reads them."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def otlp_request(spans, *, hex_ids: bool = False) -> dict:
    """Spans as one ExportTraceServiceRequest in JSON, by the SDK's own protobuf encoder and
    protobuf's JSON mapping (ids in base64); `hex_ids` writes the ids in hex, as the OTLP JSON
    encoding of the Collector's file exporter does."""
    import base64

    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    request = MessageToDict(encode_spans(spans))
    if hex_ids:
        for resource in request["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
    return request


def otlp_line(spans, *, hex_ids: bool = False) -> str:
    """One line of an OTLP JSON file: `MessageToJson` of the encoded request, on one line."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    if not hex_ids:
        return MessageToJson(encode_spans(spans), indent=None)
    return json.dumps(otlp_request(spans, hex_ids=True))


def _semantic_conventions() -> list[str]:
    """Every OpenInference attribute name, longest first (how Phoenix lists them)."""
    import inspect

    from openinference.semconv import trace

    names = {
        getattr(klass, attr)
        for name in dir(trace)
        if name.endswith("Attributes") and inspect.isclass(klass := getattr(trace, name))
        for attr in dir(klass)
        if attr.isupper()
    }
    return sorted((n for n in names if isinstance(n, str)), key=len, reverse=True)


_JSON_STRING_ATTRIBUTES = ("document.metadata", "llm.prompt_template.variables", "metadata", "tool.parameters")


def phoenix_attributes(attributes: dict) -> dict:
    """Span attributes flattened as Phoenix's get_spans_dataframe flattens them: a semantic
    convention stays whole, indexed ones (`retrieval.documents.0.document.id`) become a list of
    dicts keyed by the rest (`document.id`), JSON-string attributes are parsed, and other
    attributes nest by their first name part (`ragaudit.qid` -> `ragaudit: {qid}`)."""
    conventions = _semantic_conventions()

    def parsed(key: str, value):
        if key.endswith(_JSON_STRING_ATTRIBUTES) and isinstance(value, str):
            try:
                return json.loads(value) or None
            except ValueError:
                return value
        return value

    out: dict = {}
    for key, value in attributes.items():
        value = list(value) if isinstance(value, tuple) else value
        prefix = next((c for c in conventions if key == c or key.startswith(c + ".")), None)
        if prefix is not None and key != prefix:
            index, _, rest = key[len(prefix) + 1 :].partition(".")
            if index.isdigit() and rest:
                items = out.setdefault(prefix, [])
                while len(items) <= int(index):
                    items.append({})
                items[int(index)][rest] = parsed(rest, value)
                continue
        if prefix == key:
            out[key] = parsed(key, value)
            continue
        head, _, tail = key.partition(".")
        if tail:
            out.setdefault(head, {})[tail] = value
        else:
            out[key] = value
    return out


def phoenix_rows(spans) -> list[dict]:
    """The rows of Phoenix's spans dataframe for these spans (context.*, span_kind, attributes.*)."""
    import pandas as pd

    rows = []
    for span in spans:
        attributes = dict(span.attributes)
        row = {
            "name": span.name,
            "span_kind": attributes.get("openinference.span.kind", "UNKNOWN"),
            "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
            "start_time": pd.Timestamp(span.start_time, unit="ns", tz="UTC"),
            "end_time": pd.Timestamp(span.end_time, unit="ns", tz="UTC"),
            "status_code": span.status.status_code.name,
            "status_message": span.status.description or "",
            "context.span_id": f"{span.context.span_id:016x}",
            "context.trace_id": f"{span.context.trace_id:032x}",
        }
        row.update({f"attributes.{k}": v for k, v in phoenix_attributes(attributes).items()})
        rows.append(row)
    return rows


def write_phoenix(spans, path: Path, *, date_format: str = "epoch") -> Path:
    """A Phoenix span export: the dataframe saved as parquet, or as JSON lines (`.jsonl`, as
    pandas writes them: times as epoch milliseconds or ISO text, floats to 10 digits)."""
    import pandas as pd

    frame = pd.DataFrame(phoenix_rows(spans))
    if path.suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True, date_format=date_format)
    else:
        frame.to_parquet(path)
    return path


def _iso_ms(ns: int) -> str:
    from datetime import datetime, timezone

    moment = datetime.fromtimestamp(ns // 1_000_000_000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{ns % 1_000_000_000 // 1_000_000:03d}Z"


def langfuse_observations(spans, *, retriever_type: str = "SPAN") -> list[dict]:
    """The spans as Langfuse observations (its public API / export schema): GENERATION for LLM
    spans, `retriever_type` for RETRIEVER spans (their documents in `output`), SPAN otherwise;
    JSON inputs and outputs parsed, as Langfuse stores them; `ragaudit.*` attributes and the
    resource attributes in `metadata`."""
    observations = []
    for span in spans:
        a = dict(span.attributes)
        kind = a.get("openinference.span.kind")

        def value(name: str):
            raw = a.get(f"{name}.value")
            return json.loads(raw) if a.get(f"{name}.mime_type") == "application/json" else raw

        output = value("output")
        if kind == "RETRIEVER":
            documents = phoenix_attributes(a).get("retrieval.documents")
            if documents is not None:
                output = [
                    {
                        "id": d.get("document.id"),
                        "content": d.get("document.content"),
                        "score": d.get("document.score"),
                        "metadata": d.get("document.metadata"),
                    }
                    for d in documents
                ]
        observations.append(
            {
                "id": f"{span.context.span_id:016x}",
                "traceId": f"{span.context.trace_id:032x}",
                "parentObservationId": f"{span.parent.span_id:016x}" if span.parent else None,
                "type": "GENERATION" if kind == "LLM" else retriever_type if kind == "RETRIEVER" else "SPAN",
                "name": span.name,
                "startTime": _iso_ms(span.start_time),
                "endTime": _iso_ms(span.end_time),
                "input": value("input"),
                "output": output,
                "metadata": {
                    "resourceAttributes": dict(span.resource.attributes),
                    **{k: v for k, v in a.items() if k.startswith("ragaudit.")},
                },
                "level": "ERROR" if span.status.status_code.name == "ERROR" else "DEFAULT",
                "statusMessage": span.status.description,
            }
        )
    return observations


def rag_spans(
    tracer,
    question: str,
    documents: list[dict],
    answer: str,
    *,
    genai: bool = False,
    root_attributes: dict | None = None,
    start_ns: int | None = None,
):
    """One request of a RAG application as spans made by the OpenTelemetry SDK: a root CHAIN
    (question in, answer out) over a RETRIEVER span holding `documents` ({id, content, score,
    metadata}) and an LLM span. With `genai`, the OpenTelemetry GenAI conventions instead
    (`gen_ai.operation.name`, `gen_ai.retrieval.documents` as a JSON string,
    `gen_ai.output.messages`) and a root span of no declared kind. `start_ns`: when the request
    starts (the SDK's clock otherwise)."""
    at = (lambda offset: None) if start_ns is None else (lambda offset: start_ns + offset)
    if genai:
        root = dict(root_attributes or {})
        retriever = {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.query.text": question,
            "gen_ai.retrieval.documents": json.dumps(documents),
        }
        llm = {
            "gen_ai.operation.name": "chat",
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
            ),
        }
    else:
        root = {"openinference.span.kind": "CHAIN", "input.value": question, **(root_attributes or {})}
        retriever = {"openinference.span.kind": "RETRIEVER", "input.value": question}
        for i, d in enumerate(documents):
            for key in ("id", "content", "score"):
                if d.get(key) is not None:
                    retriever[f"retrieval.documents.{i}.document.{key}"] = d[key]
            if d.get("metadata") is not None:
                retriever[f"retrieval.documents.{i}.document.metadata"] = json.dumps(d["metadata"])
        llm = {"openinference.span.kind": "LLM", "output.value": answer}
    with tracer.start_as_current_span("rag", attributes=root, start_time=at(0)) as span:
        with tracer.start_as_current_span("retrieve", attributes=retriever, start_time=at(1_000)):
            pass
        with tracer.start_as_current_span("llm", attributes=llm, start_time=at(2_000)):
            pass
        if not genai:
            span.set_attribute("output.value", answer)


def trace_documents(trace) -> list[dict]:
    """The retrieved payloads of a ragaudit Trace as span documents ({id, content, score, metadata}),
    every payload field in the metadata, as docs/production.md puts them there."""
    return [
        {
            "id": p.snippet_id,
            "content": p.text,
            "score": p.score_raw,
            "metadata": {
                "doc_id": p.doc_id,
                "section_id": p.section_id,
                "start_char_idx": p.offsets.start,
                "end_char_idx": p.offsets.end,
                "rev": p.rev,
                "source_url": p.source_url,
                "tokens": p.tokens,
                "index_hash": p.index_hash,
                "analyzer": p.analyzer,
                "embed_model": p.embed_model,
            },
        }
        for p in trace.retrieved
    ]


def marked_answer(trace) -> str:
    """A reference answer as an LLM app writes it: each sentence followed by its `[snippet_id]` markers."""
    return " ".join(s.text.rstrip(".") + "".join(f" [{c}]" for c in s.citations) + "." for s in trace.answer.segments)


def write_demo_config(folder: Path, *, extra: str = "") -> Path:
    """configs/default.toml (the demo: bm25-k5, dense-k5 and the sampling hybrid-mmr-k5 over every
    handbook question) with the fast hashing encoder, writing its runs under `folder`."""
    text = (ROOT / "configs" / "default.toml").read_text()
    text = text.replace('"../gold_sets', f'"{ROOT / "gold_sets"}').replace('out = "../reports"', 'out = "runs"')
    text = text.replace('model = "all-MiniLM-L6-v2"', 'model = "hashing"')
    config = Path(folder) / "demo.toml"
    config.write_text(text + extra)
    return config


def as_questions(rows: dict[str, dict]) -> dict:
    """Question records by qid, as a report holds them, typed (`ragaudit.core.model.Question`): a row
    gives what it sets (metrics, lambda, stats); the rest is a question of pipeline p with one run."""
    from ragaudit.core.model import Question

    return {
        qid: Question.from_json({"pipeline": "p", "qid": qid, "stats": {"runs": 1}, **row}, f"$[{qid!r}]")
        for qid, row in rows.items()
    }


REFERENCE = ROOT / "docs" / "reference.md"


def readme_layout() -> str:
    """The block of README.md's "Layout" section: a folder a line, its contents described beside it."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.search(r"## Layout\n\n```\n(.*?)```", readme, re.S).group(1)


def markdown_table(text: str, marker: str) -> list[list[str]]:
    """The body rows of the markdown table after `<!-- marker -->` in `text`, cells unescaped."""
    import re

    match = re.search(rf"<!-- {re.escape(marker)} -->\n((?:\|.*\n)+)", text)
    assert match, f"no table marked <!-- {marker} -->"
    rows = match.group(1).splitlines()[2:]
    return [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]] for row in rows]


def backticked(cell: str) -> list[str]:
    """The `names` of a table cell."""
    import re

    return re.findall(r"`([^`]+)`", cell)


class Lazy:
    """A class or module of a heavy library (LlamaIndex, Haystack, the LLM SDKs), imported the first
    time a test uses it: called, an attribute read, or an isinstance check. Collecting the suite
    then imports none of them; `Lazy("haystack", "Document")` stands where `from haystack import
    Document` stood."""

    def __init__(self, module: str, name: str | None = None):
        self._module, self._name = module, name

    def _target(self):
        import importlib

        module = importlib.import_module(self._module)
        return module if self._name is None else getattr(module, self._name)

    def __getattr__(self, attr: str):
        if attr.startswith("_"):  # pytest looks for its own markers on every module attribute: not an import
            raise AttributeError(attr)
        return getattr(self._target(), attr)

    def __call__(self, *args, **kwargs):
        return self._target()(*args, **kwargs)

    def __instancecheck__(self, obj) -> bool:
        return isinstance(obj, self._target())


CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


def chromium(width: int, height: int, *, browser_logs: bool = False):
    """A headless Chromium (Selenium) with a window of `width` x `height`, as a context manager
    (with `browser_logs`, its console log is kept for `get_log("browser")`); skips when the browser,
    its driver or selenium is missing, unless RAGAUDIT_REQUIRE_BROWSER=1."""
    import contextlib
    import tempfile

    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package")
    if missing:
        reason = f"headless browser test needs {', '.join(missing)} (Debian: chromium chromium-driver)"
        if os.environ.get("RAGAUDIT_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + "; RAGAUDIT_REQUIRE_BROWSER=1")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    @contextlib.contextmanager
    def opened():
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        with tempfile.TemporaryDirectory() as profile:
            for arg in (
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--window-size={width},{height}",
                f"--user-data-dir={profile}",
            ):
                options.add_argument(arg)
            if browser_logs:
                options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
            browser = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
            try:
                yield browser
            finally:
                browser.quit()

    return opened()


def count_corpus_loads(monkeypatch) -> list[Path]:
    """The corpus paths `ragaudit.io.corpus.load_corpus` reads from now on, wherever it is called
    from: every module that imported it is given the counting one."""
    import sys

    import ragaudit.io.corpus

    original = ragaudit.io.corpus.load_corpus
    loads: list[Path] = []

    def counting(path):
        loads.append(Path(path))
        return original(path)

    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == "ragaudit" and getattr(module, "load_corpus", None) is original:
            monkeypatch.setattr(module, "load_corpus", counting)
    return loads


class RegexReads:
    """The characters a module's regular expressions are given to read from now on (each call's
    `endpos - pos`, or the whole string): a count of work that, unlike a time, a busy machine does
    not change; `longest` is the longest text one call was given. Patterns held in module-level
    lists and tuples are counted too."""

    def __init__(self, monkeypatch, module):
        self.chars = self.longest = 0
        for name, value in list(vars(module).items()):
            if isinstance(value, re.Pattern):
                monkeypatch.setattr(module, name, self._counted(value))
            elif isinstance(value, (list, tuple)) and value and all(isinstance(v, re.Pattern) for v in value):
                monkeypatch.setattr(module, name, type(value)(self._counted(v) for v in value))

    def _counted(self, pattern: re.Pattern):
        reads = self

        class Counted:
            def __getattr__(self, attr):
                return getattr(pattern, attr)

            def _read(self, string, pos=0, endpos=None):
                read = max(0, min(len(string), len(string) if endpos is None else endpos) - pos)
                reads.chars += read
                reads.longest = max(reads.longest, read)

            def search(self, string, *span):
                self._read(string, *span)
                return pattern.search(string, *span)

            def match(self, string, *span):
                self._read(string, *span)
                return pattern.match(string, *span)

            def fullmatch(self, string, *span):
                self._read(string, *span)
                return pattern.fullmatch(string, *span)

            def finditer(self, string, *span):
                self._read(string, *span)
                return pattern.finditer(string, *span)

            def findall(self, string, *span):
                self._read(string, *span)
                return pattern.findall(string, *span)

            def sub(self, repl, string, count=0):
                self._read(string)
                return pattern.sub(repl, string, count)

            def split(self, string, maxsplit=0):
                self._read(string)
                return pattern.split(string, maxsplit)

        return Counted()


def write_keys(folder: Path, name: str, password: bytes | None = None) -> tuple[Path, Path]:
    """An ed25519 key pair in PEM, as `ragaudit attest --key` and `verify --pubkey` read them."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private, public = folder / f"{name}.pem", folder / f"{name}.pub.pem"
    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return private, public
