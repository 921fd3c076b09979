"""Tests for the canonical DSL printer."""

from __future__ import annotations

from sophon_dsl.model import (
    Call, Expression, ListValue, Literal, Mode, ObjectValue, OutputMethod, OutputTarget, Param, Plan,
    Reference, RetryPolicy, Risk, Template, ToolDecl,
)
from sophon_dsl.syntax.dsl_parser import parse_dsl
from sophon_dsl.syntax.dsl_printer import CANONICAL_DAGGER, format_value, print_dsl

R = Reference


def roundtrip(plan: Plan, dagger: str = "$") -> str:
    text = print_dsl(plan, dagger)
    parsed, diags = parse_dsl(text)
    assert diags == [], (text, diags)
    assert parsed == plan, text
    return text


def test_canonical_dagger():
    assert CANONICAL_DAGGER == "$"


def test_header_order_and_blank_line():
    plan = Plan(
        calls=(Call("f"),), goal="g", mode=Mode.LAZY, id="p1",
        input_schema={"type": "object"}, state_schema={"a b": 1}, output_schema=True,
        tools=(ToolDecl("web.search", "Search", {"type": "object"}, None, Risk.LOW, False),),
        output=Literal(None),
    )
    assert roundtrip(plan) == (
        'goal = "g"\nmode = lazy\nid = "p1"\ninput = {type: "object"}\nstate = {"a b": 1}\n'
        'output = true\ntool web.search = {description: "Search", input: {type: "object"}, '
        'risk: "low", latent: false}\n\nf()\nreturn null\n')


def test_eager_mode_omitted_and_empty_plan():
    assert print_dsl(Plan()) == ""
    assert print_dsl(Plan(calls=(Call("f"),))) == "f()\n"


def test_call_line_and_decorators():
    call = Call(
        "gmail.send", (Param("to", ListValue((Literal("a@b.c"),))), Param("text", R("state", ("text",)))),
        OutputTarget((R("state", ("r",)), R("state", ("e",))), "||"), id="s1",
        risk=Risk.HIGH, retry=RetryPolicy(3), timeout=30.0, after=("s0", "true"),
        model_hint={"requiresReasoning": True}, success_criterion="sent", activity="sendMail",
        instance="①", delegate="Agent", scopes=("state",), reasoning="why",
    )
    text = roundtrip(Plan((call,)))
    assert text == (
        '@risk(high) @retry(3) @timeout(30.0) @after(s0, "true") @model(requiresReasoning=true) '
        '@success("sent") @activity(sendMail) @instance("①") @delegate("Agent") @scopes(state) '
        '@reason("why")\n'
        's1: $state.r || $state.e = gmail.send(to=["a@b.c"], $state.text)\n')


def test_output_methods_and_fanout():
    for method, op in [(OutputMethod.ASSIGN, "|="), (OutputMethod.MERGE, "&="),
                       (OutputMethod.CONCAT, "+="), (OutputMethod.PUSH, "<<=")]:
        text = roundtrip(Plan((Call("f", output=OutputTarget((R("state", ("x",)),), None, method)),)))
        assert text == f"$state.x {op} f()\n"
    text = roundtrip(Plan((Call("f", output=OutputTarget((R("a"), R("b")), "&&")),)))
    assert text == "$a && $b = f()\n"


def test_long_call_breaks_one_argument_per_line():
    params = tuple(Param(f"parameter{i}", Literal("x" * 20)) for i in range(4))
    text = roundtrip(Plan((Call("tool", params, inline_output=Literal(1)),)))
    assert text == 'tool(\n' + "".join(f'    parameter{i}="{"x" * 20}",\n' for i in range(4)) + ') -> 1\n'


def test_retry_policy_kwargs():
    call = Call("f", retry=RetryPolicy(2, interval=0.5, jitter=True, errors=("Timeout",)))
    assert roundtrip(Plan((call,))).startswith(
        '@retry(max_attempts=2, interval=0.5, jitter=true, errors=["Timeout"])\n')


def test_quoting_of_odd_names():
    call = Call("my tool", (Param("_private", Literal(1)), Param("a b", Literal(2)), Param("a-b", Literal(3))),
                id="not a name", activity="null", model_hint={"_x": 1})
    text = roundtrip(Plan((call,), tools=(ToolDecl("x y"),)))
    assert 'tool "x y" = {}' in text
    assert '@id("not a name")' in text and '@activity("null")' in text and '@model({_x: 1})' in text
    assert '"my tool"("_private"=1, "a b"=2, a-b=3)' in text


def test_values():
    assert format_value(Literal(True)) == "true"
    assert format_value(Literal(None)) == "null"
    assert format_value(Literal(1.5)) == "1.5"
    assert format_value(Literal('a "q" †\n')) == '"a \\"q\\" ††\\n"'
    assert format_value(Expression("||", (R("a", ("b",)), R("c", (0,))))) == "$a.b || $c[0]"
    assert format_value(Template(("Hi ", R("input", ("name",)), "!"))) == '"Hi †input.name!"'
    assert format_value(Template((R("s", ("n",)), ".txt"))) == '"†{s.n}.txt"'
    assert format_value(ObjectValue((("a", Literal(1)), ("b c", ListValue(()))))) == '{a: 1, "b c": []}'
    assert format_value(R("state", ("x",)), "†") == "†state.x"


def test_both_daggers_parse_to_same_plan():
    plan = Plan((Call("f", (Param("x", R("input", ("y",))),), OutputTarget((R("state", ("z",)),))),))
    assert roundtrip(plan, "†") == "†state.z = f(x=†input.y)\n"
    assert roundtrip(plan, "$") == "$state.z = f(x=$input.y)\n"


def test_formatting_normalises_input():
    text = "# c\n†state.x=f( a = 'b' , c=True,\n );return {'k':None,}\n"
    plan, diags = parse_dsl(text)
    assert not diags
    assert print_dsl(plan) == '# c\n$state.x = f(a="b", c=true)\nreturn {k: null}\n'
