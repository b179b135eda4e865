"""`traces.log` (grep-friendly) and `rag_traces.sqlite`: one row per run and answer segment.

traces.log is logfmt: `key=value` pairs separated by spaces, one line per row. A value that holds
a space, `=`, a quote, a backslash or any control or non-printable character is written as a
JSON string, so no field of a trace can start a new line or forge a key.
"""
from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from ragaudit.io.files import atomic_path

COLUMNS = ("ts", "pipeline", "qid", "variant", "seed", "seg", "deltaS", "lambda_state", "store", "index_hash",
           "embed_model", "analyzer", "section_id", "rev", "citations", "scores", "kpos", "kfinal")
LOG_NAMES = {"lambda_state": "lambda", "embed_model": "embed"}
_PLAIN = re.compile(r"[A-Za-z0-9_.,:;/@#%+\-\[\]()|*!?~^&$']*\Z")


def rows(report: dict, traces) -> list[dict]:
    """The rows of both outputs, in run order; a run without segments gives one row with seg null."""
    by_key = {(t.config, t.qid, t.variant, t.seed): t for t in traces}
    out = []
    for question in report["questions"]:
        for run in question["runs"]:
            trace = by_key[(run["pipeline"], run["qid"], run["variant"], run["seed"])]
            payloads = {p.snippet_id: p for p in trace.retrieved}
            index = trace.index
            segments = trace.answer.segments if trace.answer and trace.answer.segments else [None]
            for segment in segments:
                cited = [payloads[c] for c in (segment.citations if segment else run["citations"]) if c in payloads]
                first = cited[0] if cited else None
                out.append({
                    "ts": trace.retrieved_at, "pipeline": run["pipeline"], "qid": run["qid"],
                    "variant": run["variant"], "seed": run["seed"], "seg": segment.seg if segment else None,
                    "deltaS": run["metrics"]["delta_s_qr"], "lambda_state": question["lambda"]["state"],
                    "k": len(trace.retrieved),
                    "store": index.store if index else None, "index_hash": index.index_hash if index else None,
                    "embed_model": index.embed_model if index else None, "analyzer": index.analyzer if index else None,
                    "section_id": first.section_id if first else None, "rev": first.rev if first else None,
                    "citations": [p.snippet_id for p in cited], "scores": [p.score_norm for p in cited],
                    "kpos": [p.k_pos for p in cited], "kfinal": [p.k_final for p in cited],
                })
    return out


def _text(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, list):
        return "[" + ",".join(_text(v) for v in value) + "]"
    return str(value)


def log_value(value) -> str:
    """A value as logfmt writes it: bare when it is plain, else a JSON string (all escaped)."""
    text = _text(value)
    return text if text and _PLAIN.match(text) else json.dumps(text, ensure_ascii=True)


LOG_ORDER = ("ts", "pipeline", "qid", "variant", "seed", "seg", "deltaS", "lambda_state", "k", "store", "index_hash",
             "embed_model", "analyzer", "section_id", "rev", "citations", "scores", "kpos", "kfinal")


def write_log(path: Path, table: list[dict]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        for row in table:
            out.write(" ".join(f"{LOG_NAMES.get(c, c)}={log_value(row[c])}" for c in LOG_ORDER) + "\n")


def write_sqlite(path: Path, table: list[dict]) -> None:
    with atomic_path(path) as tmp:
        tmp.unlink()
        db = sqlite3.connect(tmp)
        try:
            with db:
                db.execute("CREATE TABLE rag_traces (ts TEXT, pipeline TEXT, qid TEXT, variant INTEGER, seed INTEGER, "
                           "seg INTEGER, deltaS REAL, lambda_state TEXT, store TEXT, index_hash TEXT, "
                           "embed_model TEXT, analyzer TEXT, section_id TEXT, rev TEXT, citations TEXT, "
                           "scores TEXT, kpos TEXT, kfinal TEXT)")
                db.executemany(f"INSERT INTO rag_traces VALUES ({', '.join('?' * len(COLUMNS))})",
                               [tuple(json.dumps(r[c], allow_nan=False) if isinstance(r[c], list) else r[c]
                                      for c in COLUMNS) for r in table])
        finally:
            db.close()
