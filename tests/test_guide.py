"""docs/guide.md's examples are true: the marked blocks are written out and read by ragaudit's own
readers, the trace validates clean against the corpus, the config runs end to end, the stated
revision and sections are the corpus reader's, and the config reference names exactly the keys
the schema has."""

import json
import re
import tomllib

from helpers import ROOT, invoke, run_dir_of

from ragaudit.io import config as config_module
from ragaudit.io.config import load_config
from ragaudit.io.corpus import load_corpus
from ragaudit.io.gold import read_gold

GUIDE = ROOT / "docs" / "guide.md"


def checked_blocks() -> dict[str, str]:
    return dict(re.findall(r"<!-- check: (\S+) -->\n```\w+\n(.*?)```", GUIDE.read_text(), re.S))


def write_examples(folder):
    for name, body in checked_blocks().items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    return folder


def test_every_example_is_there():
    assert set(checked_blocks()) == {"corpus/keys.md", "gold.jsonl", "traces.jsonl", "audit.toml"}


def test_the_corpus_is_as_described(tmp_path):
    corpus = load_corpus(write_examples(tmp_path) / "corpus")
    doc = corpus["keys"]
    text = GUIDE.read_text()
    assert f"rev `{doc.rev}`" in text
    for section in doc.sections:
        assert f"`{section.section_id}`" in text
    rotation = next(s for s in doc.sections if s.section_id == "key-management/rotation")
    assert f"(chars {rotation.start}–{rotation.end})" in text


def test_the_gold_item_reads_and_checks_clean(tmp_path):
    folder = write_examples(tmp_path)
    items, problems = read_gold(folder / "gold.jsonl")
    assert not problems and [i.qid for i in items] == ["KEY-ROT-1"]
    check = invoke("gold", "check", folder / "gold.jsonl", "--corpus", folder / "corpus", "--no-distance")
    assert check.exit_code == 0, check.output


def test_the_trace_validates_clean_against_the_corpus(tmp_path):
    folder = write_examples(tmp_path)
    result = invoke("validate", folder / "traces.jsonl", "--corpus", folder / "corpus", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["records"] == 1


def test_the_config_runs_end_to_end(tmp_path):
    folder = write_examples(tmp_path)
    config = folder / "audit.toml"
    config.write_text(config.read_text().replace('model = "all-MiniLM-L6-v2"', 'model = "hashing"'))
    loaded = load_config(config)
    assert loaded.gold == folder / "gold.jsonl" and loaded.seeds == (1, 2)
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    run_dir = run_dir_of(result)
    traces = [json.loads(line) for line in (run_dir / "traces.jsonl").read_text().splitlines()]
    assert len(traces) == 3 * 2  # three variants, two seeds; only variant 0 seed 1 was recorded
    assert sum(t["error"] is None for t in traces) == 1


def test_the_config_reference_names_exactly_the_schemas_keys():
    documented = tomllib.loads(checked_blocks()["audit.toml"])
    for table, model in config_module._SECTIONS.items():
        commented = set(re.findall(rf"^\[{table}\]\n((?:(?!^\[).*\n)*)", GUIDE.read_text(), re.M)[0].split("\n"))
        keys = set(documented.get(table, {})) | {
            m.group(1) for line in commented if (m := re.match(r"# (\w+) =", line.strip()))
        }
        keys |= {m for line in commented for m in re.findall(r"`?(\w+)`? = \"", line) if line.strip().startswith("#")}
        assert keys == set(model.model_fields), table
