"""Markup and template syntax in a qid, a question, a pipeline name, an answer and a snippet stay
text in report.html, compare.html and faults.html: escaped where they are shown, never a tag or an
attribute of the page, and `{{ 7*7 }}` shown as written, not evaluated."""

import json
from html.parser import HTMLParser

import pytest
from helpers import invoke, run_dir_of

HOSTILE = '<script>alert(1)</script>"><img onerror=x>{{ 7*7 }}'
RAW = ("<script>alert(1)", '"><img', "<img onerror")  # what would become markup if left unescaped
QID = f"KEYS-1 {HOSTILE}"
QUESTION = f"How often are hardware keys rotated? {HOSTILE}"
PIPELINE = f"bm25 {HOSTILE}"
SENTENCE = f"Hardware keys are rotated every 12 months {HOSTILE}."
CORPUS = f"""# Security

## Keys

{SENTENCE}

## Passwords

Passwords are rotated every 90 days.

## Badges

Lost badges are reported to the front desk within one day.
"""


class Page(HTMLParser):
    """The page as a browser reads it: its tags, its text nodes and attribute values (entities
    decoded) outside scripts, and the content of each script."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.texts: list[str] = []
        self.attributes: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(source)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes.extend(value for _, value in attrs if value is not None)
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        (self.scripts if self._in_script else self.texts).append(data)


def _item(qid: str, question: str, sentence: str, section: str) -> dict:
    start = CORPUS.index(sentence)
    return {
        "qid": qid,
        "question": question,
        "paraphrases": [],
        "doc_id": "security",
        "section_id": f"security/{section}",
        "anchor": {"start": start, "end": start + len(sentence), "unit": "char", "text": sentence},
    }


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile-html")
    (tmp / "corpus").mkdir()
    (tmp / "corpus" / "security.md").write_text(CORPUS)
    items = [
        _item(QID, QUESTION, SENTENCE, "keys"),
        _item("PWD-1", "How often are passwords rotated?", "Passwords are rotated every 90 days.", "passwords"),
        _item("BADGE-1", "Where are lost badges reported?", CORPUS.split("\n\n")[-1].strip(), "badges"),
    ]
    (tmp / "gold.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    config = tmp / "audit.toml"
    config.write_text(
        '[audit]\ngold = "gold.jsonl"\ncorpus = "corpus"\nparaphrases = 1\nseeds = [1]\nout = "runs"\n\n'
        "[gate]\ndelta_s_max = 0.0\n\n"  # every question fails a check: the gate table links each one
        '[embedder]\nmodel = "hashing"\n\n'
        f'[[pipelines]]\nname = {json.dumps(PIPELINE)}\nkind = "reference"\nretriever = "bm25"\nk = 2\n\n'
        '[[pipelines]]\nname = "tfidf"\nkind = "reference"\nretriever = "tfidf"\nk = 2\n'
    )
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    run_dir = run_dir_of(result)
    faults = invoke("faults", run_dir, "--only", "stale_revision", "--out", tmp / "faults")
    assert faults.exit_code in (0, 1), faults.output
    report = json.loads((run_dir / "report.json").read_text())
    return report, {
        "report.html": (run_dir / "report.html").read_text(),
        "compare.html": (run_dir / "compare.html").read_text(),
        "faults.html": (tmp / "faults" / "faults.html").read_text(),
    }


def test_the_run_carries_the_hostile_text_everywhere(pages):
    """The premise: the hostile string reached every field the pages could show."""
    report, _ = pages
    mine = [q for q in report["questions"] if q["pipeline"] == PIPELINE]
    assert {q["qid"] for q in mine} >= {QID} and QUESTION in {q["question"] for q in mine}
    runs = [r for q in mine for r in q["runs"]]
    assert any(HOSTILE in c["text"] for r in runs for c in r["claims"])  # the extractive answer states it
    assert any(HOSTILE in s["text"] for s in report["snippets"].values())


@pytest.mark.parametrize("name", ["report.html", "compare.html", "faults.html"])
def test_hostile_text_is_never_markup(pages, name):
    _, found = pages
    source = found[name]
    for raw in RAW:
        assert raw not in source, raw
    page = Page(source)
    assert "img" not in page.tags
    assert page.tags.count("script") == (2 if name == "report.html" else 0)  # the data block and the code
    shown = page.texts + page.attributes
    assert PIPELINE in shown  # a whole text node or attribute: escaped, shown as written, {{ 7*7 }} kept


def test_report_html_shows_qid_and_question_as_written(pages):
    _, found = pages
    page = Page(found["report.html"])
    assert QID in page.texts and QUESTION in page.texts  # the question table's cells
    assert QID in page.attributes  # the gate table's question links carry it as data-q
    data = page.scripts[0]
    assert "<" not in data and ">" not in data and "&" not in data
    drill = json.loads(data)
    mine = [q for q in drill["questions"] if q["qid"] == QID and q["pipeline"] == PIPELINE]
    assert mine and mine[0]["question"] == QUESTION
    assert any(HOSTILE in c["text"] for r in mine[0]["runs"] for c in r["claims"])
    assert any(HOSTILE in s["text"] for s in drill["snippets"].values())
