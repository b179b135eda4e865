"""Every question row of a run in a columnar file (`questions.parquet`): one row per (pipeline,
question) with its counts, λ, the means of its runs' metrics and its gold reference, written a
batch at a time and read back as a stream. report.json carries the rows a reader needs first
(all of them in a run of up to `reporting.QUESTION_ROWS` rows); this file carries every one, so
that memory and report.json stay bounded however many distinct questions a run has.

Nested values (the gold reference) are stored as JSON text; metric means as `m.<metric>`, run
counts and extremes as `stats.<name>`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import orjson

from ragaudit.errors import InputError
from ragaudit.model import Lambda, Question, QuestionStats

QUESTIONS = "questions.parquet"
TEXT = ("pipeline", "qid", "doc_id", "section_id", "question")
COUNTS = ("errored", "correct")
LAMBDA = ("state", "symbol", "css", "spread")
BATCH = 5_000


def _schema(metrics: tuple[str, ...]):
    import pyarrow as pa

    fields = [pa.field(k, pa.string()) for k in TEXT]
    fields += [pa.field(k, pa.int64()) for k in COUNTS]
    fields += [pa.field(f"lambda.{k}", pa.string() if k in ("state", "symbol") else pa.float64()) for k in LAMBDA]
    fields += [pa.field(f"m.{name}", pa.float64()) for name in metrics]
    fields += [pa.field(f"stats.{name}", pa.int64()) for name in QuestionStats.COUNTS]
    fields += [pa.field(f"stats.{name}", pa.float64()) for name in QuestionStats.EXTREMES]
    fields.append(pa.field("gold", pa.string()))
    return pa.schema(fields)


def write_questions(
    path: Path, questions: Iterable[Question], metrics: tuple[str, ...], gold_of: Callable[[Question], Any]
) -> int:
    """Write every question row to `path` (through a temporary name), `gold_of(row)` giving its
    gold reference as report.json holds it; built and written BATCH rows at a time. Returns the
    number of rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ragaudit.io.files import atomic_path

    schema = _schema(metrics)
    written = 0
    with atomic_path(path) as tmp, pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        batch: list[Question] = []
        for question in questions:
            batch.append(question)
            if len(batch) >= BATCH:
                writer.write_batch(pa.RecordBatch.from_pydict(_columns(batch, metrics, gold_of), schema=schema))
                written, batch = written + len(batch), []
        if batch or not written:
            writer.write_batch(pa.RecordBatch.from_pydict(_columns(batch, metrics, gold_of), schema=schema))
            written += len(batch)
    return written


def _columns(rows: list[Question], metrics: tuple[str, ...], gold_of: Callable[[Question], Any]) -> dict:
    columns: dict[str, list] = {k: [getattr(q, k) for q in rows] for k in (*TEXT, *COUNTS)}
    for k in LAMBDA:
        columns[f"lambda.{k}"] = [getattr(q.lam, k) for q in rows]
    for name in metrics:
        columns[f"m.{name}"] = [q.metrics.get(name) for q in rows]
    for name in (*QuestionStats.COUNTS, *QuestionStats.EXTREMES):
        columns[f"stats.{name}"] = [getattr(q.stats, name) for q in rows]
    golds = (gold_of(q) for q in rows)
    columns["gold"] = [None if g is None else orjson.dumps(g).decode() for g in golds]
    return columns


def read_questions(path: Path, *, gold: bool = False) -> Iterator[Question]:
    """The stored question rows, a batch at a time, in the order they were written; with `gold`,
    each with its gold reference. A file that is not a question table is an InputError."""
    import pyarrow.parquet as pq

    try:
        handle = pq.ParquetFile(path)
        names = handle.schema_arrow.names
        missing = [k for k in (*TEXT, *COUNTS, "lambda.state") if k not in names]
        if missing:
            raise InputError(f"{path}: expected the question rows of a ragaudit run, found no column {missing[0]!r}")
        columns = [n for n in names if gold or n != "gold"]
        for batch in handle.iter_batches(batch_size=BATCH, columns=columns):
            for row in batch.to_pylist():
                yield _question(row)
    except (OSError, ValueError, KeyError) as exc:  # pyarrow's errors derive from these
        raise InputError(
            f"{path}: expected the question rows of a ragaudit run, found an unreadable file ({exc})"
        ) from None


def _question(row: dict) -> Question:
    stats: dict[str, Any] = {name: row.get(f"stats.{name}") for name in QuestionStats.EXTREMES}
    stats.update({name: row.get(f"stats.{name}") or 0 for name in QuestionStats.COUNTS})
    gold = row.get("gold")
    return Question(
        pipeline=row["pipeline"],
        qid=row["qid"],
        doc_id=row["doc_id"],
        section_id=row["section_id"],
        question=row["question"],
        errored=row["errored"] or 0,
        correct=row["correct"] or 0,
        lam=Lambda(
            row["lambda.state"], row.get("lambda.symbol") or "", row.get("lambda.css"), row.get("lambda.spread")
        ),
        metrics={k[2:]: v for k, v in row.items() if k.startswith("m.")},
        stats=QuestionStats(**stats),
        gold=None if gold is None else orjson.loads(gold),
    )


def complete(questions: list[Question], path: Path, rows: int) -> list[Question]:
    """The rows of a report.json that holds fewer than its `rows`: its own (with their gold and
    runs), and the others read from the questions.parquet at `path`, in (pipeline, qid) order."""
    if not Path(path).is_file():
        raise InputError(
            f"{path}: expected {QUESTIONS} beside the report (it holds {rows:,} question rows, the report "
            f"{len(questions):,}), found none"
        )
    held = {q.key: q for q in questions}
    merged = [held.pop(q.key, q) for q in read_questions(path)]
    merged += held.values()  # a row of the report the table lacks: kept, never dropped
    merged.sort(key=lambda q: q.key)
    return merged
