"""Canonical types. Everything past the readers in `ragaudit.io` works on these, never on raw dicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for annotations only: this module imports nothing of ragaudit when it runs
    from ragaudit.core.analyzers import Analyzer

TRACE_SCHEMA = "ragaudit.trace/1"
DEFAULT_MODEL = "all-MiniLM-L6-v2"  # the embedding model, unless `[embedder] model` or `--model` names another
UNITS = ("char", "token")

# Required payload fields, in the order of docs/reference.md §1.4. Each has its own `missing_<field>` code.
REQUIRED_PAYLOAD_FIELDS = (
    "doc_id",
    "section_id",
    "snippet_id",
    "source_url",
    "offsets",
    "tokens",
    "index_hash",
    "embed_model",
    "analyzer",
    "rev",
)


# The λ states, best first, each with its symbol: the one list every reader of λ uses.
LAMBDA_SYMBOLS = {"convergent": "→", "recursive": "<>", "chaotic": "×", "divergent": "←"}
LAMBDA_STATES: tuple[str, ...] = tuple(LAMBDA_SYMBOLS)


@dataclass(frozen=True, slots=True)
class Span:
    """A valid half-open interval `[start, end)` in one unit."""

    start: int
    end: int
    unit: str = "char"

    def __len__(self) -> int:
        return self.end - self.start

    def overlaps(self, other: Span, *, widen: int = 0) -> bool:
        return self.start < other.end + widen and other.start - widen < self.end

    def contains(self, other: Span) -> bool:
        return self.start <= other.start and other.end <= self.end


@dataclass(frozen=True, slots=True)
class Offsets:
    """Offsets as given (object form). Values are unchecked; `span` is set only when they are valid."""

    start: Any
    end: Any
    unit: Any

    @property
    def span(self) -> Span | None:
        s, e = self.start, self.end
        if type(s) is int and type(e) is int and 0 <= s < e and self.unit in UNITS:
            return Span(s, e, self.unit)
        return None


@dataclass(frozen=True, slots=True)
class FieldError:
    """A field whose JSON type is not the one the format asks for."""

    path: str
    expected: str
    found: str


@dataclass(slots=True)
class Payload:
    """One retrieved unit and its citation payload. Not frozen: validation builds hundreds of
    thousands of these per second, and a frozen dataclass costs four times as much to build.
    Treat it as immutable all the same."""

    doc_id: str | None
    section_id: str | None
    snippet_id: str | None
    source_url: str | None
    offsets: Offsets | None
    tokens: int | None
    index_hash: str | None
    embed_model: str | None
    analyzer: str | None
    rev: str | None
    window: dict[str, Any] | None = None
    page: int | None = None
    score_raw: float | None = None
    score_norm: float | None = None
    rerank_score: float | None = None
    k_pos: int | None = None
    k_final: int | None = None
    text: str | None = None
    missing: frozenset[str] = frozenset()
    # the offsets when they are valid; "derived": built again by the constructor, never sent to a worker
    span: Span | None = field(init=False, compare=False, repr=False, metadata={"derived": True})

    def __post_init__(self) -> None:
        self.span = self.offsets.span if self.offsets is not None else None


@dataclass(frozen=True, slots=True)
class LiveIndex:
    index_hash: str | None = None
    analyzer: str | None = None
    embed_model: str | None = None
    store: str | None = None


@dataclass(frozen=True, slots=True)
class Segment:
    seg: int
    text: str
    citations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Answer:
    raw: str | None = None
    text: str | None = None
    segments: tuple[Segment, ...] = ()
    raw_citations: tuple[str, ...] | None = None  # the `citations` of `raw` when it is JSON
    raw_keys: tuple[str, ...] = ()  # top-level keys of `raw`, in order, when it is JSON
    # the segments were read from the text's citation markers (ragaudit.core.citing): how each got its
    # citations, "marker" (its own), "next" (the next marked sentence's) or "none"; empty otherwise
    marked: tuple[str, ...] = ()

    @property
    def citations(self) -> tuple[str, ...]:
        """Snippet ids the answer cites: from its segments, else from the cite-first JSON."""
        if self.segments:
            seen: dict[str, None] = {}
            for segment in self.segments:
                seen.update(dict.fromkeys(segment.citations))
            return tuple(seen)
        return self.raw_citations or ()


@dataclass(frozen=True, slots=True)
class Step:
    step_number: int
    question: str = ""
    intermediate_answer: str = ""
    confidence_score: float | None = None
    citations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunKey:
    qid: str
    variant: int
    seed: int


@dataclass(frozen=True, slots=True)
class Trace:
    qid: str
    variant: int
    seed: int
    retrieved: tuple[Payload, ...] = ()
    query: str | None = None
    config: str | None = None
    retriever_name: str | None = None
    retrieved_at: str | None = None
    index: LiveIndex | None = None
    answer: Answer | None = None
    steps: tuple[Step, ...] = ()
    error: str | None = None
    offset_unit: str | None = None
    field_errors: tuple[FieldError, ...] = ()
    file: str | None = None
    line: int | None = None
    attempts: int | None = None  # calls it took when a failed call was tried again
    retried: tuple[str, ...] = ()  # the errors of the attempts that failed
    source: str | None = None  # "spans": joined from production spans (ragaudit ingest); else none

    @property
    def key(self) -> RunKey:
        return RunKey(self.qid, self.variant, self.seed)


@dataclass(frozen=True, slots=True)
class Issue:
    code: str
    severity: str
    message: str
    fix: str
    path: str = "$"
    qid: str | None = None
    variant: int | None = None
    seed: int | None = None
    seg: int | None = None
    citation: str | None = None
    file: str | None = None
    line: int | None = None
    pipeline: str | None = None  # the trace's `config`: which pipeline produced the run

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity,
            "qid": self.qid,
            "variant": self.variant,
            "seed": self.seed,
            "path": self.path,
            "message": self.message,
            "fix": self.fix,
        }
        for name in ("seg", "citation", "file", "line", "pipeline"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


# ---- corpus -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Section:
    section_id: str
    start: int
    end: int
    title: str = ""

    @property
    def span(self) -> Span:
        return Span(self.start, self.end, "char")


@dataclass(frozen=True, slots=True)
class Document:
    doc_id: str
    text: str
    rev: str
    title: str = ""
    source_url: str | None = None
    sections: tuple[Section, ...] = ()
    pages: tuple[tuple[int, int], ...] = ()

    def section(self, section_id: str) -> Section | None:
        for section in self.sections:
            if section.section_id == section_id:
                return section
        return None

    def page_of(self, char: int) -> int | None:
        for number, (start, end) in enumerate(self.pages, start=1):
            if start <= char < end:
                return number
        return None


@dataclass(frozen=True)
class Corpus:
    documents: dict[str, Document]
    path: str = ""
    _token_spans: dict[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict, repr=False, compare=False)
    _sections: dict[tuple[str, str], Section] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for doc in self.documents.values():
            for section in doc.sections:
                self._sections[(doc.doc_id, section.section_id)] = section

    def section(self, doc_id: str, section_id: str) -> Section | None:
        return self._sections.get((doc_id, section_id))

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self.documents

    def __getitem__(self, doc_id: str) -> Document:
        return self.documents[doc_id]

    def __len__(self) -> int:
        return len(self.documents)

    def token_spans(self, doc_id: str, analyzer: Analyzer) -> list[tuple[int, int]]:
        """Char spans of the document's tokens under `analyzer`, computed once per pair."""
        key = (doc_id, analyzer.name)
        spans = self._token_spans.get(key)
        if spans is None:
            spans = self._token_spans[key] = analyzer.spans(self.documents[doc_id].text)
        return spans

    def char_span(self, doc_id: str, span: Span, analyzer: Analyzer | None = None) -> Span | None:
        """The span in chars; a token span needs the analyzer, and is None past the last token."""
        if span.unit == "char":
            return span
        if analyzer is None:
            return None
        spans = self.token_spans(doc_id, analyzer)
        if span.end > len(spans):
            return None
        return Span(spans[span.start][0], spans[span.end - 1][1], "char")


# ---- gold set -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Anchor:
    span: Span
    text: str


@dataclass(frozen=True, slots=True)
class ExpectedCitation:
    """One gold span. `section_id` and `text` default to the item's section and anchor text where
    the span is the anchor's document; `None` means the gold set does not say."""

    doc_id: str
    span: Span
    snippet_id: str | None = None
    section_id: str | None = None
    text: str | None = None


@dataclass(frozen=True, slots=True)
class Decoy:
    doc_id: str
    section_id: str | None = None


@dataclass(frozen=True, slots=True)
class GoldItem:
    qid: str
    question: str
    doc_id: str
    section_id: str
    anchor: Anchor
    paraphrases: tuple[str, ...] = ()
    expected_citations: tuple[ExpectedCitation, ...] = ()
    decoy: Decoy | None = None
    answers_not_allowed: tuple[str, ...] = ()
    reference_answer: str | None = None
    line: int | None = None
    accept: str = "all"  # "any": the expected citations are alternatives, each answering the question

    @property
    def variants(self) -> tuple[str, ...]:
        return (self.question, *self.paraphrases)

    @property
    def gold_citations(self) -> tuple[ExpectedCitation, ...]:
        """`expected_citations`, defaulting to the anchor; each with its section and text filled in
        from the item where the gold set leaves them out and the span is the anchor's."""
        if not self.expected_citations:
            return (ExpectedCitation(self.doc_id, self.anchor.span, None, self.section_id, self.anchor.text),)
        return tuple(self._completed(c) for c in self.expected_citations)

    def _completed(self, cite: ExpectedCitation) -> ExpectedCitation:
        same_doc = cite.doc_id == self.doc_id
        section = cite.section_id or (self.section_id if same_doc else None)
        text = cite.text
        if text is None and same_doc and cite.span == self.anchor.span:
            text = self.anchor.text
        if section == cite.section_id and text == cite.text:
            return cite
        return ExpectedCitation(cite.doc_id, cite.span, cite.snippet_id, section, text)


# --- what a run reads and where it runs: one registry each, every other list derived from it -------


@dataclass(frozen=True)
class InputFormat:
    """A format runs are read in: ragaudit's own trace files, or production spans joined into traces
    (docs/reference.md §10). Adding one is an entry here and its reader."""

    name: str
    holds: str  # what a file of the format is, as `ragaudit ingest --help` says it
    reader: str | None = None  # "module:function" yielding a file's span records; None: ragaudit's own traces


INPUT_FORMATS = {
    f.name: f
    for f in (
        InputFormat("traces", "ragaudit trace JSON lines"),
        InputFormat("otlp", "OTLP JSON, .gz too", "ragaudit.io.spans.otlp:read_otlp"),
        InputFormat("phoenix", "parquet or JSON lines", "ragaudit.io.spans.phoenix:read_phoenix"),
        InputFormat("langfuse", "JSON or JSON lines", "ragaudit.io.spans.langfuse:read_langfuse"),
    )
}
FORMATS: tuple[str, ...] = tuple(INPUT_FORMATS)
SPAN_FORMATS: tuple[str, ...] = tuple(name for name, f in INPUT_FORMATS.items() if f.reader)


@dataclass(frozen=True)
class ExecutorKind:
    """Where the work of a run happens (`[executor] kind`, `--executor`; ragaudit.auditing.executors)."""

    name: str
    elsewhere: bool  # its workers are other processes, which build the run's inputs from the config file
    shards: bool  # `validate` shards its inputs over it (its own processes on this machine are --workers)


EXECUTORS = {
    e.name: e
    for e in (
        ExecutorKind("local", elsewhere=False, shards=True),
        ExecutorKind("processes", elsewhere=True, shards=False),
        ExecutorKind("dask", elsewhere=True, shards=True),
    )
}
EXECUTOR_KINDS: tuple[str, ...] = tuple(EXECUTORS)
