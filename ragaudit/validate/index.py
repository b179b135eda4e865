"""Rules comparing each payload with the live index the pipeline read from."""
from __future__ import annotations

from ragaudit.validate.codes import issue
from ragaudit.validate.registry import rule, where

_PARITY = (("analyzer", "analyzer_mismatch"), ("index_hash", "mismatch_index_hash"),
           ("embed_model", "embed_model_mismatch"))


@rule("missing_live_index", "analyzer_mismatch", "mismatch_index_hash", "embed_model_mismatch")
def live_index_parity(trace, ctx):
    if trace.index is None:
        if trace.retrieved:
            yield issue("missing_live_index", "expected the live index in `index`, found none; "
                        "analyzer, index_hash and embed_model parity were not checked", **where(trace, "$.index"))
        return
    for field_name, code in _PARITY:
        live = getattr(trace.index, field_name)
        if live is None:
            continue
        for i, p in enumerate(trace.retrieved):
            value = getattr(p, field_name)
            if value is not None and value != live:
                yield issue(code, f"expected {field_name} {live!r} (live index), found {value!r}",
                            **where(trace, f"$.retrieved[{i}].{field_name}", citation=p.snippet_id))
