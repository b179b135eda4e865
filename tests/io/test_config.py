"""The config reader: defaults, ranges, per-kind pipeline keys, finite numbers, and every problem
reported at once on its own line. Expected line numbers are counted by hand from the literal TOML."""

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from ragaudit.cli.commands import main
from ragaudit.core.errors import InputError
from ragaudit.io.config import Config, load_config
from ragaudit.io.config_schema import AuditSection, LabelsSection, _Root


def write(tmp_path, text):
    path = tmp_path / "configs" / "audit.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def problems(path) -> list[str]:
    with pytest.raises(InputError) as caught:
        load_config(path)
    return [str(p) for p in caught.value.problems]


def test_paths_are_relative_to_the_config(tmp_path):
    path = write(
        tmp_path,
        """
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
""",
    )
    config = load_config(path)
    assert config.audit.gold == path.parent.parent / "gold" / "gold.jsonl"
    assert config.audit.out == path.parent / "reports"
    assert config.audit.seeds == [1, 2] and config.audit.paraphrases == 3
    assert config.audit.whitelist == (frozenset({"a/b", "a/c"}),)
    assert config.gate.coverage_min == 0.5 and config.gate.delta_s_excess_max == 0.25
    assert config.gate.hallucination_max == 0
    assert (config.gate.source("coverage_min"), config.gate.source("delta_s_excess_max")) == ("config", "default")
    lam = config.lambda_
    assert (lam.css_min, lam.anchor_support_min, lam.key_recall_min, lam.key_precision_min) == (0.5, 0.40, 0.3, 0.5)
    assert (config.metrics.k, config.metrics.match_tolerance, config.metrics.delta_s) == (5, 0, "nearest")
    assert config.metrics.ndcg_k is None  # ndcg follows k
    assert (config.support.threshold, config.support.model, config.support.params) == (0.7, None, None)
    assert (config.executor.kind, config.executor.scheduler, config.history.path) == ("local", None, None)
    [pipeline] = config.pipelines
    assert (pipeline.name, pipeline.kind, pipeline.options["retriever"], pipeline.options["k"]) == (
        "bm25",
        "reference",
        "bm25",
        5,
    )


# what every pipeline's options held before the schema: one shape for every kind
OPTION_DEFAULTS = {
    "retriever": "bm25",
    "analyzer": "lowercase+ascii_fold",
    "k": 5,
    "rerank": None,
    "chunk_size": 64,
    "chunk_overlap": 0,
    "temperature": 0.0,
    "traces": None,
    "format": "traces",
    "factory": None,
    "command": None,
    "timeout_s": 30.0,
    "options": {},
    "isolation": "thread",
    "max_in_flight": None,
    "rate_limit": None,
    "retries": 0,
    "retry_backoff_s": 0.5,
    "cache": False,
    "code": [],
    "history_key": None,
}


def test_every_kind_keeps_every_option_key_with_its_default(tmp_path):
    path = write(
        tmp_path,
        """[[pipelines]]
name = "ref"
kind = "reference"

[[pipelines]]
name = "old"
kind = "replay"
traces = "recorded/traces.jsonl"

[[pipelines]]
name = "mine"
kind = "python"
factory = "mypkg.rag:make_pipeline"
options = { delay = 0.5 }

[[pipelines]]
name = "node"
kind = "command"
command = ["node", "rag.js"]
timeout_s = 10
""",
    )
    ref, replay, python, command = load_config(path).pipelines
    assert ref.options == OPTION_DEFAULTS
    assert replay.options == {**OPTION_DEFAULTS, "traces": path.parent / "recorded" / "traces.jsonl"}
    assert python.options == {**OPTION_DEFAULTS, "factory": "mypkg.rag:make_pipeline", "options": {"delay": 0.5}}
    assert command.options == {**OPTION_DEFAULTS, "command": ["node", "rag.js"], "timeout_s": 10}


def test_rerank_none_means_no_reranker(tmp_path):
    path = write(
        tmp_path,
        '[[pipelines]]\nname = "a"\nkind = "reference"\nrerank = "none"\n\n'
        '[[pipelines]]\nname = "b"\nkind = "reference"\nrerank = "mmr"\n',
    )
    assert [p.options["rerank"] for p in load_config(path).pipelines] == [None, "mmr"]


def test_every_bad_key_is_reported_with_its_line(tmp_path):
    path = write(
        tmp_path,
        """[audit]
paraphrases = "three"
seeds = [1, "2"]
colour = "blue"

[[pipelines]]
name = "x"
kind = "magic"
""",
    )
    assert problems(path) == [
        f"{path}:2: $.audit.paraphrases: expected an integer, found string 'three'",
        f"{path}:3: $.audit.seeds[1]: expected an integer, found string '2'",
        f"{path}:4: $.audit.colour: expected one of allow_cross_section, corpus, cross_section_whitelist, gold, "
        "live_index, markers, offset_unit, out, paraphrases, seeds, workers, found unknown key 'colour'",
        f"{path}:8: $.pipelines[0].kind: expected kind one of reference, replay, python, command, found string 'magic'",
    ]


# (TOML, path, message): each config is one defect; its line is that of the key, counted by hand
OUT_OF_RANGE = [
    ("[audit]\nworkers = 0\n", 2, "$.audit.workers", "expected an integer >= 1, found number 0"),
    ("[audit]\nparaphrases = 0\n", 2, "$.audit.paraphrases", "expected an integer >= 1, found number 0"),
    ("[audit]\nseeds = []\n", 2, "$.audit.seeds", "expected a non-empty array, found array of 0"),
    ("[audit]\nseeds = [1, 2, 1]\n", 2, "$.audit.seeds[2]", "expected distinct seeds, found seed 1 again"),
    ("[audit]\nseeds = [-1]\n", 2, "$.audit.seeds[0]", "expected an integer >= 0, found number -1"),
    ('[audit]\noffset_unit = "byte"\n', 2, "$.audit.offset_unit", "expected 'char' or 'token', found string 'byte'"),
    ("[metrics]\nk = -5\n", 2, "$.metrics.k", "expected an integer >= 1, found number -5"),
    (
        "[metrics]\nmatch_tolerance = -100\n",
        2,
        "$.metrics.match_tolerance",
        "expected an integer >= 0, found number -100",
    ),
    ('[metrics]\ndelta_s = "far"\n', 2, "$.metrics.delta_s", "expected 'nearest' or 'join', found string 'far'"),
    ("[gate]\ndelta_s_max = 1.2\n", 2, "$.gate.delta_s_max", "expected a number in [0, 1], found number 1.2"),
    (
        "[gate]\ndelta_s_mean_max = -0.1\n",
        2,
        "$.gate.delta_s_mean_max",
        "expected a number in [0, 1], found number -0.1",
    ),
    ("[gate]\ncoverage_min = 70\n", 2, "$.gate.coverage_min", "expected a number in [0, 1], found number 70"),
    (
        "[gate]\ncoverage_pass_rate = 1.5\n",
        2,
        "$.gate.coverage_pass_rate",
        "expected a number in [0, 1], found number 1.5",
    ),
    (
        "[gate]\ncitation_match_min = 1.01\n",
        2,
        "$.gate.citation_match_min",
        "expected a number in [0, 1], found number 1.01",
    ),
    (
        "[gate]\nlambda_convergent_min = -1\n",
        2,
        "$.gate.lambda_convergent_min",
        "expected a number in [0, 1], found number -1",
    ),
    ("[gate]\nhallucination_max = -1\n", 2, "$.gate.hallucination_max", "expected an integer >= 0, found number -1"),
    ("[gate]\nmax_errors = -3\n", 2, "$.gate.max_errors", "expected an integer >= 0, found number -3"),
    (
        '[gate]\nlambda_forbid = ["chaotic", "wobbly"]\n',
        2,
        "$.gate.lambda_forbid[1]",
        "expected 'convergent', 'recursive', 'chaotic' or 'divergent', found string 'wobbly'",
    ),
    ("[lambda]\ncss_min = 2\n", 2, "$.lambda.css_min", "expected a number in [0, 1], found number 2"),
    (
        "[lambda]\nanchor_support_min = -0.5\n",
        2,
        "$.lambda.anchor_support_min",
        "expected a number in [0, 1], found number -0.5",
    ),
    ("[support]\nthreshold = 1.5\n", 2, "$.support.threshold", "expected a number in [0, 1], found number 1.5"),
    ('[embedder]\nmodel = ""\n', 2, "$.embedder.model", "expected a non-empty string, found string ''"),
    (
        '[[pipelines]]\nname = "p"\nkind = "reference"\nretriever = "bm26"\n',
        4,
        "$.pipelines[0].retriever",
        "expected 'bm25', 'tfidf', 'dense' or 'hybrid', found string 'bm26'",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "reference"\nrerank = "cohere"\n',
        4,
        "$.pipelines[0].rerank",
        "expected 'none' or 'mmr', found string 'cohere'",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "reference"\nanalyzer = "stemmed"\n',
        4,
        "$.pipelines[0].analyzer",
        "expected 'whitespace', 'lowercase' or 'lowercase+ascii_fold', found string 'stemmed'",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "reference"\nk = 0\n',
        4,
        "$.pipelines[0].k",
        "expected an integer >= 1, found number 0",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "reference"\nchunk_size = 0\n',
        4,
        "$.pipelines[0].chunk_size",
        "expected an integer >= 1, found number 0",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "reference"\nchunk_size = 32\nchunk_overlap = 32\n',
        5,
        "$.pipelines[0].chunk_overlap",
        "expected chunk_overlap < chunk_size (32), found number 32",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "reference"\nchunk_overlap = 64\n',
        4,
        "$.pipelines[0].chunk_overlap",
        "expected chunk_overlap < chunk_size (64), found number 64",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "reference"\ntemperature = -0.5\n',
        4,
        "$.pipelines[0].temperature",
        "expected a number >= 0, found number -0.5",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "command"\ncommand = ["rag"]\ntimeout_s = 0\n',
        5,
        "$.pipelines[0].timeout_s",
        "expected a number > 0, found number 0",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "replay"\ntraces = "t.jsonl"\ntimeout_s = -1.5\n',
        5,
        "$.pipelines[0].timeout_s",
        "expected a number > 0, found number -1.5",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "command"\ncommand = []\n',
        4,
        "$.pipelines[0].command",
        "expected a non-empty array, found array of 0",
    ),
    (
        '[[pipelines]]\nname = ""\nkind = "replay"\ntraces = "t"\n',
        2,
        "$.pipelines[0].name",
        "expected a non-empty string, found string ''",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "replay"\ntraces = "t"\n\n[[pipelines]]\nname = "p"\nkind = "replay"\ntraces = "u"\n',
        2,
        "$.pipelines[0].name",
        "expected unique pipeline names, found 'p' 2 times",
    ),
]


@pytest.mark.parametrize(("text", "line", "at", "message"), OUT_OF_RANGE, ids=[c[2] for c in OUT_OF_RANGE])
def test_out_of_range_values_are_config_errors(tmp_path, text, line, at, message):
    path = write(tmp_path, text)
    assert problems(path)[0] == f"{path}:{line}: {at}: {message}"


def test_duplicate_pipeline_names_are_reported_on_each(tmp_path):
    path = write(
        tmp_path,
        '[[pipelines]]\nname = "p"\nkind = "replay"\ntraces = "t"\n\n'
        '[[pipelines]]\nname = "p"\nkind = "replay"\ntraces = "u"\n',
    )
    assert problems(path) == [
        f"{path}:2: $.pipelines[0].name: expected unique pipeline names, found 'p' 2 times",
        f"{path}:7: $.pipelines[1].name: expected unique pipeline names, found 'p' 2 times",
    ]


NON_FINITE = [
    ("[gate]\ncoverage_min = nan\n", 2, "$.gate.coverage_min", "expected a finite number, found number nan"),
    ("[gate]\ndelta_s_max = inf\n", 2, "$.gate.delta_s_max", "expected a finite number, found number inf"),
    ("[gate]\ndelta_s_mean_max = -inf\n", 2, "$.gate.delta_s_mean_max", "expected a finite number, found number -inf"),
    ("[lambda]\ncss_min = +nan\n", 2, "$.lambda.css_min", "expected a finite number, found number nan"),
    ("[support]\nthreshold = nan\n", 2, "$.support.threshold", "expected a finite number, found number nan"),
    ("[metrics]\nk = inf\n", 2, "$.metrics.k", "expected an integer, found number inf"),
    ("[gate]\nmax_errors = nan\n", 2, "$.gate.max_errors", "expected an integer, found number nan"),
    (
        '[[pipelines]]\nname = "p"\nkind = "reference"\ntemperature = nan\n',
        4,
        "$.pipelines[0].temperature",
        "expected a finite number, found number nan",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "command"\ncommand = ["rag"]\ntimeout_s = inf\n',
        5,
        "$.pipelines[0].timeout_s",
        "expected a finite number, found number inf",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "python"\nfactory = "m:f"\noptions = { alpha = 1, beta = { gamma = [0.5, nan] } }\n',
        5,
        "$.pipelines[0].options.beta.gamma[1]",
        "expected a finite number, found number nan",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "python"\nfactory = "m:f"\n\n[pipelines.options]\nscale = -inf\n',
        7,
        "$.pipelines[0].options.scale",
        "expected a finite number, found number -inf",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "wizard"\nk = nan\n',
        4,
        "$.pipelines[0].k",
        "expected a finite number, found number nan",
    ),
]


@pytest.mark.parametrize(("text", "line", "at", "message"), NON_FINITE, ids=[c[2] for c in NON_FINITE])
def test_nan_and_infinity_are_config_errors_anywhere(tmp_path, text, line, at, message):
    path = write(tmp_path, text)
    assert f"{path}:{line}: {at}: {message}" in problems(path)


REFERENCE_KEYS = (
    "analyzer, chunk_overlap, chunk_size, history_key, k, kind, name, rerank, retriever, temperature, timeout_s"
)
PER_KIND = [
    (
        '[[pipelines]]\nname = "p"\nkind = "reference"\ncommand = ["rag"]\n',
        4,
        "$.pipelines[0].command",
        f"expected one of {REFERENCE_KEYS} (a reference pipeline), found key 'command', which only command pipelines take",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "replay"\ntraces = "t"\nretriever = "bm25"\n',
        5,
        "$.pipelines[0].retriever",
        "expected one of format, history_key, k, kind, name, timeout_s, traces (a replay pipeline), found key 'retriever', "
        "which only reference pipelines take",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "command"\ncommand = ["rag"]\nfactory = "m:f"\n',
        5,
        "$.pipelines[0].factory",
        "expected one of cache, code, command, history_key, k, kind, max_in_flight, name, rate_limit, retries, retry_backoff_s, timeout_s (a command pipeline), found key 'factory', "
        "which only python pipelines take",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "python"\nfactory = "m:f"\ntemperature = 0.2\n',
        5,
        "$.pipelines[0].temperature",
        "expected one of cache, code, factory, history_key, isolation, k, kind, max_in_flight, name, options, rate_limit, retries, retry_backoff_s, timeout_s (a python pipeline), found key 'temperature', "
        "which only reference pipelines take",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "reference"\ncolour = "blue"\n',
        4,
        "$.pipelines[0].colour",
        f"expected one of {REFERENCE_KEYS} (a reference pipeline), found unknown key 'colour'",
    ),
    # a missing required key points at its table's header
    (
        '[audit]\nseeds = [1]\n\n[[pipelines]]\nname = "p"\nkind = "replay"\n',
        4,
        "$.pipelines[0].traces",
        "expected key 'traces' (required), found none",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "python"\n',
        1,
        "$.pipelines[0].factory",
        "expected key 'factory' (required), found none",
    ),
    (
        '[[pipelines]]\nname = "p"\nkind = "command"\ntimeout_s = 5\n',
        1,
        "$.pipelines[0].command",
        "expected key 'command' (required), found none",
    ),
]


@pytest.mark.parametrize(("text", "line", "at", "message"), PER_KIND, ids=[c[2] for c in PER_KIND])
def test_each_kind_takes_its_own_keys(tmp_path, text, line, at, message):
    path = write(tmp_path, text)
    assert problems(path) == [f"{path}:{line}: {at}: {message}"]


def test_an_error_in_the_second_pipeline_points_into_the_second_block(tmp_path):
    path = write(
        tmp_path,
        """[metrics]
k = 5

[[pipelines]]
name = "first"
kind = "reference"
k = 5

[[pipelines]]
name = "second"
kind = "reference"
k = -1

[[pipelines]]
kind = "replay"
name = "third"
""",
    )
    assert problems(path) == [
        f"{path}:12: $.pipelines[1].k: expected an integer >= 1, found number -1",
        f"{path}:14: $.pipelines[2].traces: expected key 'traces' (required), found none",
    ]


MISSING_LINES = [
    # (TOML, line, path, message): cases that used to have no line at all
    (
        '[[pipelines]]\nkind = "replay"\ntraces = "t"\n',
        1,
        "$.pipelines[0].name",
        "expected key 'name' (required), found none",
    ),
    (
        '[gate]\nk = 1\n\n[[pipelines]]\nname = "p"\ntraces = "t"\n',
        4,
        "$.pipelines[0].kind",
        "expected kind one of reference, replay, python, command, found none",
    ),
    (
        "[audit]\nseeds = [1]\n\n[colour]\nred = 1\n",
        4,
        "$.colour",
        "expected one of audit, audit_log, compare, embedder, executor, gate, gold, history, labels, lambda, metrics, pipelines, support, found unknown table [colour]",
    ),
    (
        'title = "x"\n',
        1,
        "$.title",
        "expected one of audit, audit_log, compare, embedder, executor, gate, gold, history, labels, lambda, metrics, pipelines, support, found unknown key 'title'",
    ),
    (
        '[audit]\nseeds = [1]\n\n[pipelines]\nname = "p"\n',
        4,
        "$.pipelines",
        "expected [[pipelines]] entries, found a single table",
    ),
    ("gate = 3\n", 1, "$.gate", "expected a table, found number 3"),
    (
        'pipelines = [\n  { name = "a", kind = "replay", traces = "t" },\n  3,\n]\n',
        3,
        "$.pipelines[1]",
        "expected a table, found number 3",
    ),
    ("[audit]\ngold = 12\n", 2, "$.audit.gold", "expected a path string, found number 12"),
]


@pytest.mark.parametrize(("text", "line", "at", "message"), MISSING_LINES, ids=[c[2] for c in MISSING_LINES])
def test_every_problem_has_a_line(tmp_path, text, line, at, message):
    path = write(tmp_path, text)
    assert f"{path}:{line}: {at}: {message}" in problems(path)


def test_all_problems_of_a_file_are_reported_together(tmp_path):
    path = write(
        tmp_path,
        """[audit]
workers = 0

[metrics]
k = -5

[gate]
coverage_min = nan
pipelines = ["ghost"]

[[pipelines]]
name = "bm25"
kind = "reference"
command = ["rag"]
""",
    )
    expected = [
        f"{path}:2: $.audit.workers: expected an integer >= 1, found number 0",
        f"{path}:5: $.metrics.k: expected an integer >= 1, found number -5",
        f"{path}:8: $.gate.coverage_min: expected a finite number, found number nan",
        f"{path}:9: $.gate.pipelines[0]: expected names of configured pipelines (bm25), found 'ghost', not configured",
        f"{path}:14: $.pipelines[0].command: expected one of {REFERENCE_KEYS} (a reference pipeline), "
        "found key 'command', which only command pipelines take",
    ]
    assert problems(path) == expected
    result = CliRunner().invoke(main, ["run", str(path)])
    assert result.exit_code == 3
    assert result.stderr.splitlines() == [f"error: {line}" for line in expected]


def test_gate_pipelines_must_be_configured(tmp_path):
    pipelines = (
        '[[pipelines]]\nname = "bm25"\nkind = "reference"\n\n[[pipelines]]\nname = "dense"\nkind = "reference"\n'
    )
    accepted = write(tmp_path, '[gate]\npipelines = ["dense"]\n\n' + pipelines)
    assert load_config(accepted).gate.pipelines == ["dense"]
    rejected = write(tmp_path, '[gate]\npipelines = ["dense", "sparse", "hybrid"]\n\n' + pipelines)
    assert problems(rejected) == [
        f"{rejected}:2: $.gate.pipelines[1]: expected names of configured pipelines "
        "(bm25, dense), found 'sparse', 'hybrid', not configured"
    ]


def test_compare_pairs_name_configured_pipelines_and_margins_lie_inside_0_1(tmp_path):
    pipelines = (
        '[[pipelines]]\nname = "bm25"\nkind = "reference"\n\n[[pipelines]]\nname = "dense"\nkind = "reference"\n'
    )
    accepted = write(
        tmp_path, '[compare]\npairs = [["bm25", "dense"], ["dense", "dense"]]\nmargin = 0.05\n\n' + pipelines
    )
    assert load_config(accepted).compare.model_dump() == {
        "pairs": [["bm25", "dense"], ["dense", "dense"]],
        "margin": 0.05,
        "discordance": 0.1,
        "icc": 0.5,
    }
    rejected = write(
        tmp_path,
        '[compare]\npairs = [["bm25", "dense"],\n  ["bm25", "dense", "sparse"]]\nmargin = 0.0\ndiscordance = 1.0\n\n'
        + pipelines,
    )
    assert problems(rejected) == [
        f"{rejected}:3: $.compare.pairs[1]: expected a pair of two pipeline names [A, B], found an array of 3",
        f"{rejected}:4: $.compare.margin: expected a number in (0, 1), found number 0.0",
        f"{rejected}:5: $.compare.discordance: expected a number in (0, 1), found number 1.0",
    ]
    unknown = write(tmp_path, '[compare]\npairs = [["bm25", "sparse"]]\n\n' + pipelines)
    assert problems(unknown) == [
        f"{unknown}:2: $.compare.pairs[0]: expected pairs of configured pipelines (bm25, dense), found 'sparse', "
        "not configured"
    ]


def test_a_gate_only_config_leaves_gated_names_to_the_gate(tmp_path):
    path = write(tmp_path, '[gate]\npipelines = ["dense-k5"]\ncoverage_min = 0.5\n')
    assert load_config(path).gate.pipelines == ["dense-k5"]


def test_toml_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, "[audit]\nseeds = [1,\n")
    with pytest.raises(InputError, match=r"audit.toml:\d+: expected TOML"):
        load_config(path)


def test_missing_config(tmp_path):
    with pytest.raises(InputError, match="no such config file"):
        load_config(tmp_path / "nope.toml")


def test_the_config_has_one_field_per_table_named_as_the_table(tmp_path):
    """Config mirrors the TOML: a field per table of the schema ([lambda] as `lambda_`, as the schema
    names it), each holding that table's section; besides them only its path and its calibration."""
    tables = {field.alias or name for name, field in _Root.model_fields.items()}
    assert {"audit", "embedder", "lambda", "gold", "labels", "pipelines"} <= tables
    fields = [f.name for f in dataclasses.fields(Config) if f.name not in ("path", "calibration")]
    assert sorted("lambda" if name == "lambda_" else name for name in fields) == sorted(tables)
    path = write(
        tmp_path,
        '[audit]\nparaphrases = 2\nmarkers = ["number"]\n[embedder]\nmodel = "hashing"\n[gold]\nignore = '
        '["gold_section_item_count"]\n[labels]\npath = "labels.jsonl"\n[lambda]\ncss_min = 0.4\n',
    )
    config = load_config(path)
    for name in fields:
        if name != "pipelines":
            assert isinstance(getattr(config, name), _Root.model_fields[name].annotation), name
    assert (config.audit.paraphrases, config.audit.marker_forms, config.embedder.model) == (2, {"number"}, "hashing")
    assert (config.gold.ignore, config.labels.path) == (["gold_section_item_count"], path.parent / "labels.jsonl")
    assert config.lambda_.css_min == 0.4


def test_a_section_built_in_code_takes_a_path_as_it_is_and_toml_still_a_string_only(tmp_path):
    gold = tmp_path / "gold.jsonl"
    audit = AuditSection(gold=gold, corpus=Path("corpus"), paraphrases=2)
    assert (audit.gold, audit.corpus, audit.out, audit.paraphrases) == (gold, Path("corpus"), Path("reports"), 2)
    assert LabelsSection(path=gold).path == gold
    assert Config(audit=audit).audit.gold == gold
    with pytest.raises(ValidationError, match="expected a path string"):  # a value not a path, in code too
        AuditSection(gold=12)
    path = write(tmp_path, '[audit]\ngold = 12\ncorpus = ""\n\n[labels]\npath = true\n')
    assert problems(path) == [
        f"{path}:2: $.audit.gold: expected a path string, found number 12",
        f"{path}:3: $.audit.corpus: expected a path string, found string ''",
        f"{path}:6: $.labels.path: expected a path string, found boolean true",
    ]
