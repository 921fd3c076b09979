"""Compiler: dependency edges and every static check (plans built from the model types)."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import BaseModel

from sophon_dsl.compiler import AGENT_STEP, CompiledPlan, check, compile_plan, effective_registry
from sophon_dsl.diagnostics import Span
from sophon_dsl.model import (
    Call,
    Mode,
    OutputMethod,
    OutputTarget,
    Param,
    Plan,
    ToolDecl,
)
from sophon_dsl.refs import json_to_value, parse_reference
from sophon_dsl.tools import ToolSpec, tool

# ---------------------------------------------------------------------------
# Builders: call N sits on line N; its tool name at column 1 (or after the output path);
# parameter k's value at column 20 + 10*k.


def sp(line: int, col: int, width: int = 3) -> Span:
    return Span(line, col, line, col + width)


def C(tool_name: str, line: int, params: dict | None = None, out: str | list | None = None,
      op: str | None = None, method: OutputMethod = OutputMethod.SET, **kw) -> Call:
    ps = []
    for k, (name, val) in enumerate((params or {}).items()):
        ps.append(Param(name, json_to_value(val, sp(line, 20 + 10 * k)), sp(line, 15 + 10 * k)))
    target = None
    if out is not None:
        paths = [out] if isinstance(out, str) else out
        refs = tuple(parse_reference(p, sp(line, 1 + 12 * n)) for n, p in enumerate(paths))
        target = OutputTarget(refs, op if len(refs) > 1 else None, method, sp(line, 1, 10))
    attr_spans = tuple((name, sp(line, 60 + 3 * n)) for n, name in
                       enumerate(("_after", "_id", "_output")))
    if "inline_output" in kw and kw["inline_output"] is not None and not hasattr(kw["inline_output"], "span"):
        kw["inline_output"] = json_to_value(kw["inline_output"], sp(line, 70))
    return Call(tool_name, tuple(ps), target, span=Span(line, 1, line, 80),
                tool_span=sp(line, 40, len(tool_name)), attr_spans=attr_spans, **kw)


def P(*calls: Call, **kw) -> Plan:
    return Plan(tuple(calls), file="t.sophon", **kw)


@tool
def fetch(user: str) -> dict:
    return {}


@tool
def summarize(profile: dict, n: int = 3) -> str:
    return ""


@tool
def count(n: int) -> int:
    return n


@tool
def send(to: list[str], body: str) -> None:
    return None


OPEN = ToolSpec("any", input_schema=None)  # latent, no schema: anything goes
ACT = ToolSpec("act", input_schema=None, func=lambda **kw: None)  # an activity, no schema
TOOLS = [fetch, summarize, count, send, OPEN, ACT]


def codes(diags) -> list[str]:
    return [d.code for d in diags]


def only(diags, code):
    found = [d for d in diags if d.code == code]
    assert found, f"no {code} in {[str(d) for d in diags]}"
    return found


# ---------------------------------------------------------------------------
# Interface


def test_compiled_plan_shape():
    plan = P(C("fetch", 1, {"user": "alice"}, "†state.p"),
             C("summarize", 2, {"profile": "†state.p"}, "†state.s", id="sum"))
    c = compile_plan(plan, TOOLS)
    assert isinstance(c, CompiledPlan)
    assert c.ok and c.diagnostics == ()
    assert c.ids == ("c1", "sum")
    assert c.deps == (frozenset(), frozenset({0}))
    assert c.data_deps[1][0][0].text() == "†state.p" and c.data_deps[1][0][1] == (0,)
    assert c.writers[("state", "p")] == ((0, 0),)
    assert c.writers[("state", "s")] == ((1, 0),)
    assert c.order == (0, 1)
    assert c.index == {"c1": 0, "sum": 1}
    assert "fetch" in c.tools and "agent.step" in c.tools
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.ok = False  # frozen


def test_check_returns_sorted_list():
    plan = P(C("nope2", 2), C("nope1", 1))
    diags = check(plan, TOOLS)
    assert isinstance(diags, list)
    assert [d.line for d in diags] == [1, 2]


def test_effective_registry_layers():
    decl = ToolDecl("web.search", "Search", {"type": "object", "properties": {"q": {"type": "string"}}})
    reg = effective_registry(P(tools=(decl,)), TOOLS)
    assert reg["web.search"].origin == "plan" and reg["agent.step"] is AGENT_STEP
    assert reg["fetch"].func is not None
    mine = ToolSpec("agent.step", input_schema={"type": "object", "properties": {}})
    assert effective_registry(P(), [mine])["agent.step"] is mine


def test_agent_step_builtin_accepts_step_fields():
    plan = P(C("agent.step", 1, {"description": "d", "task": "t", "toolHints": ["a"],
                                 "expected_findings": "x", "subagent_hint": "s", "extra": 1}))
    assert check(plan) == []
    bad = check(P(C("agent.step", 1, {"task": 3})))
    assert codes(bad) == ["E204"]


# ---------------------------------------------------------------------------
# Dependency edges


def deps_of(plan, tools=TOOLS):
    return compile_plan(plan, tools).deps


def test_textual_order_independent():
    plan = P(C("summarize", 1, {"profile": "†state.p"}, "†state.s"),
             C("fetch", 2, {"user": "a"}, "†state.p"))
    c = compile_plan(plan, TOOLS)
    assert c.ok, c.diagnostics
    assert c.deps == (frozenset({1}), frozenset())
    assert c.order == (1, 0)


@pytest.mark.parametrize("read,write,edge", [
    ("†state.a", "†state.a", True),
    ("†state.a", "†state.a.b", True),       # extension
    ("†state.a", "†state", True),           # prefix (whole kind)
    ("†state.a.b", "†state.a", True),       # prefix
    ("†state.a.b", "†state.a.b.c", True),   # extension
    ("†state.a.b", "†state.a.c", False),    # sibling
    ("†state.a", "†state.ab", False),       # not a path prefix
    ("†state.a", "†data.a", False),         # other kind
    ("†state.items[0]", "†state.items", True),
    ("†state.items", "†state.items[1].x", True),
])
def test_prefix_and_extension_edges(read, write, edge):
    plan = P(C("any", 1, {"x": read}), C("any", 2, {}, write))
    assert (1 in deps_of(plan)[0]) is edge


def test_expression_and_template_reads():
    plan = P(C("any", 1, {}, "†state.a"), C("any", 2, {}, "†state.b"), C("any", 3, {}, "†state.c"),
             C("any", 4, {"x": "†state.a || †state.b", "y": "Hello †state.c!",
                          "z": {"deep": ["†{state.a}.txt"]}}))
    c = compile_plan(plan, TOOLS)
    assert c.ok, c.diagnostics
    assert c.deps[3] == frozenset({0, 1, 2})
    assert [r.text() for r, _ in c.data_deps[3]] == ["†state.a", "†state.b", "†state.c", "†state.a"]


def test_all_output_paths_are_writes():
    plan = P(C("any", 1, {}, ["†state.ok", "†state.err"], op="||"),
             C("any", 2, {}, ["†state.u.s", "†state.audit.s"], op="&&"),
             C("any", 3, {"a": "†state.err", "b": "†state.audit"}))
    c = compile_plan(plan, TOOLS)
    assert c.deps[2] == frozenset({0, 1})
    assert c.writers[("state", "err")] == ((0, 1),)
    assert c.writers[("state", "audit", "s")] == ((1, 1),)


def test_reader_depends_on_every_writer_and_not_itself():
    plan = P(C("any", 1, {}, "†state.x"),
             C("any", 2, {"x": "†state.x"}, "†state.x", method=OutputMethod.MERGE),
             C("any", 3, {"x": "†state.x"}))
    c = compile_plan(plan, TOOLS)
    assert c.ok, c.diagnostics
    assert c.deps == (frozenset(), frozenset({0}), frozenset({0, 1}))


def test_after_adds_control_edges():
    plan = P(C("any", 1, id="s1"), C("any", 2, after=("s1",)), C("any", 3, after=("s1", "c2")))
    c = compile_plan(plan, TOOLS)
    assert c.ok
    assert c.control_deps == (frozenset(), frozenset({0}), frozenset({0, 1}))
    assert c.deps[2] == frozenset({0, 1})
    assert c.order == (0, 1, 2)


def test_order_is_stable_by_position():
    plan = P(C("any", 1, {"x": "†state.z"}), C("any", 2), C("any", 3), C("any", 4, {}, "†state.z"))
    assert compile_plan(plan, TOOLS).order == (1, 2, 3, 0)


def test_large_plan_compiles():
    n = 10_000
    calls = [C("count", 1, {"n": 1}, "†state.v0")]
    for i in range(1, n):
        calls.append(C("count", i + 1, {"n": f"†state.v{i - 1}"}, f"†state.v{i}"))
    c = compile_plan(P(*calls), TOOLS)
    assert c.ok
    assert len(c.order) == n and c.order[0] == 0 and c.order[-1] == n - 1
    assert c.deps[n - 1] == frozenset({n - 2})


def test_large_wide_plan_compiles():
    n = 10_000
    calls = [C("any", i + 1, {"x": "†input.q"}, f"†state.r.k{i}") for i in range(n)]
    calls.append(C("any", n + 1, {"all": "†state.r"}))
    c = compile_plan(P(*calls), TOOLS)
    assert c.ok
    assert len(c.deps[n]) == n


# ---------------------------------------------------------------------------
# E2xx: tools and parameters


def test_e201_unknown_tool_did_you_mean():
    d = only(check(P(C("fetsh", 3, {"user": "a"})), TOOLS), "E201")[0]
    assert "did you mean 'fetch'" in d.message
    assert (d.line, d.column) == (3, 40)
    assert d.file == "t.sophon"
    assert codes(check(P(C("fetch", 1, {"user": "a"})), TOOLS)) == []


def test_e201_no_suggestion_when_nothing_close():
    d = only(check(P(C("zzzzzzzz", 1)), TOOLS), "E201")[0]
    assert "did you mean" not in d.message


def test_e202_missing_required():
    d = only(check(P(C("send", 2, {"to": ["a"]})), TOOLS), "E202")
    assert len(d) == 1 and "'body'" in d[0].message
    assert (d[0].line, d[0].column) == (2, 40)
    assert check(P(C("summarize", 1, {"profile": {}})), TOOLS) == []  # n has a default


def test_e203_unknown_parameter_closed_schema():
    d = only(check(P(C("fetch", 1, {"user": "a", "usr": "b"})), TOOLS), "E203")[0]
    assert "'usr'" in d.message and "did you mean 'user'" in d.message
    assert (d.line, d.column) == (1, 25)  # the parameter's span


def test_e203_rule():
    def decl_tool(schema):
        return [ToolSpec("t", input_schema=schema)]
    plan = P(C("t", 1, {"x": 1}))
    # properties given, additionalProperties absent -> closed
    assert codes(check(plan, decl_tool({"type": "object", "properties": {"y": {}}}))) == ["E203"]
    assert codes(check(plan, decl_tool({"properties": {"y": {}}, "additionalProperties": False}))) == ["E203"]
    # open schemas
    assert check(plan, decl_tool({"properties": {"y": {}}, "additionalProperties": True})) == []
    assert check(plan, decl_tool({"properties": {"y": {}}, "additionalProperties": {"type": "integer"}})) == []
    assert check(plan, decl_tool({"type": "object"})) == []
    assert check(plan, decl_tool(None)) == []
    assert check(plan, decl_tool({"properties": {}, "patternProperties": {"^x": {}}})) == []
    assert codes(check(plan, decl_tool({"additionalProperties": False}))) == ["E203"]


def test_e204_literal_type_mismatch():
    d = only(check(P(C("count", 4, {"n": "three"})), TOOLS), "E204")[0]
    assert "expects integer" in d.message and "string" in d.message
    assert (d.line, d.column) == (4, 20)
    assert check(P(C("count", 4, {"n": 3})), TOOLS) == []


def test_e204_nested_literal_points_at_item():
    d = only(check(P(C("send", 2, {"to": ["a", 5], "body": "x"})), TOOLS), "E204")[0]
    assert "to[1]" in d.message and "string" in d.message


def test_e204_other_keywords_and_refs_skipped():
    t = [ToolSpec("t", input_schema={"type": "object", "properties": {
        "mode": {"type": "string", "enum": ["a", "b"]}, "obj": {"type": "object"}}})]
    d = only(check(P(C("t", 1, {"mode": "c"})), t), "E204")[0]
    assert "'mode'" in d.message and "string" in d.message
    # a value containing a reference is not a literal: no E204 (types checked by E205)
    assert codes(check(P(C("t", 1, {"obj": {"k": "†input.x"}})), t)) == ["W305"]  # (no input schema)


class Point(BaseModel):
    x: int


@tool
def plot(p: Point) -> None:
    return None


def test_e204_schema_with_defs():
    assert codes(check(P(C("plot", 1, {"p": {"x": "no"}})), [plot])) == ["E204"]
    assert check(P(C("plot", 1, {"p": {"x": 1}})), [plot]) == []


def test_e205_reference_type_mismatch_cwltool_style():
    plan = P(C("fetch", 1, {"user": "a"}, "†state.u"),
             C("summarize", 2, {"profile": "†input.p"}, "†state.a"),
             C("count", 3, {"n": "†state.a"}))
    d = only(check(plan, TOOLS), "E205")[0]
    assert d.message == ("parameter 'n' of call c3 (t.sophon:3:1) expects integer but †state.a is "
                         "written by c2 (t.sophon:2:1) as string")
    assert d.related == ("c2 writes †state.a at t.sophon:2:1 (output of tool 'summarize': string)",)
    assert (d.line, d.column) == (3, 20)


def test_e205_sub_path_and_compatible_cases():
    out = {"type": "object", "properties": {"n": {"type": "integer"}, "name": {"type": "string"}}}
    prod = ToolSpec("prod", input_schema={"type": "object", "properties": {}}, output_schema=out)
    tools = [*TOOLS, prod]
    ok = P(C("prod", 1, {}, "†state.r"), C("count", 2, {"n": "†state.r.n"}))
    assert check(ok, tools) == []
    bad = P(C("prod", 1, {}, "†state.r"), C("count", 2, {"n": "†state.r.name"}))
    d = only(check(bad, tools), "E205")[0]
    assert "as string (inside †state.r)" in d.message
    # number accepted where integer produced and vice versa; unknown schema -> no check
    assert check(P(C("any", 1, {}, "†state.r"), C("count", 2, {"n": "†state.r"})), tools) == []


def test_e205_branch_error_alternative_and_methods_skipped():
    plan = P(C("summarize", 1, {"profile": {}}, ["†state.ok", "†state.err"], op="||"),
             C("count", 2, {"n": "†state.err"}), C("any", 3, {"x": "†state.ok"}))
    assert check(plan, TOOLS) == []  # last alternative may hold an error object
    plan = P(C("summarize", 1, {"profile": {}}, "†state.list", method=OutputMethod.PUSH),
             C("count", 2, {"n": "†state.list"}))
    assert "as array" in only(check(plan, TOOLS), "E205")[0].message


def test_e205_declared_schemas_and_templates():
    plan = P(C("count", 1, {"n": "†input.name"}),
             input_schema={"type": "object", "properties": {"name": {"type": "string"}}})
    assert "declared as string by the plan's input schema" in only(check(plan, TOOLS), "E205")[0].message
    plan = P(C("count", 1, {"n": "n is †input.x"}))
    assert "template" in only(check(plan, TOOLS), "E205")[0].message


def test_e205_expression_operands():
    plan = P(C("summarize", 1, {"profile": {}}, "†state.s"), C("count", 2, {}, "†state.k"),
             C("count", 3, {"n": "†state.s && †state.k"}),   # && -> value of the last: ok
             C("count", 4, {"n": "†state.k || †state.s"}))   # || -> any operand: s mismatches
    assert len(only(check(plan, TOOLS), "E202")) == 1  # c2 calls count without n
    ds = only(check(plan, TOOLS), "E205")
    assert len(ds) == 1 and ds[0].line == 4


def test_e206_require_executor():
    plan = P(C("any", 1), C("any", 2, inline_output={"a": 1}), C("fetch", 3, {"user": "x"}))
    assert check(plan, TOOLS) == []
    d = only(check(plan, TOOLS, require_executor=True), "E206")
    assert len(d) == 1 and (d[0].line, d[0].column) == (1, 40)


# ---------------------------------------------------------------------------
# E3xx: data flow


def test_e301_read_without_writer():
    d = only(check(P(C("any", 2, {"x": "†state.missing"})), TOOLS), "W303")[0]
    assert "†state.missing" in d.message and (d.line, d.column) == (2, 20)
    d = only(check(P(C("any", 1, {"x": "†data.x"})), TOOLS), "E301")[0]
    assert "no call writes it" in d.message


def test_e301_self_write_does_not_count():
    plan = P(C("any", 1, {"x": "†state.c"}, "†state.c"))
    assert codes(check(plan, TOOLS)) == ["W303"]


def test_e301_input_rules():
    # without an input schema any input read is accepted; W305 names it (a run must be given it)
    assert codes(check(P(C("any", 1, {"x": "†input.anything.at.all"})), TOOLS)) == ["W305"]
    schema = {"type": "object", "properties": {"user": {"type": "object", "properties": {
        "name": {"type": "string"}}}, "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {"type": "object"}}}
    for good in ("†input.user", "†input.user.name", "†input.tags[0]", "†input.extra.free.form", "†input"):
        assert check(P(C("any", 1, {"x": good}), input_schema=schema), TOOLS) == [], good
    for bad in ("†input.usr", "†input.user.age", "†input.user.name.x", "†input.tags.x"):
        assert codes(check(P(C("any", 1, {"x": bad}), input_schema=schema), TOOLS)) == ["E301"], bad


def test_e301_state_schema():
    schema = {"type": "object", "properties": {"history": {"type": "array"}}}
    assert check(P(C("any", 1, {"x": "†state.history"}), state_schema=schema), TOOLS) == []
    assert codes(check(P(C("any", 1, {"x": "†state.other"}), state_schema=schema), TOOLS)) == ["E301"]


def test_e301_overlapping_writer_satisfies():
    assert check(P(C("any", 1, {}, "†state.a.b"), C("any", 2, {"x": "†state.a"})), TOOLS) == []
    assert check(P(C("any", 1, {}, "†state"), C("any", 2, {"x": "†state.a.b"})), TOOLS) == []


def test_e301_fallback_expression_needs_one_source():
    plan = P(C("any", 1, {}, "†state.default"), C("any", 2, {"x": "†state.user || †state.default"}))
    assert check(plan, TOOLS) == []
    plan = P(C("any", 1, {"x": "†state.a || †state.b"}))
    ds = only(check(plan, TOOLS), "W303")
    assert len(ds) == 1 and "'||'" in ds[0].message
    plan = P(C("any", 1, {}, "†state.a"), C("any", 2, {"x": "†state.a && †state.b"}))
    assert codes(check(plan, TOOLS)) == ["W303"]


def test_e301_template_and_plan_output():
    assert codes(check(P(C("any", 1, {"x": "Hi †state.who"})), TOOLS)) == ["W303"]
    from sophon_dsl.model import Reference
    plan = P(C("any", 1, {}, "†state.a"), output=json_to_value({"r": "†state.a", "m": "†state.zz"}))
    ds = check(plan, TOOLS)
    assert codes(ds) == ["W303"] and "the plan's output" in ds[0].message
    assert isinstance(plan.output.get("r"), Reference)


def test_e302_cycle_of_two():
    plan = P(C("any", 1, {"x": "†state.b"}, "†state.a"), C("any", 2, {"x": "†state.a"}, "†state.b"))
    c = compile_plan(plan, TOOLS)
    assert not c.ok and sorted(c.order) == [0, 1]
    d = only(c.diagnostics, "E302")
    assert len(d) == 1
    assert "c1 -> c2 -> c1" in d[0].message
    assert (d[0].line, d[0].column) == (1, 40)
    assert any("t.sophon:1:1" in r for r in d[0].related)
    assert any("t.sophon:2:1" in r and "†state.b" in r for r in d[0].related)


def test_e302_cycle_of_three_and_separate_components():
    plan = P(C("any", 1, {"x": "†state.c"}, "†state.a"),
             C("any", 2, {"x": "†state.a"}, "†state.b"),
             C("any", 3, {"x": "†state.b"}, "†state.c"),
             C("any", 4, {"x": "†state.e"}, "†state.d"),
             C("any", 5, {"x": "†state.d"}, "†state.e"),
             C("any", 6, {"x": "†state.a"}))
    ds = only(check(plan, TOOLS), "E302")
    assert [d.message.split(": ", 1)[1] for d in ds] == ["c1 -> c2 -> c3 -> c1", "c4 -> c5 -> c4"]


def test_e302_control_and_self_cycles():
    plan = P(C("any", 1, id="a", after=("b",)), C("any", 2, id="b", after=("a",)))
    d = only(check(plan, TOOLS), "E302")[0]
    assert "a -> b -> a" in d.message and any("runs after" in r for r in d.related)
    d = only(check(P(C("any", 1, after=("c1",))), TOOLS), "E302")[0]
    assert "c1 -> c1" in d.message


def test_e302_long_cycle_no_recursion_limit():
    n = 3000
    calls = [C("any", i + 1, {"x": f"†state.v{(i - 1) % n}"}, f"†state.v{i}") for i in range(n)]
    ds = only(check(P(*calls), TOOLS), "E302")
    assert len(ds) == 1 and ds[0].message.count("->") == n


def test_e303_duplicate_ids():
    plan = P(C("any", 1), C("any", 2, id="s"), C("any", 3, id="s"), C("any", 4, id="c1"))
    ds = only(check(plan, TOOLS), "E303")
    assert [(d.line, d.column) for d in ds] == [(3, 63), (4, 63)]
    assert compile_plan(plan, TOOLS).index == {"c1": 0, "s": 1}
    assert "'s'" in ds[0].message


def test_e304_after_unknown():
    plan = P(C("any", 1, id="fetch_step"), C("any", 2, after=("fetch_stp",)))
    d = only(check(plan, TOOLS), "E304")[0]
    assert "did you mean 'fetch_step'" in d.message and (d.line, d.column) == (2, 60)


def test_e305_max_calls():
    plan = P(*[C("any", i + 1) for i in range(5)])
    assert check(plan, TOOLS, max_calls=5) == []
    d = only(check(plan, TOOLS, max_calls=3), "E305")[0]
    assert d.line == 4 and "5 calls" in d.message
    assert check(plan, TOOLS, max_calls=None) == []


def test_e306_unknown_kind():
    d = only(check(P(C("any", 1, {"x": "†stat.a"})), TOOLS), "E306")[0]
    assert "did you mean 'state'" in d.message
    assert codes(check(P(C("any", 1, {"x": "†stat.a"})), TOOLS)) == ["E306"]  # no extra E301
    plan = P(C("any", 1, {}, "†memo.a"), C("any", 2, {"x": "†memo.a"}))
    assert check(plan, TOOLS) == []  # a kind some call writes is known


def test_e307_input_read_only():
    d = only(check(P(C("any", 1, {}, "†input.x")), TOOLS), "E307")[0]
    assert (d.line, d.column) == (1, 1)


# ---------------------------------------------------------------------------
# W301


def test_w301_concurrent_setters():
    plan = P(C("any", 1, {}, "†state.x"), C("any", 2, {}, "†state.x"))
    d = only(check(plan, TOOLS), "W301")[0]
    assert d.severity.value == "warning" and compile_plan(plan, TOOLS).ok
    assert "c1" in d.message and "c2" in d.message


def test_w301_not_when_ordered_or_merging_or_same_call():
    ordered = P(C("any", 1, {}, "†state.x"), C("any", 2, {"y": "†state.y"}, "†state.x"),
                C("any", 3, {}, "†state.y", after=("c1",)))
    assert check(ordered, TOOLS) == []
    merging = P(C("any", 1, {}, "†state.x", method=OutputMethod.CONCAT),
                C("any", 2, {}, "†state.x", method=OutputMethod.CONCAT))
    assert check(merging, TOOLS) == []
    one_call = P(C("act", 1, {}, ["†state.x", "†state.x"], op="||"), C("any", 2, {"x": "†state.x"}))
    assert check(one_call, TOOLS) == []
    instances = P(C("any", 1, {}, "†state.x", instance="1"), C("any", 2, {}, "†state.x", instance="2"))
    assert check(instances, TOOLS) == []


def test_w301_branches_of_different_calls():
    plan = P(C("act", 1, {}, ["†state.ok", "†state.err"], op="||"),
             C("act", 2, {}, ["†state.ok2", "†state.err"], op="||"),
             C("any", 3, {"x": "†state"}))
    assert codes(check(plan, TOOLS)) == ["W301"]


def test_w301_prefix_overlap():
    plan = P(C("any", 1, {}, "†state.x"), C("any", 2, {}, "†state.x.y"))
    d = only(check(plan, TOOLS), "W301")
    assert len(d) == 1 and "overlapping" in d[0].message and (d[0].line, d[0].column) == (2, 1)
    ordered = P(C("any", 1, {}, "†state.x", id="a"), C("any", 2, {}, "†state.x.y", after=("a",)))
    assert check(ordered, TOOLS) == []


def test_w302_unread_branch_alternative():
    # the last alternative (the catch) needs no reader; an earlier one does
    plan = P(C("act", 1, {}, ["†state.receipt", "†state.error"], op="||"),
             C("any", 2, {"e": "†state.error"}))
    d = only(check(plan, TOOLS), "W302")
    assert len(d) == 1 and "†state.receipt" in d[0].message and (d[0].line, d[0].column) == (1, 1)
    assert compile_plan(plan, TOOLS).ok
    # read through a prefix / extension, by the plan output, or declared in the state schema
    assert check(P(*plan.calls, C("any", 3, {"e": "†state"})), TOOLS) == []
    assert check(P(*plan.calls, C("any", 3, {"e": "†state.receipt.id"})), TOOLS) == []
    assert check(P(*plan.calls, output=json_to_value("†state.receipt")), TOOLS) == []
    schema = {"type": "object", "properties": {"receipt": {"type": "object"}}}
    assert check(P(*plan.calls, state_schema=schema), TOOLS) == []
    # fan-out (&&) paths need no reader
    assert check(P(C("act", 1, {}, ["†state.a", "†state.b"], op="&&")), TOOLS) == []


# ---------------------------------------------------------------------------
# E4xx: modes


def test_e401_inline_output_in_lazy_mode():
    plan = P(C("any", 1, inline_output={"s": "positive"}), mode=Mode.LAZY)
    d = only(check(plan, TOOLS), "E401")[0]
    assert (d.line, d.column) == (1, 66)
    assert check(P(C("any", 1, inline_output={"s": 1})), TOOLS) == []


def test_e402_inline_output_on_activity():
    d = only(check(P(C("count", 1, {"n": 1}, inline_output=3)), TOOLS), "E402")[0]
    assert "count" in d.message
    d = only(check(P(C("any", 1, inline_output=3, activity="sendMail")), TOOLS), "E402")[0]
    assert "sendMail" in d.message


def test_w401_branching_latent_output_eager():
    both_read = {"a": "†state.a", "b": "†state.b"}
    plan = P(C("any", 1, {}, ["†state.a", "†state.b"], op="||", inline_output=1), C("any", 2, both_read))
    d = only(check(plan, TOOLS), "W401")
    assert len(d) == 1 and d[0].severity.value == "warning" and "inline _output" in d[0].message
    assert (d[0].line, d[0].column) == (1, 1)
    # without inline output too: the model collapses the branch while planning
    plan = P(C("any", 1, {}, ["†state.a", "†state.b"], op="||"), C("any", 2, both_read))
    assert codes(check(plan, TOOLS)) == ["W401"]
    # not in lazy mode, not for fan-out, not for activities
    assert check(P(*plan.calls, mode=Mode.LAZY), TOOLS) == []
    assert check(P(C("any", 1, {}, ["†state.a", "†state.b"], op="&&", inline_output=1)), TOOLS) == []
    act = P(C("summarize", 1, {"profile": {}}, ["†state.a", "†state.b"], op="||"), C("any", 2, both_read))
    assert check(act, TOOLS) == []


# ---------------------------------------------------------------------------
# Everything in one pass


def test_all_problems_reported_together():
    plan = P(C("fetsh", 1),
             C("count", 2, {"n": "x", "m": 1}),
             C("any", 3, {"x": "†state.nothing"}, after=("zz",)),
             C("any", 4, {}, "†input.a", id="c1"))
    diags = check(plan, TOOLS, max_calls=3)
    assert codes(diags) == ["E201", "E204", "E203", "W303", "E304", "E305", "E307", "E303"]
    assert [d.line for d in diags] == [1, 2, 2, 3, 3, 4, 4, 4]


def test_with_the_dsl_parser():
    dsl = pytest.importorskip("sophon_dsl.syntax.dsl_parser")
    plan, diags = dsl.parse_dsl(
        '†state.a = f(x=†state.b)\n'
        '†state.b = g(y=†state.a, n="three")\n'
        '@after(s9) h(z="Hi †state.nope")\n', file="x.plan")
    assert not diags
    tools = [ToolSpec("f"), ToolSpec("h"), ToolSpec("g", input_schema={
        "type": "object", "properties": {"y": {}, "n": {"type": "integer"}}})]
    got = [(d.code, d.line, d.column) for d in check(plan, tools)]
    assert ("E302", 1, 12) in got
    assert ("E204", 2, 28) in got
    assert ("E304", 3, 1) in got
    assert ("W303", 3, 16) in got
