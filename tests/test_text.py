"""The one sentence splitter: abbreviations, initials, decimals and ellipses stay inside their
sentence, a line break always ends one, a piece opening in lower case continues the one before
(unless that one ends in a citation marker and its stop), and no module splits sentences its own way."""

import json
import random
import re

import pytest
from helpers import ROOT, shared_path
from hypothesis import given, settings
from hypothesis import strategies as st

from ragaudit.core.text import (
    BLOCK,
    _line_sentences,
    _plain_sentences,
    _pysbd_pieces,
    _split,
    heading_only,
    sentence_spans,
    sentences,
)


def test_abbreviations_decimals_and_ellipses_keep_a_sentence_whole():
    text = (
        "Use a hardware key, e.g. a YubiKey. Dr. Smith approves it. The U.S. office pays 3.5 times more... Really? Yes."
    )
    assert sentences(text) == [
        "Use a hardware key, e.g. a YubiKey.",
        "Dr. Smith approves it.",
        "The U.S. office pays 3.5 times more...",
        "Really?",
        "Yes.",
    ]


def test_lines_end_sentences_and_lower_case_continues_one():
    text = "# Keys\nRotate them every 12 months\n- at least two keys i.e. a spare. It cost approx. five dollars."
    assert sentences(text) == [
        "# Keys",
        "Rotate them every 12 months",
        "- at least two keys i.e. a spare.",
        "It cost approx. five dollars.",
    ]


def test_a_lower_case_sentence_after_a_marker_and_its_stop_is_a_sentence():
    text = "Keys rotate every 12 months [1]. they are kept in Vault [2]. It cost approx. five dollars."
    assert sentences(text) == [
        "Keys rotate every 12 months [1].",
        "they are kept in Vault [2].",
        "It cost approx. five dollars.",
    ]


def _pysbd_alone(line: str) -> list[str]:
    """pysbd on the whole line at once, lower-case openers joined to the sentence before: the
    reference a long line cut into blocks must reproduce."""
    import pysbd

    out: list[str] = []
    for piece in pysbd.Segmenter(language="en", clean=False).segment(line):
        piece = piece.strip()
        if piece and out and piece[0].islower() and not re.search(r"[\]】] *[.!?]$", out[-1]):
            out[-1] = line[line.index(out[-1]) : line.index(piece, line.index(out[-1])) + len(piece)]
        elif piece:
            out.append(piece)
    return out


def test_a_long_line_is_split_as_pysbd_splits_it_whole():
    corpus = sorted((ROOT / "gold_sets" / "handbook" / "corpus").glob("*.md"))
    prose = [s for path in corpus for s in sentences(path.read_text()) if not s.startswith(("#", "-", "|"))]
    line = " ".join(prose[:120])
    assert len(line) > 10 * BLOCK
    assert sentences(line) == _pysbd_alone(line)


def _lines(texts) -> list[str]:
    return list(dict.fromkeys(m.group() for text in texts for m in re.finditer(r"[^\n]+", text)))


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [s for v in value for s in _strings(v)] if isinstance(value, list) else []


def _agree(lines: list[str]) -> int:
    """How many of `lines` are plain prose; each line is split exactly as pysbd alone splits it."""
    taken = 0
    for line in lines:
        taken += _plain_sentences(line) is not None
        assert _line_sentences.__wrapped__(line) == _split(line, _pysbd_pieces), line[:200]
    return taken


def test_plain_prose_of_the_handbook_is_split_as_pysbd_splits_it():
    handbook = ROOT / "gold_sets" / "handbook"
    texts = [path.read_text() for path in sorted((handbook / "corpus").glob("*.md"))]
    texts += [s for line in (handbook / "gold.jsonl").read_text().splitlines() for s in _strings(json.loads(line))]
    lines = _lines(texts)
    assert _agree(lines) >= len(lines) // 4  # the plain path is taken, not only declined


@pytest.mark.parametrize("source", ["squad", "expertqa"])
def test_plain_prose_of_other_corpora_is_split_as_pysbd_splits_it(source):
    if source == "squad":
        texts = _strings(json.loads(shared_path("squad", "small.json").read_text()))
    else:
        rows = shared_path("expertqa", "rand_val.jsonl").read_text().splitlines()[:60]
        texts = [s for row in rows for s in _strings(json.loads(row))]
    lines = _lines(texts)[:600]
    assert _agree(lines) >= len(lines) // 5


WORDS = "the key rotation policy every quarter owner review service account approved data it is on up".split()
TRICKY = (
    "Dr Mr no vs st ms pp mix civil iii via etc approx inc corp dept est vol fig jan sept mon tue adj col "
    "Dr. e.g. U.S. 3.5 1. a. (a) (b) (ii) (iv) 1) 2) (2019) [1] [2] [doc:0001] [doc:0001]. "
    '"quoted" "Go." Go! -- - , ; : 10:30 50% one/two don\'t \'quoted\' (see below) (RTO) ... ? ! '
    "The A I Keys Vault Operations Jan Sept US UK"
).split()
CAPITALS = "The A I Keys Service Vault Dr Mr Operations Jan Sept US UK".split()


def _generated(count: int, seed: int) -> list[str]:
    """Lines of a few sentences each, mostly plain words with abbreviations, list markers, quotes,
    brackets, dashes and numbers mixed in."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 5)):
            words = [rng.choice(TRICKY) if rng.random() < 0.25 else rng.choice(WORDS) for _ in range(rng.randint(1, 9))]
            opener = [rng.choice(CAPITALS)] if rng.random() < 0.8 else []
            parts.append(" ".join(opener + words) + rng.choice([".", "?", ". ", ".  ", "? "]))
        line = " ".join(parts).strip()
        line = line.rstrip(".?") if rng.random() < 0.3 else line
        lines.append(" " * rng.choice([0, 0, 1, 2]) + line + " " * rng.choice([0, 0, 1, 3]))
    return lines


def test_plain_prose_of_generated_text_is_split_as_pysbd_splits_it():
    lines = _generated(2_000, seed=7)
    assert _agree(lines) >= 150


NAMES = "Okta PagerDuty Windows Engineering Vault CISO UTC AWS EU IC Ms Gen Mon Corp Jan II IV Mix".split()
PARENTHETICALS = ["(EU only)", "(Caab)", "(see the policy)", "(2019)", "(A)", "(a)", "(iv)", "(Mr Smith)", "(50%, a/b)"]


def _generated_with_names(count: int, seed: int) -> list[str]:
    """Lines whose sentences end on names, acronyms, abbreviations pysbd knows and roman numerals,
    some under markdown headings, some closed by a parenthetical (or holding one elsewhere)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 4)):
            words = [rng.choice(WORDS + NAMES) for _ in range(rng.randint(1, 7))]
            parts.append(" ".join([rng.choice(CAPITALS), *words, rng.choice(NAMES)]) + rng.choice([".", "?", ""]))
        line = rng.choice(["", "", "# ", "## "]) + " ".join(parts)
        if rng.random() < 0.4:
            line += rng.choice([" ", "  ", ""]) + rng.choice(PARENTHETICALS) + rng.choice(["", " ", "."])
        elif rng.random() < 0.2:
            words = line.split(" ")
            at = rng.randrange(len(words) + 1)
            line = " ".join([*words[:at], rng.choice(PARENTHETICALS), *words[at:]])
        lines.append(line)
    return lines


def test_prose_ending_on_names_under_headings_or_closed_by_a_parenthetical_is_split_as_pysbd_splits_it():
    lines = _generated_with_names(1_500, seed=11)
    assert _agree(lines) >= 300  # the plain path takes these lines too


def test_a_name_an_acronym_and_a_closing_parenthetical_end_a_sentence():
    for line, expected in [
        ("Access is granted in Okta. The CISO approves it.", ["Access is granted in Okta.", "The CISO approves it."]),
        ("## Keys rotate at 02:00 UTC. Owners use Vault", ["## Keys rotate at 02:00 UTC.", "Owners use Vault"]),
        ("Who approves it? (EU only)", ["Who approves it?", "(EU only)"]),
        ("Keys rotate yearly.  (see the policy) ", ["Keys rotate yearly.", "(see the policy)"]),
    ]:
        assert [line[a:b] for a, b in _plain_sentences(line)] == expected
        assert [line[a:b] for a, b in _split(line, _pysbd_pieces)] == expected


def test_hostile_lines_of_plain_characters_are_split_as_pysbd_splits_them():
    shapes = ["(", "[", '"', "aa [", "aa (", "Keys rotate. ", "a) ", "x' ", "ab."]
    assert _agree([shape * 1_000 + end for shape in shapes for end in ("", ".", " Done.")]) >= 3


@pytest.mark.parametrize(
    "line",
    [
        "(see below) Mr owner rotation? UK corp",  # pysbd ends a sentence after a leading parenthesis
        "Keys rotate -- every quarter the. US corp owner -- Dr review?",  # a stop between dashes stays
        "Keys rotate every quarter, see dept. The owner approves.",  # an abbreviation pysbd knows
        "Keys rotate: (a) monthly (b) yearly. The owner approves.",  # a list
        "Keys rotate at the U.S. office. The owner approves.",
        'He said "rotate it." Then he left.',
        "Keys rotate [see the doc. Then] yearly.",
        "Keys rotate every 3.5 days. The owner approves.",
        "Keys rotate every quarter! The owner approves.",
        "Keys rotate every quarter. the owner approves.",
        "Keys rotate every quarter.[1] The owner approves.",
        "Keys rotate every quarter; see 'Rotation' below.",
        "Keys go to Ms. Jones yearly.",  # an abbreviation pysbd knows, capitalised
        "Keys go to Henry II. Then he left.",  # a roman numeral, upper case
        "Is it on? (EU only) Then more.",  # a parenthetical that does not close the line
        "Is it on? (EU only).",
    ],
)
def test_prose_pysbd_has_rules_for_is_left_to_pysbd(line):
    assert _plain_sentences(line) is None


def test_plain_prose_ends_a_sentence_at_each_stop_before_a_capital():
    line = "  Keys rotate every quarter [keys:0001][keys:0002].  Owners (see the register) approve it? Yes"
    assert [line[a:b] for a, b in _plain_sentences(line)] == [
        "Keys rotate every quarter [keys:0001][keys:0002].",
        "Owners (see the register) approve it?",
        "Yes",
    ]


def test_a_line_without_an_end_is_cut_at_spaces_and_loses_nothing():
    line = "word " * (5 * BLOCK) + "x" * (9 * BLOCK)
    spans = sentence_spans(line)
    assert "".join(line[a:b] for a, b in spans).replace(" ", "") == line.replace(" ", "")
    assert [b for _, b in spans] == sorted(b for _, b in spans)


def test_spans_are_offsets_into_the_text():
    text = "  One sentence here.  Two?\n\nThree!"
    spans = sentence_spans(text, offset=100)
    assert [text[a - 100 : b - 100] for a, b in spans] == ["One sentence here.", "Two?", "Three!"]


def test_no_module_splits_sentences_its_own_way():
    own = re.compile(r"re\.(?:split|compile)\(r?[\"'][^\"']*\(\?<=\[[^\]]*\.[^\]]*\]\)")  # a lookbehind on . ! ?
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "ragaudit").rglob("*.py")
        if path.name != "text.py" and own.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


TRAPS = "Use a hardware key, e.g. a YubiKey. Dr. Smith approves it. The U.S. office pays 3.5 times more."
WHOLE = ["Use a hardware key, e.g. a YubiKey.", "Dr. Smith approves it.", "The U.S. office pays 3.5 times more."]


def test_the_chunker_packs_whole_sentences():
    from ragaudit.core.analyzers import ANALYZERS
    from ragaudit.core.types import Corpus
    from ragaudit.io.corpus import text_document
    from ragaudit.pipelines.reference.chunking import chunk_corpus

    corpus = Corpus({"keys": text_document("keys", TRAPS, markdown=False)})
    chunks = chunk_corpus(corpus, ANALYZERS["lowercase"], chunk_size=1)  # one sentence a chunk
    assert [c.text for c in chunks] == WHOLE


def test_the_answerer_picks_among_whole_sentences():
    from ragaudit.core.analyzers import ANALYZERS
    from ragaudit.core.types import Payload
    from ragaudit.pipelines.reference.answerer import answer

    snippet = Payload(*("keys", "keys/s", "keys-1", "u", None, 20, "h", "e", "a", "r"), text=TRAPS)
    picked = set()
    for seed in range(40):  # sampling hot: every sentence comes up, and only ever whole
        given = answer(
            "Who approves the hardware key?", [snippet], ANALYZERS["lowercase"], seed=seed, key="q", temperature=50.0
        )
        assert given is not None
        picked.update(segment.text for segment in given.segments)
    assert sorted(picked) == sorted(WHOLE)


def test_the_support_scorer_reads_whole_sentences():
    from ragaudit.checks.metrics.support import texts_to_encode, units

    assert units(TRAPS) == WHOLE
    assert set(WHOLE) <= set(texts_to_encode([(TRAPS, ["Keys are issued by the office."])]))


def test_adapters_make_one_segment_per_whole_sentence():
    from ragaudit.adapters.graphrag.cite import split_claims
    from ragaudit.core.llm_citations import segments

    assert [s["text"] for s in segments(TRAPS, [])] == WHOLE
    cited = TRAPS.replace("it.", "it [Data: Sources (1)].")
    assert [c.text for c in split_claims(cited)] == WHOLE


def test_sentence_spans_are_the_ones_pysbd_finds_with_char_spans():
    import pysbd

    from ragaudit.core.text import _pysbd_spans

    segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
    corpus = (ROOT / "gold_sets" / "handbook" / "corpus").glob("*.md")
    texts = [line for path in sorted(corpus) for line in path.read_text().splitlines()]
    texts += [
        "Dr. Smith went to Washington D.C. He said e.g. Vault is fine...  And then?  Yes!!",
        "Hi. Hi. Hi.  Hi.",  # the same sentence again: each span starts past the one before
        "U.S. law caps it at 3.5 approx. five dollars. Mr. X agrees. ",
        "end.   ",
        "a  b.  c",
    ]
    for text in texts:
        assert _pysbd_spans(text) == [(s.start, s.end) for s in segmenter.segment(text)], text


def test_pysbd_is_given_bounded_blocks_that_hold_each_character_once(monkeypatch):
    """pysbd's time grows with the square of what it is given: no line reaches it longer than
    8 × BLOCK, whatever its spaces, and a block is never read twice."""
    import ragaudit.core.text as text

    given: list[int] = []
    segmenter = text._segmenter()

    class Counting:
        def processor(self, block):
            given.append(len(block))
            return segmenter.processor(block)

    monkeypatch.setattr(text, "_segmenter", lambda: Counting())
    text._line_sentences.cache_clear()
    lines = [
        "a?b!" * 5_000,  # sentence ends, no space
        "é" * 20_000,  # no end, no space
        ("ÿ" * 3_000 + " ") * 7,  # spaces too far apart to cut at
        "Keys are rotated every year, e.g. in May. " * 700,  # prose with abbreviations
    ]
    for line in lines:
        given.clear()
        sentence_spans(line)
        assert max(given) <= 8 * BLOCK and sum(given) <= len(line), line[:20]
    given.clear()
    sentence_spans("Keys are rotated every year. " * 700)  # plain prose
    assert given == []
    text._line_sentences.cache_clear()


def test_a_sentence_said_many_times_is_looked_for_once_each_time():
    """pysbd's sentences are found in the block by string search; a block of one short sentence said
    n times once searched from the block's start for each, n²/2 searches in all."""
    from ragaudit.core.text import _pysbd_spans

    class Block(str):
        searches = 0

        def find(self, *args):
            Block.searches += 1
            return super().find(*args)

    block = Block("Go. " * 400)
    spans = _pysbd_spans(block)
    assert spans == [(4 * i, 4 * i + 4) for i in range(400)]
    assert Block.searches <= 2 * len(spans)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["Hi.", "Hi", "Go!", " ", "  ", "a", "Dr.", "3.5", "?", "\n"]), max_size=40))
def test_sentences_said_again_are_found_where_pysbd_finds_them(pieces):
    import pysbd

    from ragaudit.core.text import _pysbd_spans

    block = "".join(pieces)
    segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
    assert _pysbd_spans(block) == [(s.start, s.end) for s in segmenter.segment(block)]


def test_content_stems_are_remembered_for_texts_up_to_a_length():
    from ragaudit.core import text

    text._content_stems.cache_clear()
    short = "Hardware keys are rotated every 12 months."
    stems = ("hardwar", "key", "rotat", "month")  # no stopword ("are", "every"), no bare number
    assert text.content_stems(short) == stems and text.content_stems(short) == stems
    assert text._content_stems.cache_info()[:2] == (1, 1)  # (hits, misses): read once
    long = " ".join([short] * 200)  # past the length a text is remembered up to
    assert len(long) > text._LONGEST_REMEMBERED
    assert text.content_stems(long) == stems * 200
    assert text._content_stems.cache_info().currsize == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# Computational complexity theory", True),
        ("Backup policy\n=============\n", True),
        ("Incident response", True),
        ("Backups are kept for 13 months.", False),  # a sentence
        ("Backups are kept for:", False),  # a sentence running on into a list
        ("Retention\nBackups are kept for 13 months.", False),  # a heading and its text
        ("one two three four five six seven eight nine ten eleven twelve thirteen", False),  # too long
        ("", False),
    ],
)
def test_a_heading_is_one_short_line_that_ends_no_sentence(text, expected):
    assert heading_only(text) is expected
