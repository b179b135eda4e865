"""Tables that name the same things in two places stay in step: held here, not at import time."""

from dataclasses import fields
from typing import get_args

from ragaudit import analyzers, gating, types
from ragaudit.gatechecks.registry import CHECKS
from ragaudit.io import config_schema, traces
from ragaudit.io.calibration import THRESHOLDS
from ragaudit.metrics import registry


def test_the_config_schemas_lambda_states_and_analyzers_are_the_packages():
    assert config_schema.LAMBDA_STATES == types.LAMBDA_STATES
    assert set(get_args(config_schema._Analyzer)) == set(analyzers.ANALYZERS)


def test_every_metric_a_list_names_is_in_the_registry_and_averaged_are_the_run_metrics():
    listed = {*registry.AVERAGED, *registry.TRENDED, *(n for view in registry.VIEWS.values() for n in view)}
    assert listed <= set(registry.METRICS), sorted(listed - set(registry.METRICS))
    assert set(registry.AVERAGED) == {m.name for m in registry.RUN_METRICS}


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
