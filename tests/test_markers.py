"""The one citation-marker grammar, and the modules that read markers through it: the late-citation
rule, the quantity reader, the support scorer's text cleaning and the adapters."""

import re

import pytest
from helpers import ROOT

from ragaudit.adapters.graphrag.cite import parse_blocks
from ragaudit.checks.metrics.quantities import hallucinated, mentions
from ragaudit.checks.validation.answer import citations_trail
from ragaudit.core.markers import FORMS as MARKER_FORMS
from ragaudit.core.markers import MARKER, form, marker_ids, markers
from ragaudit.core.text import clean

# (marker, the source ids it names)
FORMS = [
    ("[hb24-sec-keys-0007]", ["hb24-sec-keys-0007"]),
    ("[3]", ["3"]),
    ("[1, 2]", ["1", "2"]),
    ("[ 1 ; 22 ]", ["1", "22"]),
    ("[1 2]", ["1", "2"]),
    ("[kb-7 kb-9; faq]", ["kb-7", "kb-9", "faq"]),
    ("[faq]", ["faq"]),
    ("[^1]", ["^1"]),
    ("[^4^]", ["^4^"]),
    ("[doc:3]", ["doc:3"]),
    ("[5,+more]", ["5", "+more"]),
    ("[Data: Reports (4, 7); Entities (1, +more)]", []),
    ("[data:sources (12)]", []),
    ("【4:0†source】", []),
]


@pytest.mark.parametrize("marker, ids", FORMS)
def test_each_form_is_one_marker_with_its_ids(marker, ids):
    [found] = MARKER.finditer(f"Keys rotate every 12 months {marker}.")
    assert (found.group(), marker_ids(found)) == (marker, ids)


@pytest.mark.parametrize(
    "text",
    [
        "[the handbook](https://example.com/handbook)",  # a markdown link
        "[1,\n2]",  # across lines
        "[" + "x" * 201 + "]",  # longer than 200 characters
        "[Cl−] ions",  # a character no id has
        "[]",
        "[see below]",  # words in brackets, separated by blanks alone
        "[citation needed]",
        "[Figure 3]",
    ],
)
def test_what_is_not_a_marker(text):
    assert MARKER.search(text) is None


def test_graphrag_blocks_are_the_grammars_data_references():
    text = "Scrooge kept it cold [Data: Sources (0, 2)] and [Data: Reports (5)]."
    assert [(b.start, b.end) for b in parse_blocks(text)] == [m.span() for m in MARKER.finditer(text)]


@pytest.mark.parametrize("marker", [m for m, _ in FORMS])
def test_markers_standing_after_the_answer_are_late_and_inline_ones_are_not(marker):
    assert citations_trail(f"Keys rotate every 12 months. Admins keep two. {marker}")
    assert not citations_trail(f"Keys rotate every 12 months {marker}. Admins keep two {marker}.")


@pytest.mark.parametrize("marker", [m for m, _ in FORMS])
@pytest.mark.parametrize(
    "answer",
    [
        "Keys rotate every 12 months. {marker}",  # after the full stop, as LLMs often place it
        "Keys rotate every 12 months.{marker}",
        "Keys rotate every 12 months {marker}.",
        "Redirect every request to HTTPS:: {marker}",  # a final sentence without its stop
        "Keys rotate every 12 months {marker}",
        "Keys rotate every 12 months. {marker} Admins keep two. {marker}",
        "Keys rotate every 12 months.{marker}{marker} Admins keep two.{marker}",
    ],
)
def test_a_marker_after_its_sentence_cites_it_inline(marker, answer):
    assert not citations_trail(answer.format(marker=marker))


@pytest.mark.parametrize("marker", [m for m, _ in FORMS])
def test_numbers_inside_markers_are_not_quantities(marker):
    segment = f"Keys rotate every 12 months {marker}."
    assert [m.surface for m in mentions(segment)] == ["12 months"]
    assert hallucinated(segment, ["Keys rotate every 12 months."]) == []


@pytest.mark.parametrize("marker", [m for m, _ in FORMS])
def test_the_support_scorer_reads_the_sentence_without_its_markers(marker):
    assert clean(f"Keys rotate every 12 months {marker}.") == "Keys rotate every 12 months ."


def test_bracketed_words_that_are_not_a_list_of_ids_stay_text():
    segment = "The ratio [Equation 9.9 of chapter (2)] is 3.5."
    assert {m.surface for m in mentions(segment)} >= {"9.9", "3.5"}


def test_no_module_writes_its_own_marker_pattern():
    """A complement to the tests above: a regex that opens with a literal bracket is a marker pattern."""
    own = re.compile(r"re\.compile\(\s*r?[\"'] ?\\\[")
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "ragaudit").rglob("*.py")
        if path.name != "markers.py" and own.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


# Brackets that technical documentation writes and answers over it quote, none of which cites a
# source: the shapes of the Flask, Click and requests docs and of pyproject/tox files
# (bench/markers.py counts them over those documentation sets).
NOT_CITING = [
    "Install it with `pip install flask[async]` to use async views.",
    "Install flask[async] to use async views.",
    "Use requests[use_chardet_on_py3] to keep chardet.",
    "Read it with row[key] and data[name].",
    'Add this to pyproject.toml:\n\n[build-system]\nrequires = ["flit_core<4"]\n\n[project.scripts]\nflask = "flask.cli:main"',
    '[tool.pytest.ini_options]\naddopts = "-q"\n\n[[tool.uv.sources]]\nname = "x"',
    "[testenv]\ncommands = pytest\n\n[flake8]\nmax-line-length = 88",
    '```toml\n[project]\nname = "app"\n```',
    "~~~\nrows[1]\n~~~",
    "Get the row by index::\n\n    >>> r[1]\n    'John'",
    ".. code-block:: python\n    :caption: ``tests/test_blog.py``\n\n    count = db.execute(q).fetchone()[1]",
    ">>> requests.get(url)\n<Response [200]>",
    "The call returns <Response [200]> on success.",
    "$ pip install requests[socks]",
    "Usage: hello [OPTIONS] COMMAND [ARGS]...",
    "The flag shows [default: 1] in the help text.",
    "Logged at [2022-01-25T08:52Z] and again at [08:52:10].",
    "See the footnote [#]_ below.",
]


@pytest.mark.parametrize("text", NOT_CITING)
def test_brackets_that_cite_nothing_are_not_markers(text):
    retrieved = frozenset({"flask-docs:0001", "flask-docs:0002", "quickstart"})
    assert [m.group() for m in markers(text, names=retrieved)] == []


@pytest.mark.parametrize(
    "text, read",
    [
        ("Keys rotate every 12 months[1].", ["[1]"]),  # a number glued to a word, as LLMs write it
        ("Keys rotate every 12 months.[1][2]", ["[1]", "[2]"]),
        ("Install `flask[async]` for async views [2].", ["[2]"]),
        ("Sources:\n[1]", ["[1]"]),  # a number alone on its line
        ("See [quickstart] for the rest.", ["[quickstart]"]),  # names a retrieved document
        ("See [flask-docs:0099].", ["[flask-docs:0099]"]),  # an id with a digit: a dangling citation
        ("Latency < 200 ms [1] and throughput > 5 [2].", ["[1]", "[2]"]),
    ],
)
def test_markers_beside_code_and_brackets_are_still_read(text, read):
    retrieved = frozenset({"flask-docs:0001", "flask-docs:0002", "quickstart"})
    assert [m.group() for m in markers(text, names=retrieved)] == read


def test_a_config_may_limit_the_forms_read():
    text = "Keys rotate yearly [faq] [1] 【2†source】 [Data: Reports (3)]."
    names = frozenset({"faq"})
    assert [form(m) for m in markers(text, names=names)] == ["id", "number", "file", "data"]
    assert [m.group() for m in markers(text, names=names, forms={"number"})] == ["[1]"]


def test_no_form_list_but_the_grammars():
    from ragaudit.io.config_schema import _MARKER_FORMS

    assert _MARKER_FORMS == MARKER_FORMS


DOCS = """# Installing

## Extras

Install flask[async] to run async views.
The requests[socks] extra adds SOCKS proxies.

## Packaging

The build backend is named in the [build-system] table of pyproject.toml.
"""
ASYNC = "Install flask[async] to run async views."
BACKEND = "The build backend is named in the [build-system] table of pyproject.toml."


def _docs_run(tmp_path, answers: list[str], *, extra: str = ""):
    """A replay run over a small documentation corpus: one question, one run per answer."""
    import json

    from helpers import invoke, payload_for, run_dir_of

    from ragaudit.io.corpus import load_corpus

    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir(parents=True)
    (corpus_dir / "install.md").write_text(DOCS, encoding="utf-8")
    corpus = load_corpus(corpus_dir)
    start = DOCS.index(ASYNC)
    gold = {
        "qid": "ASYNC-1",
        "question": "What do I install to run async views?",
        "paraphrases": [],
        "doc_id": "install",
        "section_id": "installing/extras",
        "anchor": {"start": start, "end": start + len(ASYNC), "unit": "char", "text": ASYNC},
    }
    (tmp_path / "gold.jsonl").write_text(json.dumps(gold) + "\n", encoding="utf-8")
    retrieved = [
        payload_for(
            corpus, "install", ASYNC, snippet_id="install:0001", section_id="installing/extras", score=0.9, rank=1
        ),
        payload_for(
            corpus, "install", BACKEND, snippet_id="install:0002", section_id="installing/packaging", score=0.5, rank=2
        ),
    ]
    lines = [
        json.dumps(
            {
                "qid": "ASYNC-1",
                "variant": 0,
                "seed": seed,
                "query": gold["question"],
                "retrieved": retrieved,
                "answer": {"text": text},
            }
        )
        for seed, text in enumerate(answers, start=1)
    ]
    (tmp_path / "rec.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    seeds = list(range(1, len(answers) + 1))
    config = tmp_path / "audit.toml"
    config.write_text(
        f'[audit]\ngold = "gold.jsonl"\ncorpus = "corpus"\nparaphrases = 1\nseeds = {seeds}\nout = "runs"\n{extra}\n'
        '[embedder]\nmodel = "hashing"\n\n[gold]\nignore = ["gold_section_item_count"]\n\n'
        '[[pipelines]]\nname = "docs-app"\nkind = "replay"\ntraces = "rec.jsonl"\n',
        encoding="utf-8",
    )
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    run = run_dir_of(result)
    issues = [json.loads(line) for line in (run / "issues.jsonl").read_text().splitlines()]
    report = json.loads((run / "report.json").read_text())
    runs = {r["seed"]: r for q in report["questions"] for r in q["runs"]}
    return issues, runs


def test_answers_quoting_brackets_from_documentation_cite_only_with_their_markers(tmp_path):
    issues, runs = _docs_run(
        tmp_path,
        [
            f"{ASYNC} [1]",  # the gold sentence holds flask[async]: a perfect answer
            "Run `pip install flask[async]` and async views work [1].",
            'Name the backend in pyproject.toml:\n\n[build-system]\nrequires = ["flit_core<4"]\n\nas the docs say [2].',
            "Use requests[socks] for proxies and flask[async] for async views [1].",
        ],
    )
    assert [i for i in issues if i["code"] in ("dangling_citation", "cite_after_answer")] == []
    assert runs[1]["correct"], runs[1]["why"]
    assert runs[1]["citations"] == ["install:0001"]
    assert runs[2]["citations"] == ["install:0001"]
    assert runs[3]["citations"] == ["install:0002"]


def test_an_app_citing_by_number_alone_says_so_in_its_config(tmp_path):
    answers = ["Install the extra [install] to run async views [1]."]
    issues, runs = _docs_run(tmp_path / "all", answers)
    assert runs[1]["citations"] == ["install:0001"]  # [install] names the retrieved document
    issues, runs = _docs_run(tmp_path / "number", answers, extra='markers = ["number"]')
    assert runs[1]["citations"] == ["install:0001"]
    assert [c["text"] for c in runs[1]["claims"]] == ["Install the extra [install] to run async views [1]."]
    assert [i["code"] for i in issues if i["severity"] == "error"] == []
