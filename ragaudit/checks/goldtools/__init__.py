"""Gold-set upkeep: anchoring a new item's answer in the corpus (`ragaudit gold anchor`) and moving
every anchor after the corpus was edited (`ragaudit gold reanchor`)."""

from ragaudit.checks.goldtools.anchor import Anchoring, find_anchor, gold_line
from ragaudit.checks.goldtools.find import Found
from ragaudit.checks.goldtools.reanchor import DEFAULT_MIN_RATIO, Outcome, Reanchored, reanchor

__all__ = [
    "DEFAULT_MIN_RATIO",
    "Anchoring",
    "Found",
    "Outcome",
    "Reanchored",
    "find_anchor",
    "gold_line",
    "reanchor",
]
