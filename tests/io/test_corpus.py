import json

import pytest

from ragaudit.errors import InputError
from ragaudit.io.corpus import PREAMBLE, load_corpus, markdown_sections, revision, slugify


def test_directory_doc_ids_sections_and_rev(corpus):
    assert sorted(corpus.documents) == ["policies", "team/on-call"]
    doc = corpus["policies"]
    assert [s.section_id for s in doc.sections] == [
        "policies", "policies/security", "policies/security/keys", "policies/security/passwords"]
    keys = corpus.section("policies", "policies/security/keys")
    assert doc.text[keys.start:].startswith("### Keys")
    assert doc.text[keys.end:].startswith("### Passwords")
    assert doc.rev == revision(doc.text) and len(doc.rev) == 12
    assert doc.source_url.startswith("file:///") and doc.source_url.endswith("policies.md")


def test_preamble_fences_and_repeated_headings():
    text = "intro line\n# A\n```\n# not a heading\n```\n## B\n## B\n### C ###\n"
    sections = markdown_sections(text)
    assert [s.section_id for s in sections] == [PREAMBLE, "a", "a/b", "a/b-2", "a/b-2/c"]
    assert sections[0].start == 0 and sections[0].end == text.index("# A")
    assert sections[-1].end == len(text)
    assert all(a.end == b.start for a, b in zip(sections, sections[1:]))


def test_slugify_folds_and_joins():
    assert slugify("Données & Clés — v2") == "donnees-cles-v2"
    assert slugify("***") == "section"


def test_txt_file_is_one_preamble_section(tmp_path):
    (tmp_path / "notes.txt").write_text("# not markdown here\nplain", encoding="utf-8")
    doc = load_corpus(tmp_path)["notes"]
    assert [(s.section_id, s.start, s.end) for s in doc.sections] == [(PREAMBLE, 0, len(doc.text))]


def test_crlf_text_is_kept_exactly(tmp_path):
    (tmp_path / "w.md").write_bytes(b"# T\r\nbody\r\n")
    assert load_corpus(tmp_path)["w"].text == "# T\r\nbody\r\n"


def test_directory_duplicate_doc_ids(tmp_path):
    (tmp_path / "a.md").write_text("# A", encoding="utf-8")
    (tmp_path / "a.txt").write_text("A", encoding="utf-8")
    with pytest.raises(InputError, match="duplicate doc_id 'a'"):
        load_corpus(tmp_path)


def test_jsonl_corpus_reports_every_defect(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join([
        json.dumps({"doc_id": "a", "text": "alpha beta", "sections": [{"section_id": "s", "start": 0, "end": 5}],
                    "pages": [[0, 5], [5, 10]], "rev": "r1"}),
        json.dumps({"doc_id": "a", "text": "again"}),
        "{not json",
        json.dumps({"doc_id": 3, "text": "x"}),
        json.dumps({"doc_id": "b", "text": "short", "sections": [{"section_id": "s", "start": 2, "end": 50}]}),
    ]) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_corpus(path)
    messages = [str(p) for p in caught.value.problems]
    assert len(messages) == 4
    assert messages[0] == f"{path}:2: $.doc_id: duplicate doc_id 'a': expected unique ids, found it first on line 1"
    assert messages[1].startswith(f"{path}:3: expected a JSON value")
    assert messages[2] == f"{path}:4: $.doc_id: expected a string, found number 3"
    assert messages[3] == f"{path}:5: $.sections[0]: expected 0 <= start < end <= 5 (text length), found [2, 50]"


def test_jsonl_corpus_fields(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"doc_id": "a", "text": "alpha beta", "rev": "r1", "pages": [[0, 5], [5, 10]]}) + "\n",
                    encoding="utf-8")
    doc = load_corpus(path)["a"]
    assert doc.rev == "r1" and doc.page_of(7) == 2 and doc.sections[0].section_id == PREAMBLE


def test_missing_and_empty_corpus(tmp_path):
    with pytest.raises(InputError, match="no such corpus"):
        load_corpus(tmp_path / "nope")
    with pytest.raises(InputError, match="found none"):
        load_corpus(tmp_path)
    (tmp_path / "c.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="empty file"):
        load_corpus(tmp_path / "c.jsonl")
