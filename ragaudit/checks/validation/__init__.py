"""Validation of citation payloads (docs/reference.md §2). Importing this package registers every rule."""

from ragaudit.checks.validation import answer, corpus, index, payload, ranking, record  # noqa: F401  (registration)
from ragaudit.checks.validation.engine import (
    Validator,
    aborted_pipelines,
    parity_failure,
    validate_trace,
    validate_traces,
)
from ragaudit.checks.validation.registry import RULES, Context, Rule
from ragaudit.core.codes import CODES, Code

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
