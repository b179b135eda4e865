"""ragaudit: offline, deterministic evaluation and audit of retrieval-augmented generation."""
__version__ = "0.1.0"
