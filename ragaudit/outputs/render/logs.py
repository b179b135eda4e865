"""`traces.log` (grep-friendly) and `rag_traces.sqlite`: one row per run and answer segment.

traces.log is logfmt: `key=value` pairs separated by spaces, one line per row. A value that holds
a space, `=`, a quote, a backslash or any control or non-printable character is written as a
JSON string, so no field of a trace can start a new line or forge a key.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable, Iterator

import orjson

from ragaudit.core.wire import without_collector
from ragaudit.io.files import atomic_path, sqlite_errors

COLUMNS = (
    "ts",
    "pipeline",
    "qid",
    "variant",
    "seed",
    "seg",
    "deltaS",
    "lambda_state",
    "store",
    "index_hash",
    "embed_model",
    "analyzer",
    "section_id",
    "rev",
    "citations",
    "scores",
    "kpos",
    "kfinal",
)
LOG_NAMES = {"lambda_state": "lambda", "embed_model": "embed"}
LOG_ORDER = (*COLUMNS[:8], "k", *COLUMNS[8:])  # traces.log: the columns, with k after the λ state
_PLAIN = re.compile(r"[A-Za-z0-9_.,:;/@#%+\-\[\]()|*!?~^&$']*\Z")
LOG_SOURCE = (  # the columns of runs.parquet the rows are read from, in the order `rows` unpacks them
    "pipeline",
    "qid",
    "variant",
    "seed",
    "ts",
    "store",
    "index_hash",
    "embed_model",
    "analyzer",
    "m.delta_s_qr",
    "citations",
    "segments",
    "spans",
)


Places = dict[str, tuple[str | None, str | None]]  # each snippet's (section id, revision), by ref


def rows(runs_path: Path, states: dict[tuple[str, str], str], places: Places) -> Iterator[dict[str, Any]]:
    """The rows of both outputs, in stored run order, read from runs.parquet a batch at a time; a
    run without segments gives one row with seg null. `places` is `SnippetStore.places()`."""
    from ragaudit.checks.runstore import iter_values

    for batch in iter_values(runs_path, LOG_SOURCE):
        for pipeline, qid, variant, seed, ts, store, index_hash, embed_model, analyzer, delta_s, *nested in batch:
            citations, segments, spans = nested
            by_id = {s["snippet_id"]: s for s in orjson.loads(spans or "[]")}
            for segment in orjson.loads(segments or "[]") or [None]:
                ids = segment["citations"] if segment else orjson.loads(citations or "[]")
                cited = [by_id[c] for c in ids if c in by_id]
                first = places.get(cited[0]["ref"]) if cited else None
                yield {
                    "ts": ts,
                    "pipeline": pipeline,
                    "qid": qid,
                    "variant": variant,
                    "seed": seed,
                    "seg": segment["seg"] if segment else None,
                    "deltaS": delta_s,
                    "lambda_state": states.get((pipeline, qid)),
                    "k": len(by_id),
                    "store": store,
                    "index_hash": index_hash,
                    "embed_model": embed_model,
                    "analyzer": analyzer,
                    "section_id": first[0] if first else None,
                    "rev": first[1] if first else None,
                    "citations": [s["snippet_id"] for s in cited],
                    "scores": [s["score_norm"] for s in cited],
                    "kpos": [s["k_pos"] for s in cited],
                    "kfinal": [s["k_final"] for s in cited],
                }


def _text(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, list):
        return "[" + ",".join(_text(v) for v in value) + "]"
    return str(value)


def log_value(value: object) -> str:
    """A value as logfmt writes it: bare when it is plain, else a JSON string (all escaped)."""
    text = _text(value)
    return text if text and _PLAIN.match(text) else json.dumps(text, ensure_ascii=True)


_NAMED = tuple((c, f"{LOG_NAMES.get(c, c)}=") for c in LOG_ORDER)
_MEMO_MAX = 1 << 16


def log_line(row: dict[str, Any], memo: dict[str, str]) -> str:
    """The traces.log line of a row (no newline): each column as `log_value` writes it. `memo`
    keeps the written form of strings, which repeat row after row (pipelines, hashes, qids)."""
    parts = []
    for column, named in _NAMED:
        value = row[column]
        kind = type(value)
        if kind is str:
            text = memo.get(value)
            if text is None:
                if len(memo) >= _MEMO_MAX:
                    memo.clear()
                text = memo[value] = log_value(value)
        elif value is None:
            text = "-"
        elif kind is float:
            text = f"{value:.4f}"  # digits, a sign and a point, or nan/inf: always plain
        elif kind is int:
            text = str(value)
        elif kind is list:
            text = _list_value(value)
        else:
            text = log_value(value)
        parts.append(named + text)
    return " ".join(parts)


def _list_value(value: list[Any]) -> str:
    """`log_value` of a list of scalars, without its recursion (anything else goes to it)."""
    parts = []
    for item in value:
        kind = type(item)
        if kind is str:
            parts.append(item)
        elif kind is float:
            parts.append(f"{item:.4f}")
        elif kind is int:
            parts.append(str(item))
        elif item is None:
            parts.append("-")
        else:
            return log_value(value)
    text = "[" + ",".join(parts) + "]"
    return text if _PLAIN.match(text) else json.dumps(text, ensure_ascii=True)


@without_collector  # a task of a worker process beside the other outputs: its rows make no cycles
def write_log_files(run_dir: Path, runs_path: Path, states: dict[tuple[str, str], str], places: Places) -> None:
    """traces.log and rag_traces.sqlite of a run directory, from its runs.parquet (`rows`): a task
    that a worker process can run beside the other outputs."""
    write_logs(run_dir / "traces.log", run_dir / "rag_traces.sqlite", rows(runs_path, states, places))


def write_logs(log_path: Path, sqlite_path: Path, table: Iterable[dict[str, Any]]) -> None:
    """traces.log and rag_traces.sqlite from one pass over the rows."""
    import itertools
    import sqlite3

    with (
        atomic_path(log_path) as log_tmp,
        atomic_path(sqlite_path) as db_tmp,
        open(log_tmp, "w", encoding="utf-8") as out,
    ):
        db_tmp.unlink()
        with sqlite_errors(f"write {sqlite_path.name}", sqlite_path):
            db = sqlite3.connect(db_tmp)
            try:
                with db:
                    db.execute(CREATE)
                    rows = iter(table)
                    memo: dict[str, str] = {}
                    while chunk := list(itertools.islice(rows, 5000)):
                        out.write("".join(log_line(r, memo) + "\n" for r in chunk))
                        db.executemany(INSERT, [_sql_row(r) for r in chunk])
            finally:
                db.close()


CREATE = (
    "CREATE TABLE rag_traces (ts TEXT, pipeline TEXT, qid TEXT, variant INTEGER, seed INTEGER, seg INTEGER, "
    "deltaS REAL, lambda_state TEXT, store TEXT, index_hash TEXT, embed_model TEXT, analyzer TEXT, "
    "section_id TEXT, rev TEXT, citations TEXT, scores TEXT, kpos TEXT, kfinal TEXT)"
)
INSERT = f"INSERT INTO rag_traces VALUES ({', '.join('?' * len(COLUMNS))})"


def _sql_row(r: dict[str, Any]) -> tuple[Any, ...]:
    return tuple([orjson.dumps(v).decode() if isinstance(v, list) else v for v in map(r.__getitem__, COLUMNS)])
