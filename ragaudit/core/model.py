"""The report model, typed: built from an audit (`ragaudit.auditing.reporting`) or read back from report.json
(`Report.from_json`: a damaged one is an input error naming where, never a traceback)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ragaudit.core import shape, types
from ragaudit.core.errors import InputError
from ragaudit.core.means import Means
from ragaudit.core.shape import JSON, ShapeError, get, items, numbers, obj

# ---- the gate ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One gate check of one pipeline. `threshold` is always a number (or None: not gated, or a
    check without a numeric bar such as `pipeline_ran`), compared with `value` as `bound` says;
    `bound` is the bar in words, as every renderer shows it; `settings` are the other [gate]
    settings the check reads (coverage_pass_rate's coverage_min)."""

    pipeline: str
    name: str
    threshold: float | None
    value: float | None
    passed: bool
    bound: str
    questions: list[str] = field(default_factory=list)
    detail: str = ""
    source: str = "default"  # where the threshold came from: default, config, or calibration
    reasons: dict[str, str] = field(default_factory=dict)  # qid -> why that question fails it, where known
    settings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> JSON:
        return {
            "pipeline": self.pipeline,
            "name": self.name,
            "threshold": self.threshold,
            "value": self.value,
            "passed": self.passed,
            "bound": self.bound,
            "questions": list(self.questions),
            "detail": self.detail,
            "source": self.source,
            "reasons": dict(self.reasons),
            "settings": dict(self.settings),
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> "Check":
        data = obj(data, where)
        threshold = data.get("threshold")
        settings = data.get("settings") or {}
        bound = data.get("bound")
        if isinstance(threshold, dict):  # a report of ragaudit.report/2 before one threshold shape
            settings = {k: v for k, v in threshold.items() if k != "pass_rate" and shape.is_num(v)}
            bound = bound or ", ".join(f"{k} {v}" for k, v in threshold.items())
            threshold = threshold.get("pass_rate")
        elif not shape.opt_num(threshold):
            bound = bound or str(threshold)
            threshold = None
        value = data.get("value")
        return cls(
            pipeline=get(data, "pipeline", where, lambda v: isinstance(v, str), "text"),
            name=get(data, "name", where, lambda v: isinstance(v, str), "text"),
            threshold=threshold,
            value=value if shape.opt_num(value) else None,
            passed=get(data, "passed", where, lambda v: isinstance(v, bool), "a boolean"),
            bound=bound if isinstance(bound, str) else ("–" if threshold is None else f"{threshold:g}"),
            questions=get(
                data,
                "questions",
                where,
                lambda v: isinstance(v, list) and all(isinstance(q, str) for q in v),
                "an array of qids",
                [],
            ),
            detail=str(data.get("detail") or ""),
            source=str(data.get("source") or "default"),
            reasons=dict(data.get("reasons") or {}),
            settings=dict(settings),
        )


@dataclass
class Gate:
    verdict: str
    pipelines: list[str]
    checks: list[Check]

    def to_json(self) -> JSON:
        return {
            "verdict": self.verdict,
            "pipelines": list(self.pipelines),
            "checks": [c.to_json() for c in self.checks],
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "$.gate") -> "Gate":
        data = obj(data, where)
        return cls(
            verdict=get(data, "verdict", where, lambda v: v in ("pass", "fail"), "pass or fail"),
            pipelines=get(data, "pipelines", where, lambda v: isinstance(v, list), "an array", []),
            checks=items(data, "checks", where, Check.from_json),
        )

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def of(self, pipeline: str) -> list[Check]:
        return [c for c in self.checks if c.pipeline == pipeline]

    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def flagged_questions(self) -> dict[str, set[str]]:
        """Per pipeline, every question that a failing check names: what a reader of a failed gate
        is pointed at. A passing check's list (a few questions below a per-run bar while the rate
        still passes) is shown in the report but flags nothing."""
        out: dict[str, set[str]] = {p: set() for p in self.pipelines}
        for check in self.failed():
            out.setdefault(check.pipeline, set()).update(check.questions)
        return out

    def missing_from_baseline(self) -> list[str]:
        return [c.pipeline for c in self.checks if c.name == "baseline_missing"]


# ---- questions and pipelines ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lambda:
    state: str
    symbol: str
    css: float | None
    spread: float | None

    def to_json(self) -> JSON:
        return {"state": self.state, "symbol": self.symbol, "css": self.css, "spread": self.spread}

    @classmethod
    def from_json(cls, data: Any, where: str) -> "Lambda":
        data = obj(data, where)
        return cls(
            state=get(data, "state", where, shape.is_state, "a λ state (" + ", ".join(types.LAMBDA_STATES) + ")"),
            symbol=str(data.get("symbol") or ""),
            css=get(data, "css", where, shape.opt_num, "a number or null", None),
            spread=get(data, "spread", where, shape.opt_num, "a number or null", None),
        )


@dataclass(frozen=True, slots=True)
class QuestionStats:
    """How a question's runs went, counted; the gate names questions by these."""

    runs: int
    errored: int = 0
    correct: int = 0
    unmatched: int = 0
    hallucinating: int = 0
    ungrounded: int = 0
    coverage_missing: int = 0
    min_coverage: float | None = None
    max_delta_s: float | None = None
    max_delta_s_excess: float | None = None

    COUNTS = ("runs", "errored", "correct", "unmatched", "hallucinating", "ungrounded", "coverage_missing")
    EXTREMES = ("min_coverage", "max_delta_s", "max_delta_s_excess")

    def to_json(self) -> JSON:
        return {name: getattr(self, name) for name in (*self.COUNTS, *self.EXTREMES)}

    @classmethod
    def from_json(cls, data: Any, where: str) -> "QuestionStats":
        data = obj(data, where)
        counts = {name: get(data, name, where, shape.is_count, "a count (an integer >= 0)", 0) for name in cls.COUNTS}
        extremes = {name: get(data, name, where, shape.opt_num, "a number or null", None) for name in cls.EXTREMES}
        return cls(**counts, **extremes)


@dataclass(slots=True)
class Question:
    """One question of one pipeline: its λ state, the means of its runs' metrics, its run counts,
    its gold reference and, when the report carries them, its runs (as report.json holds them)."""

    pipeline: str
    qid: str
    doc_id: str | None
    section_id: str | None
    question: str | None
    errored: int
    correct: int
    lam: Lambda
    metrics: Mapping[str, float | None]
    stats: QuestionStats
    gold: JSON | None = None
    runs: list[JSON] | None = None
    runs_omitted: int | None = None

    def __post_init__(self) -> None:  # a report holds a row per question: their means are held compactly
        self.metrics = self.metrics if isinstance(self.metrics, Means) else Means(self.metrics)

    def to_json(self) -> JSON:
        out: JSON = {
            "pipeline": self.pipeline,
            "qid": self.qid,
            "doc_id": self.doc_id,
            "section_id": self.section_id,
            "question": self.question,
            "errored": self.errored,
            "correct": self.correct,
            "lambda": self.lam.to_json(),
            "metrics": dict(self.metrics),
            "stats": self.stats.to_json(),
        }
        if self.gold is not None:
            out["gold"] = self.gold
        if self.runs is not None:
            out["runs"] = self.runs
        if self.runs_omitted is not None:
            out["runs_omitted"] = self.runs_omitted
        return out

    @classmethod
    def from_json(cls, data: Any, where: str) -> "Question":
        data = obj(data, where)
        text = lambda v: v is None or isinstance(v, str)  # noqa: E731
        runs = data.get("runs")
        if runs is not None and not (isinstance(runs, list) and all(isinstance(r, dict) for r in runs)):
            raise ShapeError(f"{where}.runs: expected an array of runs, found {shape.kind_of(runs)}")
        return cls(
            pipeline=get(data, "pipeline", where, lambda v: isinstance(v, str), "text"),
            qid=get(data, "qid", where, lambda v: isinstance(v, str), "text"),
            doc_id=get(data, "doc_id", where, text, "text", None),
            section_id=get(data, "section_id", where, text, "text", None),
            question=get(data, "question", where, text, "text", None),
            errored=get(data, "errored", where, shape.is_count, "a count (an integer >= 0)", 0),
            correct=get(data, "correct", where, shape.is_count, "a count (an integer >= 0)", 0),
            lam=Lambda.from_json(data.get("lambda"), f"{where}.lambda"),
            metrics=numbers(data, "metrics", where),
            stats=QuestionStats.from_json(data.get("stats"), f"{where}.stats"),
            gold=data.get("gold") if isinstance(data.get("gold"), dict) else None,
            runs=runs,
            runs_omitted=data.get("runs_omitted") if shape.is_int(data.get("runs_omitted")) else None,
        )

    @property
    def key(self) -> tuple[str, str]:
        return (self.pipeline, self.qid)

    def holds(self) -> bool:
        """Every run of the question is correct, grounded and free of hallucinations."""
        s = self.stats
        return s.runs > 0 and s.correct == s.runs and not s.ungrounded and not s.hallucinating


@dataclass
class PipelineSummary:
    """One pipeline's aggregates: run counts, the means of every metric, its questions by λ state."""

    runs: int
    questions: int
    errored: int
    hallucinating_runs: int
    metrics: dict[str, float | None]
    citation_match_rate: float | None
    lam: dict[str, int]
    zones: dict[str, int] = field(default_factory=dict)
    histograms: JSON = field(default_factory=dict)

    def to_json(self) -> JSON:
        return {
            "runs": self.runs,
            "questions": self.questions,
            "errored": self.errored,
            "hallucinating_runs": self.hallucinating_runs,
            "metrics": dict(self.metrics),
            "citation_match_rate": self.citation_match_rate,
            "lambda": dict(self.lam),
            "zones": dict(self.zones),
            "histograms": self.histograms,
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> "PipelineSummary":
        data = obj(data, where)
        lam = get(data, "lambda", where, lambda v: isinstance(v, dict), "an object of λ state counts", {})
        return cls(
            runs=get(data, "runs", where, shape.is_int, "an integer"),
            questions=get(data, "questions", where, shape.is_int, "an integer", 0),
            errored=get(data, "errored", where, shape.is_int, "an integer", 0),
            hallucinating_runs=get(data, "hallucinating_runs", where, shape.is_int, "an integer", 0),
            metrics=numbers(data, "metrics", where),
            citation_match_rate=get(data, "citation_match_rate", where, shape.opt_num, "a number or null", None),
            lam={k: v for k, v in lam.items() if shape.is_int(v)},
            zones=dict(data.get("zones") or {}),
            histograms=dict(data.get("histograms") or {}),
        )


@dataclass(frozen=True)
class Aborted:
    """The run whose analyzer_mismatch stopped a pipeline (analyzer parity)."""

    qid: str | None
    variant: int | None
    seed: int | None
    message: str

    @property
    def text(self) -> str:
        return f"{self.qid} v{self.variant} s{self.seed}: {self.message}"

    def to_json(self) -> JSON:
        return {"qid": self.qid, "variant": self.variant, "seed": self.seed, "message": self.message}


@dataclass
class PipelineResult:
    """A configured pipeline as the report records it: its kind, options, index and aborting run, if any."""

    kind: str | None
    options: JSON
    index: JSON | None = None
    aborted: Aborted | None = None
    aborted_text: str | None = None  # as recorded, for a report written before `aborted_run`

    def to_json(self) -> JSON:
        return {
            "kind": self.kind,
            "options": self.options,
            "index": self.index,
            "aborted": self.aborted.text if self.aborted else self.aborted_text,
            **({"aborted_run": self.aborted.to_json()} if self.aborted else {}),
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> "PipelineResult":
        data = obj(data, where)
        run = data.get("aborted_run")
        aborted = None
        if isinstance(run, dict):
            aborted = Aborted(run.get("qid"), run.get("variant"), run.get("seed"), str(run.get("message") or ""))
        text = data.get("aborted")
        return cls(
            kind=data.get("kind"),
            options=dict(data.get("options") or {}),
            index=data.get("index") if isinstance(data.get("index"), dict) else None,
            aborted=aborted,
            aborted_text=text if isinstance(text, str) and text else None,
        )

    @property
    def stopped(self) -> str | None:
        """Why the pipeline was aborted, in words; None when it was not."""
        return self.aborted.text if self.aborted else self.aborted_text


@dataclass
class IssueCounts:
    errors: int
    warnings: int
    by_code: dict[str, int] = field(default_factory=dict)


@dataclass
class Summary:
    verdict: str
    runs: int
    questions: int
    detailed_questions: int
    issues: IssueCounts
    gold_errors: int
    gold_warnings: int
    pipelines: dict[str, PipelineSummary]
    sections: list[JSON]
    unmatched_runs: list[str]
    unmatched_count: int
    question_rows: int | None = None  # every question row, when report.json holds fewer (questions.parquet)

    def to_json(self) -> JSON:
        return {
            **({} if self.question_rows is None else {"question_rows": self.question_rows}),
            "verdict": self.verdict,
            "runs": self.runs,
            "questions": self.questions,
            "detailed_questions": self.detailed_questions,
            "issues": {
                "errors": self.issues.errors,
                "warnings": self.issues.warnings,
                "by_code": dict(self.issues.by_code),
            },
            "gold_check": {"errors": self.gold_errors, "warnings": self.gold_warnings},
            "pipelines": {name: p.to_json() for name, p in self.pipelines.items()},
            "sections": self.sections,
            "unmatched_runs": list(self.unmatched_runs),
            "unmatched_count": self.unmatched_count,
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "$.summary") -> "Summary":
        data = obj(data, where)
        issues = obj(data.get("issues") or {}, f"{where}.issues")
        gold = obj(data.get("gold_check") or {}, f"{where}.gold_check")
        pipelines = get(data, "pipelines", where, lambda v: isinstance(v, dict), "an object")
        return cls(
            verdict=str(data.get("verdict") or ""),
            runs=get(data, "runs", where, shape.is_int, "an integer", 0),
            questions=get(data, "questions", where, shape.is_int, "an integer", 0),
            detailed_questions=get(data, "detailed_questions", where, shape.is_int, "an integer", 0),
            issues=IssueCounts(
                get(issues, "errors", f"{where}.issues", shape.is_int, "an integer", 0),
                get(issues, "warnings", f"{where}.issues", shape.is_int, "an integer", 0),
                dict(issues.get("by_code") or {}),
            ),
            gold_errors=get(gold, "errors", f"{where}.gold_check", shape.is_int, "an integer", 0),
            gold_warnings=get(gold, "warnings", f"{where}.gold_check", shape.is_int, "an integer", 0),
            pipelines={
                name: PipelineSummary.from_json(p, f"{where}.pipelines.{name}") for name, p in pipelines.items()
            },
            sections=get(data, "sections", where, lambda v: isinstance(v, list), "an array", []),
            unmatched_runs=get(data, "unmatched_runs", where, lambda v: isinstance(v, list), "an array", []),
            unmatched_count=get(data, "unmatched_count", where, shape.is_int, "an integer", 0),
            question_rows=get(data, "question_rows", where, shape.is_int, "an integer", None),
        )


@dataclass
class Baseline:
    """What the drift and regression checks read of an earlier run: its aggregates and questions."""

    pipelines: dict[str, PipelineSummary]
    questions: list[Question]


@dataclass
class Report:
    """report.json, typed. `meta` is what describes the run (versions, times, inputs, settings);
    nothing else depends on time or machine."""

    schema_version: str
    meta: JSON
    summary: Summary
    gate: Gate
    questions: list[Question]
    snippets: dict[str, JSON] = field(default_factory=dict)
    issues: list[JSON] = field(default_factory=list)
    gold_check: list[JSON] = field(default_factory=list)
    pipelines: dict[str, PipelineResult] = field(default_factory=dict)

    def to_json(self, questions: list[Question] | None = None) -> JSON:
        return {
            "schema_version": self.schema_version,
            "meta": self.meta,
            "summary": self.summary.to_json(),
            "gate": self.gate.to_json(),
            "questions": [q.to_json() for q in (self.questions if questions is None else questions)],
            "snippets": self.snippets,
            "issues": self.issues,
            "gold_check": self.gold_check,
            "pipelines": {name: p.to_json() for name, p in self.pipelines.items()},
        }

    @classmethod
    def from_json(cls, data: Any, source: str = "report.json") -> "Report":
        """A report document read back; a document of another shape is an InputError naming
        `source` and the first place it differs."""
        try:
            data = obj(data, "$")
            pipelines = get(data, "pipelines", "$", lambda v: isinstance(v, dict), "an object", {})
            return cls(
                schema_version=str(data.get("schema_version") or ""),
                meta=dict(get(data, "meta", "$", lambda v: isinstance(v, dict), "an object", {})),
                summary=Summary.from_json(data.get("summary")),
                gate=Gate.from_json(data.get("gate")) if "gate" in data else Gate("fail", [], []),
                questions=items(data, "questions", "$", Question.from_json),
                snippets=get(data, "snippets", "$", lambda v: isinstance(v, dict), "an object", {}),
                issues=items(data, "issues", "$", obj, []),
                gold_check=items(data, "gold_check", "$", obj, []),
                pipelines={name: PipelineResult.from_json(p, f"$.pipelines.{name}") for name, p in pipelines.items()},
            )
        except ShapeError as exc:
            raise InputError(f"{source}: expected a ragaudit report, found a damaged one: {exc}") from None

    @property
    def inputs(self) -> JSON | None:
        found = self.meta.get("inputs")
        return found if isinstance(found, dict) else None

    def as_baseline(self) -> Baseline:
        return Baseline(self.summary.pipelines, self.questions)

    def pipeline_names(self) -> list[str]:
        """The gated pipelines, then any other the summary holds."""
        names = list(self.gate.pipelines)
        return names + [p for p in self.summary.pipelines if p not in names]
