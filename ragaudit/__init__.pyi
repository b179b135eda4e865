"""The names `ragaudit` serves, as type checkers see them: each is loaded when first used (see
`ragaudit/__init__.py`, whose `_LAZY` this stub follows; tests/test_public_api.py holds them in step)."""

from ragaudit._version import __version__ as __version__
from ragaudit.agreement import agree as agree
from ragaudit.api import anchor as anchor
from ragaudit.api import audit as audit
from ragaudit.api import calibrate as calibrate
from ragaudit.api import check_gold as check_gold
from ragaudit.api import compare as compare
from ragaudit.api import faults as faults
from ragaudit.api import gate as gate
from ragaudit.api import ingest as ingest
from ragaudit.api import load_config as load_config
from ragaudit.api import load_run as load_run
from ragaudit.api import report as report
from ragaudit.api import run_baseline as run_baseline
from ragaudit.api import support_scores as support_scores
from ragaudit.api import trends as trends
from ragaudit.api import validate as validate
from ragaudit.api import verify as verify
from ragaudit.attest import attest as attest_run
from ragaudit.auditlog import run_audit_log as audit_log
from ragaudit.citations import render_traces as cite
from ragaudit.goldtools.reanchor import reanchor_file as reanchor
from ragaudit.labelfit import calibrate_labels as calibrate_labels
from ragaudit.labelling import open_session as open_labels
from ragaudit.labelserver import serve as serve_labels
from ragaudit.metrics.support import support_score as support_score
from ragaudit.model import Report as Report
from ragaudit.power import plan_gold as plan_gold
from ragaudit.probing import probe as probe

__all__ = [
    "Report",
    "__version__",
    "agree",
    "anchor",
    "attest_run",
    "audit",
    "audit_log",
    "calibrate",
    "calibrate_labels",
    "check_gold",
    "cite",
    "compare",
    "faults",
    "gate",
    "ingest",
    "load_config",
    "load_run",
    "open_labels",
    "plan_gold",
    "probe",
    "reanchor",
    "report",
    "run_baseline",
    "serve_labels",
    "support_score",
    "support_scores",
    "trends",
    "validate",
    "verify",
]
