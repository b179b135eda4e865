"""The edits a probe makes to a gold anchor's key fact, each in a copy of the corpus (docs/reference.md §13).

* `number`: a quantity of the anchor gets another value (`14 characters` → `17 characters`): the
  quantity the reference answer states, else the first with a unit, else the first; the new value
  is one that no number of the document already has, so an answer stating it can only have read it
  from the edited passage.
* `entity`: a name its document writes only in the anchor (not one the question asks about) is swapped for another of the
  same shape from the corpus that its document never mentions: a weekday for a weekday, a month for
  a month, an acronym for an acronym, a code with digits for a code, a capitalised name for a name
  of as many words (`Vault` → `PagerDuty`).
* `negation`: the anchor's statement is negated after its first auxiliary or modal verb (`must be`
  → `must not be`), or, when it holds a negation, that negation is dropped (`are not accepted` →
  `are accepted`).

An edit that cannot be made says why (`Cannot`): an anchor without a quantity for `number`, say.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragaudit.checks.metrics.quantities import Mention, mentions
from ragaudit.core.text import STOPWORDS, negated
from ragaudit.core.types import Corpus, GoldItem

KINDS = ("number", "entity", "negation")
_DIGITS = re.compile(r"\d+")
# an auxiliary or modal verb, not that of a relative clause ("access that is unused ... is revoked")
_AUX = re.compile(
    r"(?<!\bthat )(?<!\bwhich )(?<!\bwho )\b(?:is|are|was|were|must|may|can|will|should|shall)\b(?!\s+(?:only|not)\b)",
    re.IGNORECASE,
)
_NEGATION = re.compile(
    r"\b(?:is|are|was|were|must|may|can|will|should|shall|do|does|did)(\s+not)\b|\b(never\s+)|\bcan(not)\b",
    re.IGNORECASE,
)
_ENTITY = re.compile(
    r"(?<![\w-])(?:[A-Z][A-Za-z0-9]*[A-Z0-9][A-Za-z0-9]*|\d[A-Za-z]*[A-Z][A-Za-z0-9]*|[A-Z][a-z]+(?: [A-Z][a-z]+){0,2})(?![\w-])"
)
_SENTENCE_START = re.compile(r"(?:[.!?:]\s+|\n\s*(?:[-*#>|]+\s*)?|[(\[\"“'‘]\s*)$")
_WEEKDAYS = re.compile(r"(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)days?")
_MONTHS = re.compile(r"January|February|March|April|May|June|July|August|September|October|November|December")


@dataclass(frozen=True)
class Edit:
    """One edit of a gold anchor: `old` at document char `at` becomes `new`; the anchor's text
    before and after, and its span in the edited document."""

    kind: str
    qid: str
    doc_id: str
    section_id: str
    at: int
    old: str
    new: str
    anchor: str  # the anchor's text before the edit
    edited: str  # and after it
    start: int  # the anchor's span in the edited document
    end: int

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "doc_id": self.doc_id,
            "section_id": self.section_id,
            "at": self.at,
            "old": self.old,
            "new": self.new,
            "anchor": self.anchor,
            "edited": self.edited,
            "start": self.start,
            "end": self.end,
        }

    @classmethod
    def from_json(cls, qid: str, data: dict[str, Any]) -> Edit:
        return cls(qid=qid, **data)


@dataclass(frozen=True)
class Cannot:
    """An edit that cannot be made, and why."""

    kind: str
    why: str


def _edit(item: GoldItem, kind: str, offset: int, old: str, new: str) -> Edit:
    anchor = item.anchor.text
    edited = anchor[:offset] + new + anchor[offset + len(old) :]
    start = item.anchor.span.start
    return Edit(
        kind,
        item.qid,
        item.doc_id,
        item.section_id,
        start + offset,
        old,
        new,
        anchor,
        edited,
        start,
        start + len(edited),
    )


def key_quantity(item: GoldItem) -> Mention | None:
    """The anchor's quantity a number edit changes: the one its reference answer states, else the
    first with a unit, else the first; only quantities written in digits."""
    found = [m for m in mentions(item.anchor.text) if m.kind == "number" and _DIGITS.search(m.surface)]
    if not found:
        return None
    said = {(m.kind, m.key) for m in mentions(item.reference_answer or "")}
    return next((m for m in found if (m.kind, m.key) in said), None) or next(
        (m for m in found if " " in m.key), found[0]
    )


def _number(item: GoldItem, corpus: Corpus) -> Edit | Cannot:
    m = key_quantity(item)
    if m is None:
        return Cannot("number", "the anchor states no quantity in digits")
    digits = _DIGITS.search(m.surface)
    assert digits is not None  # key_quantity keeps quantities with digits
    value = int(digits.group())
    taken = {int(d) for d in _DIGITS.findall(corpus[item.doc_id].text)}
    rng = random.Random(f"number:{item.qid}")
    steps = [2, 3, 5, 7, 11, 13]
    rng.shuffle(steps)
    limit = 24 if ":" in m.surface else None  # a time of day keeps a valid hour
    for step in steps + [value + s for s in steps]:
        new = value + step if limit is None else (value + step) % limit
        if new != value and new > 0 and new not in taken:
            old = digits.group()
            return _edit(item, "number", m.start + digits.start(), old, f"{new:0{len(old)}d}" if limit else str(new))
    return Cannot("number", f"every value near {value} is already in the document")


def _kind(name: str) -> str:
    if _WEEKDAYS.fullmatch(name):
        return "weekday"
    if _MONTHS.fullmatch(name):
        return "month"
    if any(c.isdigit() for c in name):
        return "code"
    if name.isupper():
        return "acronym"
    return f"name/{name.count(' ') + 1}"


def names_in(text: str) -> list[tuple[int, str]]:
    """The names written in `text` (not the first word of a sentence, a line or a parenthesis, nor a
    capitalised stopword: "On", "Since"), with where they start."""
    return [
        (m.start(), m.group())
        for m in _ENTITY.finditer(text)
        if not _starts_sentence(text, m.start()) and m.group().lower() not in STOPWORDS
    ]


def _starts_sentence(text: str, at: int) -> bool:
    return not text[:at].strip() or _SENTENCE_START.search(text[max(0, at - 12) : at]) is not None


def catalog(corpus: Corpus) -> dict[str, list[str]]:
    """Every name of the corpus by shape (`_kind`), each once, sorted."""
    found: dict[str, set[str]] = {}
    for doc in corpus.documents.values():
        for _, name in names_in(doc.text):
            found.setdefault(_kind(name), set()).add(name)
    return {kind: sorted(names) for kind, names in found.items()}


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])", re.IGNORECASE)


def _mentions(name: str, text: str) -> bool:
    return _pattern(name).search(text) is not None


def _count(name: str, text: str) -> int:
    return len(_pattern(name).findall(text))


def _entity(item: GoldItem, corpus: Corpus, names: dict[str, list[str]]) -> Edit | Cannot:
    asked = " ".join(item.variants)
    document = corpus[item.doc_id].text
    # a name its document writes once: once it is edited, the old fact is nowhere in the document
    found = [(at, name) for at, name in names_in(item.anchor.text) if _count(name, document) == 1]
    found = [(at, name) for at, name in found if not _mentions(name, asked)]
    if not found:
        return Cannot("entity", "the anchor names nothing its document names only there and the question does not")
    said = item.reference_answer or ""
    at, name = next(((a, n) for a, n in found if _mentions(n, said)), found[0])
    others = [n for n in names.get(_kind(name), []) if not _mentions(n, document) and not _mentions(n, asked)]
    if not others:
        return Cannot("entity", f"no other {_kind(name).split('/')[0]} in the corpus that {item.doc_id} never mentions")
    return _edit(item, "entity", at, name, random.Random(f"entity:{item.qid}").choice(others))


def _negation(item: GoldItem) -> Edit | Cannot:
    text = item.anchor.text
    if negated(text):
        found = _NEGATION.search(text)
        if found is None:
            return Cannot("negation", "the anchor's negation is not one a word can drop (not, never, cannot)")
        group = next(g for g in (1, 2, 3) if found.group(g))
        return _edit(item, "negation", found.start(group), found.group(group), "")
    aux = _AUX.search(text)
    if aux is None:
        return Cannot("negation", "the anchor has no auxiliary or modal verb to negate (is, are, must, may, can, ...)")
    return _edit(item, "negation", aux.start(), aux.group(), f"{aux.group()} not")


def make_edit(kind: str, item: GoldItem, corpus: Corpus, names: dict[str, list[str]]) -> Edit | Cannot:
    """The `kind` edit of the item's anchor (`names`: the corpus's `catalog`), or why there is none."""
    if item.anchor.span.unit != "char" or item.doc_id not in corpus:
        return Cannot(kind, "the anchor is not a char span of a corpus document")
    if kind == "number":
        return _number(item, corpus)
    if kind == "entity":
        return _entity(item, corpus, names)
    return _negation(item)


def write_copy(source: Path, corpus: Corpus, edit: Edit | None, folder: Path) -> Path:
    """A copy of the corpus at `source` in `folder`, with `edit` made (None: as it is); returns its
    path. Only the corpus's documents are copied, each written from the text ragaudit read (a
    document that is a symlink becomes a file of its own): nothing is written to the source, and
    nothing is read that the corpus reader does not read."""
    from ragaudit.io.corpus import corpus_files

    source = Path(source)
    if source.is_dir():
        target = folder / "corpus"
        for file in corpus_files(source):
            relative = file.relative_to(source)
            doc_id = relative.with_suffix("").as_posix()
            text = corpus[doc_id].text
            if edit is not None and doc_id == edit.doc_id:
                text = _applied(text, edit)
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            (target / relative).write_bytes(text.encode("utf-8", "surrogatepass"))
        return target
    target = folder / "corpus.jsonl"
    with open(source, encoding="utf-8") as lines, open(target, "w", encoding="utf-8") as out:
        for line in lines:
            out.write(_edited_line(line, corpus, edit) if edit is not None else line)
    return target


def _applied(text: str, edit: Edit) -> str:
    if text[edit.at : edit.at + len(edit.old)] != edit.old:
        raise ValueError(f"{edit.doc_id}: expected {edit.old!r} at char {edit.at}")
    return text[: edit.at] + edit.new + text[edit.at + len(edit.old) :]


def _edited_line(line: str, corpus: Corpus, edit: Edit) -> str:
    """One line of a corpus.jsonl, with the edit made when it is the edited document's: its text
    changed, its sections and pages moved past the edit, its own rev dropped (the text's own)."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return line
    if not isinstance(record, dict) or record.get("doc_id") != edit.doc_id:
        return line
    record["text"] = _applied(corpus[edit.doc_id].text, edit)
    shift = len(edit.new) - len(edit.old)

    def moved(at: int) -> int:
        return at + shift if at > edit.at else at

    for section in record.get("sections") or []:
        section["start"], section["end"] = moved(section["start"]), moved(section["end"])
    record["pages"] = [[moved(a), moved(b)] for a, b in record.get("pages") or []] or None
    record.pop("rev", None)
    return json.dumps({k: v for k, v in record.items() if v is not None}, ensure_ascii=False) + "\n"
