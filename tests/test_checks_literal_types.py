"""``checks.schema.literal_types``: the scalar types a parameter schema accepts whatever the
value (E204's shortcut for literals) never lets through a literal that the full check
(jsonschema) rejects, and says None whenever the value matters."""

from __future__ import annotations

import jsonschema
import pytest

from sophon_dsl.checks.schema import literal_types

SCHEMAS = [
    True, {}, {"description": "anything"},
    {"type": "integer"}, {"type": "number"}, {"type": "string"}, {"type": "boolean"}, {"type": "null"},
    {"type": ["integer", "null"]}, {"type": "array"}, {"type": "object"}, {"type": ["string", "object"]},
    {"type": "integer", "title": "t"},
]
VALUE_MATTERS = [
    {"type": "integer", "minimum": 0}, {"enum": [1, 2]}, {"const": "x"}, {"type": "string", "maxLength": 3},
    {"$ref": "#/$defs/x"}, {"anyOf": [{"type": "integer"}]}, {"type": "integer", "format": "int32"},
    {"type": "float"}, {"type": []}, False, "integer",
]
LITERALS = [0, 7, -3, 2.5, 3.0, True, False, None, "", "text"]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_a_type_only_schema_lets_through_only_what_jsonschema_accepts(schema):
    ok = literal_types(schema)
    assert ok is not None
    for value in LITERALS:
        if type(value) in ok:
            assert jsonschema.Draft202012Validator(schema).is_valid(value), (schema, value)


@pytest.mark.parametrize("schema", VALUE_MATTERS)
def test_a_schema_that_says_more_than_a_type_is_left_to_the_full_check(schema):
    assert literal_types(schema) is None


def test_booleans_are_not_integers_and_integers_are_numbers():
    assert literal_types({"type": "integer"}) == {int}
    assert literal_types({"type": "number"}) == {int, float}
    assert bool not in literal_types({"type": ["integer", "number"]})
