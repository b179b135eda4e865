"""`ragaudit gold check`: is every gold item answerable from the corpus it names? (docs/reference.md §1.2)"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ragaudit.checks.validation.corpus import text_difference
from ragaudit.core.codes import issue
from ragaudit.core.errors import Problem
from ragaudit.core.progress import phase
from ragaudit.core.types import Corpus, GoldItem, Issue

if TYPE_CHECKING:
    from ragaudit.checks.metrics.embed import Encoder

ANCHOR_DELTA_S_MAX = 0.35
SECTION_ITEMS = (3, 5)


def _at(item: GoldItem, file: str, path: str) -> dict[str, Any]:
    return dict(qid=item.qid, variant=None, seed=None, path=path, file=file, line=item.line)


def check_gold(
    items: list[GoldItem],
    corpus: Corpus,
    *,
    file: str,
    paraphrases: int = 3,
    problems: list[Problem] | tuple[Problem, ...] = (),
    encoder: Encoder | None = None,
    ignore: Collection[str] = (),
    severity: Mapping[str, str] | None = None,
) -> list[Issue]:
    """Every finding for the gold set; `problems` are the reader's (unreadable items).

    With an encoder, items whose question is far from its anchor (dS > 0.35) are warned about.
    Items with a broken anchor are left out of the section counts and the distance warning.
    The findings of codes in `ignore` are left out; `severity` gives codes another severity
    (the config's [gold] table, whose codes the config loader checked).
    """
    if "gold_anchor_far" in ignore:
        encoder = None  # nothing to warn about: no model loaded, no embedding computed
    with phase("gold check"):
        found = _findings(items, corpus, file, paraphrases, problems, encoder)
    severity = severity or {}
    return [
        dataclasses.replace(i, severity=severity[i.code]) if i.code in severity else i
        for i in found
        if i.code not in ignore
    ]


def _findings(
    items: list[GoldItem],
    corpus: Corpus,
    file: str,
    paraphrases: int,
    problems: Sequence[Problem],
    encoder: Encoder | None,
) -> list[Issue]:
    found = [
        issue(
            "gold_malformed", p.message, qid=None, variant=None, seed=None, path=p.path or "$", file=p.file, line=p.line
        )
        for p in problems
    ]
    first_line: dict[str, int | None] = {}
    per_section: Counter[tuple[str, str]] = Counter()
    section_lines: dict[tuple[str, str], list[GoldItem]] = defaultdict(list)
    sound: list[GoldItem] = []
    for item in items:
        if item.qid in first_line:
            found.append(
                issue(
                    "gold_duplicate_qid",
                    f"expected a unique qid, found {item.qid!r} again (first on line {first_line[item.qid]})",
                    **_at(item, file, "$.qid"),
                )
            )
        else:
            first_line[item.qid] = item.line
        if len(item.variants) < paraphrases:
            found.append(
                issue(
                    "gold_too_few_variants",
                    f"expected at least {paraphrases} variants (question + paraphrases), found {len(item.variants)}",
                    **_at(item, file, "$.paraphrases"),
                )
            )
        anchor_findings = _check_anchor(item, corpus, file)
        found.extend(anchor_findings)
        if not anchor_findings:  # broken items would only add noise to the warnings below
            sound.append(item)
            per_section[(item.doc_id, item.section_id)] += 1
            section_lines[(item.doc_id, item.section_id)].append(item)
    low, high = SECTION_ITEMS
    for (doc_id, section_id), n in sorted(per_section.items()):
        if not low <= n <= high:
            first = section_lines[(doc_id, section_id)][0]
            found.append(
                issue(
                    "gold_section_item_count",
                    f"expected {low} to {high} items for section {doc_id}#{section_id}, found {n}",
                    **_at(first, file, "$.section_id"),
                )
            )
    if encoder is not None:
        found.extend(_check_distance(sound, encoder, file))
    return found


def _check_expected(item: GoldItem, corpus: Corpus, file: str) -> list[Issue]:
    """Each expected citation lies in its document and, where the gold set names them, in its
    section and on its text (an accept = "any" alternative is compared with its own text)."""
    out = []
    for i, cite in enumerate(item.expected_citations):
        at = f"$.expected_citations[{i}]"
        doc = corpus.documents.get(cite.doc_id)
        if doc is None or (cite.span.unit == "char" and cite.span.end > len(doc.text)):
            out.append(
                issue(
                    "gold_expected_out_of_bounds",
                    f"expected a span inside document {cite.doc_id!r}, found "
                    f"{'an unknown document' if doc is None else f'end {cite.span.end} > {len(doc.text)}'}",
                    **_at(item, file, at),
                )
            )
            continue
        if cite.section_id is not None:
            section = corpus.section(cite.doc_id, cite.section_id)
            if section is None:
                out.append(
                    issue(
                        "gold_unknown_section",
                        f"expected a section of {cite.doc_id!r}, found {cite.section_id!r}",
                        **_at(item, file, f"{at}.section_id"),
                    )
                )
            elif cite.span.unit == "char" and not section.span.contains(cite.span):
                out.append(
                    issue(
                        "gold_anchor_outside_section",
                        f"expected the span inside {cite.section_id!r} "
                        f"[{section.start}, {section.end}), found [{cite.span.start}, {cite.span.end})",
                        **_at(item, file, at),
                    )
                )
        if cite.text is not None and cite.span.unit == "char":
            piece = doc.text[cite.span.start : cite.span.end]
            if piece != cite.text:
                out.append(
                    issue(
                        "gold_anchor_text_mismatch",
                        text_difference(piece, cite.text, cite.span.start),
                        **_at(item, file, f"{at}.text"),
                    )
                )
    return out


def _check_anchor(item: GoldItem, corpus: Corpus, file: str) -> list[Issue]:
    out = _check_expected(item, corpus, file)
    if item.doc_id not in corpus:
        return out + [
            issue(
                "gold_unknown_document",
                f"expected a doc_id of the corpus, found {item.doc_id!r}",
                **_at(item, file, "$.doc_id"),
            )
        ]
    doc = corpus[item.doc_id]
    section = corpus.section(item.doc_id, item.section_id)
    if section is None:
        known = ", ".join(s.section_id for s in doc.sections[:8])
        out.append(
            issue(
                "gold_unknown_section",
                f"expected a section of {item.doc_id!r} ({known}"
                f"{', ...' if len(doc.sections) > 8 else ''}), found {item.section_id!r}",
                **_at(item, file, "$.section_id"),
            )
        )
    span = item.anchor.span
    if span.unit != "char":
        return out  # token anchors name no analyzer, so only their section can be checked in chars
    if span.end > len(doc.text):
        return out + [
            issue(
                "gold_anchor_out_of_bounds",
                f"expected end <= {len(doc.text)}, found {span.end}",
                **_at(item, file, "$.anchor"),
            )
        ]
    piece = doc.text[span.start : span.end]
    if piece != item.anchor.text:
        out.append(
            issue(
                "gold_anchor_text_mismatch",
                text_difference(piece, item.anchor.text, span.start, "anchor.text"),
                **_at(item, file, "$.anchor.text"),
            )
        )
    if section is not None and not section.span.contains(span):
        out.append(
            issue(
                "gold_anchor_outside_section",
                f"expected the anchor inside {item.section_id!r} "
                f"[{section.start}, {section.end}), found [{span.start}, {span.end})",
                **_at(item, file, "$.anchor"),
            )
        )
    return out


def _check_distance(items: list[GoldItem], encoder: Encoder, file: str) -> list[Issue]:
    from ragaudit.checks.metrics.embed import delta_s_pairs

    scores = delta_s_pairs(encoder, [i.question for i in items], [i.anchor.text for i in items])
    return [
        issue(
            "gold_anchor_far",
            f"expected dS(question, anchor) <= {ANCHOR_DELTA_S_MAX}, found {d:.3f}",
            **_at(item, file, "$.question"),
        )
        for item, d in zip(items, scores)
        if d > ANCHOR_DELTA_S_MAX
    ]
