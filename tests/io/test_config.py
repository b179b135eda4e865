import pytest

from ragaudit.errors import InputError
from ragaudit.io.config import load_config


def write(tmp_path, text):
    path = tmp_path / "configs" / "audit.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_paths_are_relative_to_the_config(tmp_path):
    path = write(tmp_path, """
[audit]
gold = "../gold/gold.jsonl"
corpus = "../gold/corpus"
seeds = [1, 2]
cross_section_whitelist = [["a/b", "a/c"]]

[gate]
coverage_min = 0.5

[[pipelines]]
name = "bm25"
kind = "reference"
retriever = "bm25"
""")
    config = load_config(path)
    assert config.gold == path.parent.parent / "gold" / "gold.jsonl"
    assert config.seeds == (1, 2) and config.paraphrases == 3
    assert config.cross_section_whitelist == (frozenset({"a/b", "a/c"}),)
    assert config.gate["coverage_min"] == 0.5 and config.gate["delta_s_max"] == 0.60
    assert config.gate["hallucination_max"] == 0 and config.lambda_ == {"css_min": 0.5, "anchor_support_min": 0.45}
    assert config.metrics == {"k": 5, "match_tolerance": 30, "delta_s": "nearest"}
    [pipeline] = config.pipelines
    assert (pipeline.name, pipeline.kind, pipeline.options["retriever"], pipeline.options["k"]) == ("bm25", "reference", "bm25", 5)


def test_every_bad_key_is_reported_with_its_line(tmp_path):
    path = write(tmp_path, """[audit]
paraphrases = "three"
seeds = [1, "2"]
colour = "blue"

[[pipelines]]
name = "x"
kind = "magic"
""")
    with pytest.raises(InputError) as caught:
        load_config(path)
    assert [str(p) for p in caught.value.problems] == [
        f"{path}:2: $.audit.paraphrases: expected an integer, found string 'three'",
        f"{path}:3: $.audit.seeds: expected an array of integers, found array of 2",
        f"{path}:4: $.audit.colour: expected one of allow_cross_section, corpus, cross_section_whitelist, gold, "
        "offset_unit, out, paraphrases, seeds, workers, found unknown key 'colour'",
        f"{path}: $.pipelines[0].kind: expected kind one of reference, replay, python, command, found string 'magic'",
    ]


def test_toml_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, "[audit]\nseeds = [1,\n")
    with pytest.raises(InputError, match=r"audit.toml:\d+: expected TOML"):
        load_config(path)


def test_missing_config(tmp_path):
    with pytest.raises(InputError, match="no such config file"):
        load_config(tmp_path / "nope.toml")
