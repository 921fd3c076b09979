"""``SchemaValidator.accepts``: the scalar types a hot caller may pass without calling
``check`` (issue 30 item 9).  Skipping ``check`` for them must never pass a value that
``check`` refuses, and a schema that says more than ``type`` accepts no type whole."""

from __future__ import annotations

import pytest

from sophon_dsl.runtime.validation import schema_validator

VALUES = [0, 7, -3, True, False, 2.5, float(2), "", "s", None, [], [1], {}, {"a": 1}]


@pytest.mark.parametrize("schema", [
    {"type": "integer"}, {"type": "number"}, {"type": "string"}, {"type": "boolean"}, {"type": "null"},
    {"type": ["integer", "null"]}, {"type": "integer", "description": "an annotation only"},
    {"description": "anything"}, {"type": "array"}, {"type": "object"},
    {"type": "integer", "minimum": 3}, {"enum": [1, 2]}, {"type": "string", "maxLength": 0},
])
def test_a_type_accepted_whole_is_one_check_passes(schema):
    v = schema_validator(schema)
    assert v is not None
    for value in VALUES:
        if type(value) in v.accepts:
            assert v.check(value) is None, (schema, value)


@pytest.mark.parametrize("schema", [{"type": "integer", "minimum": 3}, {"enum": [1, 2]},
                                    {"type": "string", "maxLength": 0}])
def test_a_schema_about_values_accepts_no_type_whole(schema):
    assert schema_validator(schema).accepts == frozenset()


def test_the_common_schemas():
    assert schema_validator({"type": "integer"}).accepts == {int}  # not bool: jsonschema decides it
    assert schema_validator({"type": "number"}).accepts == {int, float}
    assert schema_validator({"type": ["string", "null"]}).accepts == {str, type(None)}


def test_a_run_still_refuses_what_the_output_schema_refuses():
    from sophon_dsl import tool
    from sophon_dsl.runtime import run

    @tool(name="count")
    async def count(n: int) -> int:
        return True if n == 1 else n  # a bool is no JSON Schema integer

    result = run("†state.a = count(n=2)\n†state.b = count(n=1)\n", [count])
    assert result.calls[0].status == "succeeded"
    assert result.calls[1].status == "failed"
    assert result.calls[1].error.error == "Tool.OutputInvalid"
