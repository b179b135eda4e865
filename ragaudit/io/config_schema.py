"""The config's schema: one pydantic model per table, with its keys, types, ranges and defaults
(`ragaudit.io.config` reads a TOML file with it and locates every problem). `SCHEMA` (section ->
key -> (kind, default)) is derived from the models. The `*Section` models are the tables a loaded
Config carries, one field each (config.audit.gold, config.metrics.k); `GateSection` is the
thresholds in force, [gate] merged with a calibration's."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, Union, cast, get_args, get_origin

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, create_model, field_validator
from pydantic_core import PydanticCustomError, core_schema

from ragaudit.core.errors import describe
from ragaudit.core.gatechecks.entry import Key
from ragaudit.core.gatechecks.registry import KEYS
from ragaudit.core.types import DEFAULT_MODEL, EXECUTOR_KINDS, FORMATS

_Retriever = Literal["bm25", "tfidf", "dense", "hybrid"]
_LambdaState = Literal["convergent", "recursive", "chaotic", "divergent"]
_Analyzer = Literal["whitespace", "lowercase", "lowercase+ascii_fold"]
RETRIEVERS: tuple[str, ...] = get_args(_Retriever)
LAMBDA_STATES: tuple[str, ...] = get_args(_LambdaState)
# the λ states are ragaudit.core.types.LAMBDA_STATES, the analyzers ragaudit.core.analyzers' and the retrievers
# ragaudit.pipelines.reference.RETRIEVERS, registries above this module (tests/test_registries.py)
if TYPE_CHECKING:  # mypy reads no Literal built from a registry: to it these are strings
    _Format: TypeAlias = str
    _ExecutorKind: TypeAlias = str
else:  # at run time, Literals of the registries' names: pydantic checks them and names them in its errors
    _Format = Literal[FORMATS]
    _ExecutorKind = Literal[EXECUTOR_KINDS]


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


def _path(value: Any, info: core_schema.ValidationInfo) -> Path:
    if isinstance(value, Path):  # a section built in code (TOML has strings only): taken as it is
        return value
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


_MarkerForm = Literal["number", "id", "file", "data"]  # ragaudit.core.markers.FORMS
_MARKER_FORMS: tuple[_MarkerForm, ...] = ("number", "id", "file", "data")


class AuditSection(_Table):
    gold: _ConfigPath | None = None
    corpus: _ConfigPath | None = None
    paraphrases: _Positive = 3
    seeds: list[_Count] = Field(default_factory=lambda: [1], min_length=1)
    out: _ConfigPath = Field(default="reports", validate_default=True)
    allow_cross_section: bool = False
    cross_section_whitelist: list[list[_Text]] = Field(default_factory=list)
    offset_unit: Literal["char", "token"] = "char"
    workers: _Positive = 1
    live_index: bool = False  # check that traces read from production spans carry the live index (spans rarely do)
    markers: list[_MarkerForm] = Field(default_factory=lambda: list(_MARKER_FORMS), min_length=1)

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, seeds: list[int]) -> list[int]:
        for i, seed in enumerate(seeds):
            if seed in seeds[:i]:
                raise _fail("distinct seeds", f"seed {seed} again", at=i)
        return seeds

    @property
    def marker_forms(self) -> frozenset[str]:
        """`markers` as a set: the marker forms an answer's text cites with."""
        return frozenset(self.markers)

    @property
    def whitelist(self) -> tuple[frozenset[str], ...]:
        """`cross_section_whitelist` as sets: the groups of sections one sentence may cite together."""
        return tuple(frozenset(group) for group in self.cross_section_whitelist)


class EmbedderSection(_Table):
    model: _Text = DEFAULT_MODEL
    cache: bool | None = None  # the vectors in the cache file too; unset: for a model, not for hashing


class MetricsSection(_Table):
    k: _Positive = 5
    ndcg_k: _Positive | None = None  # ndcg's own cutoff; k when unset
    match_tolerance: _Count = 0
    delta_s: Literal["nearest", "join"] = "nearest"


_KEY_TYPES: dict[str, Any] = {"rate": _Rate, "count": _Count, "states": list[_LambdaState]}


def _threshold_field(key: Key) -> tuple[Any, Any]:
    """A [gate] key of a check (ragaudit.core.gatechecks) as a pydantic field: its type and default."""
    kind = _KEY_TYPES[key.kind]
    default = key.default
    if isinstance(default, tuple):
        return kind, Field(default_factory=lambda: list(default))
    return (kind | None if key.nullable else kind), default


if TYPE_CHECKING:
    _Thresholds = _Table
else:  # one field per key the gate's checks read, in their order
    _Thresholds = create_model(
        "_Thresholds", __base__=_Table, **{name: _threshold_field(key) for name, key in KEYS.items()}
    )


GATE_OWN_KEYS = (  # the section's own keys, after the checks' (reference §1.5)
    Key("pipelines", "names", [], "gate only these (default: all); the others are still reported"),
    Key(
        "from",
        "path",
        None,
        "a `calibration.json` of `ragaudit calibrate`: its thresholds replace the defaults, under the keys this table"
        " sets (a check's threshold may be null there: not gated, with the reason; `coverage_min` is always a number);"
        " every check says where its threshold came from",
    ),
)


class _Gate(_Thresholds):
    # the checks' thresholds and settings (ragaudit.core.gatechecks), then which pipelines and a calibration;
    # a type checker sees the generated fields as Any (`GateSection.threshold(key)` reads them)
    if TYPE_CHECKING:

        def __getattr__(self, key: str) -> Any: ...

    pipelines: list[_Text] = Field(default_factory=list, description=GATE_OWN_KEYS[0].what)
    from_: _ConfigPath | None = Field(default=None, alias="from", description=GATE_OWN_KEYS[1].what)

    @field_validator("pipelines")
    @classmethod
    def _configured(cls, names: list[str], info: core_schema.ValidationInfo) -> list[str]:
        configured = (info.context or {}).get("pipelines") or ()
        unknown = [name for name in names if configured and name not in configured]
        if unknown:
            raise _fail(
                f"names of configured pipelines ({', '.join(dict.fromkeys(configured))})",
                f"{', '.join(map(repr, unknown))}, not configured",
                at=names.index(unknown[0]),
            )
        return names


Source = Literal["default", "config", "calibration"]


class GateSection(_Gate):
    """The thresholds in force: `[gate]` as the config writes it, under it a calibration's (`from`)
    for the keys the config leaves out, where each came from (`source`), and why the calibration
    leaves a check ungated. Built by `GateSection.of`, never read from TOML (a config that writes
    `sources` or `not_gated` has an unknown key)."""

    sources: dict[str, Source] = Field(default_factory=dict)  # key -> config or calibration
    not_gated: dict[str, str] = Field(default_factory=dict)  # check -> why a calibration does not gate it

    def threshold(self, key: str) -> Any:
        """The value in force of the [gate] key `key` (a key of `ragaudit.core.gatechecks.KEYS`: these
        fields are made from them)."""
        return getattr(self, key)

    def source(self, key: str) -> Source:
        return self.sources.get(key, "default")

    @classmethod
    def of(cls, table: _Gate, calibration: Any = None) -> "GateSection":
        """`table` with a calibration's (a `ragaudit.io.calibration.Calibration`) thresholds for the
        keys it does not write, each key's source, and the calibration's reasons for the checks it
        leaves ungated: the one place the two are merged."""
        fields = type(table).model_fields
        written = {name for name in table.model_fields_set if name != "from_"}
        values = dict(table)
        sources: dict[str, Source] = {(fields[name].alias or name): "config" for name in written}
        not_gated: dict[str, str] = {}
        if calibration is not None:
            for key, value in calibration.gate.items():
                if key not in written:
                    values[key] = value
                    sources[key] = "calibration"
            not_gated = {k: v for k, v in calibration.not_gated.items() if k not in written}
        return cls.model_construct(table.model_fields_set, **values, sources=sources, not_gated=not_gated)


class LambdaSection(_Table):
    css_min: _Rate = 0.50
    anchor_support_min: _Rate = 0.40
    key_recall_min: _Rate = 0.3  # share of the gold anchor's key content a claim must state
    key_precision_min: _Rate = 0.5  # share of the claim's own content (one clause's) the anchor must state


class SupportSection(_Table):
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


class CompareSection(_Table):
    """Decisions between configurations: which pipelines to pair (each with the first when empty),
    the non-inferiority margin, and the planning assumptions of the detectable-change line."""

    pairs: list[_Pair] = Field(default_factory=list)
    margin: _OpenRate = 0.02
    discordance: _OpenRate = 0.10
    icc: _Rate = 0.5

    @field_validator("pairs")
    @classmethod
    def _configured(cls, pairs: list[list[str]], info: core_schema.ValidationInfo) -> list[list[str]]:
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


class AuditLogSection(_Table):
    """`audit-log` window over window: what a regression must reach (ragaudit.flows.auditlog.regression)."""

    alpha: _OpenRate = 0.05  # Holm-adjusted p-value below which a movement is significant
    min_effect: _OpenRate = 0.02  # smallest movement that counts: a rate or score difference, or a share
    min_traces: _Positive = 20  # traces a window needs on a metric to be compared on it


class GoldSection(_Table):
    """What the gold check reports: warning codes left out, and another severity per warning code
    ("info" is shown and counts as neither error nor warning). The codes are checked by the loader."""

    ignore: list[_Text] = Field(default_factory=list)
    severity: dict[str, Literal["info", "warning", "error"]] = Field(default_factory=dict)


class LabelsSection(_Table):
    path: _ConfigPath | None = None  # a person's labels of runs (ragaudit label): agreement, corrected rate


class HistorySection(_Table):
    path: _ConfigPath | None = None  # the history file (default: history.sqlite beside the run directories)


class ExecutorSection(_Table):
    kind: _ExecutorKind = "local"
    scheduler: _Text | None = None  # a Dask scheduler address, such as "tcp://10.0.0.5:8786"
    # how long a run waits for a cluster left without a worker to have one again (then exit 4)
    worker_wait_s: float = Field(default=120.0, gt=0.0, le=86_400.0)


class _Pipeline(_Table):
    if TYPE_CHECKING:
        kind: str  # a Literal of its name in each kind's table
    name: _Text
    k: _Positive = 5
    timeout_s: float = Field(30.0, gt=0.0, le=86_400.0)  # a day
    history_key: _Text | None = None  # the name the history keeps its values under (default: name)

    @field_validator("name")
    @classmethod
    def _unique(cls, name: str, info: core_schema.ValidationInfo) -> str:
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
    def _overlap(cls, overlap: int, info: core_schema.ValidationInfo) -> int:
        size = info.data.get("chunk_size")
        if size is not None and overlap >= size:
            raise _fail(f"chunk_overlap < chunk_size ({size})")
        return overlap


class _Replay(_Pipeline):
    kind: Literal["replay"]
    traces: _ConfigPath
    # the recording's format: ragaudit traces, or production spans joined into traces (docs/reference.md §10)
    format: _Format = "traces"


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
    # files and folders of the pipeline's code whose contents key the answer cache, beside its module or command
    code: list[_ConfigPath] = Field(default_factory=list)

    @field_validator("code")
    @classmethod
    def _existing(cls, paths: list[Path]) -> list[Path]:
        for at, path in enumerate(paths):
            if not path.exists():
                raise _fail("an existing file or folder", f"{str(path)!r}, which does not exist", at)
        return paths


class _Python(_Remote):
    kind: Literal["python"]
    factory: _Text
    options: dict[str, Any] = Field(default_factory=dict)
    # "process": each instance in a worker process of its own, for libraries with process-wide state
    isolation: Literal["thread", "process"] = "thread"


class _Command(_Remote):
    kind: Literal["command"]
    command: list[str] = Field(min_length=1)


@dataclass(frozen=True)
class PipelineKind:
    """A kind of pipeline: its `[[pipelines]]` table (whose `kind` Literal is its name), the function that
    builds one ("module:function", called with the PipelineConfig, the Inputs and the sections to leave
    out, `ragaudit.pipelines.pool`), and whether one instance serves every worker (others get one each).
    Adding a kind is an entry here, its table above and its builder."""

    table: type[_Pipeline]
    build: str
    shared: bool

    @property
    def name(self) -> str:
        return cast(str, get_args(self.table.model_fields["kind"].annotation)[0])  # its `kind` Literal's one value

    @property
    def remote(self) -> bool:
        """It may call a service: it takes a call policy (limits, retries, the answer cache)."""
        return issubclass(self.table, _Remote)


KINDS: dict[str, PipelineKind] = {
    kind.name: kind
    for kind in (
        PipelineKind(_Reference, "ragaudit.pipelines.reference:build", shared=True),
        PipelineKind(_Replay, "ragaudit.pipelines.replay:build", shared=True),
        PipelineKind(_Python, "ragaudit.pipelines.isolated:build", shared=False),
        PipelineKind(_Command, "ragaudit.pipelines.command:build", shared=False),
    )
}
_KINDS: dict[str, type[_Pipeline]] = {name: kind.table for name, kind in KINDS.items()}
PIPELINE_KINDS = tuple(KINDS)
if TYPE_CHECKING:
    _AnyPipeline: TypeAlias = _Pipeline
else:  # one table of the kinds', told apart by `kind`
    _AnyPipeline = Annotated[Union[tuple(_KINDS.values())], Field(discriminator="kind")]


class _Root(_Table):
    audit: AuditSection
    embedder: EmbedderSection
    metrics: MetricsSection
    gate: _Gate
    lambda_: LambdaSection = Field(alias="lambda")
    support: SupportSection
    executor: ExecutorSection
    history: HistorySection
    compare: CompareSection
    audit_log: AuditLogSection
    gold: GoldSection
    labels: LabelsSection
    pipelines: list[_AnyPipeline] = []


_SECTIONS: dict[str, type[_Table]] = {
    "audit": AuditSection,
    "embedder": EmbedderSection,
    "metrics": MetricsSection,
    "gate": _Gate,
    "lambda": LambdaSection,
    "support": SupportSection,
    "executor": ExecutorSection,
    "history": HistorySection,
    "compare": CompareSection,
    "audit_log": AuditLogSection,
    "gold": GoldSection,
    "labels": LabelsSection,
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


def kind_keys(kind: str) -> tuple[str, ...]:
    """The keys a pipeline of this kind takes, but name and kind: what its report records."""
    model = _KINDS.get(kind)
    return tuple(key for key in _defaults(model) if key not in ("name", "kind")) if model else ()
