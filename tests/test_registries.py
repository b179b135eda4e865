"""Tables that name the same things in two places stay in step: held here, not at import time."""

from dataclasses import fields
from typing import get_args

from ragaudit.checks.metrics import registry
from ragaudit.core import analyzers, types
from ragaudit.core.gatechecks.registry import CHECKS
from ragaudit.decisions import gating
from ragaudit.io import config_schema, traces
from ragaudit.io.calibration import THRESHOLDS


def test_the_config_schemas_lambda_states_and_analyzers_are_the_packages():
    assert config_schema.LAMBDA_STATES == types.LAMBDA_STATES
    assert set(get_args(config_schema._Analyzer)) == set(analyzers.ANALYZERS)


def test_every_metric_a_view_or_a_trend_names_is_in_the_registry():
    listed = {*registry.TRENDED, *(n for view in registry.VIEWS.values() for n in view)}
    assert listed <= set(registry.METRICS), sorted(listed - set(registry.METRICS))


def test_the_trace_reader_builds_payloads_in_their_fields_order():
    order = tuple(f.name for f in fields(types.Payload) if f.init and f.name != "missing")
    assert traces._ORDER == order
    assert traces._ORDER[: len(types.REQUIRED_PAYLOAD_FIELDS)] == types.REQUIRED_PAYLOAD_FIELDS
    assert set(traces._ORDER) == set(traces._EXPECTED)


def test_the_gate_sections_keys_are_the_checks_thresholds_and_settings():
    assert gating.READ | {"from_", "sources", "not_gated"} == set(config_schema.GateSection.model_fields)
    assert set(THRESHOLDS) <= gating.READ


def test_every_structural_check_has_its_bar_and_every_other_its_value():
    for check in CHECKS:
        if check.key is None:
            assert check.bar is not None or check.name == "baseline_missing", check.name
            assert check.value is None and check.tune is None and check.card is None, check.name
        else:
            assert check.value is not None and check.failing is not None and check.bar is None, check.name


def test_the_pipeline_kinds_builders_are_functions_of_their_modules_and_the_config_reads_every_kind():
    from importlib import import_module

    from ragaudit.pipelines import pool

    for name, kind in config_schema.KINDS.items():
        module, _, function = kind.build.partition(":")
        assert callable(getattr(import_module(module), function)), kind.build
        assert get_args(kind.table.model_fields["kind"].annotation) == (name,)
    tables = get_args(get_args(get_args(config_schema._Root.model_fields["pipelines"].annotation)[0])[0])
    assert tables == tuple(kind.table for kind in config_schema.KINDS.values())
    assert pool.REMOTE_KINDS == ("python", "command") and pool.SHARED_KINDS == ("reference", "replay")


def test_the_retrievers_the_config_takes_are_the_reference_pipelines():
    from ragaudit.pipelines import reference

    assert get_args(config_schema._Retriever) == config_schema.RETRIEVERS == tuple(reference.RETRIEVERS)
    assert [name for name, r in reference.RETRIEVERS.items() if r.dense] == ["dense", "hybrid"]


def _choices(*path: str) -> dict[str, tuple[str, ...]]:
    """The choices of a command's parameters, by parameter name."""
    from ragaudit.cli.commands import main

    command = main
    for name in path:
        command = command.commands[name]
    return {p.name: tuple(p.type.choices) for p in command.params if hasattr(p.type, "choices")}


def test_the_input_formats_readers_exist_and_every_list_of_formats_is_the_registrys():
    from importlib import import_module

    from ragaudit.io import spans

    for name, fmt in types.INPUT_FORMATS.items():
        if fmt.reader is not None:
            module, _, function = fmt.reader.partition(":")
            assert callable(getattr(import_module(module), function)), fmt.reader
            assert spans._reader(name) is getattr(import_module(module), function)
    assert spans._reader("traces") is None
    assert types.FORMATS == ("traces", "otlp", "phoenix", "langfuse") and types.SPAN_FORMATS == types.FORMATS[1:]
    assert get_args(config_schema._Replay.model_fields["format"].annotation) == types.FORMATS
    assert _choices("validate")["source"] == types.FORMATS
    assert _choices("ingest")["source"] == types.SPAN_FORMATS


def test_the_executor_kinds_are_the_executors_names_and_every_list_of_them_is_the_registrys():
    from ragaudit.auditing.executors import DaskClient
    from ragaudit.core.execution import Processes, Threads

    assert (Threads.name, Processes.name, DaskClient.name) == types.EXECUTOR_KINDS == ("local", "processes", "dask")
    assert get_args(config_schema.ExecutorSection.model_fields["kind"].annotation) == types.EXECUTOR_KINDS
    assert _choices("run")["executor"] == types.EXECUTOR_KINDS
    assert _choices("validate")["executor"] == ("local", "dask")
