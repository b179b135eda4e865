"""TOML config reader (docs/reference.md §1.5): one schema, every problem located.

The pydantic models of `ragaudit.io.config_schema` are the schema: keys, types, ranges, defaults. `SCHEMA`
(section -> key -> (kind, default)) is derived from them and is the one table of the gate defaults
(docs/reference.md §1.5). Paths are relative to the config's folder; every number is finite; rates and thresholds
lie in [0, 1]. A loaded `Config` has the shape of its TOML: a field per table, holding that table's section model
(`config.audit.gold`, `config.embedder.model`, `config.gold.ignore`), `[gate]` as the thresholds in force.

Each `[[pipelines]]` entry takes the keys of its kind and no others:

| kind        | keys                                                                                                 |
|-------------|------------------------------------------------------------------------------------------------------|
| every kind  | name (unique), kind, k (>= 1, default 5), timeout_s (> 0, at most 86400, default 30)                 |
| `reference` | retriever, analyzer, rerank ("none"/"mmr"), chunk_size, chunk_overlap < chunk_size, temperature >= 0 |
| `replay`    | traces (required), format ("traces", or spans: "otlp", "phoenix", "langfuse"; default "traces")      |
| `python`    | factory (required), options (a table of keyword arguments for the factory), isolation ("thread",     |
|             | "process"; default "thread")                                                                         |
| `command`   | command (required: a non-empty array of strings)                                                     |
| both above  | max_in_flight (>= 1), rate_limit (calls/s, 0.0001 to 1e6), retries (0 to 20), retry_backoff_s (> 0, at |
|             | most 3600), cache (bool): bounded so that every wait they make is one a clock can time; code        |
|             | (existing files and folders whose contents key the answer cache)                                     |

`PipelineConfig.options` holds every pipeline key, those the kind does not take at their
defaults, so every kind has one shape. `[gate] pipelines` must name configured pipelines; a
config without `[[pipelines]]` (gate-only, for `ragaudit gate`) leaves that to the gate, which
fails a pipeline without runs. A bad config raises one InputError listing every problem as
`file:line: $.path: expected ..., found ...`, a missing key on its table header's line.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from pydantic import (
    ValidationError,
)

from ragaudit.core.errors import InputError, Problem, UsageError, describe
from ragaudit.io.config_schema import (
    AuditLogSection,
    AuditSection,
    CompareSection,
    EmbedderSection,
    ExecutorSection,
    GateSection,
    GoldSection,
    HistorySection,
    LabelsSection,
    LambdaSection,
    MetricsSection,
    SupportSection,
)
from ragaudit.io.tomlpos import BARE as _BARE
from ragaudit.io.tomlpos import Loc, Positions

if TYPE_CHECKING:
    from ragaudit.io.calibration import Calibration


@dataclass(frozen=True)
class PipelineConfig:
    name: str
    kind: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    """A loaded config: a field per TOML table, named as the table (`lambda_` for [lambda]) and holding its
    section model; `path` is the file it was read from, `calibration` the one [gate] from names."""

    path: Path | None = None
    audit: AuditSection = field(default_factory=AuditSection)
    embedder: EmbedderSection = field(default_factory=EmbedderSection)
    metrics: MetricsSection = field(default_factory=MetricsSection)
    gate: GateSection = field(default_factory=GateSection)  # the thresholds in force, with their sources
    lambda_: LambdaSection = field(default_factory=LambdaSection)
    support: SupportSection = field(default_factory=SupportSection)
    pipelines: tuple[PipelineConfig, ...] = ()
    executor: ExecutorSection = field(default_factory=ExecutorSection)
    history: HistorySection = field(default_factory=HistorySection)
    gold: GoldSection = field(default_factory=GoldSection)  # [gold]: the gold check's ignore and severity
    compare: CompareSection = field(default_factory=CompareSection)
    audit_log: AuditLogSection = field(default_factory=AuditLogSection)  # [audit_log]: regression thresholds
    labels: LabelsSection = field(default_factory=LabelsSection)  # [labels]: the path of a person's labels of runs
    calibration: Calibration | None = None  # the calibration named by [gate] from


from ragaudit.io.config_schema import (  # noqa: E402
    _KINDS,
    _SECTIONS,
    PIPELINE_KINDS,
    _defaults,
    _found,
    _option_defaults,
    _Pipeline,
    _Root,
)


def default_config() -> Config:
    return Config()


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


def _unknown_key(parent: tuple[Any, ...], key: str, value: Any) -> str:  # a table's loc: names, an index, a kind
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


def _explain(error: Any) -> tuple[Loc, str]:  # a pydantic ErrorDetails
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


def _non_finite(value: Any, loc: Loc = ()) -> Iterator[tuple[Loc, float]]:
    """Every NaN or infinite number of a parsed TOML value, with its location (docs/reference.md §1.5: every number is finite)."""
    if isinstance(value, float) and not math.isfinite(value):
        yield loc, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _non_finite(item, loc + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _non_finite(item, loc + (index,))


def _jsonpath(loc: Loc) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" if _BARE.fullmatch(p) else f"[{p!r}]" for p in loc)


def _problems(path: Path, text: str, raw: dict[str, Any], error: ValidationError | None) -> list[Problem]:
    found = [_explain(e) for e in (error.errors(include_url=False) if error else [])]
    reported = {loc for loc, _ in found}
    for loc, value in _non_finite(raw):
        if not any(loc[:n] in reported for n in range(1, len(loc) + 1)):
            found.append((loc, f"expected a finite number, found {describe(value)}"))
    if not found:
        return []
    positions = Positions(text)
    problems = [Problem(str(path), message, positions.line_of(loc), _jsonpath(loc)) for loc, message in found]
    return sorted(problems, key=lambda p: (p.line is None, p.line or 0))


def _with_fitted(root: _Root, calibration: Calibration) -> _Root:
    """The config with the claim thresholds a calibration fitted to labels, where it sets none itself."""
    from ragaudit.io.calibration import CLAIMS

    changed: dict[str, dict[str, float]] = {}
    for key, value in calibration.claims.items():
        table, name = CLAIMS[key]
        section: SupportSection | LambdaSection = root.support if table == "support" else root.lambda_
        if name not in section.model_fields_set:  # the config's own keys win
            changed.setdefault(table, {})[name] = value
    if not changed:
        return root
    updates: dict[str, SupportSection | LambdaSection] = {}
    if "support" in changed:
        updates["support"] = root.support.model_copy(update=changed["support"])
    if "lambda" in changed:
        updates["lambda_"] = root.lambda_.model_copy(update=changed["lambda"])
    return root.model_copy(update=updates)


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
    _check_gold_codes(path, text, root.gold)
    _check_history_keys(path, text, root.pipelines)
    defaults = _option_defaults()
    calibration = None
    if root.gate.from_ is not None:
        from ragaudit.io.calibration import read_calibration

        calibration = read_calibration(root.gate.from_)
        root = _with_fitted(root, calibration)
    return Config(
        path=path,
        audit=root.audit,
        embedder=root.embedder,
        metrics=root.metrics,
        gate=GateSection.of(root.gate, calibration),
        lambda_=root.lambda_,
        support=root.support,
        pipelines=tuple(
            PipelineConfig(p.name, p.kind, {**defaults, **p.model_dump(exclude={"name", "kind"})})
            for p in root.pipelines
        ),
        executor=root.executor,
        history=root.history,
        gold=root.gold,
        compare=root.compare,
        audit_log=root.audit_log,
        labels=root.labels,
        calibration=calibration,
    )


def _check_history_keys(path: Path, text: str, pipelines: list[_Pipeline]) -> None:
    """Two pipelines cannot keep their values under one history key (a name, by default)."""
    owner: dict[str, str] = {}
    for i, p in enumerate(pipelines):
        key = p.history_key or p.name
        if key in owner:
            at = ("pipelines", i, "history_key" if p.history_key else "name")
            raise InputError(
                Problem(
                    str(path),
                    f"expected a history key of its own, found {key!r}, the history key of pipeline {owner[key]!r}",
                    Positions(text).line_of(at),
                    _jsonpath(at),
                )
            )
        owner[key] = p.name


def _check_gold_codes(path: Path, text: str, table: GoldSection) -> None:
    """[gold] names only the gold check's warning codes: another name is a usage error (exit 2)
    that lists them."""
    from ragaudit.core.codes import GOLD_WARNINGS

    for key, codes in (("ignore", list(table.ignore)), ("severity", list(table.severity))):
        unknown = [code for code in codes if code not in GOLD_WARNINGS]
        if unknown:
            line = Positions(text).line_of(("gold", key))
            raise UsageError(
                f"{path}{'' if line is None else f':{line}'}: [gold] {key}: expected gold-check warning codes "
                f"({', '.join(GOLD_WARNINGS)}), found {', '.join(map(repr, unknown))}"
            )
