"""A probe directory's ledger, `probe.jsonl`: what the probe was asked (its first line) and every finished
piece of work, one JSON line each, appended and flushed to disk as it finishes. A probe killed
mid-way keeps every finished line (a torn last one is cut off); `--resume` reads them and does the
rest, and refuses (exit 2) when the config, gold set, corpus or options differ from the first line's."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ragaudit.core.errors import InputError, Problem, UsageError

LEDGER = "probe.jsonl"
SCHEMA = "ragaudit.probe/1"
CHECKED = ("inputs", "pipelines", "qids", "edits", "seeds")  # what a resumed probe must share with its start


def key_of(record: dict[str, Any]) -> tuple[str, str | None, str | None, str | None]:
    """What a record finishes: (what, pipeline, qid, kind)."""
    return (record["record"], record.get("pipeline"), record.get("qid"), record.get("kind"))


class Ledger:
    def __init__(self, folder: Path, header: dict[str, Any], *, resume: bool):
        self.path = Path(folder) / LEDGER
        self.records: list[dict[str, Any]] = []
        if resume:
            found = self._read()
            if not found or found[0].get("schema") != SCHEMA:
                raise InputError(Problem(str(self.path), f"expected a probe ledger ({SCHEMA}), found none"))
            first = found[0]
            differ = [name for name in CHECKED if first.get(name) != header.get(name)]
            if differ:
                raise UsageError(
                    f"--resume {folder}: the probe was started with other {', '.join(differ)}: "
                    "start a new probe, or resume with the config and options it was started with"
                )
            self.header, self.records = first, found[1:]
        else:
            self.header = {"schema": SCHEMA, **header}
            self.path.write_text(json.dumps(self.header, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
        self.done = {key_of(r) for r in self.records}

    def _read(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            raise InputError(Problem(str(self.path), "expected the ledger of a probe, found no such file"))
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):  # a kill mid-write: the finished lines before it stay
            data = data[: data.rfind(b"\n") + 1]
            with open(self.path, "r+b") as handle:
                handle.truncate(len(data))
        out = []
        for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(Problem(str(self.path), f"expected a JSON line, found {exc.msg}", number)) from None
            if not isinstance(record, dict) or not ("schema" in record or "record" in record):
                raise InputError(Problem(str(self.path), "expected a probe record", number))
            out.append(record)
        return out

    def add(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n"
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(line)
            out.flush()
            os.fsync(out.fileno())
        self.records.append(record)
        self.done.add(key_of(record))

    def has(self, what: str, pipeline: str | None = None, qid: str | None = None, kind: str | None = None) -> bool:
        return (what, pipeline, qid, kind) in self.done

    def of(self, what: str, pipeline: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.records if r["record"] == what and (pipeline is None or r.get("pipeline") == pipeline)]
