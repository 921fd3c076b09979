"""Document shapes -> Plan, diagnostics with positions, printer round trips."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sophon_dsl.model import (Call, Expression, ListValue, Literal, Mode, ObjectValue, OutputMethod,
                              OutputTarget, Param, Plan, Reference, RetryPolicy, Risk, Template,
                              ToolDecl)
from sophon_dsl.syntax.doc_printer import dump_json, dump_yaml, plan_to_document
from sophon_dsl.syntax.documents import document_to_plan, tool_decls_from_node
from sophon_dsl.syntax.json_source import parse_json
from sophon_dsl.syntax.yaml_source import parse_yaml


def load(text: str, form: str = "json"):
    node, diags = (parse_json if form == "json" else parse_yaml)(text)
    plan, more = document_to_plan(node, form=form)
    return plan, diags + more


def ok(text: str, form: str = "json") -> Plan:
    plan, diags = load(text, form)
    assert diags == [], [str(d) for d in diags]
    return plan


def codes(diags):
    return [d.code for d in diags]


def inside(text, span):
    lines = text.split("\n")
    for line, col in ((span.line, span.column), (span.end_line, span.end_column)):
        if not (1 <= line <= len(lines)) or not (1 <= col <= len(lines[line - 1]) + 1):
            return False
    return True


# ------------------------------------------------------------------ shapes


def test_list_of_calls_with_every_meta_property():
    text = json.dumps([{
        "_tool": "f", "q": "†input.q", "n": 3, "t": "Hello †input.name!",
        "e": "†state.a || †state.b",
        "_outputPath": "†state.x", "_outputMethod": "concat", "_output": {"k": "v"},
        "_id": "s1", "_activity": "act", "_instance": "①", "_delegate": "Agent",
        "_scopes": ["state", "input"], "_reasoningForCall": "why", "_risk": "Medium",
        "_retry": {"max_attempts": 4, "interval": 2, "backoff_rate": 1.5, "max_delay": 10,
                   "jitter": True, "errors": ["Timeout"]},
        "_timeout": 30, "_after": ["s0"], "_modelHint": {"requiresReasoning": True},
        "_successCriterion": "done",
    }], ensure_ascii=False)
    plan = ok(text)
    (c,) = plan.calls
    assert c.tool == "f" and c.id == "s1" and c.activity == "act" and c.instance == "①"
    assert c.param("q").value == Reference("input", ("q",))
    assert c.param("n").value == Literal(3)
    assert c.param("t").value == Template(("Hello ", Reference("input", ("name",)), "!"))
    assert c.param("e").value == Expression("||", (Reference("state", ("a",)), Reference("state", ("b",))))
    assert c.output == OutputTarget((Reference("state", ("x",)),), None, OutputMethod.CONCAT)
    assert c.inline_output == ObjectValue((("k", Literal("v")),))
    assert c.delegate == "Agent" and c.scopes == ("state", "input") and c.reasoning == "why"
    assert c.risk is Risk.MEDIUM and c.timeout == 30.0 and c.after == ("s0",)
    assert c.retry == RetryPolicy(4, 2.0, 1.5, 10.0, True, ("Timeout",))
    assert c.model_hint == {"requiresReasoning": True} and c.success_criterion == "done"
    assert dict(c.attr_spans).keys() >= {"_tool", "_after", "_outputPath", "_risk"}
    assert c.attr_span("_after").line == 1
    assert plan.call_ids() == ["s1"]


def test_spans_of_calls_params_and_values():
    text = '[\n  {"_tool": "a", "x": [1, "†state.y"]},\n  {"_tool": "b",\n   "_after": ["c1"]}\n]'
    plan = ok(text)
    a, b = plan.calls
    l2 = text.split("\n")[1]
    col = lambda s, start=0: l2.index(s, start) + 1
    assert (a.span.line, a.span.column, a.span.end_column) == (2, col("{"), len(l2))
    assert (a.tool_span.line, a.tool_span.column, a.tool_span.end_column) == (2, col('"a"'), col('"a"') + 3)
    p = a.param("x")
    assert (p.span.line, p.span.column, p.span.end_column) == (2, col('"x"'), col("]") + 1)
    assert (p.value.span.column, p.value.items[1].span.column) == (col("["), col('"†'))
    assert b.span.line == 3 and b.span.end_line == 4
    assert b.attr_span("_after").line == 4 and b.attr_span("_after").column == text.split("\n")[3].index("[") + 1


def test_branching_and_fanout_output_paths():
    plan = ok('[{"_tool": "p", "_outputPath": "†state.receipt || †state.error"},'
              ' {"_tool": "q", "_outputPath": "†state.a&&†state.b.c[0]"}]')
    a, b = plan.calls
    assert a.output.op == "||" and a.output.is_branching and len(a.output.paths) == 2
    assert b.output.op == "&&" and b.output.paths[1] == Reference("state", ("b", "c", 0))


def test_plan_message_and_solution_and_single_call():
    p1 = ok('{"type": "plan", "mode": "lazy", "plan": [{"_tool": "f"}]}')
    assert p1.mode is Mode.LAZY and [c.tool for c in p1.calls] == ["f"]
    p2 = ok('{"calls": [{"_tool": "f"}], "output": {"status": "†state.s"}}')
    assert p2.output == ObjectValue((("status", Reference("state", ("s",))),))
    p3 = ok('{"calls": [], "output": null}')
    assert p3.output is None and p3.calls == ()
    assert ok('{"_tool": "only"}').calls[0].tool == "only"
    assert ok("[]") == Plan()


def test_plan_document_header():
    doc = {
        "goal": "G", "mode": "lazy", "id": "p1",
        "inputSchema": {"type": "object", "properties": {"topic": {"type": "string"}}},
        "stateSchema": {"type": "object"}, "outputSchema": True,
        "tools": {"web.search": {"description": "Search", "input": {"type": "object"},
                                 "output": {"type": "array"}, "risk": "low", "latent": False}},
        "calls": [{"_tool": "web.search", "q": "†input.topic"}], "output": "†state.r",
    }
    plan = ok(json.dumps(doc))
    assert (plan.goal, plan.mode, plan.id) == ("G", Mode.LAZY, "p1")
    assert plan.input_schema["properties"]["topic"] == {"type": "string"}
    assert plan.output_schema is True
    (t,) = plan.tools
    assert t == ToolDecl("web.search", "Search", {"type": "object"}, {"type": "array"}, Risk.LOW, False)
    doc["tools"] = [{"name": "web.search", "description": "Search"}]
    assert ok(json.dumps(doc)).tools == (ToolDecl("web.search", "Search"),)


def test_context_list_and_request():
    ctx = [
        {"type": "tool", "tool": "Tool.detectLanguage"},
        {"type": "tool", "tool": {"name": "x", "description": "X"}},
        {"type": "input", "text": "Bonjour", "n": 2, "f": 1.5, "ok": True, "l": [], "o": {}, "z": None},
        {"type": "state", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}},
        {"type": "plan", "plan": [{"_tool": "old"}]},
        {"type": "plan", "plan": [{"_tool": "new", "_outputPath": "†state.a"}]},
        {"type": "note", "text": "ignored"},
    ]
    plan = ok(json.dumps(ctx))
    assert [c.tool for c in plan.calls] == ["new"]
    assert plan.state_schema["properties"] == {"a": {"type": "string"}}
    props = plan.input_schema["properties"]
    assert props == {"text": {"type": "string"}, "n": {"type": "integer"}, "f": {"type": "number"},
                     "ok": {"type": "boolean"}, "l": {"type": "array"}, "o": {"type": "object"},
                     "z": {"type": "null"}}
    assert [t.name for t in plan.tools] == ["x"]
    req = {"schema": {"type": "object", "properties": {"calls": {"type": "array"},
                                                       "output": {"type": "object", "nullable": True}}},
           "context": ctx}
    plan = ok(json.dumps(req))
    assert plan.output_schema == {"type": "object", "nullable": True}
    plan = ok(json.dumps({"schema": {"type": "string"}, "context": []}))
    assert plan.output_schema == {"type": "string"}


def test_sophon_execution_plan():
    doc = {"id": "plan_abc123", "goal": "Compare", "steps": [
        {"id": "s1", "description": "Research Acme", "dependsOn": [], "toolHints": ["web.search"]},
        {"id": "s4", "description": "Build sheet", "dependsOn": ["s1"], "toolHints": ["document.create"],
         "modelHint": {"requiresReasoning": True}},
        {"id": "s5", "description": "Email", "dependsOn": ["s4"], "toolHints": ["gmail.send"],
         "estimatedRisk": "Medium"},
    ]}
    plan = ok(json.dumps(doc))
    assert plan.id == "plan_abc123" and plan.goal == "Compare"
    s1, s4, s5 = plan.calls
    assert {c.tool for c in plan.calls} == {"agent.step"}
    assert s1.id == "s1" and s1.after == () and s1.param("description").value == Literal("Research Acme")
    assert s1.param("toolHints").value == ListValue((Literal("web.search"),))
    assert s4.after == ("s1",) and s4.model_hint == {"requiresReasoning": True}
    assert s5.risk is Risk.MEDIUM and s5.after == ("s4",)
    assert s5.attr_span("_risk") is not None
    # a bare list of Sophon steps also works
    assert ok(json.dumps(doc["steps"])).calls == plan.calls


def test_planned_steps_bare_and_under_steps():
    steps = [
        {"task": "Find the API base URL", "success_criterion": "URL found",
         "expected_findings": ["api_base_url"], "subagent_hint": "researcher"},
        {"id": "code", "task": "Write client", "success_criterion": "tests pass",
         "expected_findings": [], "depends_on": [1], "subagent_hint": None},
        {"task": "Report", "success_criterion": "sent", "depends_on": [1, "code"]},
    ]
    plan = ok(json.dumps(steps))
    a, b, c = plan.calls
    assert (a.id, b.id, c.id) == ("step1", "code", "step3")
    assert a.success_criterion == "URL found" and a.param("task").value == Literal("Find the API base URL")
    assert a.param("expected_findings").value == ListValue((Literal("api_base_url"),))
    assert a.param("subagent_hint").value == Literal("researcher")
    assert b.after == ("step1",) and c.after == ("step1", "code")
    assert ok(json.dumps({"goal": "g", "steps": steps})).calls == plan.calls
    plan2, diags = load(json.dumps([{"task": "x", "depends_on": [7]}]))
    # (one step, no criterion: the planner's rules add E111s, issue 26 item 3)
    assert codes(diags) == ["E111", "E111", "E103"] and plan2.calls == ()


def test_yaml_document():
    text = """goal: Demo
mode: lazy
calls:
  - _tool: web.search
    query: "†input.topic"
    _outputPath: †state.hits
  - _tool: summarize
    text: †state.hits
    _after: [c1]
"""
    plan = ok(text, "yaml")
    assert plan.goal == "Demo" and plan.calls[1].param("text").value == Reference("state", ("hits",))
    assert plan.calls[1].param("text").value.span.line == 8


# ------------------------------------------------------------------ diagnostics


def test_all_problems_reported_and_bad_calls_skipped():
    text = ('[\n'
            '  {"_tool": "good"},\n'
            '  42,\n'
            '  {"x": 1},\n'
            '  {"_tool": "t", "_outputPath": "state.x"},\n'
            '  {"_tool": "t", "_outputPath": "†state.a || †state.b && †state.c"},\n'
            '  {"_tool": "t", "_risk": "huge", "_timeout": -1, "_retry": 0, "_after": "ok"},\n'
            '  {"_tool": "t", "_bogus": 1, "_outputMethod": "push"},\n'
            '  {"_tool": "t", "v": "a † b"},\n'
            '  {"_tool": "t", "_outputMethod": "sett", "_outputPath": "†state.z"},\n'
            '  {"_tool": "", "_scopes": [1]},\n'
            '  {"_tool": "also_good", "_modelHint": {}}\n'
            ']')
    plan, diags = load(text)
    # a malformed reference keeps its call (its text stands in), as in the DSL (issue 12)
    assert [c.tool for c in plan.calls] == ["good", "t", "also_good"]
    got = [(d.code, d.line, d.path) for d in diags]
    assert got == [
        ("E102", 3, "$[1]"),
        ("E102", 4, "$[2]"),
        ("E106", 5, "$[3]._outputPath"),
        ("E106", 6, "$[4]._outputPath"),
        ("E103", 7, "$[5]._risk"),
        ("E103", 7, "$[5]._timeout"),
        ("E103", 7, "$[5]._retry"),
        ("E104", 8, "$[6]._bogus"),
        ("E103", 8, "$[6]._outputMethod"),
        ("E105", 9, "$[7].v"),
        ("E103", 10, "$[8]._outputMethod"),
        ("E102", 11, "$[9]._tool"),
        ("E103", 11, "$[9]._scopes"),
    ]
    for d in diags:
        assert inside(text, d.span)
    e105 = next(d for d in diags if d.code == "E105")
    assert text.split("\n")[8][e105.column - 1] == "†"
    e104 = next(d for d in diags if d.code == "E104")
    assert "did you mean" not in e104.message or "_" in e104.message


def test_header_and_shape_errors():
    plan, diags = load('{"goal": 3, "mode": "fast", "gaol": "x", "calls": [], "plan": [],'
                       ' "inputSchema": "s", "tools": {"t": {"risk": "extreme", "inputs": {}}}}')
    assert sorted(codes(diags)) == ["E107", "E107", "E107", "E107", "E108", "E109", "E109"]
    assert any("did you mean 'goal'" in d.message for d in diags)
    for text in ('"just a string"', '{"foo": 1}', "3"):
        plan, diags = load(text)
        assert codes(diags) == ["E101"] and plan == Plan()


def test_tool_decl_files():
    node, _ = parse_yaml("tools:\n  web.search:\n    description: Search\n    input: {type: object}\n"
                         "    risk: low\n  send:\n    latent: false\n")
    decls, diags = tool_decls_from_node(node)
    assert diags == [] and [d.name for d in decls] == ["web.search", "send"]
    assert decls[0].risk is Risk.LOW and decls[1].latent is False
    acts = {"type": "object", "description": "Detect the language",
            "properties": {"_tool": {"const": "detectLanguage"}, "text": {"type": "string"},
                           "_output": {"type": "string"}},
            "required": ["_tool", "text"]}
    for doc in (acts, [acts], {"tools": [acts]}, {"anyOf": [acts]}):
        decls, diags = tool_decls_from_node(parse_json(json.dumps(doc))[0])
        assert diags == []
        (d,) = decls
        assert d.name == "detectLanguage" and d.description == "Detect the language"
        assert d.input_schema == {"type": "object", "properties": {"text": {"type": "string"}},
                                  "required": ["text"]}
        assert d.output_schema == {"type": "string"}
    decls, diags = tool_decls_from_node(parse_json('[{"description": "no name"}, {"name": "a"}, {"name": "a"}]')[0])
    assert codes(diags) == ["E109"] and [d.name for d in decls] == ["a"]  # the second "a" refines the first
    decls, diags = tool_decls_from_node(parse_json('{"x": 1}')[0])
    assert codes(diags) == ["E101"]


# ------------------------------------------------------------------ printer


def test_printer_shapes():
    call = Call("f", (Param("x", Literal(1)),), OutputTarget((Reference("state", ("a",)),)))
    assert plan_to_document(Plan((call,))) == [{"_tool": "f", "x": 1, "_outputPath": "†state.a"}]
    doc = plan_to_document(Plan((call,), output=Literal("done")))
    assert doc == {"calls": [{"_tool": "f", "x": 1, "_outputPath": "†state.a"}], "output": "done"}
    doc = plan_to_document(Plan((call,), goal="g"))
    assert list(doc) == ["goal", "calls"]
    c2 = Call("g", (Param("y", Literal("a†b")),), OutputTarget((Reference("state", ("l",)),), None,
                                                               OutputMethod.PUSH),
              inline_output=Literal(None), id="k", risk=Risk.HIGH, retry=RetryPolicy(5), timeout=2.5)
    d = plan_to_document(Plan((c2,)))[0]
    assert list(d) == ["_tool", "y", "_outputPath", "_outputMethod", "_output", "_id", "_risk",
                       "_retry", "_timeout"]
    assert d["y"] == "a††b" and d["_retry"] == 5 and d["_output"] is None


# hypothesis strategies for arbitrary models ---------------------------------

names = st.from_regex(r"[a-z][a-zA-Z0-9_]{0,5}", fullmatch=True)
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"),
                                       blacklist_characters="\ufeff\x85"), max_size=12)
refs = st.builds(Reference, st.sampled_from(["input", "state", "data"]),
                 st.lists(st.one_of(names, st.integers(0, 9)), max_size=3).map(tuple))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.floats(allow_nan=False, allow_infinity=False, width=32), texts).map(Literal)
exprs = st.builds(Expression, st.sampled_from(["||", "&&"]), st.lists(refs, min_size=2, max_size=3).map(tuple))
plain = st.text(alphabet="abc xyz-!:", min_size=1, max_size=5)
templates = st.lists(st.tuples(plain, refs), min_size=1, max_size=3).map(
    lambda pairs: Template(tuple(x for pair in pairs for x in pair)))
values = st.recursive(
    st.one_of(scalars, refs, exprs, templates),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: ListValue(tuple(xs))),
        st.dictionaries(names, inner, max_size=3).map(lambda d: ObjectValue(tuple(d.items())))),
    max_leaves=6)
targets = st.one_of(
    st.builds(OutputTarget, refs.map(lambda r: (r,)), st.none(), st.sampled_from(list(OutputMethod))),
    st.builds(OutputTarget, st.lists(refs, min_size=2, max_size=3).map(tuple),
              st.sampled_from(["||", "&&"]), st.sampled_from(list(OutputMethod))))
retries = st.builds(RetryPolicy, st.integers(1, 9), st.floats(0, 60), st.floats(0, 4),
                    st.one_of(st.none(), st.floats(0, 600)), st.booleans(),
                    st.lists(names, max_size=2).map(tuple))
json_data = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-99, 99), texts),
                         lambda i: st.dictionaries(names, i, max_size=3), max_leaves=4)
calls = st.builds(
    Call,
    tool=st.from_regex(r"[a-z][a-z0-9_.]{0,8}", fullmatch=True),
    params=st.dictionaries(names, values, max_size=3).map(
        lambda d: tuple(Param(k, v) for k, v in d.items())),
    output=st.one_of(st.none(), targets),
    inline_output=st.one_of(st.none(), values),
    id=st.one_of(st.none(), names), activity=st.one_of(st.none(), names),
    instance=st.one_of(st.none(), st.sampled_from(["①", "i2"])), delegate=st.one_of(st.none(), names),
    scopes=st.one_of(st.none(), st.lists(names, max_size=2).map(tuple)),
    reasoning=st.one_of(st.none(), names), risk=st.one_of(st.none(), st.sampled_from(list(Risk))),
    retry=st.one_of(st.none(), retries), timeout=st.one_of(st.none(), st.floats(0.001, 1e5)),
    after=st.lists(names, max_size=2).map(tuple),
    model_hint=st.one_of(st.none(), st.dictionaries(names, json_data, max_size=2)),
    success_criterion=st.one_of(st.none(), names))
schemas = st.one_of(st.none(), st.just({"type": "object"}), st.just(True))
tool_decls = st.builds(ToolDecl, names, texts, schemas, schemas, st.sampled_from(list(Risk)), st.booleans())
plans = st.builds(
    Plan, calls=st.lists(calls, max_size=3).map(tuple),
    goal=st.one_of(st.none(), texts), mode=st.sampled_from(list(Mode)), id=st.one_of(st.none(), names),
    input_schema=schemas, state_schema=schemas, output_schema=schemas,
    tools=st.lists(tool_decls, max_size=2, unique_by=lambda t: t.name).map(tuple),
    output=st.one_of(st.none(), values.filter(lambda v: v != Literal(None) or not isinstance(v, Literal))))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans)
def test_round_trip_json_and_yaml(plan):
    if isinstance(plan.output, Literal) and plan.output.value is None:
        plan = Plan(plan.calls, plan.goal, plan.mode, plan.id, plan.input_schema, plan.state_schema,
                    plan.output_schema, plan.tools, None)
    j = dump_json(plan)
    back, diags = load(j)
    assert diags == [], [str(d) for d in diags]
    assert back == plan
    y = dump_yaml(plan)
    back, diags = load(y, "yaml")
    assert diags == [], [str(d) for d in diags]
    assert back == plan


# ------------------------------------------------------------------ robustness

VALID = json.dumps({"goal": "g", "tools": {"t": {"description": "d"}}, "calls": [
    {"_tool": "t", "q": "†input.q", "_outputPath": "†state.a || †state.b", "_retry": {"max_attempts": 2}},
    {"_tool": "u", "x": ["†state.a", {"k": "v †state.b"}], "_after": ["c1"], "_risk": "low"}],
    "output": {"s": "†state.a"}}, ensure_ascii=False, indent=1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_documents_never_raise(data):
    text = VALID
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text)))
        j = data.draw(st.integers(i, min(len(text), i + 6)))
        ins = data.draw(st.sampled_from(['', '"', "†", "$", "_x", "[", "}", ",", "||", "null", "1",
                                         '"_tool"', "&&", "\n", ": ", "'", "*a", "&a "]))
        text = text[:i] + ins + text[j:]
    for form in ("json", "yaml"):
        plan, diags = load(text, form)
        assert isinstance(plan, Plan)
        for d in diags:
            assert d.span is not None and inside(text, d.span), (form, str(d))
