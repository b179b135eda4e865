"""`ragaudit gold anchor`: where in a corpus an answer is, as candidate anchor spans and a gold line.

The answer text is looked for exactly, then with whitespace, case and inline markup folded, then
as the sentences most like it by the embedding model; the first of these that finds anything
gives the candidates, each labelled how it was found. The gold line anchors the first candidate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ragaudit.checks.goldtools.find import Found, exact, normalised, similar
from ragaudit.core.types import Corpus
from ragaudit.io.corpus import slugify

if TYPE_CHECKING:
    from ragaudit.checks.metrics.embed import Encoder

QID_LENGTH = 48


@dataclass(frozen=True)
class Anchoring:
    candidates: list[Found]  # the best first

    @property
    def how(self) -> str | None:
        return self.candidates[0].how if self.candidates else None


def find_anchor(corpus: Corpus, answer: str, encoder: Callable[[], Encoder]) -> Anchoring:
    """The candidate anchors of `answer` in `corpus`; `encoder` makes the embedding model, called
    only when neither exact nor folded matching finds the answer."""
    for finder in (exact, normalised):
        found = finder(corpus, answer)
        if found:
            return Anchoring(found)
    return Anchoring(similar(corpus, answer, encoder()))


def gold_line(found: Found, *, question: str, answer: str, qid: str | None, paraphrases: tuple[str, ...]) -> str:
    """One gold item (the gold set's JSON lines format, keys sorted) anchored at `found`."""
    item = {
        "qid": qid or slugify(question)[:QID_LENGTH].strip("-"),
        "question": question,
        "paraphrases": list(paraphrases),
        "doc_id": found.doc_id,
        "section_id": found.section_id,
        "anchor": {"start": found.start, "end": found.end, "unit": "char", "text": found.text},
        "reference_answer": answer,
    }
    return json.dumps(item, ensure_ascii=False, sort_keys=True)


def describe(found: Found) -> str:
    """`exact: doc#section [start, end) "text"` (with its score when it has one)."""
    score = "" if found.score is None else f" {found.score:.3f}"
    text = found.text if len(found.text) <= 120 else found.text[:119] + "…"
    return f"{found.how}{score}: {found.doc_id}#{found.section_id} [{found.start}, {found.end}) {text!r}"
