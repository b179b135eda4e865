import json

from helpers import KEYS_SENTENCE, PASSWORDS_SENTENCE, POLICIES

from ragaudit.checks.metrics.embed import HashingEncoder
from ragaudit.checks.validation.gold import check_gold
from ragaudit.io.gold import read_gold


def item(qid, sentence=KEYS_SENTENCE, section="policies/security/keys", **extra):
    start = POLICIES.index(sentence)
    return {
        "qid": qid,
        "question": f"What does the handbook say: {sentence}",
        "paraphrases": ["p1", "p2"],
        "doc_id": "policies",
        "section_id": section,
        "anchor": {"start": start, "end": start + len(sentence), "unit": "char", "text": sentence},
        **extra,
    }


def run(tmp_path, corpus, items, **options):
    path = tmp_path / "gold.jsonl"
    path.write_text("\n".join(i if isinstance(i, str) else json.dumps(i) for i in items) + "\n", encoding="utf-8")
    read, problems = read_gold(path)
    return check_gold(read, corpus, file=str(path), problems=problems, **options)


def test_clean_gold_set_is_silent(tmp_path, corpus):
    items = [item(f"K{i}") for i in range(3)]
    assert run(tmp_path, corpus, items, encoder=HashingEncoder()) == []


def test_each_finding(tmp_path, corpus):
    bad_text = item("T1")
    bad_text["anchor"]["text"] = "Hardware keys are rotated every 24 months."
    outside = item("O1", section="policies/security/passwords")
    far = dict(item("F1"), question="zzz qqq")
    items = [
        item("K1"),
        item("K1"),
        bad_text,
        outside,
        far,
        dict(item("V1"), paraphrases=[]),
        dict(item("D1"), doc_id="nope"),
        dict(item("S1"), section_id="policies/nope"),
        dict(item("B1"), anchor={"start": 10, "end": 10**6, "unit": "char", "text": "x"}),
        dict(item("E1"), expected_citations=[{"doc_id": "gone", "start": 0, "end": 4, "unit": "char"}]),
        '{"qid": 5}',
        "not json",
    ]
    found = run(tmp_path, corpus, items, encoder=HashingEncoder())
    by_code = {}
    for f in found:
        by_code.setdefault(f.code, []).append(f.qid)
    assert by_code == {
        "gold_malformed": [None, None, None, None, None, None],
        "gold_duplicate_qid": ["K1"],
        "gold_anchor_text_mismatch": ["T1"],
        "gold_anchor_outside_section": ["O1"],
        "gold_too_few_variants": ["V1"],
        "gold_unknown_document": ["D1"],
        "gold_unknown_section": ["S1"],
        "gold_anchor_out_of_bounds": ["B1"],
        "gold_expected_out_of_bounds": ["E1"],
        "gold_anchor_far": ["F1"],
    }
    malformed = [f for f in found if f.code == "gold_malformed"]
    assert [(m.line, m.path) for m in malformed[:2]] == [(11, "$.qid"), (11, "$.question")]
    assert malformed[-1].line == 12


def test_section_counts_warn_outside_three_to_five(tmp_path, corpus):
    items = [item(f"K{i}") for i in range(6)] + [item("P1", PASSWORDS_SENTENCE, "policies/security/passwords")]
    found = run(tmp_path, corpus, items)
    assert sorted(f.message for f in found) == [
        "expected 3 to 5 items for section policies#policies/security/keys, found 6",
        "expected 3 to 5 items for section policies#policies/security/passwords, found 1",
    ]
    assert {f.severity for f in found} == {"warning"}


def alternative(sentence, section, doc="policies", text=None):
    source = POLICIES if doc == "policies" else None
    start = source.index(sentence)
    return {
        "doc_id": doc,
        "start": start,
        "end": start + len(sentence),
        "unit": "char",
        "section_id": section,
        "text": sentence if text is None else text,
    }


def test_accept_any_items_are_read_and_checked(tmp_path, corpus):
    keys, passwords = ("policies/security/keys", "policies/security/passwords")
    good = dict(
        item("A1"),
        accept="any",
        expected_citations=[alternative(KEYS_SENTENCE, keys), alternative(PASSWORDS_SENTENCE, passwords)],
    )
    stale = dict(
        item("A2"),
        accept="any",
        expected_citations=[alternative(KEYS_SENTENCE, keys, text="old words"), alternative(PASSWORDS_SENTENCE, keys)],
    )
    path = tmp_path / "gold.jsonl"
    path.write_text("\n".join(json.dumps(i) for i in (good, stale)) + "\n")
    items, problems = read_gold(path)
    assert problems == [] and [i.accept for i in items] == ["any", "any"]
    assert [c.section_id for c in items[0].gold_citations] == [keys, passwords]
    found = run(tmp_path, corpus, [good, stale, item("A3"), item("A4")])
    assert [(f.code, f.qid, f.path) for f in found] == [
        ("gold_anchor_text_mismatch", "A2", "$.expected_citations[0].text"),
        ("gold_anchor_outside_section", "A2", "$.expected_citations[1]"),
    ]


def test_accept_must_be_all_or_any_and_name_its_alternatives(tmp_path, corpus):
    found = run(tmp_path, corpus, [dict(item("X1"), accept="some"), dict(item("X2"), accept="any")])
    assert [(f.code, f.path) for f in found] == [
        ("gold_malformed", "$.accept"),
        ("gold_malformed", "$.expected_citations"),
    ]


def test_anchor_text_that_differs_late_shows_where(tmp_path, corpus):
    start = POLICIES.index(KEYS_SENTENCE)
    long_text = POLICIES[start : start + 80]  # the keys sentence and the next one
    wrong = long_text[:70] + "X" + long_text[71:]
    gold = item("L1", anchor={"start": start, "end": start + 80, "unit": "char", "text": wrong})
    [found] = [
        f for f in run(tmp_path, corpus, [gold, item("L2"), item("L3")]) if f.code == "gold_anchor_text_mismatch"
    ]
    assert found.message == (
        f"expected anchor.text == document slice [{start}, {start + 80}), found a difference at char 70 of the slice "
        f"(document char {start + 70}): slice ...{long_text[46:94]!r}, text ...{wrong[46:94]!r}"
    )
    assert long_text[46:94] != wrong[46:94] and found.path == "$.anchor.text"


# ---- [gold] ignore and severity ---------------------------------------------------------------------


def _with(tmp_path, table: str):
    """A config over the first 2 handbook items (one section: below 3 items, a section-count
    warning), with `table` appended."""
    from helpers import BM25, write_config

    config = write_config(tmp_path, BM25, items=2, seeds="[1]")
    config.write_text(config.read_text() + "\n" + table + "\n")
    return config


def _gold_check(tmp_path, config):
    from helpers import DEMO, invoke

    return invoke(
        "gold", "check", tmp_path / "gold.jsonl", "--corpus", DEMO / "corpus", "--no-distance", "--config", config
    )


def test_gold_check_warnings_can_be_ignored_or_made_info_by_code(tmp_path):
    plain = _gold_check(tmp_path, _with(tmp_path, ""))
    assert plain.exit_code == 0 and " warning gold_section_item_count " in plain.output
    assert "0 errors, 1 warnings\n" in plain.output
    info = _gold_check(tmp_path, _with(tmp_path, '[gold]\nseverity = { gold_section_item_count = "info" }'))
    assert info.exit_code == 0 and " info gold_section_item_count " in info.output
    assert "0 errors, 0 warnings, 1 info\n" in info.output
    raised = _gold_check(tmp_path, _with(tmp_path, '[gold]\nseverity = { gold_section_item_count = "error" }'))
    assert raised.exit_code == 1 and " error gold_section_item_count " in raised.output
    quiet = _gold_check(tmp_path, _with(tmp_path, '[gold]\nignore = ["gold_section_item_count"]'))
    assert quiet.exit_code == 0 and "gold_section_item_count" not in quiet.output


def test_an_unknown_code_in_gold_ignore_is_a_usage_error_listing_the_known_codes(tmp_path):
    from click.testing import CliRunner
    from helpers import DEMO

    from ragaudit.cli.commands import main

    config = _with(tmp_path, '[gold]\nignore = ["items_per_section"]')
    line = config.read_text().splitlines().index('ignore = ["items_per_section"]') + 1
    for args in (
        ["run", config],
        ["gold", "check", tmp_path / "gold.jsonl", "--corpus", DEMO / "corpus", "--config", config],
    ):
        result = CliRunner().invoke(main, [str(a) for a in args])
        assert result.exit_code == 2, result.output
        assert result.stderr.strip().endswith(
            f"{config}:{line}: [gold] ignore: expected gold-check warning codes "
            "(gold_section_item_count, gold_anchor_far), found 'items_per_section'"
        )
        assert "Traceback" not in result.output


def test_a_run_leaves_ignored_gold_codes_out_of_its_report(tmp_path):
    from helpers import invoke, run_dir_of

    config = _with(tmp_path, '[gold]\nignore = ["gold_section_item_count", "gold_anchor_far"]')
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    report = json.loads((run_dir_of(result) / "report.json").read_text())
    assert report["gold_check"] == [] and report["summary"]["gold_check"] == {"errors": 0, "warnings": 0}
    config = _with(tmp_path, "")
    report = json.loads((run_dir_of(invoke("run", config, "--no-gate")) / "report.json").read_text())
    assert {f["code"] for f in report["gold_check"]} >= {"gold_section_item_count"}


def test_gold_check_fills_the_cache_a_run_reads(tmp_path, monkeypatch):
    """`gold check --model M` encodes each question and anchor through the embedding cache, so that
    a run's encoder of the same model finds every one of them there and encodes none again (the
    hashing encoder, its vectors kept in the file as a model's are)."""
    from helpers import DEMO, invoke

    from ragaudit.checks.metrics.embed import HashingEncoder
    from ragaudit.io.config import load_config
    from ragaudit.pipelines.inputs import Inputs

    monkeypatch.setenv("RAGAUDIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(HashingEncoder, "on_disk", True)
    lines = (DEMO / "gold.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:4]
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(lines), encoding="utf-8")
    result = invoke("gold", "check", gold, "--corpus", DEMO / "corpus", "--model", "hashing")
    assert result.exit_code == 0, result.output
    assert "4 records, 0 errors" in result.output
    config = tmp_path / "audit.toml"
    config.write_text(f'[audit]\ngold = "gold.jsonl"\ncorpus = "{DEMO / "corpus"}"\n\n[embedder]\nmodel = "hashing"\n')
    encoder = Inputs.from_config(load_config(config)).encoder  # a run's encoder
    texts = [t for line in lines for t in (json.loads(line)["question"], json.loads(line)["anchor"]["text"])]
    encoder.encode(texts)
    assert (encoder.requested, encoder.hits, encoder.encoded) == (len(texts), len(texts), 0)
