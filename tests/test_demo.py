"""The built-in handbook demo is a sound gold set for its corpus, by the real model too."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from ragaudit.cli.commands import main
from ragaudit.io.corpus import load_corpus
from ragaudit.io.gold import read_gold

DEMO = Path(__file__).resolve().parents[1] / "gold_sets" / "handbook"


def test_demo_size():
    corpus = load_corpus(DEMO / "corpus")
    items, problems = read_gold(DEMO / "gold.jsonl")
    assert problems == []
    assert len(corpus) >= 10 and sum(len(d.sections) for d in corpus.documents.values()) >= 40
    assert len(items) >= 60 and len({(i.doc_id, i.section_id) for i in items}) >= 15
    assert all(len(i.paraphrases) == 2 for i in items)


@pytest.mark.model
def test_demo_gold_check_is_clean_with_the_real_model():
    result = CliRunner().invoke(main, ["gold", "check", str(DEMO / "gold.jsonl"), "--corpus", str(DEMO / "corpus")])
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("0 errors, 0 warnings\n")
