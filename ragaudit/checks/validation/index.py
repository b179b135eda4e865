"""Rules comparing each payload with the live index the pipeline read from."""

from __future__ import annotations

from typing import Iterable, Iterator

from ragaudit.checks.validation.registry import Context, rule
from ragaudit.core.codes import issue, where
from ragaudit.core.types import Issue, LiveIndex, Trace

_PARITY = (
    ("analyzer", "analyzer_mismatch"),
    ("index_hash", "mismatch_index_hash"),
    ("embed_model", "embed_model_mismatch"),
)


@rule("missing_live_index", "analyzer_mismatch", "mismatch_index_hash", "embed_model_mismatch")
def live_index_parity(trace: Trace, ctx: Context) -> Iterable[Issue]:
    index = trace.index
    if index is None:
        if trace.retrieved and ctx.asks_live_index(trace):
            return [
                issue(
                    "missing_live_index",
                    "expected the live index in `index`, found none; "
                    "analyzer, index_hash and embed_model parity were not checked",
                    **where(trace, "$.index"),
                )
            ]
        return ()
    analyzer, index_hash, embed_model = index.analyzer, index.index_hash, index.embed_model
    for p in trace.retrieved:
        # equal to the live value, or absent (`missing_<field>`), or nothing live to compare with
        if (
            p.analyzer != analyzer
            and p.analyzer is not None
            and analyzer is not None
            or p.index_hash != index_hash
            and p.index_hash is not None
            and index_hash is not None
            or p.embed_model != embed_model
            and p.embed_model is not None
            and embed_model is not None
        ):
            return _parity_issues(trace, index)
    return ()


def _parity_issues(trace: Trace, index: LiveIndex) -> Iterator[Issue]:
    for field_name, code in _PARITY:
        live = getattr(index, field_name)
        if live is None:
            continue
        for i, p in enumerate(trace.retrieved):
            value = getattr(p, field_name)
            if value is not None and value != live:
                yield issue(
                    code,
                    f"expected {field_name} {live!r} (live index), found {value!r}",
                    **where(trace, f"$.retrieved[{i}].{field_name}", citation=p.snippet_id),
                )
