"""TOML config reader (docs/reference.md §1.5): one schema, every problem located.

The pydantic models below are the schema: keys, types, ranges, defaults. `SCHEMA` (section -> key
-> (kind, default)) is derived from them and is the one table of the gate defaults (docs/reference.md §1.5). Paths
are relative to the config's folder; every number is finite; rates and thresholds lie in [0, 1].

Each `[[pipelines]]` entry takes the keys of its kind and no others:

| kind        | keys                                                                                                 |
|-------------|------------------------------------------------------------------------------------------------------|
| every kind  | name (unique), kind, k (>= 1, default 5), timeout_s (> 0, at most 86400, default 30)                 |
| `reference` | retriever, analyzer, rerank ("none"/"mmr"), chunk_size, chunk_overlap < chunk_size, temperature >= 0 |
| `replay`    | traces (required), format ("traces", or spans: "otlp", "phoenix", "langfuse"; default "traces")      |
| `python`    | factory (required), options (a table of keyword arguments for the factory)                           |
| `command`   | command (required: a non-empty array of strings)                                                     |
| both above  | max_in_flight (>= 1), rate_limit (calls/s, 0.0001 to 1e6), retries (0 to 20), retry_backoff_s (> 0, at |
|             | most 3600), cache (bool): bounded so that every wait they make is one a clock can time               |

`PipelineConfig.options` holds every pipeline key, those the kind does not take at their
defaults, so every kind has one shape. `[gate] pipelines` must name configured pipelines; a
config without `[[pipelines]]` (gate-only, for `ragaudit gate`) leaves that to the gate, which
fails a pipeline without runs. A bad config raises one InputError listing every problem as
`file:line: $.path: expected ..., found ...`, a missing key on its table header's line.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)
from pydantic_core import PydanticCustomError

from ragaudit.analyzers import ANALYZERS
from ragaudit.errors import InputError, Problem, describe

_Retriever = Literal["bm25", "tfidf", "dense", "hybrid"]
_LambdaState = Literal["convergent", "recursive", "chaotic", "divergent"]
_Analyzer = Literal["whitespace", "lowercase", "lowercase+ascii_fold"]
RETRIEVERS: tuple[str, ...] = get_args(_Retriever)
LAMBDA_STATES: tuple[str, ...] = get_args(_LambdaState)
if set(get_args(_Analyzer)) != set(ANALYZERS):
    raise ImportError("the config schema's analyzers no longer match ragaudit.analyzers")


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
    executor: dict[str, Any] = field(default_factory=lambda: {"kind": "local", "scheduler": None})
    history: dict[str, Any] = field(default_factory=lambda: {"path": None})
    gate_sources: dict[str, str] = field(default_factory=dict)  # threshold -> "config" or "calibration"
    calibration: Any = None  # the ragaudit.io.calibration.Calibration named by [gate] from
    compare: dict[str, Any] = field(
        default_factory=lambda: {"pairs": [], "margin": 0.02, "discordance": 0.10, "icc": 0.5}
    )


def _beside(config_path: Path, value: str) -> Path:
    """A path of the config, relative to the config's folder, without `..` detours."""
    return Path(os.path.normpath(config_path.parent / value))


def _fail(expected: str, found: str = "", at: int | None = None) -> PydanticCustomError:
    """A schema error in the house words: `found` defaults to the value as written; `at` points at one
    item of the array being checked."""
    return PydanticCustomError(
        "ragaudit", "expected {expected}, found {found}", {"expected": expected, "found": found, "at": at}
    )


def _found(value: Any) -> str:
    return "a table" if isinstance(value, dict) else describe(value)


def _path(value: Any, info) -> Path:
    if not isinstance(value, str) or not value:
        raise _fail("a path string")
    config = (info.context or {}).get("path")
    return _beside(config, value) if config else Path(value)


def _rate(value: float) -> float:
    if not 0 <= value <= 1:
        raise _fail("a number in [0, 1]")
    return value


_ConfigPath = Annotated[Path, BeforeValidator(_path)]
_Rate = Annotated[float, AfterValidator(_rate)]
_Count = Annotated[int, Field(ge=0)]
_Positive = Annotated[int, Field(ge=1)]
_Text = Annotated[str, Field(min_length=1)]


class _Table(BaseModel):
    # strict: TOML has types, so "3" is never an integer and 1 never true
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True, defer_build=True)


class _Audit(_Table):
    gold: _ConfigPath | None = None
    corpus: _ConfigPath | None = None
    paraphrases: _Positive = 3
    seeds: list[_Count] = Field(default_factory=lambda: [1], min_length=1)
    out: _ConfigPath = Field("reports", validate_default=True)
    allow_cross_section: bool = False
    cross_section_whitelist: list[list[_Text]] = Field(default_factory=list)
    offset_unit: Literal["char", "token"] = "char"
    workers: _Positive = 1

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, seeds: list[int]) -> list[int]:
        for i, seed in enumerate(seeds):
            if seed in seeds[:i]:
                raise _fail("distinct seeds", f"seed {seed} again", at=i)
        return seeds


class _Embedder(_Table):
    model: _Text = "all-MiniLM-L6-v2"


class _Metrics(_Table):
    k: _Positive = 5
    match_tolerance: _Count = 30
    delta_s: Literal["nearest", "join"] = "nearest"


class _Gate(_Table):
    # Defaults from the fault benchmark over three corpora and two answer styles (bench/faults.py):
    # clean pipelines, extractive or LLM-written, pass on every corpus; every fault class fails.
    # Absolute ΔS depends on the corpus: it is reported always and gated only when a config sets it.
    delta_s_excess_max: _Rate = 0.25
    delta_s_max: _Rate | None = None
    delta_s_mean_max: _Rate | None = None
    coverage_min: _Rate = 0.70
    coverage_pass_rate: _Rate = 0.90
    citation_match_min: _Rate = 0.95
    lambda_convergent_min: _Rate = 0.85
    # a question some run of which errored or cited nothing; a question every run gets wrong is counted
    # by lambda_convergent_min and, against a baseline, by regressions, not failed outright
    lambda_forbid: list[_LambdaState] = Field(default_factory=lambda: list[_LambdaState](["divergent"]))
    hallucination_max: _Count = 0
    grounded_pass_rate: _Rate = 0.90
    max_errors: _Count = 0
    pipelines: list[_Text] = Field(default_factory=list)
    from_: _ConfigPath | None = Field(None, alias="from")  # thresholds proposed by `ragaudit calibrate`

    @field_validator("pipelines")
    @classmethod
    def _configured(cls, names: list[str], info) -> list[str]:
        configured = (info.context or {}).get("pipelines") or ()
        unknown = [name for name in names if configured and name not in configured]
        if unknown:
            raise _fail(
                f"names of configured pipelines ({', '.join(dict.fromkeys(configured))})",
                f"{', '.join(map(repr, unknown))}, not configured",
                at=names.index(unknown[0]),
            )
        return names


class _Lambda(_Table):
    css_min: _Rate = 0.50
    anchor_support_min: _Rate = 0.45
    key_recall_min: _Rate = 0.3  # share of the gold anchor's key content a claim must state
    key_precision_min: _Rate = 0.5  # share of the claim's own content (one clause's) the anchor must state


class _Support(_Table):
    threshold: _Rate = 0.7  # from the fault benchmark: every control claim above, most unsupported ones below
    model: _ConfigPath | None = None
    params: _ConfigPath | None = None


def _open_rate(value: float) -> float:
    if not 0 < value < 1:
        raise _fail("a number in (0, 1)")
    return value


def _two(names: list[str]) -> list[str]:
    if len(names) != 2:
        raise _fail("a pair of two pipeline names [A, B]", f"an array of {len(names)}")
    return names


_OpenRate = Annotated[float, AfterValidator(_open_rate)]
_Pair = Annotated[list[_Text], AfterValidator(_two)]


class _Compare(_Table):
    """Decisions between configurations: which pipelines to pair (each with the first when empty),
    the non-inferiority margin, and the planning assumptions of the detectable-change line."""

    pairs: list[_Pair] = Field(default_factory=list)
    margin: _OpenRate = 0.02
    discordance: _OpenRate = 0.10
    icc: _Rate = 0.5

    @field_validator("pairs")
    @classmethod
    def _configured(cls, pairs: list[list[str]], info) -> list[list[str]]:
        configured = (info.context or {}).get("pipelines") or ()
        for i, pair in enumerate(pairs):
            unknown = [name for name in pair if configured and name not in configured]
            if unknown:
                raise _fail(
                    f"pairs of configured pipelines ({', '.join(dict.fromkeys(configured))})",
                    f"{', '.join(map(repr, unknown))}, not configured",
                    at=i,
                )
        return pairs


class _History(_Table):
    path: _ConfigPath | None = None  # the history file (default: history.sqlite beside the run directories)


class _Executor(_Table):
    kind: Literal["local", "processes", "dask"] = "local"
    scheduler: _Text | None = None  # a Dask scheduler address, such as "tcp://10.0.0.5:8786"


class _Pipeline(_Table):
    name: _Text
    k: _Positive = 5
    timeout_s: float = Field(30.0, gt=0.0, le=86_400.0)  # a day

    @field_validator("name")
    @classmethod
    def _unique(cls, name: str, info) -> str:
        count = ((info.context or {}).get("pipelines") or []).count(name)
        if count > 1:
            raise _fail("unique pipeline names", f"{name!r} {count} times")
        return name


class _Reference(_Pipeline):
    kind: Literal["reference"]
    retriever: _Retriever = "bm25"
    analyzer: _Analyzer = "lowercase+ascii_fold"
    # TOML has no null: "none" is how a config says no reranker
    rerank: Annotated[Literal["none", "mmr"], AfterValidator(lambda r: None if r == "none" else r)] | None = None
    chunk_size: _Positive = 64
    chunk_overlap: _Count = 0
    temperature: float = Field(0.0, ge=0.0)

    @field_validator("chunk_overlap")
    @classmethod
    def _overlap(cls, overlap: int, info) -> int:
        size = info.data.get("chunk_size")
        if size is not None and overlap >= size:
            raise _fail(f"chunk_overlap < chunk_size ({size})")
        return overlap


class _Replay(_Pipeline):
    kind: Literal["replay"]
    traces: _ConfigPath
    # the recording's format: ragaudit traces, or production spans joined into traces (docs/reference.md §10)
    format: Literal["traces", "otlp", "phoenix", "langfuse"] = "traces"


class _Remote(_Pipeline):
    """What a pipeline that calls a service may set: how many calls at once, how many a second,
    how often a failed call is tried again (with exponential backoff and jitter), and whether its
    answers are kept for an unchanged re-run."""

    max_in_flight: _Positive | None = None
    # calls per second: one every 10,000 s at the slowest. The bounds keep every wait they make
    # (1 / rate_limit, retry_backoff_s x 2^retries x 2) within what a clock can time.
    rate_limit: float | None = Field(None, ge=1e-4, le=1e6)
    retries: _Count = Field(0, le=20)
    retry_backoff_s: float = Field(0.5, gt=0.0, le=3_600.0)
    cache: bool = False


class _Python(_Remote):
    kind: Literal["python"]
    factory: _Text
    options: dict[str, Any] = Field(default_factory=dict)


class _Command(_Remote):
    kind: Literal["command"]
    command: list[str] = Field(min_length=1)


_KINDS: dict[str, type[_Pipeline]] = {
    "reference": _Reference,
    "replay": _Replay,
    "python": _Python,
    "command": _Command,
}
PIPELINE_KINDS = tuple(_KINDS)


class _Root(_Table):
    audit: _Audit
    embedder: _Embedder
    metrics: _Metrics
    gate: _Gate
    lambda_: _Lambda = Field(alias="lambda")
    support: _Support
    executor: _Executor
    history: _History
    compare: _Compare
    pipelines: list[Annotated[_Reference | _Replay | _Python | _Command, Field(discriminator="kind")]] = []


_SECTIONS: dict[str, type[_Table]] = {
    "audit": _Audit,
    "embedder": _Embedder,
    "metrics": _Metrics,
    "gate": _Gate,
    "lambda": _Lambda,
    "support": _Support,
    "executor": _Executor,
    "history": _History,
    "compare": _Compare,
}
_KIND_NAMES = {bool: "boolean", int: "integer", float: "number", str: "string", Path: "path"}


def _kind(annotation: Any) -> str:
    """The kind of value a key takes, in the words of SCHEMA."""
    origin, args = get_origin(annotation), [a for a in get_args(annotation) if a is not type(None)]
    if origin is Annotated or origin in (Union, UnionType):
        return _kind(args[0])
    if origin is Literal:
        return "choice"
    return {list: "array", dict: "table"}.get(origin) or _KIND_NAMES.get(annotation, "value")


def _defaults(model: type[BaseModel]) -> dict[str, Any]:
    """Every key of a table at its default, None for a required key."""
    return {
        f.alias or name: None if f.is_required() else f.get_default(call_default_factory=True)
        for name, f in model.model_fields.items()
    }


SCHEMA: dict[str, dict[str, tuple[str, Any]]] = {
    section: {
        key: (_kind(f.annotation), default)
        for f, (key, default) in zip(model.model_fields.values(), _defaults(model).items())
    }
    for section, model in _SECTIONS.items()
}


def _option_defaults() -> dict[str, Any]:
    """Every pipeline key but name and kind, at its default: one shape of options for every kind."""
    out: dict[str, Any] = {}
    for model in _KINDS.values():
        out |= _defaults(model)
    return {key: value for key, value in out.items() if key not in ("name", "kind")}


def default_config() -> Config:
    gate = {key: value for key, value in _defaults(_Gate).items() if key != "from"}  # thresholds only
    return Config(metrics=_defaults(_Metrics), gate=gate, lambda_=_defaults(_Lambda), support=_defaults(_Support))


# --- where things are: tomllib keeps no positions, so the text is scanned for them ---------------

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_BASIC, _LITERAL = r'"(?:[^"\\\n]|\\.)*"', r"'[^'\n]*'"
_KEY = re.compile(f"{_BARE.pattern}|{_BASIC}|{_LITERAL}")
# a multi-line string may end its content with one or two quotes right before the delimiter
_STRING = re.compile(
    "|".join([r'"""(?:[^"\\]|\\.|"(?!""))*""""{0,2}', r"'''(?:[^']|'(?!''))*''''{0,2}", _BASIC, _LITERAL]), re.DOTALL
)
_SCALAR = re.compile(r"[^,\]}#\r\n]*")
_GAP = re.compile(r"(?:[ \t\r\n]+|#[^\n]*)*")
_SPACE = re.compile(r"[ \t]*")


class _Positions:
    """The line of every table, key and array item of a valid TOML text, by path."""

    def __init__(self, text: str):
        self.text, self.i = text, 0
        self.lines: dict[tuple, int] = {}
        self.ends = [m.end() for m in re.finditer("\n", text)]
        try:
            self._document()
        except (IndexError, ValueError, AttributeError, tomllib.TOMLDecodeError):
            pass  # keep what was found: a line is a help, never a reason to fail

    def line_of(self, loc: tuple) -> int | None:
        """The line of `loc`, or of its nearest enclosing table or item (a missing key's header)."""
        while loc and loc not in self.lines:
            loc = loc[:-1]
        return self.lines.get(loc)

    def _at(self, path: tuple, header: bool = False) -> None:
        line = bisect_right(self.ends, self.i) + 1
        if header or path not in self.lines:
            self.lines[path] = line

    def _skip(self, newlines: bool = True) -> None:
        self.i = _matched((_GAP if newlines else _SPACE).match(self.text, self.i)).end()

    def _document(self) -> None:
        table: tuple = ()
        arrays: dict[tuple, int] = {}  # an array of tables -> index of its last [[item]]
        while True:
            self._skip()
            if self.i >= len(self.text):
                return
            if self.text[self.i] != "[":
                self._pair(table)
                continue
            double = self.text.startswith("[[", self.i)
            self.i += 1 + double
            keys, table = self._keys(), ()
            for j, key in enumerate(keys):
                table += (key,)
                if table in arrays and not (double and j == len(keys) - 1):
                    table += (arrays[table],)
                self._at(table)
            if double:
                arrays[table] = arrays.get(table, -1) + 1
                table += (arrays[table],)
            self._at(table, header=True)
            self.i += 1 + double

    def _keys(self) -> tuple[str, ...]:
        keys = []
        while True:
            self._skip(newlines=False)
            token = _matched(_KEY.match(self.text, self.i)).group()
            self.i += len(token)
            keys.append(tomllib.loads(f"k = {token}")["k"] if token[0] in "\"'" else token)
            self._skip(newlines=False)
            if self.text[self.i] != ".":
                return tuple(keys)
            self.i += 1

    def _pair(self, table: tuple) -> None:
        keys = self._keys()
        for j in range(1, len(keys) + 1):
            self._at(table + keys[:j])
        self._skip(newlines=False)
        if self.text[self.i] != "=":
            raise ValueError(f"expected '=' at offset {self.i}")
        self.i += 1
        self._skip(newlines=False)
        self._value(table + keys)

    def _value(self, path: tuple) -> None:
        opening = self.text[self.i]
        if opening not in "[{":
            self.i = _matched(_STRING.match(self.text, self.i) or _SCALAR.match(self.text, self.i)).end()
            return
        close, index = "]" if opening == "[" else "}", 0
        self.i += 1
        while True:
            self._skip()
            if self.text[self.i] == close:
                self.i += 1
                return
            if opening == "[":
                self._at(path + (index,))
                self._value(path + (index,))
            else:
                self._pair(path)
            self._skip()
            if self.text[self.i] == ",":
                self.i, index = self.i + 1, index + 1
            elif self.text[self.i] != close:
                raise ValueError(f"expected ',' or {close!r} at offset {self.i}")


# --- pydantic's errors in the house words ---------------------------------------------------------

_EXPECTED = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
    "finite_number": "a finite number",
    "string_too_short": "a non-empty string",
    "too_short": "a non-empty array",
}
_BOUNDS = {
    "greater_than": ("gt", ">"),
    "greater_than_equal": ("ge", ">="),
    "less_than": ("lt", "<"),
    "less_than_equal": ("le", "<="),
}


def _unknown_key(parent: tuple, key: str, value: Any) -> str:
    if not parent:
        allowed = ", ".join(sorted([*_SECTIONS, "pipelines"]))
        what = f"unknown table [{key}]" if isinstance(value, dict) else f"unknown key {key!r}"
        return f"expected one of {allowed}, found {what}"
    if parent[0] == "pipelines" and len(parent) == 3:
        owners = [kind for kind, model in _KINDS.items() if key in model.model_fields]
        what = f"key {key!r}, which only {' and '.join(owners)} pipelines take" if owners else f"unknown key {key!r}"
        allowed = ", ".join(sorted(_defaults(_KINDS[parent[2]])))
        return f"expected one of {allowed} (a {parent[2]} pipeline), found {what}"
    return f"expected one of {', '.join(sorted(_defaults(_SECTIONS[parent[0]])))}, found unknown key {key!r}"


def _explain(error: Any) -> tuple[tuple, str]:  # a pydantic ErrorDetails
    """The location (without pydantic's union tag) and house message of one pydantic error."""
    raw, kind, value, ctx = error["loc"], error["type"], error.get("input"), error.get("ctx") or {}
    loc = raw[:2] + raw[3:] if raw[:1] == ("pipelines",) and len(raw) > 2 else raw
    if kind == "ragaudit":
        at = () if ctx.get("at") is None else (ctx["at"],)
        return loc + at, f"expected {ctx['expected']}, found {ctx['found'] or _found(value)}"
    if kind == "extra_forbidden":
        return loc, _unknown_key(raw[:-1], raw[-1], value)
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        found = describe(value.get("kind")) if isinstance(value, dict) and "kind" in value else "none"
        return loc + ("kind",), f"expected kind one of {', '.join(PIPELINE_KINDS)}, found {found}"
    if kind == "missing":
        return loc, f"expected key {loc[-1]!r} (required), found none"
    if kind in _BOUNDS:
        name, sign = _BOUNDS[kind]
        noun = "a number" if isinstance(ctx[name], float) else "an integer"
        return loc, f"expected {noun} {sign} {ctx[name]:g}, found {describe(value)}"
    if kind == "literal_error":
        return loc, f"expected {ctx['expected']}, found {_found(value)}"
    if kind == "list_type" and loc == ("pipelines",) and isinstance(value, dict):
        return loc, "expected [[pipelines]] entries, found a single table"
    return loc, f"expected {_EXPECTED.get(kind, 'a valid value')}, found {_found(value)}"


def _non_finite(value: Any, loc: tuple = ()):
    """Every NaN or infinite number of a parsed TOML value, with its location (docs/reference.md §1.5: every number is finite)."""
    if isinstance(value, float) and not math.isfinite(value):
        yield loc, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _non_finite(item, loc + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _non_finite(item, loc + (index,))


def _matched(found: re.Match[str] | None) -> re.Match[str]:
    """A match the line index relies on: the text was already parsed by tomllib, so it is there."""
    if found is None:
        raise ValueError("the TOML line index lost its place in a text tomllib accepted")
    return found


def _jsonpath(loc: tuple) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" if _BARE.fullmatch(p) else f"[{p!r}]" for p in loc)


def _problems(path: Path, text: str, raw: dict, error: ValidationError | None) -> list[Problem]:
    found = [_explain(e) for e in (error.errors(include_url=False) if error else [])]
    reported = {loc for loc, _ in found}
    for loc, value in _non_finite(raw):
        if not any(loc[:n] in reported for n in range(1, len(loc) + 1)):
            found.append((loc, f"expected a finite number, found {describe(value)}"))
    if not found:
        return []
    positions = _Positions(text)
    problems = [Problem(str(path), message, positions.line_of(loc), _jsonpath(loc)) for loc, message in found]
    return sorted(problems, key=lambda p: (p.line is None, p.line or 0))


def load_config(path: str | Path) -> Config:
    """Read a config; raises InputError naming every problem with its line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(Problem(str(path), "no such config file")) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(Problem(str(path), f"cannot read config: {exc}")) from None
    try:
        raw = tomllib.loads(text)
    except RecursionError:  # arrays nested thousands deep: tomllib recurses
        raise InputError(Problem(str(path), "expected TOML nested at most a few hundred deep, found deeper")) from None
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        number = int(line.group(1)) if line else len(text.splitlines()) or None
        raise InputError(Problem(str(path), f"expected TOML, found a syntax error: {exc}", number)) from None
    entries = raw.get("pipelines")
    names = (
        [p["name"] for p in entries if isinstance(p, dict) and isinstance(p.get("name"), str)]
        if isinstance(entries, list)
        else []
    )
    root, error = None, None
    try:
        root = _Root.model_validate(
            {**{section: {} for section in _SECTIONS}, **raw}, context={"path": path, "pipelines": names}
        )
    except ValidationError as exc:
        error = exc
    problems = _problems(path, text, raw, error)
    if problems or root is None:
        raise InputError(problems)
    audit, defaults = root.audit, _option_defaults()
    gate, sources, calibration = _gate(root.gate)
    return Config(
        path=path,
        gold=audit.gold,
        corpus=audit.corpus,
        paraphrases=audit.paraphrases,
        seeds=tuple(audit.seeds),
        out=audit.out,
        allow_cross_section=audit.allow_cross_section,
        cross_section_whitelist=tuple(frozenset(g) for g in audit.cross_section_whitelist),
        offset_unit=audit.offset_unit,
        workers=audit.workers,
        model=root.embedder.model,
        metrics=root.metrics.model_dump(),
        gate=gate,
        gate_sources=sources,
        calibration=calibration,
        lambda_=root.lambda_.model_dump(),
        support=root.support.model_dump(),
        executor=root.executor.model_dump(),
        history=root.history.model_dump(),
        compare=root.compare.model_dump(),
        pipelines=tuple(
            PipelineConfig(p.name, p.kind, {**defaults, **p.model_dump(exclude={"name", "kind"})})
            for p in root.pipelines
        ),
    )


def _gate(table: _Gate) -> tuple[dict[str, Any], dict[str, str], Any]:
    """The [gate] thresholds with those of a calibration (`from`) under the ones the config sets,
    where each came from, and the calibration."""
    gate = table.model_dump(exclude={"from_"})
    fields = type(table).model_fields
    written = {(fields[name].alias or name) for name in table.model_fields_set} - {"from"}
    sources = {key: "config" for key in written}
    calibration = None
    if table.from_ is not None:
        from ragaudit.io.calibration import read_calibration

        calibration = read_calibration(table.from_)
        for key, value in calibration.gate.items():
            if key not in written:
                gate[key] = value
                sources[key] = "calibration"
        gate["not_gated"] = {k: v for k, v in calibration.not_gated.items() if k not in written}
    return gate, sources, calibration
