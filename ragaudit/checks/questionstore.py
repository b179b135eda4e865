"""Every question row of a run in a columnar file (`questions.parquet`): one row per (pipeline,
question) with its counts, λ, the means of its runs' metrics and its gold reference, written a
batch at a time and read back as a stream. report.json carries the rows a reader needs first
(all of them in a run of up to `reporting.QUESTION_ROWS` rows); this file carries every one, so
that memory and report.json stay bounded however many distinct questions a run has.

Nested values (the gold reference) are stored as JSON text; metric means as `m.<metric>`, run
counts and extremes as `stats.<name>`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import orjson

from ragaudit.core.errors import InputError, Problem
from ragaudit.core.model import PipelineSummary, Question, QuestionStats, Report, Summary
from ragaudit.core.shape import ShapeError

if TYPE_CHECKING:  # pyarrow ships no types: to mypy these are Any, named for the reader
    import pyarrow as pa

QUESTIONS = "questions.parquet"
TEXT = ("pipeline", "qid", "doc_id", "section_id", "question")
COUNTS = ("errored", "correct")
LAMBDA = ("state", "symbol", "css", "spread")
BATCH = 5_000


def _schema(metrics: tuple[str, ...]) -> pa.Schema:
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


def _columns(
    rows: list[Question], metrics: tuple[str, ...], gold_of: Callable[[Question], Any]
) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = {k: [getattr(q, k) for q in rows] for k in (*TEXT, *COUNTS)}
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
    each with its gold reference. A file that is not a question table, or a row of values no run
    writes (a null qid, an unknown λ state, a negative count, text for a metric), is an InputError
    naming the row."""
    import pyarrow.parquet as pq

    try:
        handle = pq.ParquetFile(path)
        names = handle.schema_arrow.names
        missing = [k for k in (*TEXT, *COUNTS, "lambda.state") if k not in names]
        if missing:
            raise InputError(f"{path}: expected the question rows of a ragaudit run, found no column {missing[0]!r}")
        columns = [n for n in names if gold or n != "gold"]
        number = 0
        for batch in handle.iter_batches(batch_size=BATCH, columns=columns):
            for row in batch.to_pylist():
                number += 1
                yield _question(row, path, number)
    except (OSError, ValueError, KeyError) as exc:  # pyarrow's errors derive from these
        raise InputError(
            f"{path}: expected the question rows of a ragaudit run, found an unreadable file ({exc})"
        ) from None


def _question(row: dict[str, Any], path: Path, number: int) -> Question:
    """A row as report.json holds a question, read as `Question.from_json` reads one there."""
    data = {k: row.get(k) for k in (*TEXT, *COUNTS)}
    data["lambda"] = {k: row.get(f"lambda.{k}") for k in LAMBDA}
    data["metrics"] = {k[2:]: v for k, v in row.items() if k.startswith("m.")}
    data["stats"] = {
        k: v for k in QuestionStats.COUNTS + QuestionStats.EXTREMES if (v := row.get(f"stats.{k}")) is not None
    }
    for key in COUNTS:  # a table without the column (an older one) counts 0
        data[key] = data[key] if data[key] is not None else 0
    try:
        question = Question.from_json(data, f"row {number}: $")
    except ShapeError as exc:
        raise InputError(Problem(str(path), f"expected a question row of a ragaudit run: {exc}")) from None
    gold = row.get("gold")
    question.gold = None if gold is None else orjson.loads(gold)
    return question


def complete(report: Report, report_path: Path) -> list[Question]:
    """Every question row of a bounded report (`summary.question_rows`) read from `report_path`:
    the report's own (with their gold and runs), and the others read from the questions.parquet
    beside it, in (pipeline, qid) order. The table must be this run's: as many rows as the summary
    says, each (pipeline, qid) once and in order, of the report's pipelines, holding the report's
    own rows with the same counts, and adding up to each pipeline's questions, runs, errored runs
    and λ states; else an InputError naming the file and what differs."""
    questions, summary, path = report.questions, report.summary, Path(report_path).parent / QUESTIONS
    rows = summary.question_rows
    if rows is None or rows <= len(questions):
        raise InputError(
            Problem(
                str(report_path),
                f"expected summary.question_rows above the {len(questions):,} question rows the report holds "
                f"(the rest are in {QUESTIONS}), found {rows}",
                path="$.summary.question_rows",
            )
        )
    if not path.is_file():
        raise InputError(
            f"{path}: expected {QUESTIONS} beside the report (it holds {rows:,} question rows, the report "
            f"{len(questions):,}), found none"
        )
    _check_count(path, rows)
    tally = _Tally(path, summary, {q.key: q for q in questions})
    merged = [tally.add(q) for q in read_questions(path)]
    tally.finish()
    return merged


def _check_count(path: Path, rows: int) -> None:
    import pyarrow.parquet as pq

    try:
        found = pq.ParquetFile(path).metadata.num_rows
    except (OSError, ValueError) as exc:
        raise InputError(
            f"{path}: expected the question rows of a ragaudit run, found an unreadable file ({exc})"
        ) from None
    if found != rows:
        raise InputError(
            Problem(
                str(path), f"expected {rows:,} question rows (summary.question_rows of the report), found {found:,}"
            )
        )


@dataclass
class _Totals:
    """One pipeline's question rows added up, as its summary in the report counts them."""

    questions: int = 0
    runs: int = 0
    errored: int = 0
    states: Counter[str] = field(default_factory=Counter)

    def add(self, row: Question) -> None:
        self.questions, self.runs, self.errored = (
            self.questions + 1,
            self.runs + row.stats.runs,
            self.errored + row.errored,
        )
        self.states[row.lam.state] += 1

    def figures(self) -> tuple[int, int, int, dict[str, int]]:
        return (self.questions, self.runs, self.errored, {s: n for s, n in sorted(self.states.items()) if n})

    @classmethod
    def of(cls, summary: PipelineSummary) -> _Totals:
        return cls(summary.questions, summary.runs, summary.errored, Counter(summary.lam))


class _Tally:
    """The checks `complete` makes as the table's rows go by, a row at a time."""

    def __init__(self, path: Path, summary: Summary, held: dict[tuple[str, str], Question]) -> None:
        self.path, self.summary, self.held = path, summary, dict(held)
        self.last: tuple[str, str] | None = None
        self.number = 0
        self.totals = {name: _Totals() for name in summary.pipelines}

    def problem(self, message: str) -> InputError:
        return InputError(Problem(str(self.path), f"{message} (a table of another run, or an edited one?)"))

    def add(self, row: Question) -> Question:
        self.number += 1
        if self.last is not None and row.key <= self.last:
            raise self.problem(
                f"row {self.number}: expected rows in (pipeline, qid) order, each once, found {row.key} after {self.last}"
            )
        self.last = row.key
        if row.pipeline not in self.totals:
            raise self.problem(
                f"row {self.number}: expected a pipeline of the report ({', '.join(self.totals)}), found {row.pipeline!r}"
            )
        self.totals[row.pipeline].add(row)
        own = self.held.pop(row.key, None)
        if own is None:
            return row
        if _counts(own) != _counts(row):
            raise self.problem(
                f"row {self.number}: expected {row.key} as the report holds it (runs, correct, errored, λ "
                f"{_counts(own)}), found {_counts(row)}"
            )
        return own

    def finish(self) -> None:
        if self.held:
            raise self.problem(f"expected the report's question rows in the table, found none for {min(self.held)}")
        for name, totals in self.totals.items():
            expected = _Totals.of(self.summary.pipelines[name]).figures()
            if totals.figures() != expected:
                raise self.problem(
                    f"expected pipeline {name}'s rows to add up to the report's summary (questions, runs, errored, "
                    f"λ states {expected}), found {totals.figures()}"
                )


def _counts(q: Question) -> tuple[int, int, int, str]:
    return (q.stats.runs, q.correct, q.errored, q.lam.state)
