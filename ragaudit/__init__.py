"""ragaudit: offline, deterministic evaluation and audit of retrieval-augmented generation."""
__version__ = "0.1.0"
__all__ = ["support_score", "__version__"]


def __getattr__(name: str):
    # the scorer pulls in numpy and the model; `import ragaudit` and the CLI stay light until it is used
    if name == "support_score":
        from ragaudit.metrics.support import support_score
        return support_score
    raise AttributeError(f"module 'ragaudit' has no attribute {name!r}")
