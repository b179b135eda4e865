"""Validation of citation payloads (SPEC §2). Importing this package registers every rule."""
from ragaudit.validate import answer, corpus, index, payload, ranking, record  # noqa: F401  (registration)
from ragaudit.validate.codes import CODES, Code
from ragaudit.validate.engine import Validator, validate_trace
from ragaudit.validate.registry import RULES, Context, Rule

__all__ = ["CODES", "Code", "Context", "RULES", "Rule", "Validator", "validate_trace"]
