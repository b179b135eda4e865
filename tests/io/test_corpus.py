import json

import pytest

from ragaudit.core.errors import InputError
from ragaudit.io.corpus import (
    PREAMBLE,
    load_corpus,
    markdown_sections,
    revision,
    slugify,
)


def test_directory_doc_ids_sections_and_rev(corpus):
    assert sorted(corpus.documents) == ["policies", "team/on-call"]
    doc = corpus["policies"]
    assert [s.section_id for s in doc.sections] == [
        "policies",
        "policies/security",
        "policies/security/keys",
        "policies/security/passwords",
    ]
    keys = corpus.section("policies", "policies/security/keys")
    assert doc.text[keys.start :].startswith("### Keys")
    assert doc.text[keys.end :].startswith("### Passwords")
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
    path.write_text(
        "\n".join(
            [
                json.dumps(
                    {
                        "doc_id": "a",
                        "text": "alpha beta",
                        "sections": [{"section_id": "s", "start": 0, "end": 5}],
                        "pages": [[0, 5], [5, 10]],
                        "rev": "r1",
                    }
                ),
                json.dumps({"doc_id": "a", "text": "again"}),
                "{not json",
                json.dumps({"doc_id": 3, "text": "x"}),
                json.dumps({"doc_id": "b", "text": "short", "sections": [{"section_id": "s", "start": 2, "end": 50}]}),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
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
    path.write_text(
        json.dumps({"doc_id": "a", "text": "alpha beta", "rev": "r1", "pages": [[0, 5], [5, 10]]}) + "\n",
        encoding="utf-8",
    )
    doc = load_corpus(path)["a"]
    assert doc.rev == "r1" and doc.page_of(7) == 2 and doc.sections[0].section_id == PREAMBLE


def test_jsonl_corpus_titles_of_document_and_sections(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text(
        json.dumps(
            {
                "doc_id": "a",
                "text": "alpha beta",
                "title": "Doc",
                "sections": [
                    {"section_id": "s1", "start": 0, "end": 5, "title": "First"},
                    {"section_id": "s2", "start": 6, "end": 10},
                ],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    doc = load_corpus(path)["a"]
    assert doc.title == "Doc" and [(s.section_id, s.title) for s in doc.sections] == [("s1", "First"), ("s2", "")]


def test_missing_and_empty_corpus(tmp_path):
    with pytest.raises(InputError, match="no such corpus"):
        load_corpus(tmp_path / "nope")
    with pytest.raises(InputError, match="found none"):
        load_corpus(tmp_path)
    (tmp_path / "c.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="empty file"):
        load_corpus(tmp_path / "c.jsonl")


# ---- hostile corpora --------------------------------------------------------------------------


def corpus_problems(tmp_path, *documents) -> list[str]:
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b"\n".join(d if isinstance(d, bytes) else json.dumps(d).encode() for d in documents) + b"\n")
    with pytest.raises(InputError) as caught:
        load_corpus(path)
    return [str(p).removeprefix(f"{path}:") for p in caught.value.problems]


def section(sid, start, end):
    return {"section_id": sid, "start": start, "end": end}


def test_sections_must_be_ordered_disjoint_unique_and_inside_the_text(tmp_path):
    text = "0123456789" * 3
    problems = corpus_problems(
        tmp_path,
        {
            "doc_id": "a",
            "text": text,
            "sections": [
                section("s1", 0, 10),
                section("s2", 5, 15),
                section("s1", 10, 20),
                section("s3", 25, 31),
                section("s4", 20, 30),
                section("s5", 2, 4),
                section("s6", True, 4),
                section("s7", 0.0, 4),
            ],
        },
    )
    assert problems == [
        "1: $.sections[1]: expected sections in text order without overlap (starting at or after 10, "
        "the end of 's1'), found [5, 15]",
        "1: $.sections[2].section_id: expected a section_id unique in the document, found 's1' again",
        "1: $.sections[3]: expected 0 <= start < end <= 30 (text length), found [25, 31]",
        "1: $.sections[5]: expected sections in text order without overlap (starting at or after 30, "
        "the end of 's4'), found [2, 4]",
        "1: $.sections[6].start: expected an integer, found boolean true",
        "1: $.sections[7].start: expected an integer, found number 0.0",
    ]


def test_pages_must_be_ordered_disjoint_and_inside_the_text(tmp_path):
    problems = corpus_problems(
        tmp_path,
        {"doc_id": "a", "text": "x" * 20, "pages": [[0, 10], [5, 12], [10, 25], [10, 20], [1.5, 3], "p", [3, 1]]},
    )
    assert problems == [
        "1: $.pages[1]: expected pages in text order without overlap (starting at or after 10, where the page "
        "before ends), found [5, 12]",
        "1: $.pages[2]: expected [start, end] with 0 <= start < end <= 20 (text length), found [10, 25]",
        "1: $.pages[4]: expected [start, end] integers, found array of 2",
        "1: $.pages[5]: expected [start, end] integers, found string 'p'",
        "1: $.pages[6]: expected [start, end] with 0 <= start < end <= 20 (text length), found [3, 1]",
    ]


def test_jsonl_corpus_nan_duplicate_keys_and_deep_lines(tmp_path):
    good = {"doc_id": "a", "text": "alpha", "sections": [section("s", 0, 5)]}
    nan = json.dumps({"doc_id": "b", "text": "beta", "sections": [section("s", 0, 4)]}).replace(
        '"start": 0', '"start": NaN'
    )
    dup = b'{"doc_id": "c", "text": "x", "doc_id": "d"}'
    deep = b'{"doc_id": "e", "text": "y", "meta": ' + b'{"k": ' * 2_000 + b"1" + b"}" * 2_000 + b"}"
    assert corpus_problems(tmp_path, good, nan.encode(), dup, deep, b"[1, 2]") == [
        "2: $.sections[0].start: expected a finite number, found NaN",
        "3: $.doc_id: expected each key once in an object, found 'doc_id' twice",
        "4: expected JSON nested at most 254 deep, found deeper",
        "5: expected a document object, found array of 2",
    ]


def test_jsonl_corpus_text_with_a_lone_surrogate_reads_as_replacement_character(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b'{"doc_id": "a", "text": "caf\\udce9 ok"}\n')
    doc = load_corpus(path)["a"]
    assert doc.text == "caf\ufffd ok" and doc.rev == revision("caf\ufffd ok")


def test_directory_files_that_are_not_utf8_are_located(tmp_path):
    (tmp_path / "good.md").write_text("# Good\n", encoding="utf-8")
    (tmp_path / "latin.md").write_bytes("# Titre\n\nca coûte\n".encode("latin-1"))
    (tmp_path / "wide.txt").write_bytes("# Wide\n".encode("utf-16"))
    with pytest.raises(InputError) as caught:
        load_corpus(tmp_path)
    assert [str(p) for p in caught.value.problems] == [
        f"{tmp_path / 'latin.md'}:3: expected UTF-8 text, found byte 0xfb at column 6 (byte offset 14)",
        f"{tmp_path / 'wide.txt'}: expected UTF-8 text, found UTF-16 (it starts with a UTF-16 byte order mark); "
        "save the file as UTF-8",
    ]


def test_a_single_markdown_file_is_not_a_corpus(tmp_path):
    (tmp_path / "a.md").write_text("# A\n", encoding="utf-8")
    with pytest.raises(
        InputError,
        match=r"expected a directory of \.md/\.rst/\.txt files or a corpus\.jsonl, found one "
        r"\.md file",
    ):
        load_corpus(tmp_path / "a.md")


def test_a_symlink_out_of_the_corpus_folder_is_refused_unread(tmp_path):
    """`ln -s /etc/passwd corpus/notes.txt` and `linked.rst -> ../outside/secret.txt` are not
    documents: the corpus is an input error naming each link and where it leads. A symlink that
    stays inside the folder is a document; a symlinked folder is not followed."""
    corpus, outside = tmp_path / "corpus", tmp_path / "outside"
    corpus.mkdir()
    outside.mkdir()
    (corpus / "real.md").write_text("# Real\n\nKept inside.\n", encoding="utf-8")
    (corpus / "alias.md").symlink_to("real.md")
    secret = outside / "secret.txt"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n", encoding="utf-8")
    (outside / "deep.md").write_text("# Deep\n", encoding="utf-8")
    (corpus / "notes.txt").symlink_to(secret)
    (corpus / "linked.rst").symlink_to("../outside/secret.txt")
    (corpus / "folder").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InputError) as refused:
        load_corpus(corpus)
    messages = [str(p) for p in refused.value.problems]
    assert messages == [
        f"{corpus / name}: expected a file inside the corpus folder {corpus}, found a symlink to {secret}: "
        "not read (copy the file into the folder, or remove the link)"
        for name in ("linked.rst", "notes.txt")
    ]
    (corpus / "notes.txt").unlink()
    (corpus / "linked.rst").unlink()
    assert sorted(load_corpus(corpus).documents) == ["alias", "real"]  # folder/deep is not followed
