"""`ragaudit gold anchor` and `ragaudit gold reanchor`, end to end on the handbook: candidate anchors
labelled how they were found, a gold line that `gold check` accepts, and anchors moved after the
corpus is edited in the test (a sentence moved to another section, a document deleted, a number
changed), every item that cannot be moved listed with its reason."""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import pytest
from helpers import DEMO, invoke

from ragaudit.io.corpus import load_corpus, markdown_sections
from ragaudit.io.gold import read_gold

CORPUS, GOLD = DEMO / "corpus", DEMO / "gold.jsonl"
SENTENCE = "Workforce passwords must be at least 14 characters long."
QUESTION = "How long must workforce passwords be?"
PARAPHRASES = ("--paraphrase", "What is the minimum password length?", "--paraphrase", "How short may a password be?")


def gold_checked(line: str, tmp_path: Path, corpus: Path = CORPUS):
    path = tmp_path / "one.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    return invoke("gold", "check", path, "--corpus", corpus, "--no-distance")


def test_anchor_an_exact_answer(tmp_path):
    result = invoke("gold", "anchor", "--corpus", CORPUS, "--question", QUESTION, "--answer", SENTENCE, *PARAPHRASES)
    assert result.exit_code == 0, result.output
    text = (CORPUS / "security-policy.md").read_text(encoding="utf-8")
    start = text.index(SENTENCE)
    assert result.stderr.splitlines() == [
        f"candidate 1 exact: security-policy#security-policy/password-requirements [{start}, {start + len(SENTENCE)}) "
        f"{SENTENCE!r}"
    ]
    item = json.loads(result.stdout)
    assert item == {
        "qid": "how-long-must-workforce-passwords-be",
        "question": QUESTION,
        "paraphrases": ["What is the minimum password length?", "How short may a password be?"],
        "doc_id": "security-policy",
        "section_id": "security-policy/password-requirements",
        "anchor": {"start": start, "end": start + len(SENTENCE), "unit": "char", "text": SENTENCE},
        "reference_answer": SENTENCE,
    }
    checked = gold_checked(result.stdout.strip(), tmp_path)
    assert checked.exit_code == 0, checked.output


def test_anchor_folds_whitespace_case_and_markup(tmp_path):
    answer = "workforce   PASSWORDS must be\nat least *14* characters `long`"
    result = invoke("gold", "anchor", "--corpus", CORPUS, "--question", QUESTION, "--answer", answer, "--qid", "PW-1")
    assert result.exit_code == 0, result.output
    start = (CORPUS / "security-policy.md").read_text(encoding="utf-8").index(SENTENCE)
    item = json.loads(result.stdout)
    assert result.stderr.startswith("candidate 1 normalised: security-policy#security-policy/password-requirements")
    assert (item["qid"], item["anchor"]) == (
        "PW-1",
        {"start": start, "end": start + len(SENTENCE) - 1, "unit": "char", "text": SENTENCE[:-1]},
    )
    assert "add --paraphrase twice" in result.stderr
    checked = invoke(
        "gold", "check", _write(tmp_path, result.stdout), "--corpus", CORPUS, "--no-distance", "--paraphrases", "1"
    )
    assert checked.exit_code == 0, checked.output


def test_anchor_a_paraphrased_answer_by_the_embedding_model(tmp_path):
    answer = "Staff passwords need fourteen characters or more."
    assert SENTENCE.lower() not in answer.lower()
    result = invoke("gold", "anchor", "--corpus", CORPUS, "--question", QUESTION, "--answer", answer, *PARAPHRASES)
    assert result.exit_code == 0, result.output
    candidates = result.stderr.splitlines()
    assert len(candidates) == 3 and all(" similar " in c for c in candidates)
    assert candidates[0].startswith("candidate 1 similar ") and candidates[0].endswith(repr(SENTENCE))
    scores = [float(c.split(" similar ")[1].split(":")[0]) for c in candidates]
    assert scores == sorted(scores, reverse=True)
    assert json.loads(result.stdout)["anchor"]["text"] == SENTENCE
    assert gold_checked(result.stdout.strip(), tmp_path).exit_code == 0


def test_anchor_bad_input():
    assert invoke("gold", "anchor", "--corpus", CORPUS, "--question", "Q", "--answer", "  ").exit_code == 2
    missing = invoke("gold", "anchor", "--corpus", "/nonexistent/corpus", "--question", "Q", "--answer", "A")
    assert missing.exit_code == 3 and "no such corpus" in missing.output


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "line.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


# ---- reanchor --------------------------------------------------------------------------------


def edited_corpus(tmp_path: Path) -> dict:
    """The handbook with three edits: an anchor sentence of key-management moved to the end of
    another section, secrets-handling deleted, "14 characters" changed to "16 characters"."""
    new = tmp_path / "new"
    shutil.copytree(CORPUS, new)
    items, _ = read_gold(GOLD)
    key = next(i for i in items if i.doc_id == "key-management")
    path = new / "key-management.md"
    text = path.read_text(encoding="utf-8")
    assert text.count(key.anchor.text) == 1
    text = (
        text.replace(key.anchor.text + " ", "", 1)
        if key.anchor.text + " " in text
        else text.replace(key.anchor.text, "", 1)
    )
    target = next(s for s in reversed(markdown_sections(text)) if s.section_id != key.section_id)
    text = text[: target.end].rstrip("\n") + "\n\n" + key.anchor.text + "\n" + text[target.end :]
    path.write_text(text, encoding="utf-8")
    (new / "secrets-handling.md").unlink()
    policy = new / "security-policy.md"
    assert policy.read_text(encoding="utf-8").count("at least 14 characters") == 1
    policy.write_text(policy.read_text(encoding="utf-8").replace("at least 14 characters", "at least 16 characters"))
    return {"path": new, "moved": key, "target": target.section_id, "items": items}


def test_reanchor_after_edits(tmp_path):
    edit = edited_corpus(tmp_path)
    new, items = edit["path"], edit["items"]
    out = tmp_path / "gold.new.jsonl"
    result = invoke("gold", "reanchor", GOLD, "--corpus", new, "--from", CORPUS, "--out", out)
    assert result.exit_code == 1, result.output

    deleted = [i for i in items if i.doc_id == "secrets-handling"]
    assert len(deleted) == 4
    for item in deleted:  # listed, located, with the reason; nothing invented for them
        assert (
            f"error: {GOLD}:{item.line}: {item.qid}: not moved: document 'secrets-handling' was in the old corpus "
            "and is not in the new one, and no sentence of the new corpus matches the text (best ratio"
        ) in result.stderr
    kept = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [k["qid"] for k in kept] == [i.qid for i in items if i.doc_id != "secrets-handling"]

    corpus = load_corpus(new)
    by_qid = {k["qid"]: k for k in kept}
    for k in kept:  # every anchor is its text, at its offsets, in its section
        doc, anchor = corpus[k["doc_id"]], k["anchor"]
        assert doc.text[anchor["start"] : anchor["end"]] == anchor["text"]
        section = doc.section(k["section_id"])
        assert section is not None and section.start <= anchor["start"] and anchor["end"] <= section.end

    moved = by_qid[edit["moved"].qid]
    assert (moved["section_id"], moved["anchor"]["text"]) == (edit["target"], edit["moved"].anchor.text)
    assert f"{edit['moved'].qid}: moved: anchor exact to key-management#{edit['target']}" in result.stdout

    changed = by_qid["PWD-REQ-1"]
    new_sentence = SENTENCE.replace("14", "16")
    ratio = difflib.SequenceMatcher(None, new_sentence, SENTENCE, autojunk=False).ratio()
    assert ratio >= 0.9
    assert (
        changed["anchor"]["text"] == new_sentence and changed["section_id"] == "security-policy/password-requirements"
    )
    assert (
        f"PWD-REQ-1: moved: anchor fuzzy, ratio {ratio:.3f} to security-policy#security-policy/password-requirements"
    ) in result.stdout
    assert "(numbers differ: 14 → 16)" in result.stdout

    # items of other documents, untouched by the edits, stayed exactly as they were
    originals = {json.loads(line)["qid"]: json.loads(line) for line in GOLD.read_text().splitlines()}
    untouched = [i.qid for i in items if i.doc_id not in ("secrets-handling", "key-management", "security-policy")]
    assert all(by_qid[q] == originals[q] for q in untouched)
    assert f"{len(items)} items: " in result.stdout and "4 not moved (left out)" in result.stdout

    checked = invoke("gold", "check", out, "--corpus", new, "--no-distance")
    assert checked.exit_code == 0, checked.output


def test_reanchor_below_the_ratio_lists_the_item(tmp_path):
    new = edited_corpus(tmp_path)["path"]
    out = tmp_path / "strict.jsonl"
    result = invoke("gold", "reanchor", GOLD, "--corpus", new, "--out", out, "--min-ratio", "0.99")
    assert result.exit_code == 1
    line = next(i.line for i in read_gold(GOLD)[0] if i.qid == "PWD-REQ-1")
    ratio = difflib.SequenceMatcher(None, SENTENCE.replace("14", "16"), SENTENCE, autojunk=False).ratio()
    assert (
        f"error: {GOLD}:{line}: PWD-REQ-1: not moved: its text is not in the new corpus, and no sentence of the new "
        f"corpus matches the text (best ratio {ratio:.3f} < 0.99)"
    ) in result.stderr
    assert "PWD-REQ-1" not in out.read_text(encoding="utf-8")


def test_reanchor_of_an_unchanged_corpus_keeps_everything(tmp_path):
    out = tmp_path / "same.jsonl"
    result = invoke("gold", "reanchor", GOLD, "--corpus", CORPUS, "--out", out)
    assert result.exit_code == 0, result.output
    assert [json.loads(line) for line in out.read_text().splitlines()] == [
        json.loads(line) for line in GOLD.read_text().splitlines()
    ]
    assert result.stdout.startswith("80 items: 80 stayed, 0 moved") and result.stderr == ""


def test_reanchor_bad_input(tmp_path):
    out = tmp_path / "out.jsonl"
    damaged = tmp_path / "gold.jsonl"
    damaged.write_text(GOLD.read_text().splitlines()[0] + "\n{oops\n", encoding="utf-8")
    result = invoke("gold", "reanchor", damaged, "--corpus", CORPUS, "--out", out)
    assert result.exit_code == 3 and f"{damaged}:2:" in result.output and not out.exists()
    missing = invoke("gold", "reanchor", tmp_path / "none.jsonl", "--corpus", CORPUS, "--out", out)
    assert missing.exit_code == 3 and not out.exists()
    assert invoke("gold", "reanchor", GOLD, "--corpus", tmp_path / "nowhere", "--out", out).exit_code == 3
    assert invoke("gold", "reanchor", GOLD, "--corpus", CORPUS, "--out", out, "--min-ratio", "0").exit_code == 2
    assert invoke("gold", "reanchor", GOLD, "--corpus", CORPUS, "--out", GOLD).exit_code == 2  # never over an input


@pytest.mark.parametrize("unit", ["token"])
def test_reanchor_leaves_token_anchors_listed(tmp_path, unit):
    item = json.loads(GOLD.read_text().splitlines()[0])
    item["anchor"]["unit"] = unit
    gold = _write(tmp_path, json.dumps(item) + "\n")
    result = invoke("gold", "reanchor", gold, "--corpus", CORPUS, "--out", tmp_path / "out.jsonl")
    assert result.exit_code == 1 and "only char anchors can be moved" in result.stderr


def test_the_guides_reanchor_example_is_what_the_command_prints(tmp_path):
    """docs/guide.md §2.2: the example folder with one number edited, reanchored."""
    import re

    guide = (Path(__file__).resolve().parents[1] / "docs" / "guide.md").read_text(encoding="utf-8")
    files = re.findall(r"<!-- check: file ([^ ]+) -->\n```\w*\n(.*?)```", guide, re.S)
    for name, body in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body, encoding="utf-8")
    shutil.copytree(tmp_path / "handbook", tmp_path / "handbook-v2")
    policies = tmp_path / "handbook-v2" / "policies.md"
    policies.write_text(policies.read_text().replace("at least 14 characters", "at least 16 characters"))
    out = tmp_path / "gold.v2.jsonl"
    result = invoke(
        "gold", "reanchor", tmp_path / "gold.jsonl", "--corpus", tmp_path / "handbook-v2",
        "--from", tmp_path / "handbook", "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    shown = re.search(r'least 16 characters" in the example\'s `policies.md`:\n\n```\n(.*?)```', guide, re.S).group(1)
    assert result.stdout == shown.replace("gold.v2.jsonl", str(out))


def test_anchor_never_finds_an_answer_in_a_file_linked_from_outside_the_corpus(tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n", encoding="utf-8")
    (corpus / "notes.txt").symlink_to(secret)
    result = invoke("gold", "anchor", "--corpus", corpus, "--question", "Who?", "--answer", "root:x:0:0:root")
    assert result.exit_code == 3, result.output
    assert result.stderr == (
        f"error: {corpus / 'notes.txt'}: expected a file inside the corpus folder {corpus}, found a symlink to "
        f"{secret}: not read (copy the file into the folder, or remove the link)\n"
    )
    assert result.stdout == ""
