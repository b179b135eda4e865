"""The config schema as a source: the gate-defaults table, and line numbers that survive any TOML
layout. Each generated config records its expected lines while it is written, not by asking the reader."""

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragaudit.core.errors import InputError
from ragaudit.io.config import default_config, load_config
from ragaudit.io.config_schema import SCHEMA

ROOT = Path(__file__).resolve().parents[2]

# The gate defaults, as the fault benchmark over three corpora set them (bench/faults.py); absolute
# ΔS is reported and gated only when a config sets it.
GATE = {
    "delta_s_excess_max": 0.25,
    "delta_s_max": None,
    "delta_s_mean_max": None,
    "coverage_min": 0.70,
    "coverage_pass_rate": 0.90,
    "citation_match_min": 0.95,
    "lambda_convergent_min": 0.85,
    "lambda_forbid": ["divergent"],
    "hallucination_max": 0,
    "grounded_pass_rate": 0.90,
    "max_errors": 0,
    "labelled_good_min": None,
    "faithful_min": None,
    "pipelines": [],
}


def test_the_gate_section_keeps_its_shape_and_defaults():
    assert {key: default for key, (_, default) in SCHEMA["gate"].items()} == {**GATE, "from": None}
    assert all(isinstance(entry, tuple) and len(entry) == 2 for entry in SCHEMA["gate"].values())
    thresholds = default_config().gate
    assert {key: getattr(thresholds, key) for key in GATE} == GATE
    assert (thresholds.from_, thresholds.sources, thresholds.not_gated) == (None, {}, {})


def test_the_demo_config_sets_the_schema_defaults():
    gate = tomllib.loads((ROOT / "configs" / "default.toml").read_text(encoding="utf-8"))["gate"]
    assert {key: SCHEMA["gate"][key][1] for key in gate} == gate


def test_defaults_are_fresh_for_each_config():
    first = default_config()
    first.gate.lambda_forbid.append("recursive")
    assert default_config().gate.lambda_forbid == ["divergent"]


def problems(tmp_path, text: str) -> list[str]:
    path = tmp_path / "audit.toml"
    path.write_bytes(text.encode("utf-8"))
    with pytest.raises(InputError) as caught:
        load_config(path)
    return [str(p).removeprefix(f"{path}:") for p in caught.value.problems]


def test_decoy_headers_inside_strings_and_comments_are_not_tables(tmp_path):
    text = '''[audit]
gold = """
[[pipelines]]
k = 0
"""  # [[pipelines]] in a comment too
corpus = 'c[[pipelines]]'

[[pipelines]]
name = "a"
kind = "replay"
"traces" = "t.jsonl"
"k" = -2
'''
    assert problems(tmp_path, text) == ["12: $.pipelines[0].k: expected an integer >= 1, found number -2"]


def test_dotted_keys_inline_tables_and_subtables(tmp_path):
    text = """gate.coverage_min = 2
metrics = { k = 0, match_tolerance = 3 }
pipelines = [
  { name = "inline", kind = "replay", traces = "t" },
  { name = "inline2", kind = "replay", traces = "t", k = 0 },
]

[lambda]
"css_min" = 1.5
"""
    assert problems(tmp_path, text) == [
        "1: $.gate.coverage_min: expected a number in [0, 1], found number 2",
        "2: $.metrics.k: expected an integer >= 1, found number 0",
        "5: $.pipelines[1].k: expected an integer >= 1, found number 0",
        "9: $.lambda.css_min: expected a number in [0, 1], found number 1.5",
    ]


def test_subtables_of_the_nth_pipeline(tmp_path):
    text = """[[pipelines]]
name = "a"
kind = "python"
factory = "m:f"
[pipelines.options]
ok = 1

[[pipelines]]
name = "b"
kind = "python"
factory = "m:f"

[pipelines.options]
bad = nan
"""
    assert problems(tmp_path, text) == ["14: $.pipelines[1].options.bad: expected a finite number, found number nan"]


def test_windows_line_endings(tmp_path):
    text = (
        '[audit]\r\nworkers = 1\r\n\r\n[[pipelines]]\r\nname = "a"\r\nkind = "replay"\r\ntraces = "t"\r\n\r\n'
        '[[pipelines]]\r\nname = "b"\r\nkind = "replay"\r\ntraces = "t"\r\nk = 0\r\n'
    )
    assert problems(tmp_path, text) == ["13: $.pipelines[1].k: expected an integer >= 1, found number 0"]


FILLERS = ["", "# a comment with [[pipelines]] and [gate]", "   "]
GOOD_KEYS = ["k = 3", "timeout_s = 5", 'retriever = "tfidf"', "chunk_size = 32", "temperature = 0.1"]
DECOY = ["[audit]", 'gold = """', "[[pipelines]]", "k = 0", '"""', "seeds = [1]", ""]


@st.composite
def layouts(draw):
    """A config of several reference pipelines, one with a bad k, and the line that bad k is written on.
    Between keys go blank lines and comments; before the pipelines, maybe a string that looks like one."""
    count = draw(st.integers(1, 5))
    bad = draw(st.integers(0, count - 1))
    lines: list[str] = list(DECOY) if draw(st.booleans()) else []
    expected = None
    for index in range(count):
        lines.append("[[pipelines]]")
        good = GOOD_KEYS[1:] if index == bad else GOOD_KEYS
        keys = [f'name = "p{index}"', 'kind = "reference"', *draw(st.lists(st.sampled_from(good), unique=True))]
        if index == bad:
            keys.append("k = 0")
        for key in draw(st.permutations(keys)):
            lines += draw(st.lists(st.sampled_from(FILLERS), max_size=2))
            if key == "k = 0":
                expected = len(lines) + 1
            lines.append(key)
        lines += draw(st.lists(st.just(""), max_size=2))
    return "\n".join(lines) + "\n", bad, expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layouts())
def test_a_bad_key_is_found_on_its_line_in_any_layout(tmp_path, layout):
    text, bad, line = layout
    assert problems(tmp_path, text) == [f"{line}: $.pipelines[{bad}].k: expected an integer >= 1, found number 0"]


def test_reading_a_config_imports_no_numerical_library():
    code = (
        "import sys; from ragaudit.io.config import load_config; load_config(sys.argv[1]); "
        "print(sorted(m for m in ('numpy', 'torch', 'sklearn', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "configs" / "default.toml")], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("rate_limit", "1e-300", "a number >= 0.0001, found number 1e-300"),
        ("rate_limit", "1e300", "a number <= 1e+06, found number 1e+300"),
        ("retry_backoff_s", "1e308", "a number <= 3600, found number 1e+308"),
        ("retries", "5000", "an integer <= 20, found number 5000"),
        ("timeout_s", "1e308", "a number <= 86400, found number 1e+308"),
    ],
)
def test_waits_are_bounded_so_no_clock_overflows(tmp_path, key, value, expected):
    text = f'[[pipelines]]\nname = "svc"\nkind = "python"\nfactory = "m:f"\n{key} = {value}\n'
    assert problems(tmp_path, text) == [f"5: $.pipelines[0].{key}: expected {expected}"]
    worst = '[[pipelines]]\nname = "svc"\nkind = "python"\nfactory = "m:f"\n'
    worst += "rate_limit = 0.0001\nretries = 20\nretry_backoff_s = 3600\ntimeout_s = 86400\n"
    path = tmp_path / "worst.toml"
    path.write_text(worst)
    options = load_config(path).pipelines[0].options
    import threading

    longest = max(1 / options["rate_limit"], options["retry_backoff_s"] * 2 ** options["retries"] * 2)
    assert longest <= threading.TIMEOUT_MAX and options["timeout_s"] <= threading.TIMEOUT_MAX


def test_what_a_calibration_brings_to_the_gate_is_not_a_config_key(tmp_path):
    assert problems(tmp_path, '[gate]\ncoverage_min = 0.5\nnot_gated = { coverage_min = "why" }\n') == [
        "3: $.gate.not_gated: expected one of citation_match_min, coverage_min, coverage_pass_rate, "
        "delta_s_excess_max, delta_s_max, delta_s_mean_max, faithful_min, from, grounded_pass_rate, hallucination_max, "
        "labelled_good_min, lambda_convergent_min, lambda_forbid, max_errors, pipelines, found unknown key 'not_gated'"
    ]
