"""Every issue code ragaudit can emit, with its severity, meaning and one-line fix.

Codes are stable strings: never rename or reuse one. `ragaudit codes` prints this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragaudit.core.types import REQUIRED_PAYLOAD_FIELDS, Issue, Trace

ERROR, WARNING = "error", "warning"


@dataclass(frozen=True, slots=True)
class Code:
    code: str
    severity: str
    meaning: str
    fix: str
    family: str = "trace"

    def issue(self, message: str, **where: Any) -> Issue:
        return Issue(self.code, self.severity, message, self.fix, **where)


_TABLE = [
    (
        "malformed_record",
        ERROR,
        "a line is not JSON or not a trace object (the rest of the file is still checked)",
        "write one complete JSON trace object per line",
    ),
    (
        "wrong_type",
        ERROR,
        "a field holds a JSON value of the wrong type, NaN or Infinity (read as absent), or a "
        "string with a lone surrogate (read as U+FFFD)",
        "emit the type the trace format gives for this field",
    ),
    (
        "empty_citations",
        ERROR,
        "no retrieved payloads and no answer citations (early abort)",
        "return the retrieved payloads and cite them in the answer",
    ),
    *[
        (f"missing_{name}", ERROR, f"a payload has no `{name}`", f"emit `{name}` on every citation payload")
        for name in REQUIRED_PAYLOAD_FIELDS
    ],
    (
        "bad_offsets",
        ERROR,
        "offsets are not integers with 0 <= start < end, or the unit is not char/token",
        "rebuild chunk offsets and verify the unit",
    ),
    (
        "mixed_offset_units",
        ERROR,
        "char and token units mixed within one run",
        "emit every payload of a run in one unit",
    ),
    (
        "analyzer_mismatch",
        ERROR,
        "payload `analyzer` differs from the live `index.analyzer`",
        "rebuild the index with the query-time analyzer",
    ),
    (
        "mismatch_index_hash",
        ERROR,
        "payload `index_hash` differs from the live `index.index_hash`",
        "re-retrieve against the live index, or rebuild the stale snippets",
    ),
    (
        "embed_model_mismatch",
        ERROR,
        "payload `embed_model` differs from the live `index.embed_model`",
        "re-embed the corpus with the live model",
    ),
    (
        "rev_mismatch",
        ERROR,
        "payload `rev` differs from the corpus document's revision",
        "re-index the changed document",
    ),
    (
        "missing_score",
        ERROR,
        "a payload has neither `score_raw` nor `score_norm`",
        "emit the retriever score with every payload",
    ),
    ("missing_k_pos", ERROR, "a payload has no `k_pos`", "emit the 1-based retrieval rank as `k_pos`"),
    (
        "missing_k_final",
        ERROR,
        "`rerank_score` present but no `k_final`",
        "emit the 1-based rank after rerank as `k_final`",
    ),
    ("score_out_of_range", ERROR, "`score_norm` outside [0, 1]", "normalise scores to [0, 1]"),
    (
        "rank_mismatch",
        ERROR,
        "`k_final` values are not 1..n in list order",
        "number payloads 1..n in the order they are returned",
    ),
    (
        "dangling_citation",
        ERROR,
        "the answer cites a `snippet_id` that is not in `retrieved`, or a marker in its text names no retrieved payload",
        "cite only retrieved snippets",
    ),
    (
        "cite_after_answer",
        ERROR,
        "citations are emitted only after the answer",
        "emit citations before the answer (cite-first), or inline within the sentences they support",
    ),
    ("unknown_document", ERROR, "`doc_id` is not in the corpus", "re-index: the document was removed or renamed"),
    (
        "unknown_section",
        ERROR,
        "`section_id` is not a section of that document",
        "re-chunk with the current section ids",
    ),
    (
        "span_out_of_bounds",
        ERROR,
        "offsets run past the end of the document",
        "rebuild chunk offsets against the current document",
    ),
    (
        "span_text_mismatch",
        ERROR,
        "payload `text` differs from the document slice at its char offsets",
        "rebuild chunk offsets and verify the unit",
    ),
    (
        "section_mismatch",
        ERROR,
        "the span is not inside the declared section",
        "split chunks at section boundaries, or fix the section_id",
    ),
    (
        "pipeline_error",
        ERROR,
        "the trace carries `error`, or the pipeline crashed or timed out",
        "fix the pipeline failure named in the message",
    ),
    (
        "missing_live_index",
        WARNING,
        "the trace has no `index`, so parity, hash and model checks were skipped",
        "record the live index (index_hash, analyzer, embed_model) in every trace",
    ),
    (
        "tokens_mismatch",
        WARNING,
        "`tokens` differs from the token count of the span under the analyzer",
        "count tokens with the analyzer named in the payload",
    ),
    (
        "duplicate_snippet",
        WARNING,
        "a `snippet_id` appears twice in one retrieved list",
        "deduplicate retrieved snippets",
    ),
    (
        "uncited_segment",
        WARNING,
        "an answer segment carries no citation",
        "cite a retrieved snippet in every answer segment",
    ),
    (
        "tiebreak_violation",
        WARNING,
        "two adjacent payloads with equal primary score are not in (section_id asc, snippet_id asc) order; "
        "they are read in the order given, the order `[n]` markers count in",
        "none when the retriever orders ties the same way on every call; else break score ties by "
        "section_id, then snippet_id, ascending",
    ),
    (
        "cross_section_reuse",
        WARNING,
        "one answer segment cites more than one section; no defect in itself: the claim checks judge "
        "the segment against everything it cites",
        "none when the sentence draws on each section; allow_cross_section or cross_section_whitelist silences it",
    ),
]

_GOLD_TABLE = [
    (
        "gold_malformed",
        ERROR,
        "a gold line is not JSON or lacks required fields of the right type",
        "write one gold item per line in the format of docs/reference.md §1.2",
    ),
    ("gold_duplicate_qid", ERROR, "two gold items share a qid", "give every item its own qid"),
    (
        "gold_unknown_document",
        ERROR,
        "the item's doc_id is not in the corpus",
        "point the item at an existing document",
    ),
    (
        "gold_unknown_section",
        ERROR,
        "the item's section_id is not a section of its document",
        "use a section id of the current corpus",
    ),
    (
        "gold_anchor_out_of_bounds",
        ERROR,
        "the anchor span runs past the end of the document",
        "recompute the anchor offsets against the current document",
    ),
    (
        "gold_anchor_text_mismatch",
        ERROR,
        "anchor text differs from the corpus slice at its offsets",
        "recompute the anchor offsets against the current document",
    ),
    (
        "gold_anchor_outside_section",
        ERROR,
        "the anchor span is not inside the item's section",
        "move the anchor into its section, or fix the section_id",
    ),
    (
        "gold_expected_out_of_bounds",
        ERROR,
        "an expected citation is outside its document or names an unknown one",
        "recompute expected_citations against the current corpus",
    ),
    (
        "gold_too_few_variants",
        ERROR,
        "the item has fewer variants (question + paraphrases) than `paraphrases`",
        "add paraphrases or lower `paraphrases` in the config",
    ),
    (
        "gold_section_item_count",
        WARNING,
        "a section has fewer than 3 or more than 5 items",
        "keep 3 to 5 items per section so sections weigh alike",
    ),
    (
        "gold_anchor_far",
        WARNING,
        "dS(question, anchor) > 0.35: the question is far from its anchor",
        "reword the question or widen the anchor to the sentence that answers it",
    ),
]

# Across the runs of an audit rather than within one trace.
_AUDIT_TABLE = [
    (
        "inconsistent_snippet",
        ERROR,
        "one snippet_id of one index is recorded at different spans across runs; the runs that disagree "
        "with the span most runs record are named",
        "derive offsets from the stored chunk, never recompute them per request",
    ),
]

# Notes from the metrics rather than the rules: a figure that could not be computed honestly.
_METRIC_TABLE = [
    (
        "unit_mismatch",
        WARNING,
        "coverage is null: a cited span's unit cannot be put in the gold unit",
        "emit char offsets, or token offsets under an analyzer ragaudit reproduces, with the corpus given",
    ),
    (
        "text_truncated",
        WARNING,
        "a payload's text is longer than 100,000 characters: its metrics read only its first 100,000 "
        "(cut at a space); its span checks and stored text stay whole",
        "retrieve passages rather than whole documents: chunk long texts",
    ),
]

CODES: dict[str, Code] = {c[0]: Code(*c) for c in _TABLE}
CODES.update({c[0]: Code(*c, family="gold") for c in _GOLD_TABLE})
# the gold check's warnings, which [gold] ignore and severity may name (its errors stop a run)
GOLD_WARNINGS: tuple[str, ...] = tuple(c[0] for c in _GOLD_TABLE if c[1] == WARNING)
CODES.update({c[0]: Code(*c, family="audit") for c in _AUDIT_TABLE})
CODES.update({c[0]: Code(*c, family="metric") for c in _METRIC_TABLE})


def issue(code: str, message: str, **where: Any) -> Issue:
    return CODES[code].issue(message, **where)


def where(trace: Trace, path: str = "$", **extra: Any) -> dict[str, Any]:
    """The location fields of an issue about `trace`."""
    return dict(
        qid=trace.qid,
        variant=trace.variant,
        seed=trace.seed,
        path=path,
        file=trace.file,
        line=trace.line,
        pipeline=trace.config,
        **extra,
    )
