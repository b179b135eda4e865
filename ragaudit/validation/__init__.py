"""Validation of citation payloads (docs/reference.md §2). Importing this package registers every rule."""

from ragaudit.codes import CODES, Code
from ragaudit.validation import answer, corpus, index, payload, ranking, record  # noqa: F401  (registration)
from ragaudit.validation.engine import (
    Validator,
    aborted_pipelines,
    parity_failure,
    validate_trace,
    validate_traces,
)
from ragaudit.validation.registry import RULES, Context, Rule

__all__ = [
    "CODES",
    "Code",
    "Context",
    "RULES",
    "Rule",
    "Validator",
    "aborted_pipelines",
    "parity_failure",
    "validate_trace",
    "validate_traces",
]
