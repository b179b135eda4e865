"""ragaudit: offline, deterministic evaluation and audit of retrieval-augmented generation.

As a library (each function is documented in `ragaudit.flows.api`; the report it returns is the typed
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
`ragaudit.cite`, `ragaudit.attest_run` and `ragaudit.probe` too, each documented in the module it names below).

Nothing heavy is imported until a function is called; type checkers read the names and their types
from `__init__.pyi`, which imports each from the module named here.
"""

from importlib import import_module

from ragaudit._version import __version__ as __version__

_API = """anchor audit calibrate check_gold compare faults gate ingest load_config load_run report run_baseline
support_scores trends validate verify""".split()
_LAZY = {name: ("ragaudit.flows.api", name) for name in _API}
_LAZY |= {
    "Report": ("ragaudit.core.model", "Report"),
    "agree": ("ragaudit.decisions.agreement", "agree"),
    "calibrate_labels": ("ragaudit.decisions.labelfit", "calibrate_labels"),
    "open_labels": ("ragaudit.decisions.labelling", "open_session"),
    "serve_labels": ("ragaudit.decisions.labelserver", "serve"),
    "attest_run": ("ragaudit.decisions.attest", "attest"),
    "audit_log": ("ragaudit.flows.auditlog", "run_audit_log"),
    "cite": ("ragaudit.outputs.citations", "render_traces"),
    "plan_gold": ("ragaudit.decisions.power", "plan_gold"),
    "probe": ("ragaudit.flows.probing", "probe"),
    "reanchor": ("ragaudit.checks.goldtools.reanchor", "reanchor_file"),
    "support_score": ("ragaudit.checks.metrics.support", "support_score"),
}
__all__ = sorted([*_LAZY, "__version__"])


def __dir__() -> list[str]:
    return list(__all__)


def __getattr__(name: str) -> object:
    if name in _LAZY:
        module, attribute = _LAZY[name]
        return getattr(import_module(module), attribute)
    raise AttributeError(f"module 'ragaudit' has no attribute {name!r}")
