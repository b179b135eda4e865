"""The one citation-marker grammar: how an answer's text cites its sources.

A marker is one of:

* a list of source ids in brackets: `[hb24-sec-keys-0007]`, `[3]`, `[1, 2]`, `[a; b]`, `[1 2]`,
  `[^1]`, `[^1^]`, `[5,+more]`. An id is word characters and `. : / # @ + ^ † -`; ids are
  separated by commas, semicolons or spaces; the whole marker is on one line and at most 200
  characters long. A markdown link `[text](url)` is not a marker, nor are words in brackets
  separated by blanks alone (`[see below]`, `[citation needed]`): ids separated by blanks alone
  each hold more than letters (`[1 2]`, `[kb-7 kb-9]`).
* a GraphRAG data reference: `[Data: Reports (1, 5); Entities (3, +more)]` (`DATA_BLOCK`; its
  body is parsed by the GraphRAG adapter).
* an OpenAI file citation: `【4:0†source】`.

The validator (citations placed after the answer), the quantity reader and the support scorer
(a marker is not part of what a sentence says) find markers with `MARKER`; adapters read the
source ids out of a list marker with `marker_ids`.
"""

from __future__ import annotations

import re

_ID = r"[\w.:/#@+^†-]+"
_NOT_A_WORD = r"(?=[\w.:/#@+^†-]*[\d_.:/#@+^†-])[\w.:/#@+^†-]+"  # an id that is more than letters
_ITEM = rf"{_NOT_A_WORD}(?:[ \t]+{_NOT_A_WORD})+|{_ID}"  # ids separated by blanks alone, or one id
_SEPARATOR = r"[ \t]*[,;][ \t]*|[ \t]+"
_ID_LIST = rf"\[(?=[^\]\n]{{0,200}}\])[ \t]*(?P<ids>(?:{_ITEM})(?:[ \t]*[,;][ \t]*(?:{_ITEM}))*)[ \t]*\](?!\()"
_DATA = r"\[\s*data\s*:(?P<body>[^\[\]]*)\]"
_FILE = r"【[^】\n]{1,200}】"

MARKER = re.compile(f"{_DATA}|{_ID_LIST}|{_FILE}", re.IGNORECASE)
DATA_BLOCK = re.compile(_DATA, re.IGNORECASE)
_SPLIT_IDS = re.compile(_SEPARATOR)


def marker_ids(match: re.Match) -> list[str]:
    """The source ids of a list marker found by `MARKER`, as written (`[1, 2]` gives `["1", "2"]`);
    none for a GraphRAG data reference or a file citation."""
    ids = match.group("ids")
    return _SPLIT_IDS.split(ids) if ids else []
