"""Issue 10 item 9: `dry-run` without mocks does not fail a valid plan because of its samples.

Samples satisfy the schema they sample (property test against jsonschema); what no sample can
stand for is reported as an "unknown sample", never as a failure; no "took None"; mock keys that
match nothing are warned about with the closest name.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sophon_dsl import dry_run, tool
from sophon_dsl.cli import main
from sophon_dsl.runtime.dryrun import sample_from_schema
from sophon_dsl.runtime.samples import sample

TOOLS_PY = '''
from pydantic import BaseModel
from sophon_dsl import tool


class Hit(BaseModel):
    url: str
    rank: int


class Page(BaseModel):
    hits: list[Hit]
    total: int
    next: "Page | None" = None


@tool(name="web.search")
def search(query: str) -> list[dict]:
    return [{"url": "https://example.com/" + query}]


@tool(name="pages")
def pages(query: str) -> Page:
    raise AssertionError("a dry-run runs no tool")


@tool(name="fetch")
def fetch(url: str) -> str:
    raise AssertionError("a dry-run runs no tool")
'''

PLAN = '''$state.hits = web.search(query="x")
$state.page = fetch(url=$state.hits[0].url)
$state.p = pages(query="y")
$state.first = fetch(url=$state.p.hits[0].url)
return {"page": $state.page, "first": $state.first}
'''


@pytest.fixture
def files(tmp_path):
    tools = tmp_path / "tools.py"
    tools.write_text(TOOLS_PY, encoding="utf-8")
    plan = tmp_path / "p.sophon"
    plan.write_text(PLAN, encoding="utf-8")
    return tmp_path, str(tools), str(plan)


def test_list_of_dicts_and_nested_models_do_not_fail_the_dry_run(files, capsys):
    _, tools, plan = files
    assert main(["dry-run", plan, "--tools", tools, "--no-stdlib", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "succeeded"
    assert [c["status"] for c in report["calls"]] == ["succeeded"] * 4
    # the nested model's sample is valid: a hit with its url and rank, found by the reader
    assert report["state"]["state"]["p"]["hits"][0].keys() == {"url", "rank"}
    assert report["unknown_samples"] == [{
        "id": "c1", "tool": "web.search", "ref": "†state.hits[0].url",
        "reason": "the sample of web.search's output has no value at †state.hits[0].url"}]
    assert report["state"]["state"]["page"] == "string"
    assert main(["dry-run", plan, "--tools", tools, "--no-stdlib"]) == 0
    text = capsys.readouterr().out
    assert "dry-run: succeeded" in text and "unknown sample c1 (web.search)" in text


def test_a_schema_no_sample_satisfies_is_an_unknown_sample():
    odd = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}},
           "required": ["code"]}

    @tool(name="odd", output_schema=odd)
    def odd_tool() -> dict:
        return {}

    @tool(name="use")
    def use(code: str) -> str:
        return code

    report = dry_run('$state.o = odd()\n$state.u = use(code=$state.o.code)\n', [odd_tool, use])
    assert report.status == "succeeded"
    assert [u["id"] for u in report.unknown_samples] == ["c1"]
    assert "no sample satisfies the output schema" in report.unknown_samples[0]["reason"]
    # a mock result is still checked against the schema
    bad = dry_run('$state.o = odd()\n', [odd_tool], mocks={"odd": {"result": {"code": "x"}}})
    assert bad.status == "failed"


def test_no_branch_taken_is_said_without_none(files, capsys):
    tmp, tools, _ = files
    plan = tmp / "b.sophon"
    plan.write_text('$state.a || $state.b = web.search(query="x")\n'
                    '$state.c || $state.d = fetch(url=$state.a[0].url)\n', encoding="utf-8")
    mocks = tmp / "m.yaml"
    mocks.write_text('web.search: {branch: 1, result: [{url: u}]}\n', encoding="utf-8")
    assert main(["dry-run", str(plan), "--tools", tools, "--no-stdlib", "--mocks", str(mocks)]) == 0
    text = capsys.readouterr().out
    assert "None" not in text
    assert "branch c2: none taken (skipped)" in text


def test_mock_keys_that_match_nothing_are_warned_about(files, capsys):
    tmp, tools, plan = files
    mocks = tmp / "m.yaml"
    mocks.write_text('fetchh: {result: "p"}\nc2: {result: "q"}\nnothing_like_it: {result: 1}\n', encoding="utf-8")
    assert main(["dry-run", plan, "--tools", tools, "--no-stdlib", "--mocks", str(mocks), "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert len(report["warnings"]) == 2
    assert "'fetchh'" in report["warnings"][0] and "did you mean 'fetch'?" in report["warnings"][0]
    assert "'nothing_like_it'" in report["warnings"][1] and "did you mean" not in report["warnings"][1]
    assert "warning: mock 'fetchh' matches no call id or tool name" in captured.err
    assert "c2" not in captured.err


def test_samples_of_common_shapes():
    schema = {"$defs": {"Hit": {"type": "object", "properties": {"url": {"type": "string", "format": "uri"}},
                                "required": ["url"]}},
              "type": "object", "properties": {"hits": {"type": "array", "items": {"$ref": "#/$defs/Hit"},
                                                        "minItems": 2},
                                               "kind": {"enum": ["a", "b"]},
                                               "maybe": {"anyOf": [{"type": "null"}, {"type": "integer",
                                                                                      "minimum": 3}]}},
              "required": ["hits", "kind"]}
    value, problem = sample(schema)
    assert problem is None
    assert value == {"hits": [{"url": "https://example.com/"}] * 2, "kind": "a", "maybe": 3}
    assert sample_from_schema(schema) == value   # the old name still works


# -- property: for the supported subset, the sample validates -----------------------------------

_FORMATS = ["date-time", "date", "email", "uri", "uuid", "ipv4", "ipv6", "hostname"]
_NAMES = st.sampled_from(["a", "b", "url", "name", "n", "items", "x-y"])
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-50, 50), st.text(max_size=4))


@st.composite
def _strings(draw):
    schema: dict = {"type": "string"}
    if draw(st.booleans()):
        schema["format"] = draw(st.sampled_from(_FORMATS))
    else:
        low = draw(st.integers(0, 6))
        if draw(st.booleans()):
            schema["minLength"] = low
        if draw(st.booleans()):
            schema["maxLength"] = low + draw(st.integers(0, 4))
    return schema


@st.composite
def _numbers(draw):
    typ = draw(st.sampled_from(["integer", "number"]))
    schema: dict = {"type": typ}
    step = draw(st.none() | st.integers(1, 5))
    if step:
        schema["multipleOf"] = step
    low = draw(st.none() | st.integers(-30, 30))
    if low is not None:
        schema["exclusiveMinimum" if draw(st.booleans()) else "minimum"] = low
    if draw(st.booleans()):
        high = (low if low is not None else draw(st.integers(-30, 30))) + (2 * (step or 1)) + draw(st.integers(0, 9))
        if low is None and draw(st.booleans()):
            high = draw(st.integers(-30, 30))
        schema["exclusiveMaximum" if draw(st.booleans()) else "maximum"] = high
    return schema


_LEAVES = st.one_of(
    st.just({"type": "boolean"}), st.just({"type": "null"}), st.just({}), _strings(), _numbers(),
    st.lists(_SCALARS, min_size=1, max_size=4, unique_by=lambda v: json.dumps(v)).map(lambda e: {"enum": e}),
    _SCALARS.map(lambda c: {"const": c}),
    st.just({"$ref": "#/$defs/D"}),
)


def _extend(children):
    objects = st.builds(
        lambda props, req, extra: {"type": "object", "properties": props,
                                   "required": sorted(k for k in props if k in req),
                                   **({} if extra is None else {"additionalProperties": extra})},
        st.dictionaries(_NAMES, children, max_size=4), st.sets(_NAMES), st.none() | st.booleans() | children)
    required_extra = st.builds(
        lambda name, extra: {"type": "object", "required": [name], "additionalProperties": extra},
        _NAMES, children)
    arrays = st.builds(
        lambda items, low, more: {"type": "array", "items": items, "minItems": low,
                                  **({} if more is None else {"maxItems": low + more})},
        children, st.integers(0, 3), st.none() | st.integers(0, 2))
    any_of = st.lists(children, min_size=1, max_size=3).map(lambda bs: {"anyOf": bs})
    typed = {"boolean": st.just({"type": "boolean"}), "null": st.just({"type": "null"}),
             "string": _strings(), "array": arrays, "object": objects}
    one_of = st.lists(st.sampled_from(sorted(typed)), min_size=1, max_size=3, unique=True).flatmap(
        lambda types: st.tuples(*(typed[t] for t in types)).map(lambda bs: {"oneOf": list(bs)}))
    nullable = children.map(lambda c: {"anyOf": [c, {"type": "null"}]})
    return st.one_of(objects, required_extra, arrays, any_of, one_of, nullable)


_BODIES = st.recursive(_LEAVES, _extend, max_leaves=12)
_DEFS = st.recursive(_LEAVES.filter(lambda s: "$ref" not in s), _extend, max_leaves=6).filter(
    lambda s: "#/$defs/D" not in json.dumps(s))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_BODIES, defs=_DEFS)
def test_every_sample_of_the_supported_subset_validates(body, defs):
    schema = {**body, "$defs": {"D": defs}}
    value, problem = sample(schema)
    assert problem is None, (schema, value, problem)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    assert not list(validator.iter_errors(value)), (schema, value)
