"""ragaudit: offline, deterministic evaluation and audit of retrieval-augmented generation.

As a library (each function is documented in `ragaudit.flows.api` or `ragaudit.flows.api_tools`; the report it returns is the typed
`ragaudit.core.model.Report`):

    import ragaudit

    outcome = ragaudit.audit("configs/default.toml")     # run, audit, gate and write a run directory
    outcome.report.gate.verdict
    ragaudit.gate("reports/RUN/report.json", "configs/strict.toml", baseline="last-pass")
    ragaudit.report("reports/RUN")                       # rebuild every output from the stored traces
    with ragaudit.validate(["traces.jsonl"], corpus="corpus/") as found:
        for issue in found: ...
    ragaudit.ingest("otlp", ["spans.jsonl"], "traces.jsonl")
    ragaudit.verify("reports/RUN").changed
    ragaudit.faults("reports/RUN"), ragaudit.calibrate("configs/default.toml")
    ragaudit.probe("configs/default.toml", sample=20)     # does each answer follow its source?
    ragaudit.load_run("reports/RUN").runs                # pandas DataFrames
    ragaudit.support_scores([("Keys rotate yearly.", ["Keys are rotated every 12 months."])])

Every `ragaudit` command is one of these calls (`ragaudit.plan_gold`, `ragaudit.audit_log`, `ragaudit.reanchor`,
`ragaudit.cite`, `ragaudit.attest_run` and `ragaudit.probe` too).

Each public name is imported below from the facade that defines it; a function imports the modules
of its flow (and numpy, PyTorch, pandas, Dask) when called, so `import ragaudit` stays light.
"""

from ragaudit._version import __version__ as __version__
from ragaudit.core.model import Report as Report
from ragaudit.flows.api import anchor as anchor
from ragaudit.flows.api import audit as audit
from ragaudit.flows.api import calibrate as calibrate
from ragaudit.flows.api import check_gold as check_gold
from ragaudit.flows.api import compare as compare
from ragaudit.flows.api import faults as faults
from ragaudit.flows.api import gate as gate
from ragaudit.flows.api import ingest as ingest
from ragaudit.flows.api import load_config as load_config
from ragaudit.flows.api import load_run as load_run
from ragaudit.flows.api import report as report
from ragaudit.flows.api import run_baseline as run_baseline
from ragaudit.flows.api import support_score as support_score
from ragaudit.flows.api import support_scores as support_scores
from ragaudit.flows.api import trends as trends
from ragaudit.flows.api import validate as validate
from ragaudit.flows.api import verify as verify
from ragaudit.flows.api_tools import agree as agree
from ragaudit.flows.api_tools import attest_run as attest_run
from ragaudit.flows.api_tools import audit_log as audit_log
from ragaudit.flows.api_tools import calibrate_labels as calibrate_labels
from ragaudit.flows.api_tools import cite as cite
from ragaudit.flows.api_tools import open_labels as open_labels
from ragaudit.flows.api_tools import plan_gold as plan_gold
from ragaudit.flows.api_tools import probe as probe
from ragaudit.flows.api_tools import reanchor as reanchor
from ragaudit.flows.api_tools import serve_labels as serve_labels

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


def __dir__() -> list[str]:
    return list(__all__)
