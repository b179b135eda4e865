"""`traces.log` (grep-friendly) and `rag_traces.sqlite`: one row per run and answer segment."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

COLUMNS = ("ts", "qid", "seg", "deltaS", "lambda_state", "store", "index_hash", "embed_model", "analyzer",
           "section_id", "rev", "citations", "scores", "kpos", "kfinal")


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
                    "ts": trace.retrieved_at, "qid": run["qid"], "seg": segment.seg if segment else None,
                    "deltaS": run["metrics"]["delta_s_qr"], "lambda_state": question["lambda"]["state"],
                    "store": index.store if index else None, "index_hash": index.index_hash if index else None,
                    "embed_model": index.embed_model if index else None, "analyzer": index.analyzer if index else None,
                    "section_id": first.section_id if first else None, "rev": first.rev if first else None,
                    "citations": [p.snippet_id for p in cited], "scores": [p.score_norm for p in cited],
                    "kpos": [p.k_pos for p in cited], "kfinal": [p.k_final for p in cited],
                })
    return out


def _value(value) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, list):
        return "[" + ",".join(_value(v) if v is not None else "-" for v in value) + "]"
    return "-" if value is None else str(value)


def write_log(path: Path, table: list[dict]) -> None:
    names = {"deltaS": "deltaS", "lambda_state": "lambda", "embed_model": "embed", "kpos": "kpos", "kfinal": "kfinal"}
    with open(path, "w", encoding="utf-8") as out:
        for row in table:
            out.write(" ".join(f"{names.get(c, c)}={_value(row[c])}" for c in COLUMNS) + "\n")


def write_sqlite(path: Path, table: list[dict]) -> None:
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE rag_traces (ts TEXT, qid TEXT, seg INTEGER, deltaS REAL, lambda_state TEXT, store TEXT, "
                   "index_hash TEXT, embed_model TEXT, analyzer TEXT, section_id TEXT, rev TEXT, citations TEXT, "
                   "scores TEXT, kpos TEXT, kfinal TEXT)")
        db.executemany(f"INSERT INTO rag_traces VALUES ({', '.join('?' * len(COLUMNS))})",
                       [tuple(json.dumps(r[c]) if isinstance(r[c], list) else r[c] for c in COLUMNS) for r in table])
    db.close()
