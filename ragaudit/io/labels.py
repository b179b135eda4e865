"""A person's labels of runs (docs/reference.md §12): the labels file, and the digest that ties a
label to the run it was made on.

A label says of one run (pipeline, qid, variant, seed) three things a person judged: the answer
is `correct` (it gives the gold fact, from the passage that holds it), every claim is `supported`
by what it cites, and the `citation` points at the passage that holds the gold fact. `good` is all
three. `digest` is the run's digest when it was labelled (`run_digest`): a label whose run has
changed since is stale, and never counts for the run as it is now.

The labels file is JSON lines, appended to, never rewritten. Reading it checks every line and
reports each problem located (`file:line: $.key: expected …, found …`); the good lines are kept.
A run labelled twice keeps its last label, and the earlier one is reported.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ragaudit.core.errors import Problem, describe
from ragaudit.core.types import Trace
from ragaudit.io.traces import trace_to_dict

DIMENSIONS = ("correct", "supported", "citation")  # what a person labels; `good` is all three
LABEL_KEYS = ("pipeline", "qid", "variant", "seed", *DIMENSIONS, "note", "labeller", "time", "digest", "sample")
SAMPLES = ("random", "stratified", "uncertainty", "")  # how `ragaudit label` chose the run ("": not said)
_NOT_DIGESTED = ("config", "retrieved_at", "retriever_name")  # where and when it ran, not what it did


def run_digest(trace: Trace) -> str:
    """`sha256:` and the hex digest of what a run did: its request, what it retrieved and what it
    answered (not where or when it ran). A replay of the same recording has the same digest."""
    body = {k: v for k, v in trace_to_dict(trace).items() if k not in _NOT_DIGESTED}
    return "sha256:" + hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


RunKey = tuple[str, str, int, int]  # a run: (pipeline, qid, variant, seed)


@dataclass(frozen=True, slots=True)
class Label:
    pipeline: str
    qid: str
    variant: int
    seed: int
    correct: bool
    supported: bool
    citation: bool
    note: str
    labeller: str
    time: str
    digest: str
    sample: str = ""  # how the run was chosen for labelling (SAMPLES)
    line: int = 0  # where it was read

    @property
    def key(self) -> RunKey:
        return (self.pipeline, self.qid, self.variant, self.seed)

    @property
    def good(self) -> bool:
        return self.correct and self.supported and self.citation

    def value(self, dimension: str) -> bool:
        return self.good if dimension == "good" else bool(getattr(self, dimension))

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in LABEL_KEYS}


_TYPES: dict[str, tuple[type, str]] = {
    "pipeline": (str, "a pipeline name"),
    "qid": (str, "a question id"),
    "variant": (int, "an integer >= 0"),
    "seed": (int, "an integer >= 0"),
    "correct": (bool, "true or false"),
    "supported": (bool, "true or false"),
    "citation": (bool, "true or false"),
    "note": (str, "a string"),
    "labeller": (str, "a string"),
    "time": (str, "an ISO 8601 time"),
    "digest": (str, "a run digest, sha256:<64 hex digits>"),
    "sample": (str, f"one of {', '.join(repr(s) for s in SAMPLES)}"),
}


@dataclass
class LabelsFile:
    """The labels of a file, the last per run, and every problem found reading it."""

    path: Path
    labels: dict[RunKey, Label]
    problems: list[Problem]


def _check(obj: object, file: str, line: int) -> tuple[Label | None, list[Problem]]:
    if not isinstance(obj, dict):
        return None, [Problem(file, f"expected a label object, found {describe(obj)}", line)]
    problems = []
    for key in sorted(set(obj) - set(LABEL_KEYS)):
        problems.append(
            Problem(file, f"expected one of {', '.join(LABEL_KEYS)}, found unknown key {key!r}", line, f"$.{key}")
        )
    values: dict[str, Any] = {}
    for key, (kind, expected) in _TYPES.items():
        value: Any = obj.get(key, "" if key in ("note", "sample") else None)
        ok = type(value) is kind and (type(value) is not int or value >= 0)
        if key == "digest" and ok:
            ok = value.startswith("sha256:") and len(value) == 71 and all(c in "0123456789abcdef" for c in value[7:])
        if key in ("pipeline", "qid") and ok:
            ok = bool(value.strip())
        if key == "sample" and ok:
            ok = value in SAMPLES
        if not ok:
            found = "nothing" if key not in obj else describe(value)
            problems.append(Problem(file, f"expected {expected}, found {found}", line, f"$.{key}"))
        values[key] = value
    if problems:
        return None, problems
    return Label(**values), []


def read_labels(path: str | Path) -> LabelsFile:
    """Every label of a labels file; raises InputError when the file cannot be read at all. A line
    that is not a label, and an earlier label of a run labelled again, are problems; the rest is
    kept."""
    from ragaudit.core.errors import InputError

    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the labels file: {exc.strerror or exc}") from exc
    labels: dict[RunKey, Label] = {}
    problems: list[Problem] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            problems.append(Problem(str(path), "expected a JSON label object, found text that is not JSON", number))
            continue
        label, found = _check(obj, str(path), number)
        problems += found
        if label is None:
            continue
        label = Label(**{**label.to_json(), "line": number})
        earlier = labels.get(label.key)
        if earlier is not None:
            problems.append(
                Problem(
                    str(path),
                    f"expected one label per run, found {label.key[1]} v{label.key[2]} s{label.key[3]} of "
                    f"{label.key[0]} labelled again on line {number}: the later label is kept",
                    earlier.line,
                )
            )
        labels[label.key] = label
    return LabelsFile(path, labels, problems)
