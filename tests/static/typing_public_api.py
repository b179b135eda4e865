"""ragaudit's public names as a caller's type checker sees them (checked by mypy with the package,
`make test`): each a typed function or class, a misspelt name an error. Never run, only checked."""

from pathlib import Path
from typing import Any, Callable, assert_type

import ragaudit
import ragaudit.adapters
from ragaudit.auditing.history import Trends
from ragaudit.checks.goldtools.anchor import Anchoring
from ragaudit.checks.goldtools.reanchor import ReanchorReport
from ragaudit.core.model import Report
from ragaudit.decisions.attest import Attestation
from ragaudit.decisions.power import Plan, RatePlan
from ragaudit.flows.api import Calibrated, Compared, Gated, Verified
from ragaudit.flows.app import Outcome
from ragaudit.io.config import Config
from ragaudit.outputs.results import Run


def calls(config: Path, run_dir: Path) -> None:
    assert_type(ragaudit.audit(config), Outcome)
    assert_type(ragaudit.gate(run_dir / "report.json", config), Gated)
    assert_type(ragaudit.calibrate(config), Calibrated)
    assert_type(ragaudit.calibrate(config).proposal, dict[str, Any])
    assert_type(ragaudit.compare([run_dir]), Compared)
    assert_type(ragaudit.compare([run_dir]).folder, Path | None)
    assert_type(ragaudit.verify(run_dir), Verified)
    assert_type(ragaudit.verify(run_dir).changed, list[str])
    assert_type(ragaudit.Report, type[Report])
    assert_type(ragaudit.load_config(config), Config)
    assert_type(ragaudit.load_run(run_dir), Run)
    assert_type(ragaudit.trends(run_dir), Trends)
    assert_type(ragaudit.anchor(run_dir, "How often?", "Every 12 months."), Anchoring)
    assert_type(ragaudit.support_scores([("Keys rotate yearly.", ["Keys rotate every 12 months."])]), list[float])
    assert_type(ragaudit.reanchor(run_dir / "gold.jsonl", run_dir, run_dir / "new.jsonl"), ReanchorReport)
    assert_type(ragaudit.reanchor(run_dir / "gold.jsonl", run_dir, run_dir / "new.jsonl").exit_code, int)
    assert_type(ragaudit.attest_run(run_dir), Attestation)
    assert_type(ragaudit.attest_run(run_dir).path, Path)
    assert_type(ragaudit.plan_gold(run_dir / "gold.jsonl"), Plan)
    assert_type(ragaudit.plan_gold(run_dir / "gold.jsonl").rates["correct"], RatePlan)
    assert_type(ragaudit.__version__, str)
    gate: Callable[..., Gated] = ragaudit.gate
    del gate


def misspelt() -> None:
    ragaudit.gaet  # type: ignore[attr-defined]
    ragaudit.adapters.from_langchian  # type: ignore[attr-defined]
    ragaudit.calibrate(42)  # type: ignore[arg-type]
