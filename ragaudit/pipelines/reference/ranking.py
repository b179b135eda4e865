"""Chunk orderings by score with the tie-break of docs/reference.md §1.4 (score desc, then section_id asc, then
snippet_id asc), computed in numpy so that a query costs O(n) plus the sort of what it keeps.

The tie-break never changes between queries, so it is sorted once: `perm` lists the chunks in
tie-break order. Scores are looked at through `perm`; a stable sort of the negated scores then
puts equal scores in tie-break order, which is the full key without comparing strings per query.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class TieBreak:
    """Orders the chunks whose (section_id, snippet_id) keys are given, in chunk order."""

    def __init__(self, keys: Sequence[tuple[str, str]]):
        # Python's own string order, as the validator's tie-break key compares them
        self.perm = np.array(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.intp)
        self.size = len(keys)

    def top(self, scores: np.ndarray, m: int) -> np.ndarray:
        """The first `m` chunk indices of the full order, best first; equal to `order(scores)[:m]`.

        Selection is by value: every chunk scoring above the m-th best score is kept, and of the
        chunks tied at that score only the first ones in tie-break order, however many tie.
        """
        n = self.size
        m = min(max(m, 0), n)
        if m == 0:
            return np.empty(0, dtype=np.intp)
        s = scores[self.perm]
        if m == n:
            return self.perm[np.argsort(-s, kind="stable")]
        kth = np.partition(s, n - m)[n - m]  # the m-th best score
        if np.isnan(kth):  # no retriever scores NaN; if one did, still return m chunks
            return self.order(scores)[:m]
        above = np.flatnonzero(s > kth)
        tied = np.flatnonzero(s == kth)[: m - len(above)]
        # each part is in tie-break order and no score is in both, so a stable sort keeps ties in that order
        kept = np.concatenate([above, tied])
        best: np.ndarray = self.perm[kept[np.argsort(-s[kept], kind="stable")]]
        return best

    def order(self, scores: np.ndarray) -> np.ndarray:
        """Every chunk index, best first."""
        return self.perm[np.argsort(-scores[self.perm], kind="stable")]

    def ranks(self, scores: np.ndarray) -> np.ndarray:
        """The 1-based rank of each chunk in `order(scores)`, as floats, in chunk order."""
        ranks = np.empty(self.size)
        ranks[self.order(scores)] = np.arange(1, self.size + 1)
        return ranks
