"""A map's result (its items' results, already JSON) is charged against the run's result
bounds like a tool's result, and written as it was built (Runner.accept_json)."""

from __future__ import annotations

import sophon_dsl
from sophon_dsl.maps import make_map_call
from sophon_dsl.model import Call, MapSpec, OutputTarget, Param, Plan, Reference
from sophon_dsl.tools import tool


@tool
def echo(x: object = None) -> object:
    return x


def _plan() -> Plan:
    body = (Call("echo", (Param("x", Reference("item")),), OutputTarget((Reference("local", ("r",)),))),)
    spec = MapSpec(Reference("input", ("items",)), body)
    return Plan((make_map_call(spec, output=OutputTarget((Reference("state", ("out",)),))),))


ITEMS = [{"id": k, "text": "é" * 40, "tags": ["a", "b"]} for k in range(20)]


def test_map_result_written_as_built() -> None:
    result = sophon_dsl.run(_plan(), [echo], input={"items": ITEMS})
    assert result.status == "succeeded"
    assert result.state["state"]["out"] == [{"r": item} for item in ITEMS]


def test_map_result_over_the_call_bound_fails() -> None:
    # each item's result passes the bound; the map's result, all of them, does not
    result = sophon_dsl.run(_plan(), [echo], input={"items": ITEMS}, max_result_bytes=400)
    assert result.status == "failed"
    cause = next(c.error for c in result.calls if c.error and c.error.error == "Result.TooLarge").cause
    assert "max_result_bytes" in cause


def test_map_result_over_the_run_bound_fails() -> None:
    # the item results (20 x ~90 bytes) fit the run's bound; counted again in the map's, they do not
    result = sophon_dsl.run(_plan(), [echo], input={"items": ITEMS}, max_run_result_bytes=3000)
    assert result.status == "failed"
    assert any(c.error and "max_run_result_bytes" in c.error.cause for c in result.calls)
