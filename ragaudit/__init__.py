"""ragaudit: offline, deterministic evaluation and audit of retrieval-augmented generation.

The library is `ragaudit.api` (every command as a function returning a typed result); the report
it returns is `ragaudit.model.Report`. `load_run` and `support_score(s)` are here too.
"""

__version__ = "0.1.0"
__all__ = ["api", "load_run", "support_score", "support_scores", "__version__"]


def __getattr__(name: str):
    # the scorer pulls in numpy and the model; `import ragaudit` and the CLI stay light until it is used
    if name in ("support_score", "support_scores"):
        from ragaudit.metrics import support

        return getattr(support, name)
    if name == "load_run":
        from ragaudit.results import load_run

        return load_run
    if name == "api":
        import ragaudit.api

        return ragaudit.api
    raise AttributeError(f"module 'ragaudit' has no attribute {name!r}")
