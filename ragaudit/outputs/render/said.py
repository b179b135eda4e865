"""What each `ragaudit` command says about its result: the lines it prints, in order, each to stdout
or stderr, and the exit code it ends with (or the error it ends with, after its lines). Built here
from the library's typed results; the command line only prints a `Said`."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ragaudit.core.errors import InputsChangedError, RagauditError

if TYPE_CHECKING:
    from ragaudit.auditing.checking import GoldCheck, Ingested, Validation
    from ragaudit.auditing.history import Trends
    from ragaudit.checks.goldtools.anchor import Anchoring
    from ragaudit.checks.goldtools.reanchor import ReanchorReport
    from ragaudit.core.model import Report
    from ragaudit.decisions.agreement import Agreement
    from ragaudit.decisions.attest import Attestation
    from ragaudit.decisions.labelfit import Calibrated
    from ragaudit.decisions.labelling import Session
    from ragaudit.decisions.power import Plan
    from ragaudit.flows.api import FaultsResult, Gated, Rebuilt, Verified
    from ragaudit.flows.app import Outcome
    from ragaudit.flows.auditlog import AuditLogResult
    from ragaudit.flows.baselines import BaselineChoice
    from ragaudit.flows.probing import Probed


@dataclass
class Said:
    """Texts in the order printed, each with its line end and whether it goes to stderr; then the
    exit code, or an error that ends the command once the texts are out."""

    texts: list[tuple[str, bool]] = field(default_factory=list)
    exit_code: int = 0
    error: RagauditError | None = None

    def out(self, text: str, *, nl: bool = True) -> Said:
        """`text` on stdout (with a line end unless `nl` is false)."""
        self.texts.append((text + "\n" if nl else text, False))
        return self

    def err(self, lines: Iterable[object], prefix: str = "") -> Said:
        """Each of `lines` on stderr, after `prefix` (`warning: `, `error: `, `note: `)."""
        self.texts += [(f"{prefix}{line}\n", True) for line in lines]
        return self

    def ends(self, exit_code: int) -> Said:
        """The command ends with `exit_code`."""
        self.exit_code = exit_code
        return self


def as_json(result: object) -> str:
    """A result as the commands print it for tools."""
    return json.dumps(result, indent=1, sort_keys=True)


def _terminal() -> bool:
    """Whether stdout is a terminal: the summary is then shown as text, not as markdown source
    (summary.md keeps the markdown)."""
    import sys

    return bool(getattr(sys.stdout, "isatty", None) and sys.stdout.isatty())


def gated_code(passed: bool, no_gate: bool = False) -> int:
    """0: the gate passed (or is not to decide the exit code); 1: it failed."""
    return 0 if no_gate or passed else 1


# ---- run, report, gate -------------------------------------------------------------------------


def baseline(chosen: BaselineChoice | None) -> Said:
    """What the user should know about the baseline chosen (a `ragaudit.flows.baselines.BaselineChoice`, or None)."""
    return Said().err(chosen.warnings, "warning: ").err(chosen.notes) if chosen else Said()


def finished(report: Report, run_dir: Path, no_gate: bool, said: Said | None = None) -> Said:
    """The end of `run` and `report`: the pipelines the baseline lacks, the summary, the run directory."""
    from ragaudit.outputs.render.markdown import render_summary
    from ragaudit.outputs.render.run_text import baseline_gaps

    said = (said or Said()).err(baseline_gaps(report.gate)).out(render_summary(report, terminal=_terminal()), nl=False)
    return said.out(f"\nrun directory: {run_dir}").ends(gated_code(report.gate.passed, no_gate))


def run(outcome: Outcome, no_gate: bool) -> Said:
    """`ragaudit run`: the run's notices, its throughput, then as `finished`."""
    from ragaudit.core import progress
    from ragaudit.outputs.render import run_text

    said = Said().err(run_text.notices(outcome.result, outcome.findings))
    took = progress.elapsed()
    said.out(run_text.throughput(outcome.result, took, progress.breakdown(took)))
    return finished(outcome.report, outcome.result.run_dir, no_gate, said)


def rebuilt(built: Rebuilt, no_gate: bool) -> Said:
    """`ragaudit report`: the warnings of the rebuild (an `api.Rebuilt`), then as `finished`."""
    return finished(built.report, built.run_dir, no_gate, Said().err(built.warnings, "warning: "))


def gated(found: Gated, fmt: str) -> Said:
    """`ragaudit gate`: the baseline's warnings and notes, then the gate as JSON or the summary."""
    from ragaudit.outputs.render.markdown import render_summary
    from ragaudit.outputs.render.run_text import baseline_gaps

    said = Said().err(found.warnings, "warning: ").err(found.notes).err(baseline_gaps(found.gate))
    if fmt == "json":
        said.out(as_json(found.gate.to_json()))
    else:
        said.out(render_summary(found.report, terminal=_terminal()), nl=False)
    return said.ends(gated_code(found.gate.passed))


# ---- compare, faults, calibrate, verify --------------------------------------------------------


def compared(result: dict[str, Any], notes: list[str], target: Path | None, fmt: str) -> Said:
    """`ragaudit compare`: the comparison as JSON (its notes on stderr), or as text; then the files
    written, when it wrote some (`--out`)."""
    from ragaudit.outputs.render.compare_text import render_text

    if fmt == "json":
        return Said().out(as_json(result)).err(notes, "note: ")
    said = Said().out(render_text(result, notes), nl=False)
    return said.out(f"wrote {target / 'compare.json'} and {target / 'compare.html'}") if target else said


def faults(done: FaultsResult) -> Said:
    """`ragaudit faults`: the fault matrix and the files written (an `api.FaultsResult`)."""
    from ragaudit.outputs.render.faults_text import render_fault_matrix

    said = Said().out(render_fault_matrix(done.result), nl=False).out(f"wrote {done.json_path} and {done.html_path}")
    return said.err(done.warnings, "warning: ").ends(gated_code(done.passed))


def probed(done: Probed) -> Said:
    """`ragaudit probe`: what each pipeline's answers did on the edited copies (a `probing.Probed`),
    the probe directory; exit 0 when faithful_min passes (or is not set), 1 when it fails."""
    from ragaudit.outputs.render.probe_text import render_probe

    report = done.report
    said = Said().err([f"resumed: {done.resumed} finished pieces of work kept"] if done.resumed else [])
    said.out(render_probe(report.meta["probe"], report.gate.to_json()), nl=False).out(f"probe directory: {done.folder}")
    return said.err(done.warnings, "warning: ").ends(gated_code(done.passed))


def calibrated(result: dict[str, Any], target: Path, fmt: str) -> Said:
    """`ragaudit calibrate`: the proposal as JSON, or as text and where it was written."""
    from ragaudit.outputs.render.calibration_text import render_calibration

    if fmt == "json":
        return Said().out(as_json(result))
    return (
        Said()
        .out(render_calibration(result), nl=False)
        .out(f'wrote {target}; use it with [gate] from = "{target.name}"')
    )


def fitted(done: Calibrated, fmt: str) -> Said:
    """`ragaudit calibrate --labels`: the held-out agreement before and after, the thresholds and the
    file written; exit 1 when the labels were too few to fit anything."""
    from ragaudit.outputs.render.agreement_text import render_fit

    said = Said().err(done.fit.notes, "note: ")
    if fmt == "json":
        said.out(as_json({"fit": done.fit.to_json(), "more": done.fit.more, "kept": done.fit.kept,
                          "claims": (done.content or {}).get("claims"), "path": str(done.path) if done.path else None}))  # fmt: skip
    else:
        said.out(render_fit(done.fit), nl=False)
    if done.path is None:
        return said.ends(1)
    return said.out(f'wrote {done.path}; use it with [gate] from = "{done.path.name}"')


def labelling(session: Session) -> Said:
    """`ragaudit label`, before the page opens: what will be labelled, and the stale labels."""
    said = Said().err(
        [
            f"{label.labels_path}:{stale.line}: stale: {stale.qid} v{stale.variant} s{stale.seed} of {stale.pipeline} "
            "changed since it was labelled; it is offered again"
            for label in [session]
            for stale in session.stale
        ],
        "note: ",
    )
    return said.err(
        [f"{len(session.tasks)} runs of {session.run_dir} to label ({session.by}), labels to {session.labels_path}"]
    )


def label_page(url: str) -> Said:
    return Said().out(f"label at {url}  (Done on the page, or ctrl-C, ends)")


def labelled(session: Session) -> Said:
    return Said().out(f"wrote {session.recorded} labels to {session.labels_path}")


def agreed(found: Agreement, fmt: str) -> Said:
    """`ragaudit agree`: the agreement as JSON or text, its notes on stderr (exit 0)."""
    from ragaudit.outputs.render.agreement_text import render

    said = Said().err(found.notes, "note: ")
    return said.out(as_json(found.to_json())) if fmt == "json" else said.out(render(found), nl=False)


def verified(checked: Verified) -> Said:
    """`ragaudit verify`: its notes, then what was checked, or the changes as the error (exit 5)."""
    said = Said().err(checked.notes, "note: ")
    if checked.changed:
        said.error = InputsChangedError("; ".join(checked.changed))
        return said
    return said.out("\n".join(checked.checked)) if checked.checked else said


# ---- validate, ingest, gold --------------------------------------------------------------------


def validated(found: Validation, out: IO[str], fmt: str) -> Said:
    """`ragaudit validate`: its issues (a `checking.Validation`) written to `out` as they are found,
    then what follows them."""
    from ragaudit.outputs.render.issues_text import stream_validation

    stream_validation(found, out, fmt=fmt)
    return _issues_end(found, fmt, found.warnings)


def gold_checked(found: GoldCheck, out: IO[str], fmt: str) -> Said:
    """`ragaudit gold check`: its findings (a `checking.GoldCheck`) written to `out`, then what follows them."""
    from ragaudit.outputs.render.issues_text import write_checked

    write_checked(found, out, fmt=fmt)
    return _issues_end(found, fmt, [])


def _issues_end(found: Validation | GoldCheck, fmt: str, warnings: Iterable[str]) -> Said:
    """Once the issues are out: the counts (text), the warnings and the problems; exit 3 for
    problems, 1 for error issues."""
    from ragaudit.auditing.checking import GoldCheck
    from ragaudit.outputs.render.issues_text import summary

    severities = found.severities if isinstance(found, GoldCheck) else None
    said = Said().out(summary(found.records, found.counts, severities)) if fmt == "text" else Said()
    return said.err(warnings, "warning: ").err(found.problems, "error: ").ends(found.exit_code)


def graphrag_traced(text: str, dangling: bool) -> Said:
    """The trace of a GraphRAG answer on stdout; exit 1 when some cited id dangles."""
    return Said().out(text, nl=False).ends(1 if dangling else 0)


def listing(text: str) -> Said:
    """A list (`ragaudit codes`, `ragaudit metrics`) on stdout."""
    return Said().out(text)


def ingested(done: Ingested) -> Said:
    """`ragaudit ingest`: each line or input that could not be read, the late spans, what was written."""
    said = Said().err(done.bad_lines, "error: ").err(done.warnings, "warning: ")
    return said.err(done.unreadable_inputs, "error: ").out(done.summary()).ends(done.exit_code)


def anchored(found: Anchoring, question: str, answer: str, *, qid: str | None, paraphrases: tuple[str, ...]) -> Said:
    """`ragaudit gold anchor`: the candidates (stderr), and a gold line anchored at the first."""
    from ragaudit.checks.goldtools.anchor import describe, gold_line

    said = Said().err(f"candidate {i} {describe(c)}" for i, c in enumerate(found.candidates, start=1))
    if not found.candidates:
        return said.err(["no sentence of the corpus to anchor the answer in"], "error: ").ends(1)
    said.out(gold_line(found.candidates[0], question=question, answer=answer, qid=qid, paraphrases=paraphrases))
    if len(paraphrases) < 2:
        said.err(["`ragaudit gold check` asks for 3 variants by default: add --paraphrase twice"], "note: ")
    return said


def reanchored(report: ReanchorReport) -> Said:
    """`ragaudit gold reanchor`: what became of each item, and the items that could not be moved."""
    return Said().out("\n".join(report.lines)).err(list(report.problems), "error: ").ends(report.exit_code)


# ---- history, audit-log ------------------------------------------------------------------------


def history(found: Trends, fmt: str) -> Said:
    """`ragaudit history`: the stored values left out (warnings), then the trends as text or JSON."""
    from ragaudit.outputs.render import history_text

    said = Said().err(found.problems, "warning: ")
    if found.error is not None:
        said.error = found.error
        return said
    text = (
        history_text.render_json(found.points)
        if fmt == "json"
        else history_text.render_text(found.points, str(found.store), found.left_out)
    )
    return said.out(text)


def audit_log(result: AuditLogResult) -> Said:
    """`ragaudit audit-log`: the windows, the files written, the warnings and the inputs not read."""
    from ragaudit.outputs.render.audit_log_text import render_windows

    said = Said().out(render_windows(result.model), nl=False).out(f"wrote {result.out}")
    return said.err(result.warnings, "warning: ").err(result.problems, "error: ").ends(result.exit_code)


# ---- plan, attest ------------------------------------------------------------------------------


def planned(result: Plan, fmt: str) -> Said:
    """`ragaudit plan`: the detectable changes, as JSON or text."""
    from ragaudit.decisions.power import render_text

    return Said().out(as_json(result.to_json())) if fmt == "json" else Said().out(render_text(result), nl=False)


def attested(attestation: Attestation, *, signed: bool) -> Said:
    """`ragaudit attest`: the attestation written, what it holds, and whether it is signed."""
    body = attestation.statement
    predicate = body["predicate"]
    return Said().out(
        f"wrote {attestation.path}: {len(body['subject'])} files, gate {predicate['verdict']}, "
        f"{len(predicate['checks'])} checks{', signed' if signed else ', not signed (no --key)'}"
    )
