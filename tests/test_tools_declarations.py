"""Issue 10, items 10, 11, 12 and 20: typed tool arguments, `_`-prefixed parameters,
declarations validated against the JSON Schema metaschema, OpenAI / Anthropic tool
wrappers in declaration files, and a second declaration refining the first."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json

import pydantic
import pytest

import sophon_dsl
from sophon_dsl import tool


class Address(pydantic.BaseModel):
    city: str
    zip: str | None = None

    @pydantic.field_validator("zip")
    @classmethod
    def digits(cls, v: str | None) -> str | None:
        if v is not None and not v.isdigit():
            raise ValueError("zip must be digits")
        return v


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


# ---------------------------------------------------------------- item 10: typed arguments

@tool
def describe_place(address: Address, points: list[Point] | None = None,
                   by_name: dict[str, Address] | None = None, colour: Colour | None = None) -> str:
    assert isinstance(address, Address)
    assert all(isinstance(p, Point) for p in points or [])
    assert all(isinstance(a, Address) for a in (by_name or {}).values())
    assert colour is None or isinstance(colour, Colour)
    return f"{address.city} {[p.x + p.y for p in points or []]} " \
           f"{sorted(a.city for a in (by_name or {}).values())} {colour and colour.value}"


@tool
async def city_async(address: Address, where: Point | None = None) -> str:
    assert where is None or isinstance(where, Point)
    return address.city.upper()


def test_model_and_dataclass_parameters_receive_instances():
    plan = sophon_dsl.loads(
        '†state.a = describe_place(address={"city": "Paris"}, points=[{"x": 1, "y": 2}], '
        'by_name={"r": {"city": "Rome"}}, colour="blue")\n'
        '†state.b = city_async(address={"city": "Oslo"}, where={"x": 0, "y": 0})\n'
        'return {"a": †state.a, "b": †state.b}\n')
    result = sophon_dsl.run(plan, tools=[describe_place, city_async])
    assert result.status == "succeeded", result.error
    assert result.output == {"a": "Paris [3] ['Rome'] blue", "b": "OSLO"}


def test_a_value_that_does_not_convert_is_tool_input_invalid():
    plan = sophon_dsl.loads('†state.a = describe_place(address={"city": "Paris", "zip": "x1"})')
    result = sophon_dsl.run(plan, tools=[describe_place])
    assert result.status == "failed"
    record = result.calls[0]
    assert record.error.error == "Tool.InputInvalid"
    assert "address.zip" in record.error.cause and "zip must be digits" in record.error.cause
    assert record.attempts == 1


def test_called_from_python_the_function_still_converts():
    assert describe_place.func({"city": "Nice"}) == "Nice [] [] None"
    assert describe_place.func(address=Address(city="Lyon")) == "Lyon [] [] None"
    assert asyncio.run(city_async.func(address={"city": "a"})) == "A"
    assert describe_place.func.__wrapped__.__name__ == "describe_place"


def test_json_native_parameters_pass_unchanged():
    seen = []

    @tool
    def keep(items: list[dict], n: float, label: str | None = None) -> None:
        seen.append((items, n, label))

    value = [{"a": 1}]
    keep.func(items=value, n=2)
    assert seen[0][0] is value and type(seen[0][1]) is int


# ------------------------------------------------------- item 11: `_`-prefixed parameters

@tool
def transfer(_from: str, to: str, _class: int = 1) -> str:
    return f"{_from}->{to}:{_class}"


def test_underscore_parameters_are_kept_in_the_schema_and_passed():
    schema = transfer.input_schema
    assert list(schema["properties"]) == ["_from", "to", "_class"]
    assert schema["required"] == ["_from", "to"]
    plan = sophon_dsl.loads('†state.r = transfer("_from"="a", to="b", "_class"=2)\nreturn †state.r')
    result = sophon_dsl.run(plan, tools=[transfer])
    assert result.status == "succeeded" and result.output == "a->b:2"


def test_underscore_parameter_missing_is_e202():
    plan = sophon_dsl.loads('transfer(to="b")')
    codes = [d.code for d in sophon_dsl.check(plan, tools=[transfer])]
    assert codes == ["E202"]


_TRANSFER_TOOLS = '''
from sophon_dsl import tool

@tool
def transfer(_from: str, to: str, _class: int = 1) -> str:
    return f"{_from}->{to}:{_class}"
'''


@pytest.mark.parametrize("form", ["json", "yaml"])
def test_underscore_parameter_survives_dsl_to_document_to_dsl(tmp_path, capsys, form):
    from sophon_dsl.cli import main

    tools = tmp_path / "tools.py"
    tools.write_text(_TRANSFER_TOOLS, encoding="utf-8")
    dsl = '†state.r = transfer("_from"="a", to="b", "_class"=2)\n'
    plan = tmp_path / "p.plan"
    plan.write_text(dsl, encoding="utf-8")
    assert main(["fmt", "--to", form, str(plan)]) == 0
    document = capsys.readouterr().out
    assert "__from" in document and "__class" in document
    converted = tmp_path / f"p.{form}"
    converted.write_text(document, encoding="utf-8")
    assert main(["check", str(converted), "--tools", str(tools)]) == 0
    capsys.readouterr()
    assert main(["fmt", "--to", "dsl", str(converted)]) == 0
    back = capsys.readouterr().out
    assert sophon_dsl.loads(back) == sophon_dsl.loads(dsl)
    assert main(["run", str(converted), "--tools", str(tools), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"]["state"] == {"r": "a->b:2"}


def test_acts_style_schema_spells_underscore_parameters_with_two():
    from sophon_dsl.syntax.json_source import parse_json
    from sophon_dsl.syntax.documents import tool_decls_from_node

    node, _ = parse_json(json.dumps({"type": "object", "properties": {
        "_tool": {"const": "mail.search"}, "__from": {"type": "string"}, "_output": {"type": "array"}},
        "required": ["__from"]}))
    decls, diags = tool_decls_from_node(node)
    assert diags == [] and decls[0].input_schema == {
        "type": "object", "properties": {"_from": {"type": "string"}}, "required": ["_from"]}
