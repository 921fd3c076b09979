"""Property tests: plans with maps print and read back equal in every form (issue 12)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from sophon_dsl.loader import dumps, loads
from strategies import plans_with_maps

_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(plans_with_maps())
def test_dsl_round_trip(plan):
    assert loads(dumps(plan, "dsl")) == plan


@_SETTINGS
@given(plans_with_maps())
def test_json_round_trip(plan):
    assert loads(dumps(plan, "json"), "json") == plan


@_SETTINGS
@given(plans_with_maps())
def test_yaml_round_trip(plan):
    assert loads(dumps(plan, "yaml"), "yaml") == plan


@_SETTINGS
@given(plans_with_maps())
def test_forms_agree(plan):
    text = dumps(plan, "dsl")
    assert loads(dumps(loads(text), "json"), "json") == loads(text)
