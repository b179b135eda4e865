"""TOML config reader (SPEC §4, §5). Relative paths are relative to the config file."""
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragaudit.errors import InputError, Problem, describe

PIPELINE_KINDS = ("reference", "replay", "python", "command")


@dataclass(frozen=True)
class PipelineConfig:
    name: str
    kind: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    path: Path | None = None
    gold: Path | None = None
    corpus: Path | None = None
    paraphrases: int = 3
    seeds: tuple[int, ...] = (1,)
    out: Path = Path("reports")
    allow_cross_section: bool = False
    cross_section_whitelist: tuple[frozenset[str], ...] = ()
    offset_unit: str = "char"
    workers: int = 1
    model: str = "all-MiniLM-L6-v2"
    metrics: dict[str, Any] = field(default_factory=dict)
    gate: dict[str, Any] = field(default_factory=dict)
    lambda_: dict[str, Any] = field(default_factory=dict)
    support: dict[str, Any] = field(default_factory=dict)
    pipelines: tuple[PipelineConfig, ...] = ()


# section -> key -> (kind, default). A kind "path" is a string resolved against the config folder.
SCHEMA: dict[str, dict[str, tuple[str, Any]]] = {
    "audit": {
        "gold": ("path", None), "corpus": ("path", None), "paraphrases": ("integer", 3),
        "seeds": ("integers", [1]), "out": ("path", "reports"), "allow_cross_section": ("boolean", False),
        "cross_section_whitelist": ("groups", []), "offset_unit": ("unit", "char"), "workers": ("integer", 1),
    },
    "embedder": {"model": ("string", "all-MiniLM-L6-v2")},
    "metrics": {"k": ("integer", 5), "match_tolerance": ("integer", 30), "delta_s": ("reading", "nearest")},
    # SPEC §4 defaults, confirmed on the fault benchmark (bench/faults.py): a clean, stable pipeline
    # passes and every fault class fails.
    "gate": {
        "delta_s_max": ("number", 0.60), "delta_s_mean_max": ("number", 0.40), "coverage_min": ("number", 0.70),
        "coverage_pass_rate": ("number", 0.90), "citation_match_min": ("number", 0.95),
        "lambda_convergent_min": ("number", 0.80), "lambda_forbid": ("strings", ["divergent", "chaotic"]),
        "hallucination_max": ("integer", 0), "max_errors": ("integer", 0), "pipelines": ("strings", []),
    },
    "lambda": {"css_min": ("number", 0.50), "anchor_support_min": ("number", 0.45)},
    "support": {"threshold": ("number", 0.5), "model": ("path", None), "params": ("path", None)},
}
PIPELINE_KEYS: dict[str, tuple[str, Any]] = {
    "name": ("string", None), "kind": ("string", None), "retriever": ("string", "bm25"),
    "analyzer": ("string", "lowercase+ascii_fold"), "k": ("integer", 5), "rerank": ("string", None),
    "chunk_size": ("integer", 64), "chunk_overlap": ("integer", 0), "temperature": ("number", 0.0),
    "traces": ("path", None), "factory": ("string", None), "command": ("strings", None),
    "timeout_s": ("number", 30.0), "options": ("table", {}),
}
_CHECK = {
    "string": lambda v: isinstance(v, str), "path": lambda v: isinstance(v, str),
    "integer": lambda v: type(v) is int, "boolean": lambda v: isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integers": lambda v: isinstance(v, list) and all(type(x) is int for x in v),
    "strings": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "groups": lambda v: isinstance(v, list) and all(
        isinstance(g, list) and all(isinstance(x, str) for x in g) for g in v),
    "unit": lambda v: v in ("char", "token"), "table": lambda v: isinstance(v, dict),
    "reading": lambda v: v in ("nearest", "join"),
}
_EXPECTED = {"integers": "an array of integers", "strings": "an array of strings",
             "groups": "an array of arrays of section ids", "unit": "'char' or 'token'",
             "table": "a table", "path": "a path string", "integer": "an integer",
             "reading": "'nearest' or 'join'"}


def _beside(config_path: Path, value: str) -> Path:
    """A path of the config, relative to the config's folder, without `..` detours."""
    return Path(os.path.normpath(config_path.parent / value))


class _Reader:
    def __init__(self, path: Path, text: str):
        self.path, self.lines, self.problems = path, text.splitlines(), []

    def line_of(self, section: str, key: str) -> int | None:
        """Best-effort line of `key` under `[section]` (tomllib does not keep positions)."""
        current = None
        for number, line in enumerate(self.lines, start=1):
            header = re.match(r"\s*\[\[?\s*([\w.-]+)\s*\]\]?", line)
            if header:
                current = header.group(1)
            elif current == section and re.match(rf"\s*{re.escape(key)}\s*=", line):
                return number
        return None

    def values(self, section: str, table: Any, schema: dict[str, tuple[str, Any]], path: str) -> dict:
        out = {key: default for key, (_, default) in schema.items()}
        if not isinstance(table, dict):
            self.problems.append(Problem(str(self.path), f"expected a table, found {describe(table)}", None, path))
            return out
        for key, value in table.items():
            if key not in schema:
                self.problems.append(Problem(str(self.path), f"expected one of {', '.join(sorted(schema))}, "
                                             f"found unknown key {key!r}", self.line_of(section, key), f"{path}.{key}"))
                continue
            kind = schema[key][0]
            if not _CHECK[kind](value):
                self.problems.append(Problem(str(self.path), f"expected {_EXPECTED.get(kind, 'a ' + kind)}, "
                                             f"found {describe(value)}", self.line_of(section, key), f"{path}.{key}"))
                continue
            out[key] = _beside(self.path, value) if kind == "path" else value
        return out


def default_config() -> Config:
    return Config(metrics={k: d for k, (_, d) in SCHEMA["metrics"].items()},
                  gate={k: d for k, (_, d) in SCHEMA["gate"].items()},
                  lambda_={k: d for k, (_, d) in SCHEMA["lambda"].items()},
                  support={k: d for k, (_, d) in SCHEMA["support"].items()})


def load_config(path: str | Path) -> Config:
    """Read a config; raises InputError naming every bad key with its line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(Problem(str(path), "no such config file")) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(Problem(str(path), f"cannot read config: {exc}")) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        number = int(line.group(1)) if line else len(text.splitlines()) or None
        raise InputError(Problem(str(path), f"expected TOML, found a syntax error: {exc}", number)) from None
    reader = _Reader(path, text)
    sections: dict[str, dict] = {}
    for name, value in raw.items():
        if name == "pipelines":
            continue
        if name not in SCHEMA:
            reader.problems.append(Problem(str(path), f"expected one of {', '.join(sorted([*SCHEMA, 'pipelines']))}, "
                                           f"found unknown table [{name}]", None, f"$.{name}"))
            continue
        sections[name] = reader.values(name, value, SCHEMA[name], f"$.{name}")
    for name in SCHEMA:
        sections.setdefault(name, reader.values(name, {}, SCHEMA[name], f"$.{name}"))
    pipelines = []
    raw_pipelines = raw.get("pipelines", [])
    if not isinstance(raw_pipelines, list):
        reader.problems.append(Problem(str(path), "expected [[pipelines]] entries, found a single table", None, "$.pipelines"))
        raw_pipelines = []
    names = set()
    for i, table in enumerate(raw_pipelines):
        at = f"$.pipelines[{i}]"
        values = reader.values("pipelines", table, PIPELINE_KEYS, at)
        name, kind = values.pop("name"), values.pop("kind")
        if not name:
            reader.problems.append(Problem(str(path), "expected a pipeline name, found none", None, f"{at}.name"))
        elif name in names:
            reader.problems.append(Problem(str(path), f"expected unique pipeline names, found {name!r} twice", None, f"{at}.name"))
        if kind not in PIPELINE_KINDS:
            reader.problems.append(Problem(str(path), f"expected kind one of {', '.join(PIPELINE_KINDS)}, "
                                           f"found {describe(kind)}", None, f"{at}.kind"))
        names.add(name)
        pipelines.append(PipelineConfig(name or f"pipeline-{i + 1}", kind or "", values))
    audit = sections["audit"]
    if audit["paraphrases"] < 1:
        reader.problems.append(Problem(str(path), f"expected paraphrases >= 1, found {audit['paraphrases']}",
                                       reader.line_of("audit", "paraphrases"), "$.audit.paraphrases"))
    if reader.problems:
        raise InputError(reader.problems)
    return Config(
        path=path, gold=audit["gold"], corpus=audit["corpus"], paraphrases=audit["paraphrases"],
        seeds=tuple(audit["seeds"]), out=audit["out"] if isinstance(audit["out"], Path) else _beside(path, audit["out"]),
        allow_cross_section=audit["allow_cross_section"],
        cross_section_whitelist=tuple(frozenset(g) for g in audit["cross_section_whitelist"]),
        offset_unit=audit["offset_unit"], workers=audit["workers"], model=sections["embedder"]["model"],
        metrics=sections["metrics"], gate=sections["gate"], lambda_=sections["lambda"],
        support=sections["support"], pipelines=tuple(pipelines),
    )
