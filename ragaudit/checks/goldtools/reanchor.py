"""`ragaudit gold reanchor`: a gold set's anchors moved to where their text is in an edited corpus.

Per item, its anchor text (and each expected citation's) is looked for in the new corpus:

* still at its offsets in its document, in one section: **stayed** (its section id follows a
  renamed or re-cut section: then it counts as moved exactly);
* found exactly elsewhere: **exact**: the occurrence in its own document nearest to where it was,
  else the one occurrence in another document (of several, the one in a section of the same id);
* else the run of whole sentences of one section most like it, when difflib's ratio reaches
  `min_ratio`: **fuzzy**, with the ratio, and the numbers that differ named (its own document
  first, then the others);
* else **not moved**, with the reason: the item is left out of the new gold set, and listed.

Nothing is invented: an item keeps every field but its `doc_id`, `section_id` and spans. With the
old corpus (`old`), a citation without `text` is looked for by the text its span held there.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from ragaudit.checks.goldtools.find import Found, exact, fuzzy, section_at
from ragaudit.core.errors import InputError, Problem
from ragaudit.core.types import Corpus, GoldItem
from ragaudit.io.jsonfiles import iter_json_lines
from ragaudit.io.jsonl import BadLine

DEFAULT_MIN_RATIO = 0.9
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


@dataclass
class Outcome:
    """What became of one gold item: `status` stayed, moved or not moved; `moves` the anchor's and
    citations' new places (how each was found); `reason` why it was not moved."""

    qid: str
    line: int
    status: str
    moves: list[tuple[str, Found]] = field(default_factory=list)  # (what: "anchor" | "citation i", where)
    reason: str | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class Reanchored:
    outcomes: list[Outcome]
    lines: list[str]  # the new gold set, one JSON line per item kept

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def exit_code(self) -> int:
        return 1 if self.count("not moved") else 0


@dataclass(frozen=True)
class ReanchorReport:
    """What `ragaudit gold reanchor` did: the report's lines, the items it could not move (as located
    problems) and the exit code (1 when some item was not moved)."""

    lines: tuple[str, ...]
    problems: tuple[Problem, ...]
    exit_code: int


class _NotMoved(Exception):
    pass


def reanchor(
    gold_path: str | os.PathLike[str], new: Corpus, *, old: Corpus | None = None, min_ratio: float = DEFAULT_MIN_RATIO
) -> Reanchored:
    """Move every anchor of the gold set at `gold_path` into `new`. Raises InputError (nothing
    moved) when a line of the gold set is not a gold item object."""
    from ragaudit.io.gold import read_gold

    name = os.fspath(gold_path)
    items, problems = read_gold(name)
    if problems:
        raise InputError(problems)
    raw = {number: obj for number, obj in iter_json_lines(name) if not isinstance(obj, BadLine)}
    outcomes: list[Outcome] = []
    lines: list[str] = []
    for item in items:
        obj = json.loads(json.dumps(raw[item.line or 0]))  # a copy to rewrite
        outcome = Outcome(item.qid, item.line or 0, "stayed")
        try:
            if item.anchor.span.unit != "char":
                raise _NotMoved("its anchor is in token offsets: only char anchors can be moved")
            anchor = _place(new, old, item.anchor.text, item.doc_id, item.anchor.span.start, item.section_id, min_ratio)
            outcome.moves.append(("anchor", anchor))
            obj.update(doc_id=anchor.doc_id, section_id=anchor.section_id)
            obj["anchor"].update(start=anchor.start, end=anchor.end, text=anchor.text)
            for i, cite in enumerate(obj.get("expected_citations") or []):
                moved = _citation(new, old, item, cite, i, min_ratio)
                outcome.moves.append((f"citation {i}", moved))
                cite.update(doc_id=moved.doc_id, start=moved.start, end=moved.end)
                if "text" in cite:
                    cite["text"] = moved.text
                if "section_id" in cite or (moved.doc_id == anchor.doc_id and moved.section_id != anchor.section_id):
                    cite["section_id"] = moved.section_id
        except _NotMoved as why:
            outcome.status, outcome.reason = "not moved", str(why)
            outcomes.append(outcome)
            continue
        if any(found.how != "stayed" for _, found in outcome.moves):
            outcome.status = "moved"
        outcome.notes = [n for what, found in outcome.moves for n in _notes(what, found, item, obj)]
        outcomes.append(outcome)
        lines.append(json.dumps(obj, ensure_ascii=False, sort_keys=True))
    return Reanchored(outcomes, lines)


def _citation(new: Corpus, old: Corpus | None, item: GoldItem, cite: dict[str, Any], i: int, min_ratio: float) -> Found:
    text = cite.get("text")
    if (
        not text
        and item.doc_id == cite["doc_id"]
        and (cite["start"], cite["end"])
        == (
            item.anchor.span.start,
            item.anchor.span.end,
        )
    ):
        text = item.anchor.text
    if not text and old is not None and cite["doc_id"] in old:
        text = old[cite["doc_id"]].text[cite["start"] : cite["end"]]
    if not text:
        raise _NotMoved(f"expected citation {i} has no text to look for (give the old corpus: --from OLD)")
    if cite.get("unit", "char") != "char":
        raise _NotMoved(f"expected citation {i} is in token offsets: only char spans can be moved")
    return _place(new, old, text, cite["doc_id"], cite["start"], cite.get("section_id") or item.section_id, min_ratio)


def _place(
    new: Corpus, old: Corpus | None, text: str, doc_id: str, start: int, section_id: str, min_ratio: float
) -> Found:
    document = new.documents.get(doc_id)
    if document is not None and document.text[start : start + len(text)] == text:
        section = section_at(document, start, start + len(text))
        if section is not None:
            how = "stayed" if section.section_id == section_id else "exact"
            return Found(doc_id, section.section_id, start, start + len(text), text, how)
    if document is not None:
        here = exact(new, text, [doc_id])
        if here:
            return min(here, key=lambda f: (abs(f.start - start), f.start))
    others = [d for d in sorted(new.documents) if d != doc_id]
    elsewhere = exact(new, text, others)
    if len(elsewhere) > 1:
        elsewhere = [f for f in elsewhere if f.section_id == section_id] or elsewhere
    if len(elsewhere) == 1:
        return elsewhere[0]
    if elsewhere:
        places = ", ".join(sorted({f"{f.doc_id}#{f.section_id}" for f in elsewhere}))
        raise _NotMoved(f"its text is in {len(elsewhere)} places of other documents ({places}): which one is ambiguous")
    best = 0.0
    for scope in ([doc_id] if document is not None else [], others):
        found, ratio = fuzzy(new, text, scope, min_ratio=min_ratio)
        if found is not None:
            return found
        best = max(best, ratio)
    where = f"document {doc_id!r} is not in the new corpus" if document is None else "its text is not in the new corpus"
    if document is None and old is not None and doc_id in old:
        where = f"document {doc_id!r} was in the old corpus and is not in the new one"
    raise _NotMoved(
        f"{where}, and no sentence of the new corpus matches the text (best ratio {best:.3f} < {min_ratio})"
    )


def _notes(what: str, found: Found, item: GoldItem, obj: dict[str, Any]) -> list[str]:
    before = item.anchor.text if what == "anchor" else None
    if found.how != "fuzzy" or before is None:
        return []
    old_numbers, new_numbers = _NUMBER.findall(before), _NUMBER.findall(found.text)
    if old_numbers == new_numbers:
        return []
    return [f"numbers differ: {', '.join(old_numbers) or 'none'} → {', '.join(new_numbers) or 'none'}"]


def report(
    result: Reanchored, gold_path: str | os.PathLike[str], out: str | os.PathLike[str]
) -> tuple[list[str], list[Problem]]:
    """A line per item that moved (each span: how it was found, where it went, notes) and a
    summary; a located problem per item that did not."""
    lines = []
    for outcome in result.outcomes:
        if outcome.status != "moved":
            continue
        moves = "; ".join(_move(what, found) for what, found in outcome.moves if found.how != "stayed")
        notes = "".join(f" ({note})" for note in outcome.notes)
        lines.append(f"{outcome.qid}: moved: {moves}{notes}")
    moved = [f for o in result.outcomes for _, f in o.moves if o.status == "moved"]
    lines.append(
        f"{len(result.outcomes)} items: {result.count('stayed')} stayed, {result.count('moved')} moved "
        f"({sum(f.how == 'exact' for f in moved)} spans exactly, {sum(f.how == 'fuzzy' for f in moved)} by fuzzy "
        f"match), {result.count('not moved')} not moved (left out); {len(result.lines)} items written to {out}"
    )
    problems = [
        Problem(os.fspath(gold_path), f"{o.qid}: not moved: {o.reason}", o.line)
        for o in result.outcomes
        if o.status == "not moved"
    ]
    return lines, problems


def _move(what: str, found: Found) -> str:
    how = found.how if found.score is None else f"{found.how}, ratio {found.score:.3f}"
    return f"{what} {how} to {found.doc_id}#{found.section_id} [{found.start}, {found.end})"


def reanchor_file(
    gold_path: str | os.PathLike[str],
    corpus_path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    old: str | os.PathLike[str] | None = None,
    min_ratio: float = 0.9,
) -> ReanchorReport:
    """`ragaudit gold reanchor`: the gold set at GOLD moved into the corpus at `corpus_path` (from the
    corpus `old` when given) and written to `out`, which may overwrite none of the inputs."""
    from ragaudit.io.corpus import load_corpus
    from ragaudit.io.files import refuse_overwriting, write_atomic

    refuse_overwriting([out], [gold_path, corpus_path, old])
    result = reanchor(gold_path, load_corpus(corpus_path), old=load_corpus(old) if old else None, min_ratio=min_ratio)
    write_atomic(out, "".join(line + "\n" for line in result.lines))
    lines, problems = report(result, gold_path, out)
    return ReanchorReport(tuple(lines), tuple(problems), result.exit_code)
