"""reStructuredText corpora: section titles found as docutils finds them (docutils itself is the
reference), levels by adornment style, section ids by the Markdown rules, and char offsets that
validation and gold checks hold `.rst` sections to, in a Sphinx docs folder loaded as it is."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import invoke, payload_for
from hypothesis import given
from hypothesis import strategies as st

from ragaudit.io.corpus import load_corpus, markdown_sections, rst_sections
from ragaudit.io.rst import rst_headings

docutils = pytest.importorskip("docutils")

SPHINX = Path(__file__).resolve().parent / "fixtures" / "sphinx"
FIXTURES = sorted(SPHINX.glob("*.rst"))


def docutils_titles(text: str) -> list[tuple[int, str]]:
    """(level from 1, title) of every section docutils builds, in document order (no title
    promotion: the document's own title is a level 1 section like any other)."""
    from docutils import nodes
    from docutils.core import publish_doctree

    settings = {"report_level": 5, "halt_level": 5, "doctitle_xform": False, "sectsubtitle_xform": False}
    tree = publish_doctree(text, settings_overrides=settings)
    found: list[tuple[int, str]] = []

    def walk(node, depth: int) -> None:
        for child in node.children:
            if isinstance(child, nodes.section):
                found.append((depth, child[0].astext()))
                walk(child, depth + 1)
            elif isinstance(child, nodes.Element):
                walk(child, depth)

    walk(tree, 1)
    return found


def as_markdown_ids(titles: list[tuple[int, str]]) -> list[str]:
    """The section ids a Markdown file with these headings has (the rules .rst must share)."""
    text = "".join(f"{'#' * level} {title}\n\nText.\n\n" for level, title in titles)
    return [s.section_id for s in markdown_sections(text)]


def titles_of(text: str) -> list[tuple[int, str]]:
    return [(level, title) for _, level, title in rst_headings(text)]


def test_the_fixtures_are_real_sphinx_pages_with_their_licence():
    assert [f.name for f in FIXTURES] == ["ipaddress.rst", "quickstart.rst"]
    for fixture in FIXTURES:
        head = fixture.read_text(encoding="utf-8").splitlines()[:4]
        assert head[0].startswith(".. Copied unchanged") and "licen" in " ".join(head)
        assert len(fixture.read_text(encoding="utf-8").splitlines()) > 250


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_titles_and_levels_are_docutils_own(fixture):
    text = fixture.read_text(encoding="utf-8")
    expected = docutils_titles(text)
    assert len(expected) >= 8
    assert titles_of(text) == expected
    sections = [s for s in rst_sections(text) if s.section_id != "_preamble"]
    assert [s.section_id for s in sections] == as_markdown_ids(expected)
    assert [s.title for s in sections] == [title for _, title in expected]


def test_overline_and_underline_is_a_style_of_its_own():
    text = (
        "=======\nHandbook\n=======\n\nIntro.\n\n"  # '=' over and under: level 1 (seen first)
        "Keys\n====\n\nHardware keys are rotated every 12 months.\n\n"  # '=' under only: level 2
        "Rotation\n--------\n\nEvery year.\n\n"  # '-': level 3
        "Passwords\n=========\n\nEvery 90 days.\n\n"  # '=' under only again: level 2
        "=========\n  Inset  \n=========\n\nBack at level 1.\n"  # over and under, an inset title
    )
    expected = [(1, "Handbook"), (2, "Keys"), (3, "Rotation"), (2, "Passwords"), (1, "Inset")]
    assert docutils_titles(text) == expected
    assert titles_of(text) == expected
    sections = rst_sections(text)
    assert [s.section_id for s in sections] == [
        "handbook",
        "handbook/keys",
        "handbook/keys/rotation",
        "handbook/passwords",
        "inset",
    ]
    # a section starts at its title's first line: the overline when there is one
    assert text[sections[0].start :].startswith("=======\nHandbook")
    assert text[sections[4].start :].startswith("=========\n  Inset")
    assert text[sections[1].start : sections[1].end] == "Keys\n====\n\nHardware keys are rotated every 12 months.\n\n"


def test_what_is_not_a_title_stays_text():
    text = (
        "Guide\n=====\n\n"
        "A paragraph whose second line\nis followed by an adornment\n-----------------------------\n\n"
        "----------\n\n"  # a transition
        "=====  =====\nA      B\n=====  =====\n\n"  # a simple table
        "Hi there\n--\n\n"  # an underline shorter than its title and than four characters
        ".. note::\n\n   Indented\n   --------\n\n"  # a directive's body
        "Literal::\n\n    Code\n    ====\n\n"  # a literal block
        "Short\n----\n\n"  # an underline of four characters counts, even under a longer title
        "Two\n===\n"  # the first style again: level 1
    )
    expected = [(1, "Guide"), (2, "Short"), (1, "Two")]
    assert docutils_titles(text) == expected
    assert titles_of(text) == expected
    assert [s.section_id for s in rst_sections(text)] == ["guide", "guide/short", "two"]


PARAGRAPH = st.sampled_from(
    [
        "Hardware keys are rotated every 12 months.",
        "See :ref:`keys` and ``rotate --all``.\nA second line of the paragraph.",
        ".. note::\n\n   Indented body\n   =============",
        "Example::\n\n    code\n    ----",
        "* a list item\n* another one",
    ]
)
TITLE = st.text(alphabet="abcdefghij KLMN0123", min_size=1, max_size=20).map(str.strip).filter(bool)
STYLES = [("=", True), ("=", False), ("-", False), ("~", False), ("*", True), ("^", False)]


@st.composite
def rst_documents(draw) -> str:
    """Random sections whose levels never skip one (docutils rejects that), each level with its own
    adornment style, separated by paragraphs, transitions and other blocks."""
    styles = draw(st.permutations(STYLES))
    blocks, depth = [], 0
    for _ in range(draw(st.integers(1, 8))):
        level = draw(st.integers(1, depth + 1 if depth < len(styles) else depth))
        depth = level
        char, over = styles[level - 1]
        title = draw(TITLE)
        width = max(len(title), 4) + draw(st.integers(0, 3))  # a lone `*` or `-` line is a bullet
        bar = char * width
        blocks.append(f"{bar}\n{title}\n{bar}" if over else f"{title}\n{bar}")
        for _ in range(draw(st.integers(0, 2))):
            blocks.append(draw(PARAGRAPH))
        blocks.append("Closing words.")
    return "\n\n".join(blocks) + "\n"


@given(rst_documents())
def test_any_document_is_read_as_docutils_reads_it(text):
    assert titles_of(text) == docutils_titles(text)
    sections = rst_sections(text)
    assert sections[0].start == 0 and sections[-1].end == len(text)
    assert all(a.end == b.start for a, b in zip(sections, sections[1:]))
    assert all(s.start < s.end for s in sections)


# ---- a Sphinx docs folder, loaded as it is ----------------------------------------------------


def sphinx_folder(root: Path) -> dict[str, str]:
    """A Sphinx project's docs folder: conf.py, Makefile, a static file, index.rst with a toctree,
    the two real pages and a page for each of their chapters (cut at the chapter's title, a real
    page's shape), 20 .rst files in all. Returns each document's text by doc_id."""
    pages: dict[str, str] = {}
    for fixture in FIXTURES:
        text = fixture.read_text(encoding="utf-8")
        pages[fixture.stem] = text
        cuts = [s for s in rst_sections(text) if s.section_id.count("/") in (1, 2)]
        for section in cuts:
            pages[f"{fixture.stem}/{section.section_id.rsplit('/', 1)[1]}"] = text[section.start : section.end]
    names = sorted(pages)[:19]
    toctree = "".join(f"   {name}\n" for name in names)
    pages = {name: pages[name] for name in names}
    pages["index"] = f"Welcome\n=======\n\n.. toctree::\n   :maxdepth: 2\n\n{toctree}"
    for doc_id, text in pages.items():
        path = root / f"{doc_id}.rst"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / "conf.py").write_text('project = "docs"\nextensions = ["sphinx.ext.autodoc"]\n')
    (root / "Makefile").write_text("html:\n\tsphinx-build -b html . _build\n")
    (root / "_static").mkdir()
    (root / "_static" / "custom.css").write_text("body { margin: 0 }\n")
    return pages


def test_a_sphinx_docs_folder_loads_without_conversion(tmp_path):
    root = tmp_path / "docs"
    pages = sphinx_folder(root)
    assert len(list(root.rglob("*.rst"))) == 20
    corpus = load_corpus(root)
    assert sorted(corpus.documents) == sorted(pages)
    for doc_id, text in pages.items():
        document = corpus[doc_id]
        assert document.text == text
        titled = [s for s in document.sections if s.section_id != "_preamble"]
        expected = docutils_titles(text)
        assert [s.title for s in titled] == [t for _, t in expected], doc_id
        assert [s.section_id for s in titled] == as_markdown_ids(expected), doc_id
    assert corpus["index"].title == "Welcome"
    assert corpus["quickstart/echoing"].sections[0].section_id == "echoing"


def test_validation_and_gold_checks_hold_rst_sections_to_their_offsets(tmp_path, valid_trace):
    root = tmp_path / "docs"
    sphinx_folder(root)
    corpus = load_corpus(root)
    doc_id, sentence = "ipaddress", "Network objects cannot have any host bits set."
    section = "an-introduction-to-the-ipaddress-module/creating-address-network-interface-objects/defining-networks"
    other = "an-introduction-to-the-ipaddress-module/comparisons"
    start = corpus[doc_id].text.index(sentence)
    assert corpus[doc_id].section(section).start <= start < corpus[doc_id].section(section).end

    def trace_file(section_id: str) -> Path:
        payload = payload_for(
            corpus, doc_id, sentence, snippet_id="ip-1", section_id=section_id, score=0.9, rank=1, analyzer="lowercase"
        )
        payload["source_url"] = f"{corpus[doc_id].source_url}#{section_id}"
        trace = {**valid_trace, "retrieved": [payload], "query": "Can a network object have host bits set?"}
        trace["answer"] = {
            "raw": json.dumps({"citations": ["ip-1"], "answer": sentence}),
            "text": f"{sentence[:-1]} [ip-1].",
            "segments": [{"seg": 1, "text": sentence, "citations": ["ip-1"]}],
        }
        path = tmp_path / f"trace-{section_id.count('/')}.jsonl"
        path.write_text(json.dumps(trace) + "\n", encoding="utf-8")
        return path

    good = invoke("validate", trace_file(section), "--corpus", root, "--format", "json")
    report = json.loads(good.output)
    assert good.exit_code == 0, report["issues"]
    bad = invoke("validate", trace_file(other), "--corpus", root, "--format", "json")
    assert bad.exit_code == 1 and json.loads(bad.output)["counts"].get("section_mismatch") == 1

    def gold_file(section_id: str) -> Path:
        item = {
            "qid": "IP-1",
            "question": "Can a network object have host bits set?",
            "paraphrases": ["May an IP network object carry host bits?", "Are host bits allowed in a network?"],
            "doc_id": doc_id,
            "section_id": section_id,
            "anchor": {"start": start, "end": start + len(sentence), "unit": "char", "text": sentence},
        }
        path = tmp_path / "gold.jsonl"
        path.write_text(json.dumps(item) + "\n", encoding="utf-8")
        return path

    checked = invoke("gold", "check", gold_file(section), "--corpus", root)
    assert checked.exit_code == 0, checked.output
    outside = invoke("gold", "check", gold_file(other), "--corpus", root)
    assert outside.exit_code == 1 and "error gold_anchor_outside_section" in outside.output


def test_the_guides_example_has_the_sections_it_states():
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guide.md").read_text(encoding="utf-8")
    block, stated = re.search(r"  ```rst\n(.*?)  ```\n\n  has the sections (.*?)\.\n", guide, re.S).groups()
    text = "".join(line[2:] + "\n" for line in block.splitlines())
    assert [s.section_id for s in rst_sections(text)] == re.findall(r"`([^`]+)`", stated)
    assert titles_of(text) == docutils_titles(text)
