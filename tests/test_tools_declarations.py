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
import sophon_dsl.loader
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


# ------------------------------------- item 12: declarations are valid JSON Schema, wrappers

_BAD_PARAMETERS = {"type": "dict", "properties": {"amount": {"type": "float"},
                                                   "pair": {"type": "tuple", "items": {"type": "integer"}}},
                   "required": ["amount"]}


def _check_json(tmp_path, capsys, plan_text, *extra):
    from sophon_dsl.cli import main

    plan = tmp_path / "plan.json"
    plan.write_text(plan_text, encoding="utf-8")
    code = main(["check", str(plan), "--json", *extra])
    return code, json.loads(capsys.readouterr().out or "[]")


def test_plan_tool_schema_with_python_type_names_is_e109_at_the_node(tmp_path, capsys):
    text = json.dumps({"tools": {"pay": {"input": _BAD_PARAMETERS}},
                       "calls": [{"_tool": "pay", "amount": "ten"}]}, indent=2)
    code, diags = _check_json(tmp_path, capsys, text)
    assert code == 1
    got = {(d["code"], d["path"]) for d in diags}
    assert got == {("E109", "$.tools.pay.input.type"),
                   ("E109", "$.tools.pay.input.properties.amount.type"),
                   ("E109", "$.tools.pay.input.properties.pair.type")}
    by_path = {d["path"]: d for d in diags}
    amount = by_path["$.tools.pay.input.properties.amount.type"]
    assert "'float' is not a JSON Schema type; did you mean 'number'?" in amount["message"]
    line = text.splitlines()[amount["line"] - 1]
    assert line[amount["column"] - 1:amount["end_column"] - 1] == '"float"'
    assert "did you mean 'object'?" in by_path["$.tools.pay.input.type"]["message"]
    assert "did you mean 'array'?" in by_path["$.tools.pay.input.properties.pair.type"]["message"]


def test_dsl_tool_schema_with_python_type_names_is_e109_at_the_node():
    text = 'tool pay = {"input": {"type": "object", "properties": {"amount": {"type": "float"}}}}\n'
    diags = sophon_dsl.loader.parse(text).diagnostics
    at = text.index('"float"') + 1
    assert [(d.code, d.line, d.column, d.span.end_column) for d in diags] == [("E109", 1, at, at + 7)]


def test_declared_draft_is_the_one_validated_against():
    # draft-07 allows `items` as a list (tuple validation); 2020-12, the default, does not
    xs = {"type": "object", "properties": {"xs": {"type": "array", "items": [{"type": "string"}]}}}
    legacy = {"$schema": "http://json-schema.org/draft-07/schema#", **xs}
    assert sophon_dsl.loader.parse('tool t = {"input": %s}\n' % json.dumps(legacy)).diagnostics == []
    diags = sophon_dsl.loader.parse('tool t = {"input": %s}\n' % json.dumps(xs)).diagnostics
    assert [d.code for d in diags] == ["E109"]


def test_declaration_file_with_bad_schema_is_refused_by_the_cli(tmp_path, capsys):
    from sophon_dsl.cli import main

    decls = tmp_path / "tools.json"
    decls.write_text(json.dumps([{"name": "pay", "description": "Pay",
                                  "parameters": _BAD_PARAMETERS}], indent=2), encoding="utf-8")
    plan = tmp_path / "p.plan"
    plan.write_text('pay(amount=1.5)\n', encoding="utf-8")
    assert main(["check", str(plan), "--tools", str(decls)]) == 2
    err = capsys.readouterr().err
    assert "E109" in err and "'float' is not a JSON Schema type" in err and "tools.json:9:" in err


@pytest.mark.parametrize("wrapped", [
    {"type": "function", "function": {"name": "pay", "description": "Pay an amount",
                                      "parameters": {"type": "object", "properties": {
                                          "amount": {"type": "number"}}, "required": ["amount"]},
                                      "strict": True}},
    [{"type": "function", "function": {"name": "pay", "description": "Pay an amount",
                                       "parameters": {"type": "object", "properties": {
                                           "amount": {"type": "number"}}, "required": ["amount"]}}}],
    {"tools": [{"type": "function", "name": "pay", "description": "Pay an amount", "strict": False,
                "parameters": {"type": "object", "properties": {"amount": {"type": "number"}},
                               "required": ["amount"]}}]},
    {"name": "pay", "description": "Pay an amount",
     "input_schema": {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}},
    [{"name": "pay", "description": "Pay an amount", "cache_control": {"type": "ephemeral"},
      "input_schema": {"type": "object", "properties": {"amount": {"type": "number"}},
                       "required": ["amount"]}}],
], ids=["openai", "openai-list", "openai-flat", "anthropic", "anthropic-list"])
def test_declaration_files_accept_openai_and_anthropic_tools(tmp_path, capsys, wrapped):
    from sophon_dsl.cli import main

    decls = tmp_path / "tools.json"
    decls.write_text(json.dumps(wrapped), encoding="utf-8")
    good = tmp_path / "good.plan"
    good.write_text('pay(amount=2.5)\n', encoding="utf-8")
    bad = tmp_path / "bad.plan"
    bad.write_text('pay(amount="two")\n', encoding="utf-8")
    assert main(["check", str(good), "--tools", str(decls)]) == 0
    assert main(["check", str(bad), "--tools", str(decls), "--json"]) == 1
    out = capsys.readouterr().out
    assert [d["code"] for d in json.loads(out[out.index("["):])] == ["E204"]


def test_openai_wrapper_with_a_wrong_type_is_e109():
    from sophon_dsl.syntax.documents import tool_decls_from_node
    from sophon_dsl.syntax.json_source import parse_json

    node, _ = parse_json('[{"type": "tool", "function": {"name": "pay"}}]')
    decls, diags = tool_decls_from_node(node)
    assert [d.code for d in diags] == ["E109"] and diags[0].path == "$[0].type"


# ----------------------------------------- item 20: a second declaration refines the first

def test_dsl_second_declaration_refines_the_first():
    plan = sophon_dsl.loads(
        'tool pay = {"description": "Pay", "risk": "high", '
        '"input": {"type": "object", "properties": {"amount": {"type": "number"}}}}\n'
        'tool pay = {"description": "Pay an invoice", "output": {"type": "string"}}\n'
        'pay(amount=1)\n')
    (decl,) = plan.tools
    assert decl.description == "Pay an invoice" and decl.output_schema == {"type": "string"}
    assert decl.risk is sophon_dsl.model.Risk.HIGH
    assert decl.input_schema == {"type": "object", "properties": {"amount": {"type": "number"}}}
    # the refined schema is the one checked against
    later = sophon_dsl.loader.parse(
        'tool pay = {"input": {"type": "object", "properties": {"amount": {"type": "number"}}}}\n'
        'tool pay = {"input": {"type": "object", "properties": {"amount": {"type": "string"}}}}\n'
        'pay(amount=1)\n')
    assert later.ok and [d.code for d in sophon_dsl.check(later.plan)] == ["E204"]


def test_json_and_context_declarations_refine_in_order():
    doc = {"tools": [{"name": "pay", "description": "Pay", "risk": "low"},
                     {"name": "pay", "latent": False}],
           "calls": []}
    (decl,) = sophon_dsl.loads(json.dumps(doc), format="json").tools
    assert (decl.description, decl.risk.label, decl.latent) == ("Pay", "low", False)
    context = [
        {"type": "tool", "tool": {"name": "greet", "description": "old",
                                  "input": {"type": "object", "properties": {"name": {"type": "string"}}}}},
        {"type": "plan", "plan": [{"_tool": "greet", "name": "Ada"}],
         "tools": {"greet": {"description": "from the plan"}}},
        {"type": "tool", "tool": {"name": "greet", "description": "latest"}},
    ]
    (decl,) = sophon_dsl.loads(json.dumps(context), format="json").tools
    assert decl.description == "latest"
    assert decl.input_schema == {"type": "object", "properties": {"name": {"type": "string"}}}


def test_refined_declarations_print_once_and_round_trip():
    text = ('tool pay = {"description": "a", "risk": "high"}\n'
            'tool pay = {"description": "b"}\n'
            'pay()\n')
    plan = sophon_dsl.loads(text)
    for form in ("dsl", "json", "yaml"):
        again = sophon_dsl.loads(sophon_dsl.dumps(plan, format=form), format=form)
        assert again == plan and len(again.tools) == 1


# The fast walk that spares the metaschema for common schemas never calls an invalid one valid.
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

_KEYWORDS = ["type", "properties", "items", "required", "enum", "anyOf", "oneOf", "allOf", "minimum",
             "maxLength", "minItems", "uniqueItems", "description", "format", "pattern", "$ref",
             "additionalProperties", "not", "prefixItems", "$defs", "examples", "const", "readOnly",
             "dependentRequired", "$id", "multipleOf", "x-extra", "nullable"]
_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 5), st.floats(-2, 2, allow_nan=False),
                  st.sampled_from(["string", "number", "object", "float", "dict", "", "a"]))
_schemas = st.recursive(
    st.one_of(st.booleans(), st.dictionaries(st.sampled_from(_KEYWORDS), _leaf, max_size=3)),
    lambda inner: st.one_of(
        st.dictionaries(st.sampled_from(_KEYWORDS),
                        st.one_of(_leaf, inner, st.lists(st.one_of(_leaf, inner), max_size=3),
                                  st.dictionaries(st.sampled_from(["a", "b", "type"]), inner, max_size=2)),
                        max_size=4)),
    max_leaves=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_schemas)
def test_fast_schema_walk_agrees_with_the_metaschema(schema):
    from sophon_dsl.syntax.declarations import _metaschema_validator, _surely_valid

    if _surely_valid(schema):
        assert list(_metaschema_validator(schema).iter_errors(schema)) == []


def test_acts_002_tool_message_maps_names_to_input_schemas(tmp_path, capsys):
    context = [{"type": "tool", "tool": {"greetUser": {
                    "type": "object", "description": "Greet someone",
                    "properties": {"userName": {"type": "string"}}, "required": ["userName"]}}},
               {"type": "plan", "plan": [{"_tool": "greetUser", "userName": "Ada"}]}]
    (decl,) = sophon_dsl.loads(json.dumps(context), format="json").tools
    assert decl.name == "greetUser" and decl.description == "Greet someone"
    assert decl.input_schema["required"] == ["userName"]
