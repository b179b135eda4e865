"""Does an answer follow its source? The outcomes of a probe run (`ragaudit probe`, docs/reference.md
§13) and the rates over them.

A probe edits the key fact of a gold anchor in a copy of the corpus and asks the question again:
the answer *follows* the source when it states the edited fact citing the edited passage, *keeps
the old fact* when it states the fact as it was before the edit (from the model's own knowledge, a
cache, another copy of the fact), and is *other* when it does neither (each with why). Removing
the cited passage from retrieval asks whether the answer still states the fact: the citation was
*necessary* when it no longer does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

FOLLOWS, KEEPS_OLD, OTHER = "follows", "keeps_old", "other"
NECESSARY, UNNECESSARY = "necessary", "unnecessary"
Z95 = 1.959963984540054  # the standard normal's 97.5th percentile


def faithful(*, probe: Sequence[str]) -> float | None:
    """The share of probe runs that follow the edited source; None without a run. A run that errored
    or states nothing is `other`, and counts in the denominator."""
    return sum(outcome == FOLLOWS for outcome in probe) / len(probe) if probe else None


def necessary(*, probe: Sequence[str]) -> float | None:
    """The share of exclusion runs whose answer no longer states the fact once its passage is gone."""
    return sum(outcome == NECESSARY for outcome in probe) / len(probe) if probe else None


def wilson(rate: float, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval of a share `rate` observed over `n` units (n >= 1): it stays
    inside [0, 1] and is not empty at 0 or 1, where the normal interval collapses."""
    centre = (rate + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 / (1 + Z95**2 / n) * math.sqrt(rate * (1 - rate) / n + Z95**2 / (4 * n * n))
    # at 0 and at 1 an end is exactly the rate (rounding would leave it a hair inside)
    return (0.0 if rate <= 0 else max(0.0, centre - half)), (1.0 if rate >= 1 else min(1.0, centre + half))
