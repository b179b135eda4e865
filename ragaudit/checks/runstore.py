"""Per-run rows in a columnar file (`runs.parquet`): every run's metrics, verdict, answer
segments and cited spans, one row each, written a batch at a time and read back by column or by
question. The report keeps aggregates and the flagged questions' runs; every run stays here.

Nested values (segments, spans, steps) are stored as JSON text: they are read back only for the
few runs a report shows in detail, so a columnar layout would buy nothing there.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple

import orjson

from ragaudit.checks.metrics.delta_s import payload_text
from ragaudit.core.shape import RENAMED_METRICS
from ragaudit.core.types import Corpus, Payload, Trace
from ragaudit.io.files import sqlite_errors

if TYPE_CHECKING:  # pyarrow ships no types: to mypy these are Any, named for the reader
    import pyarrow as pa

RUNS = "runs.parquet"
CONTEXT = 160  # characters of document shown on each side of a span in the drill-down
KEYS = ("pipeline", "qid", "variant", "seed")
TEXT = ("query", "error", "why", "zone", "answer", "ts", "store", "index_hash", "embed_model", "analyzer")
FLAGS = ("errored", "correct")
NESTED = ("citations", "sections", "stated_sections", "segments", "claims", "spans", "steps", "chain", "attribution")
READ_BATCH = 2_000  # runs read back at a time: a batch's rows, decoded, are the memory a read holds


def snippet_ref(p: Payload) -> str:
    """A short key for a snippet's content, so each distinct snippet is stored once."""
    body = f"{p.doc_id}|{p.snippet_id}|{p.offsets and (p.offsets.start, p.offsets.end, p.offsets.unit)}|{p.text}"
    return hashlib.sha1(body.encode("utf-8", "replace")).hexdigest()[:12]


def context(corpus: Corpus | None, doc_id: str | None, start: int, end: int) -> dict[str, str] | None:
    if corpus is None or doc_id is None or doc_id not in corpus:
        return None
    text = corpus[doc_id].text
    return {"before": text[max(0, start - CONTEXT) : start], "after": text[end : end + CONTEXT]}


class Snippet(NamedTuple):
    """A distinct retrieved snippet, held as one tuple until the report shows it (`to_json`)."""

    snippet_id: str | None
    doc_id: str | None
    section_id: str | None
    rev: str | None
    start: int | None  # its offsets: all three None without
    end: int | None
    unit: str | None
    text: str | None
    before: str | None  # the document's text on each side of a char span; None without one in the corpus
    after: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "snippet_id": self.snippet_id,
            "doc_id": self.doc_id,
            "section_id": self.section_id,
            "rev": self.rev,
            "offsets": None if self.unit is None else {"start": self.start, "end": self.end, "unit": self.unit},
            "text": self.text,
            "context": None if self.before is None else {"before": self.before, "after": self.after},
        }


class SnippetStore:
    """The distinct snippets of an audit, each kept once, the first seen: whole in an SQLite file
    (`path`, in the audit's work folder; in memory without one), with only where each is (its
    section id and revision, which traces.log shows) held in memory. A snippet's texts (its own and
    the document around it) are most of its size, and the report reads back only the few it shows."""

    def __init__(self, path: Path | None = None) -> None:
        import sqlite3

        self._places: dict[str, tuple[str | None, str | None]] = {}
        self._names: dict[str, str] = {}  # one string per distinct section id and revision
        self._name = str(path or ":memory:")
        with self._failing("create"):
            self._db = sqlite3.connect(self._name, check_same_thread=False)
            self._db.execute("CREATE TABLE snippets (ref TEXT PRIMARY KEY, snippet TEXT NOT NULL)")

    def _failing(self, doing: str) -> contextlib.AbstractContextManager[None]:
        """An SQLite error (a full disk, a file that cannot be made) as the input-output error it is."""
        return sqlite_errors(f"{doing} the audit's snippets", self._name)

    def __len__(self) -> int:
        return len(self._places)

    def __contains__(self, ref: object) -> bool:
        return ref in self._places

    def add(self, snippets: dict[str, Snippet]) -> None:
        """Keep the snippets not kept yet."""
        import json

        new = [(ref, snippet) for ref, snippet in snippets.items() if ref not in self._places]
        names = self._names
        for ref, snippet in new:
            section, rev = snippet.section_id, snippet.rev
            self._places[ref] = (
                None if section is None else names.setdefault(section, section),
                None if rev is None else names.setdefault(rev, rev),
            )
        with self._failing("keep"), self._db:  # ASCII JSON: any string, lone surrogates too, reads back as it was
            self._db.executemany("INSERT INTO snippets VALUES (?, ?)", [(r, json.dumps(s)) for r, s in new])

    def places(self) -> dict[str, tuple[str | None, str | None]]:
        """Each snippet's (section id, revision), by ref."""
        return self._places

    def get(self, refs: Iterable[str]) -> dict[str, Snippet]:
        """The snippets of `refs` that are kept, by ref."""
        import json

        wanted = [ref for ref in dict.fromkeys(refs) if ref in self._places]
        found: dict[str, Snippet] = {}
        with self._failing("read"):
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                rows = self._db.execute(
                    f"SELECT ref, snippet FROM snippets WHERE ref IN ({','.join('?' * len(chunk))})", chunk
                ).fetchall()
                found.update((ref, Snippet(*json.loads(text))) for ref, text in rows)
        return found

    def close(self) -> None:
        self._db.close()


def _snippet(p: Payload, corpus: Corpus | None) -> Snippet:
    span = p.span
    around = context(corpus, p.doc_id, span.start, span.end) if span and span.unit == "char" else None
    before, after = (around["before"], around["after"]) if around else (None, None)
    return Snippet(
        p.snippet_id,
        p.doc_id,
        p.section_id,
        p.rev,
        None if span is None else span.start,
        None if span is None else span.end,
        None if span is None else span.unit,
        payload_text(p, corpus),
        before,
        after,
    )


def spans(trace: Trace, corpus: Corpus | None, snippets: dict[str, Snippet]) -> list[dict[str, Any]]:
    """The run's retrieved payloads as references into `snippets` (filled here), with their scores."""
    cited = set(trace.answer.citations) if trace.answer else None
    out = []
    for p in trace.retrieved:
        ref = snippet_ref(p)
        if ref not in snippets:
            snippets[ref] = _snippet(p, corpus)
        out.append(
            {
                "ref": ref,
                "snippet_id": p.snippet_id,
                "score_norm": p.score_norm,
                "score_raw": p.score_raw,
                "rerank_score": p.rerank_score,
                "k_pos": p.k_pos,
                "k_final": p.k_final,
                "cited": cited is None or p.snippet_id in cited,
            }
        )
    return out


def detail(record: dict[str, Any], trace: Trace, corpus: Corpus | None, snippets: dict[str, Snippet]) -> dict[str, Any]:
    """A scored run with what a reader needs to see it: its answer, segments, cited spans, steps,
    and the live index it ran against (for traces.log and rag_traces)."""
    answer = trace.answer
    index = trace.index
    row = {
        **record,
        "answer": None if answer is None else answer.text,
        "segments": [
            {"seg": s.seg, "text": s.text, "citations": list(s.citations)} for s in (answer.segments if answer else ())
        ],
        "spans": spans(trace, corpus, snippets),
        "ts": trace.retrieved_at,
        "store": index and index.store,
        "index_hash": index and index.index_hash,
        "embed_model": index and index.embed_model,
        "analyzer": index and index.analyzer,
    }
    if trace.steps:
        row["steps"] = [
            {
                "step_number": st.step_number,
                "question": st.question,
                "citations": list(st.citations),
                "confidence_score": st.confidence_score,
            }
            for st in trace.steps
        ]
    return row


@functools.lru_cache(maxsize=8)
def schema(metric_names: tuple[str, ...]) -> pa.Schema:
    """runs.parquet's columns for these metrics."""
    import pyarrow as pa

    fields = [pa.field(k, pa.string() if k in ("pipeline", "qid") else pa.int64()) for k in KEYS]
    fields += [pa.field(k, pa.string()) for k in TEXT]
    fields += [pa.field(k, pa.bool_()) for k in FLAGS]
    fields += [pa.field(f"m.{name}", pa.float64()) for name in metric_names]
    fields += [pa.field(k, pa.string()) for k in NESTED]
    return pa.schema(fields)


def record_batch(rows: list[dict[str, Any]], metric_names: Iterable[str]) -> pa.RecordBatch:
    """Scored runs (`detail` rows) as one columnar batch of runs.parquet: built where the runs were
    scored, so a worker process hands back buffers rather than a list of dicts."""
    import pyarrow as pa

    names = tuple(metric_names)
    columns = {k: [r[k] for r in rows] for k in (*KEYS, *TEXT, *FLAGS)}
    for name in names:
        columns[f"m.{name}"] = [r["metrics"].get(name) for r in rows]
    for k in NESTED:
        columns[k] = [
            None if r.get(k) is None else orjson.dumps(r[k], option=orjson.OPT_NON_STR_KEYS).decode() for r in rows
        ]
    return pa.RecordBatch.from_pydict(columns, schema=schema(names))


class RunWriter:
    """Appends batches of scored runs (`record_batch`) to runs.parquet, one row group per batch."""

    def __init__(self, path: Path, metric_names: Iterable[str]) -> None:
        self.path = Path(path)
        self.schema = schema(tuple(metric_names))
        self._writer: Any = None  # a pyarrow ParquetWriter, opened with the first batch
        self.rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        import pyarrow.parquet as pq

        if batch.num_rows == 0:
            return
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, self.schema, compression="zstd")
        self._writer.write_batch(batch)
        self.rows += batch.num_rows

    def close(self) -> None:
        import pyarrow.parquet as pq

        if self._writer is None:  # no run at all: still leave a valid, empty file
            self._writer = pq.ParquetWriter(self.path, self.schema, compression="zstd")
        self._writer.close()


def _row(table_row: dict[str, Any]) -> dict[str, Any]:
    out = {k: table_row[k] for k in (*KEYS, *TEXT, *FLAGS)}
    out["metrics"] = {RENAMED_METRICS.get(k[2:], k[2:]): v for k, v in table_row.items() if k.startswith("m.")}
    for k in NESTED:
        value = table_row.get(k)
        if value is not None:
            out[k] = orjson.loads(value)
        elif k in ("citations", "sections", "segments", "spans"):
            out[k] = []
    return out


def iter_runs(
    path: Path, *, columns: list[str] | None = None, batch_size: int | None = None
) -> Iterator[list[dict[str, Any]]]:
    """The stored runs in batches of row dicts (all columns, or only `columns` as stored), READ_BATCH
    rows at a time unless told."""
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(path)
    for batch in handle.iter_batches(batch_size=batch_size or READ_BATCH, columns=columns):
        rows = batch.to_pylist()
        yield rows if columns else [_row(r) for r in rows]


def iter_values(path: Path, columns: tuple[str, ...]) -> Iterator[Iterator[tuple[Any, ...]]]:
    """The stored runs in batches of tuples of the values of `columns`, in that order, READ_BATCH
    rows at a time: a reader of a few columns of every run builds no dict per run."""
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(path)
    for batch in handle.iter_batches(batch_size=READ_BATCH, columns=list(columns)):
        yield zip(*(batch.column(name).to_pylist() for name in columns))


def runs_of(
    path: Path, keys: set[tuple[str, str]], limit: int | None = None
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The full runs of some questions, by (pipeline, qid), in (variant, seed) order, whatever
    order they were stored in; with `limit`, at most that many a question: its failing runs
    first, then correct ones (each the first in that order)."""
    import heapq

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    # (the run's order negated, its position, its row), a heap per question
    failing: dict[tuple[str, str], list[tuple[tuple[int, ...], int, dict[str, Any]]]] = {}
    passing: dict[tuple[str, str], list[tuple[tuple[int, ...], int, dict[str, Any]]]] = {}
    if not keys:
        return {}
    handle = pq.ParquetFile(path)
    wanted = pa.array(sorted(f"{p}\x1f{q}" for p, q in keys))

    def joined(batch: pa.RecordBatch | pa.Table) -> pa.Array | pa.ChunkedArray:
        return pc.binary_join_element_wise(batch.column("pipeline"), batch.column("qid"), "\x1f")

    # only the row groups that hold a wanted run are read whole, a batch at a time
    groups = [
        i
        for i in range(handle.num_row_groups)
        if pc.any(pc.is_in(joined(handle.read_row_group(i, columns=["pipeline", "qid"])), value_set=wanted)).as_py()
    ]
    position = 0
    for batch in handle.iter_batches(batch_size=READ_BATCH, row_groups=groups) if groups else ():
        for row in batch.filter(pc.is_in(joined(batch), value_set=wanted)).to_pylist():
            position += 1  # the tie-break of a run recorded twice under one key
            key = (row["pipeline"], row["qid"])
            kept = (passing if row.get("correct") else failing).setdefault(key, [])
            order = (row["variant"], row["seed"], position)
            # a max-heap (on negated keys) of the `limit` runs first in order
            entry = (tuple(-x for x in order), position, row)
            if limit is None or len(kept) < limit:
                heapq.heappush(kept, entry)
            elif entry[0] > kept[0][0]:
                heapq.heapreplace(kept, entry)
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for key in {*failing, *passing}:
        first = [sorted(failing.get(key, []), reverse=True), sorted(passing.get(key, []), reverse=True)]
        chosen = first[0] + first[1]
        if limit is not None:
            chosen = chosen[:limit]
        found[key] = [_row(row) for _, _, row in sorted(chosen, key=lambda entry: entry[0], reverse=True)]
    return found


def coverage_share(path: Path) -> Callable[[str, float], float]:
    """A function (pipeline, minimum) -> share of that pipeline's runs whose coverage is at least
    `minimum` (a run without coverage never is), read from the stored runs."""
    import numpy as np
    import pyarrow.parquet as pq

    def share(pipeline: str, minimum: float) -> float:
        met = total = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=200_000, columns=["pipeline", "m.coverage"]):
            mine = np.asarray(batch.column("pipeline").to_numpy(zero_copy_only=False)) == pipeline
            coverage = batch.column("m.coverage").to_numpy(zero_copy_only=False).astype(float)
            total += int(mine.sum())
            met += int((mine & ~np.isnan(coverage) & (np.nan_to_num(coverage, nan=-1.0) >= minimum)).sum())
        return met / total if total else 0.0

    return share
