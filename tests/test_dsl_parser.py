"""Unit tests for the DSL parser: every construct and every error (code, line, column)."""

from __future__ import annotations

import pytest

from sophon_dsl.model import (
    Expression, ListValue, Literal, Mode, ObjectValue, OutputMethod, Reference, RetryPolicy, Risk,
    Template,
)
from sophon_dsl.syntax.dsl_parser import parse_dsl


def ok(text):
    plan, diags = parse_dsl(text)
    assert diags == [], [str(d) for d in diags]
    return plan


def one_call(text):
    plan = ok(text)
    assert len(plan.calls) == 1
    return plan.calls[0]


def errors(text):
    _, diags = parse_dsl(text)
    return [(d.code, d.line, d.column) for d in diags]


DESIGN_EXAMPLE = '''\
# comments run to the end of the line
goal = "Compare three competitors and email the team"   # header fields
mode = lazy
input = {"type": "object", "properties": {"topic": {"type": "string"}}}
tool web.search = {"description": "Search the web", "input": {}, "output": {}, "risk": "low"}

†state.profile = fetchUserProfile(userName="Alice")
summarizeProfile(profile=$state.profile)
†state.receipt || †state.error = processPayment(amount=†input.amount)
†state.user.summary && †state.audit.summary = generateSummary(text="...")
†state.items += search(q="x")
s5: gmail.send(
    to=["team@example.com"],
    body=†state.sheet,
)
@risk(medium) @retry(3) @timeout(30) @after(s1, s2)
@model(requiresReasoning=true) @success("the sheet has three rows")
@activity(sendMail) @instance("①") @delegate("SummarizerAgent") @scopes(state, input) @reason("why")
notify(text="Hello †input.name")
sentimentAnalysis(text="This is the best!") -> {"sentiment": "positive"}
return {"status": "Failed"}
'''


def test_design_example():
    plan = ok(DESIGN_EXAMPLE)
    assert plan.form == "dsl" and plan.source == DESIGN_EXAMPLE
    assert plan.goal.startswith("Compare") and plan.mode is Mode.LAZY
    assert plan.input_schema["properties"]["topic"] == {"type": "string"}
    (tool,) = plan.tools
    assert tool.name == "web.search" and tool.risk is Risk.LOW and tool.description == "Search the web"
    c = plan.calls
    assert len(c) == 8
    assert c[0].output.paths == (Reference("state", ("profile",)),)
    assert c[1].params[0].value == Reference("state", ("profile",))
    assert c[2].output.op == "||" and c[2].output.is_branching
    assert c[3].output.op == "&&" and len(c[3].output.paths) == 2
    assert c[4].output.method is OutputMethod.CONCAT
    assert c[5].id == "s5" and c[5].tool == "gmail.send"
    n = c[6]
    assert n.risk is Risk.MEDIUM and n.retry == RetryPolicy(3) and n.timeout == 30
    assert n.after == ("s1", "s2") and n.model_hint == {"requiresReasoning": True}
    assert n.success_criterion == "the sheet has three rows" and n.activity == "sendMail"
    assert n.instance == "①" and n.delegate == "SummarizerAgent" and n.scopes == ("state", "input")
    assert n.reasoning == "why"
    assert n.params[0].value == Template(("Hello ", Reference("input", ("name",))))
    assert c[7].inline_output == ObjectValue((("sentiment", Literal("positive")),))
    assert plan.output == ObjectValue((("status", Literal("Failed")),))


def test_spans_and_attr_spans():
    plan = ok('\n@risk(high) @after(a)\ns1: $state.x = web.search(q="x")\n')
    call = plan.calls[0]
    assert (call.span.line, call.span.column, call.span.end_line, call.span.end_column) == (2, 1, 3, 33)
    assert (call.tool_span.line, call.tool_span.column) == (3, 16)
    names = dict(call.attr_spans)
    assert set(names) == {"_risk", "_after", "_id", "_outputPath"}
    assert (names["_after"].line, names["_after"].column) == (2, 13)
    assert (names["_id"].line, names["_id"].column) == (3, 1)
    p = call.params[0]
    assert (p.span.line, p.span.column, p.value.span.column) == (3, 27, 29)


@pytest.mark.parametrize("op,method", [("=", OutputMethod.SET), ("|=", OutputMethod.ASSIGN),
                                       ("&=", OutputMethod.MERGE), ("+=", OutputMethod.CONCAT),
                                       ("<<=", OutputMethod.PUSH)])
def test_output_methods(op, method):
    assert one_call(f"$state.x {op} f()").output.method is method


def test_values():
    call = one_call("""f(a=1, b=-2.5e3, c=true, d=False, e=None, f=null, g='it\\'s', h='say "hi"',
        i=[1, 2,], j={k: 1, "l m": [], n: {},}, k=$a.b[0].c, l=†a || $b, m=†a && †b,
        n="†{state.name}.txt", o="a ††b", p="$5", q='\\u00e9\\n')""")
    v = {p.name: p.value for p in call.params}
    assert v["a"] == Literal(1) and v["b"] == Literal(-2500.0) and v["c"] == Literal(True)
    assert v["d"] == Literal(False) and v["e"] == Literal(None) and v["f"] == Literal(None)
    assert v["g"] == Literal("it's") and v["h"] == Literal('say "hi"')
    assert v["i"] == ListValue((Literal(1), Literal(2)))
    assert v["j"].entries[1][0] == "l m" and v["j"].get("n") == ObjectValue(())
    assert v["k"] == Reference("a", ("b", 0, "c"))
    assert v["l"] == Expression("||", (Reference("a"), Reference("b")))
    assert v["m"].op == "&&"
    assert v["n"] == Template((Reference("state", ("name",)), ".txt"))
    assert v["o"] == Literal("a †b") and v["p"] == Literal("$5") and v["q"] == Literal("é\n")


def test_single_quoted_with_adjacent_string_is_error():
    # 'it''s' is two strings in a row, not an escape
    assert errors("f(g='it''s')")[0][0] == "E001"


def test_shorthand_argument():
    call = one_call("translateText($input.text, to=$state.lang, $state.items[0].name)")
    assert [p.name for p in call.params] == ["text", "to", "name"]
    assert errors("f($input.items[0])") == [("E001", 1, 3)]


def test_keywords_are_not_reserved():
    plan = ok("goal(x=1)\ntool(y=2); return(z=3)\nmode.set(a=1)\ninput: state(b=2)\ngoal = 'g'")
    assert [c.tool for c in plan.calls] == ["goal", "tool", "return", "mode.set", "state"]
    assert plan.calls[4].id == "input" and plan.goal == "g"


def test_tool_names_with_hyphens_and_quotes():
    plan = ok('fetch-user.get-profile(id=1)\n"my tool"(x=1)\ntool "odd name" = {}\n')
    assert plan.calls[0].tool == "fetch-user.get-profile"
    assert plan.calls[1].tool == "my tool" and plan.tools[0].name == "odd name"


def test_decorators_on_own_lines_and_label_forms():
    call = one_call("@risk(HIGH)\n\n# note\n@retry(max_attempts=5, interval=2, backoff_rate=1.5, max_delay=60,"
                    " jitter=true, errors=[\"Timeout\"])\nlbl:\n  f()")
    assert call.risk is Risk.HIGH and call.id == "lbl"
    assert call.retry == RetryPolicy(5, 2, 1.5, 60, True, ("Timeout",))


def test_model_hint_forms():
    assert one_call('@model({"a": 1}) f()').model_hint == {"a": 1}
    plan, diags = parse_dsl('@model("gpt") f()\n')  # a hint is an object in every form
    assert [d.code for d in diags] == ["E103"] and "object" in diags[0].message
    assert one_call('@model(a=1, b="†raw") f()').model_hint == {"a": 1, "b": "†raw"}


def test_meta_kwargs():
    call = one_call('f(x=1, _instance="①", _outputPath="†state.a || †state.b", _outputMethod="push",'
                    ' _risk="low", _after=["s1"], _retry={"max_attempts": 2}, _timeout=5, _id="k",'
                    ' _modelHint={"m": 1}, _successCriterion="done", _activity="act", _delegate="D",'
                    ' _scopes=["state"], _reasoningForCall="r", _output=[1], "_raw"=2)')
    assert [p.name for p in call.params] == ["x", "_raw"]
    assert call.output.op == "||" and call.output.method is OutputMethod.PUSH
    assert call.instance == "①" and call.risk is Risk.LOW and call.after == ("s1",)
    assert call.retry == RetryPolicy(2) and call.timeout == 5 and call.id == "k"
    assert call.model_hint == {"m": 1} and call.success_criterion == "done"
    assert call.activity == "act" and call.delegate == "D" and call.scopes == ("state",)
    assert call.reasoning == "r" and call.inline_output == ListValue((Literal(1),))
    assert dict(call.attr_spans)["_instance"].column == 8


def test_semicolons_newlines_and_comments():
    plan = ok("; a() ;; b()\n\n\n# c\n c(x=[1,\n 2]) # trailing\n;")
    assert [c.tool for c in plan.calls] == ["a", "b", "c"]


def test_header_strings_are_raw():
    plan = ok('goal = "costs 5† per †state.x"\ninput = {"description": "†{a.b} ††"}')
    assert plan.goal == "costs 5† per †state.x"
    assert plan.input_schema == {"description": "†{a.b} ††"}


def test_escaped_dagger_before_operator_is_text():
    call = one_call('f(a="††||", b="††a && x")')
    assert call.params[0].value == Literal("†||") and call.params[1].value == Literal("†a && x")
    assert errors('f(a="†a || x")') == [("E105", 1, 12)]


def test_return_forms():
    assert ok("return $state.x").output == Reference("state", ("x",))
    assert ok("return null").output == Literal(None)
    assert ok("f()").output is None


def test_file_is_recorded():
    plan, diags = parse_dsl("f(", file="p.plan")
    assert plan.file == "p.plan" and diags[0].file == "p.plan"


# ---------------------------------------------------------------------------
# errors: (code, line, column)

@pytest.mark.parametrize("text,expected", [
    ("f(x=1", [("E001", 1, 2)]),  # at the unclosed "("
    ("f(x=1 y=2)", [("E001", 1, 7)]),
    ("f(x=1)\ng(x=[1 2])\nh(", [("E001", 2, 8), ("E001", 3, 2)]),  # the unclosed '('
    ('f(x="abc)', [("E001", 1, 5)]),
    ("f(x=1) ~", [("E001", 1, 8)]),
    ("f(x=foo)", [("E001", 1, 5)]),
    ("foo 1", [("E001", 1, 5)]),
    ("foo bar = {}", [("E001", 1, 5)]),
    ("@risk(high)", [("E001", 1, 12)]),
    ("f(x=$state.)", [("E105", 1, 5)]),
    ('f(x="a † b")', [("E105", 1, 8)]),
    ("$state. = f()", [("E106", 1, 1)]),
    ("f(_outputPath=1)", [("E106", 1, 3)]),
    ("@risk(extreme) f()", [("E103", 1, 1)]),
    ("@retry(0) f()", [("E103", 1, 1)]),
    ("@retry(tries=2) f()", [("E103", 1, 1)]),
    ("@timeout(-1) f()", [("E103", 1, 1)]),
    ("@timeout(1, 2) f()", [("E103", 1, 1)]),
    ("@after(1) f()", [("E103", 1, 1)]),
    ('f(_outputMethod="add", _outputPath="†a")', [("E103", 1, 3)]),
    ("@bogus f()", [("E104", 1, 1)]),
    ("f(_bogus=1)", [("E104", 1, 3)]),
    ("colour = 1", [("E107", 1, 1)]),
    ("mode = fast", [("E107", 1, 8)]),
    ("goal = 3", [("E107", 1, 8)]),
    ("input = 3", [("E107", 1, 9)]),
    ('goal = "a"\ngoal = "b"', [("E108", 2, 1)]),
    ("f(a=1, a=2)", [("E108", 1, 8)]),
    ("f(x={a: 1, a: 2})", [("E108", 1, 12)]),
    ("@risk(low) @risk(high) f()", [("E108", 1, 12)]),
    ("return 1\nreturn 2", [("E108", 2, 1)]),
    ("tool t = {}\ntool t = {}", []),  # a second declaration refines the first (Acts 002)
    ("tool t = 1", [("E109", 1, 10)]),
    ("tool t = {colour: 1}", [("E109", 1, 10)]),
    ('tool t = {risk: "huge"}', [("E109", 1, 10)]),
])
def test_errors(text, expected):
    assert errors(text) == expected


def test_error_messages_are_helpful():
    _, diags = parse_dsl("f(x=1 y=2)")
    assert "missing ',' between arguments" in diags[0].message
    _, diags = parse_dsl("@retri(3) f()")
    assert "did you mean @retry" in diags[0].message
    _, diags = parse_dsl("f(x=1,\n")
    assert diags[0].message.startswith("'(' is never closed")


def test_recovery_keeps_good_statements():
    plan, diags = parse_dsl("a()\nb(x=)\nc()\nd(\n  y=1 2)\ne()\n")
    assert [c.tool for c in plan.calls] == ["a", "c", "e"]
    assert [(d.line, d.column) for d in diags] == [(2, 5), (5, 7)]


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment", ";;;", "\ufeff", "†", "$", "@", "(((", "\"",
                                  "[" * 5000, "f(x=" + "[" * 3000 + "]" * 3000 + ")", "x=" + "9" * 6000,
                                  "f(x=1e999)", "\x00", "\u2028f()"])
def test_never_raises(text):
    plan, diags = parse_dsl(text)
    lines = text.split("\n")
    for d in diags:
        assert 1 <= d.line <= len(lines) and 1 <= d.column <= len(lines[d.line - 1]) + 1


def test_10k_calls_parse():
    """A 10,000-call plan parses whole (its speed is measured in benchmarks/bench_parse.py and
    docs/performance.md, not asserted here: unit tests hold no timings)."""
    lines = []
    for i in range(10000):
        lines.append(f'$state.r{i} = web.search(query="topic {i}", limit=10, text=$state.r{max(i - 1, 0)})')
    text = "\n".join(lines)
    plan, diags = parse_dsl(text)
    assert len(plan.calls) == 10000 and not diags


def test_a_name_in_another_script_says_names_are_ascii_and_how_to_write_it():
    _, diags = parse_dsl('café: $state.a = f(x=1)\n')  # a label
    (d,) = diags
    assert (d.code, d.span.line, d.span.column) == ("E001", 1, 4)
    assert "names are ASCII" in d.message and '@id("...")' in d.message
    _, diags = parse_dsl('$state.ü = f(x=1)\n')  # an output path's name
    (d,) = diags
    assert (d.code, d.span.line, d.span.column) == ("E106", 1, 1) and "names are ASCII" in d.message
