"""Gold-set reader (docs/reference.md §1.2). Structural defects are located Problems; content checks live in
`ragaudit.gold_check`."""

from __future__ import annotations

import os

from ragaudit.core.errors import Problem, describe
from ragaudit.core.types import UNITS, Anchor, Decoy, ExpectedCitation, GoldItem, Span
from ragaudit.io.fields import Fields
from ragaudit.io.jsonfiles import iter_json_lines
from ragaudit.io.jsonl import BadLine

ACCEPT = ("all", "any")


def read_gold(path: str | os.PathLike[str]) -> tuple[list[GoldItem], list[Problem]]:
    """All readable items and every problem of the unreadable ones. Raises InputError only when
    the file itself cannot be read or is empty."""
    name = os.fspath(path)
    items: list[GoldItem] = []
    problems: list[Problem] = []
    for number, obj in iter_json_lines(name):
        if isinstance(obj, BadLine):
            problems.append(obj.problem)
            continue
        if not isinstance(obj, dict):
            problems.append(Problem(name, f"expected a gold item object, found {describe(obj)}", number))
            continue
        item = _item(Fields(obj, problems, file=name, line=number))
        if item is not None:
            items.append(item)
    return items, problems


def _span(fields: Fields) -> Span | None:
    start = fields.get("start", "integer", required=True)
    end = fields.get("end", "integer", required=True)
    unit = fields.get("unit", "string", default="char")
    if unit not in UNITS:
        fields.problem(fields.at("unit"), f"expected 'char' or 'token', found {unit!r}")
        return None
    if start is None or end is None:
        return None
    if not 0 <= start < end:
        fields.problem(fields.path, f"expected 0 <= start < end, found [{start}, {end})")
        return None
    return Span(start, end, unit)


def _item(fields: Fields) -> GoldItem | None:
    before = len(fields.problems)
    qid = fields.get("qid", "string", required=True)
    if qid is not None and not qid.strip():  # no run, report row or junit case could name it
        fields.problem(fields.at("qid"), f"expected a non-empty qid, found {describe(qid)}")
    question = fields.get("question", "string", required=True)
    doc_id = fields.get("doc_id", "string", required=True)
    section_id = fields.get("section_id", "string", required=True)
    paraphrases = fields.strings("paraphrases")
    anchor_fields = fields.child("anchor", required=True)
    anchor = None
    if anchor_fields is not None:
        span = _span(anchor_fields)
        text = anchor_fields.get("text", "string", required=True)
        anchor = Anchor(span, text) if span is not None and text is not None else None
    expected = []
    for i, raw in enumerate(fields.get("expected_citations", "array", default=[])):
        at = f"{fields.at('expected_citations')}[{i}]"
        if not isinstance(raw, dict):
            fields.problem(at, f"expected a citation object {{doc_id, start, end, unit}}, found {describe(raw)}")
            continue
        cite = Fields(raw, fields.problems, file=fields.file, line=fields.line, path=at)
        cite_doc = cite.get("doc_id", "string", required=True)
        span = _span(cite)
        snippet, section, text = (cite.get(k, "string") for k in ("snippet_id", "section_id", "text"))
        if cite_doc is not None and span is not None:
            expected.append(ExpectedCitation(cite_doc, span, snippet, section, text))
    decoy_fields = fields.child("decoy")
    decoy = None
    if decoy_fields is not None:
        decoy_doc = decoy_fields.get("doc_id", "string", required=True)
        decoy = Decoy(decoy_doc, decoy_fields.get("section_id", "string")) if decoy_doc else None
    not_allowed = fields.strings("answers_not_allowed")
    reference = fields.get("reference_answer", "string")
    accept = fields.get("accept", "string", default="all")
    if accept not in ACCEPT:
        fields.problem(fields.at("accept"), f"expected 'all' or 'any', found {accept!r}")
    elif accept == "any" and not expected:
        fields.problem(
            fields.at("expected_citations"),
            "expected the alternatives of an accept = 'any' item in expected_citations, found none",
        )
    if len(fields.problems) > before or anchor is None:
        return None
    return GoldItem(
        qid,
        question,
        doc_id,
        section_id,
        anchor,
        paraphrases,
        tuple(expected),
        decoy,
        not_allowed,
        reference,
        fields.line,
        accept,
    )
