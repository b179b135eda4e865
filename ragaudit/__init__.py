"""ragaudit: offline, deterministic evaluation and audit of retrieval-augmented generation."""

__version__ = "0.1.0"
__all__ = ["support_score", "support_scores", "__version__"]


def __getattr__(name: str):
    # the scorer pulls in numpy and the model; `import ragaudit` and the CLI stay light until it is used
    if name in ("support_score", "support_scores"):
        from ragaudit.metrics import support

        return getattr(support, name)
    raise AttributeError(f"module 'ragaudit' has no attribute {name!r}")
