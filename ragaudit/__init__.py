"""ragaudit: offline, deterministic evaluation and audit of retrieval-augmented generation.

As a library (each function is documented in `ragaudit.api`; the report it returns is the typed
`ragaudit.model.Report`):

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
    ragaudit.load_run("reports/RUN").runs                # pandas DataFrames
    ragaudit.support_scores([("Keys rotate yearly.", ["Keys are rotated every 12 months."])])

Nothing heavy is imported until a function is called.
"""

from ragaudit._version import __version__

__all__ = [
    "Report",
    "__version__",
    "anchor",
    "audit",
    "calibrate",
    "check_gold",
    "compare",
    "faults",
    "gate",
    "ingest",
    "load_config",
    "load_run",
    "report",
    "run_baseline",
    "support_score",
    "support_scores",
    "trends",
    "validate",
    "verify",
]
_FROM_API = {"audit", "calibrate", "check_gold", "compare", "faults", "gate", "ingest", "load_run", "report"}
_FROM_API |= {"support_scores", "validate", "verify", "anchor", "trends", "load_config", "run_baseline"}


def __getattr__(name: str):
    if name in _FROM_API:
        from ragaudit import api

        return getattr(api, name)
    if name == "support_score":
        from ragaudit.metrics.support import support_score

        return support_score
    if name == "Report":
        from ragaudit.model import Report

        return Report
    raise AttributeError(f"module 'ragaudit' has no attribute {name!r}")
