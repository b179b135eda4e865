"""ragaudit: offline, deterministic evaluation and audit of retrieval-augmented generation."""

__version__ = "0.1.0"
__all__ = ["load_run", "support_score", "support_scores", "__version__"]


def __getattr__(name: str):
    # the scorer pulls in numpy and the model; `import ragaudit` and the CLI stay light until it is used
    if name in ("support_score", "support_scores"):
        from ragaudit.metrics import support

        return getattr(support, name)
    if name == "load_run":
        from ragaudit.results import load_run

        return load_run
    raise AttributeError(f"module 'ragaudit' has no attribute {name!r}")
