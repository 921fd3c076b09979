"""The shared per-call attribute rules (sophon_dsl/syntax/attributes.py) and that every form uses them."""

from __future__ import annotations

import json

import pytest

from sophon_dsl.loader import dumps, parse
from sophon_dsl.model import OutputMethod, RetryPolicy, Risk
from sophon_dsl.syntax.attributes import (ATTRIBUTES, OUTPUT_METHOD_WITHOUT_PATH, AttrError,
                                          convert_attribute, describe)
from sophon_dsl.syntax.dsl_parser import META_KWARGS
from sophon_dsl.syntax.documents import META_PROPERTIES

# (attribute, JSON value, model field, model value)
VALID = [
    ("_id", "s1", "id", "s1"),
    ("_id", "step-1", "id", "step-1"),
    ("_activity", "sendMail", "activity", "sendMail"),
    ("_instance", "①", "instance", "①"),
    ("_delegate", "SummarizerAgent", "delegate", "SummarizerAgent"),
    ("_reasoningForCall", "because", "reasoning", "because"),
    ("_successCriterion", "the sheet has three rows", "success_criterion", "the sheet has three rows"),
    ("_successCriterion", "†state.x is set", "success_criterion", "†state.x is set"),
    ("_risk", "medium", "risk", Risk.MEDIUM),
    ("_risk", "High", "risk", Risk.HIGH),
    ("_risk", " none ", "risk", Risk.NONE),
    ("_retry", 3, "retry", RetryPolicy(max_attempts=3)),
    ("_retry", 1, "retry", RetryPolicy(max_attempts=1)),
    ("_retry", {}, "retry", RetryPolicy()),
    ("_retry", {"max_attempts": 5, "interval": 2, "backoff_rate": 1.5, "max_delay": 60, "jitter": True,
                "errors": ["Timeout"]}, "retry", RetryPolicy(5, 2, 1.5, 60, True, ("Timeout",))),
    ("_retry", {"max_delay": None, "interval": 0.0}, "retry", RetryPolicy(max_delay=None, interval=0.0)),
    ("_retry", {"errors": "Tool.Timeout"}, "retry", RetryPolicy(errors=("Tool.Timeout",))),
    ("_timeout", 30, "timeout", 30),
    ("_timeout", 2.5, "timeout", 2.5),
    ("_after", ["s1", "s2"], "after", ("s1", "s2")),
    ("_after", "s1", "after", ("s1",)),
    ("_after", [], "after", ()),
    ("_scopes", ["state", "input"], "scopes", ("state", "input")),
    ("_scopes", "state", "scopes", ("state",)),
    ("_modelHint", {"requiresReasoning": True}, "model_hint", {"requiresReasoning": True}),
    ("_modelHint", {}, "model_hint", {}),
    ("_outputMethod", "push", "output_method", OutputMethod.PUSH),
    ("_outputMethod", "set", "output_method", OutputMethod.SET),
]

# (attribute, bad JSON value, [(message, path inside the value)])
INVALID = [
    ("_id", "", [("_id must be a non-blank string, got a blank string", ())]),
    ("_id", "  ", [("_id must be a non-blank string, got a blank string", ())]),
    ("_id", 3, [("_id must be a non-blank string, got a number", ())]),
    ("_activity", None, [("_activity must be a non-blank string, got null", ())]),
    ("_instance", ["a"], [("_instance must be a non-blank string, got a list", ())]),
    ("_delegate", {"a": 1}, [("_delegate must be a non-blank string, got an object", ())]),
    ("_reasoningForCall", True, [("_reasoningForCall must be a non-blank string, got a boolean", ())]),
    ("_successCriterion", " ", [("_successCriterion must be a non-blank string, got a blank string", ())]),
    ("_risk", "extreme", [("_risk: unknown risk level 'extreme'; expected one of none, low, medium, high, "
                           "critical", ())]),
    ("_risk", 2, [("_risk must be a risk level (none, low, medium, high, critical), got 2", ())]),
    ("_retry", 0, [("_retry must be at least 1 (the maximum number of attempts), got 0", ())]),
    ("_retry", -3, [("_retry must be at least 1 (the maximum number of attempts), got -3", ())]),
    ("_retry", 2.5, [("_retry must be an integer (the maximum number of attempts) or an object with "
                      "max_attempts, interval, backoff_rate, max_delay, jitter, errors, got 2.5", ())]),
    ("_retry", "3", [("_retry must be an integer (the maximum number of attempts) or an object with "
                      "max_attempts, interval, backoff_rate, max_delay, jitter, errors, got '3'", ())]),
    ("_retry", True, [("_retry must be an integer (the maximum number of attempts) or an object with "
                       "max_attempts, interval, backoff_rate, max_delay, jitter, errors, got a boolean", ())]),
    ("_retry", {"tries": 3}, [("unknown _retry field 'tries'; expected max_attempts, interval, backoff_rate, "
                               "max_delay, jitter, errors", ("tries",))]),
    ("_retry", {"intervall": 3}, [("unknown _retry field 'intervall'; did you mean 'interval'?; expected "
                                   "max_attempts, interval, backoff_rate, max_delay, jitter, errors",
                                   ("intervall",))]),
    ("_retry", {"max_attempts": 0}, [("_retry.max_attempts must be an integer >= 1, got 0", ("max_attempts",))]),
    ("_retry", {"max_attempts": 2.0}, [("_retry.max_attempts must be an integer >= 1, got 2.0",
                                        ("max_attempts",))]),
    ("_retry", {"interval": -1}, [("_retry.interval must be a non-negative number, got -1", ("interval",))]),
    ("_retry", {"backoff_rate": None}, [("_retry.backoff_rate must be a non-negative number, got null",
                                         ("backoff_rate",))]),
    ("_retry", {"max_delay": "x"}, [("_retry.max_delay must be a non-negative number or null, got 'x'",
                                     ("max_delay",))]),
    ("_retry", {"jitter": 1}, [("_retry.jitter must be true or false, got 1", ("jitter",))]),
    ("_retry", {"errors": ["A", 1]}, [("_retry.errors must be a list of non-blank error names, got a number "
                                       "at [1]", ("errors",))]),
    ("_retry", {"errors": ""}, [("_retry.errors must be a list of non-blank error names, got a blank string",
                                 ("errors",))]),
    ("_retry", {"errors": {}}, [("_retry.errors must be a list of non-blank error names, got an object",
                                 ("errors",))]),
    # every bad field of a policy is reported
    ("_retry", {"interval": -1, "jitter": "yes"}, [
        ("_retry.interval must be a non-negative number, got -1", ("interval",)),
        ("_retry.jitter must be true or false, got 'yes'", ("jitter",))]),
    ("_timeout", 0, [("_timeout must be a positive number of seconds, got 0", ())]),
    ("_timeout", -5, [("_timeout must be a positive number of seconds, got -5", ())]),
    ("_timeout", "30", [("_timeout must be a positive number of seconds, got '30'", ())]),
    ("_timeout", True, [("_timeout must be a positive number of seconds, got a boolean", ())]),
    ("_after", [1], [("_after must be a list of non-blank names, got a number at [0]", ())]),
    ("_after", ["a", " "], [("_after must be a list of non-blank names, got a blank string at [1]", ())]),
    ("_after", "", [("_after must be a list of non-blank names, got a blank string", ())]),
    ("_after", 3, [("_after must be a list of non-blank names, got a number", ())]),
    ("_scopes", {"state": True}, [("_scopes must be a list of non-blank names, got an object", ())]),
    ("_modelHint", "big", [('_modelHint must be an object such as {"requiresReasoning": true}, got \'big\'', ())]),
    ("_modelHint", [1], [('_modelHint must be an object such as {"requiresReasoning": true}, got a list', ())]),
    ("_outputMethod", "append", [("_outputMethod must be one of set, merge, assign, push, concat, got 'append'",
                                  ())]),
    ("_outputMethod", 1, [("_outputMethod must be one of set, merge, assign, push, concat, got 1", ())]),
]


@pytest.mark.parametrize("attr,data,field,value", VALID)
def test_valid_values(attr, data, field, value):
    got_field, got, errors = convert_attribute(attr, data)
    assert errors == ()
    assert (got_field, got) == (field, value)
    assert type(got) is type(value)
    if attr == "_retry":  # numbers are kept as written, in every form
        assert [type(getattr(got, k)) for k in ("max_attempts", "interval", "backoff_rate", "max_delay")] == \
            [type(getattr(value, k)) for k in ("max_attempts", "interval", "backoff_rate", "max_delay")]


@pytest.mark.parametrize("attr,data,expected", INVALID)
def test_invalid_values(attr, data, expected):
    field, value, errors = convert_attribute(attr, data)
    assert field == ATTRIBUTES[attr] and value is None
    assert [(e.message, e.path) for e in errors] == expected
    assert all(isinstance(e, AttrError) for e in errors)


def test_every_attribute_is_covered_and_known_to_both_readers():
    assert {a for a, *_ in VALID} == set(ATTRIBUTES) == {a for a, *_ in INVALID}
    assert set(ATTRIBUTES) <= set(META_PROPERTIES)
    assert set(ATTRIBUTES) <= set(META_KWARGS)


def test_unknown_attribute():
    assert convert_attribute("_bogus", 1) == ("_bogus", None, (AttrError("unknown attribute _bogus"),))


def test_describe():
    assert [describe(v) for v in (None, False, 1, 1.5, "x", " ", [], {}, ())] == [
        "null", "a boolean", "a number", "a number", "a string", "a blank string", "a list", "an object",
        "a list"]


# ------------------------------------------------------------------ every form uses the rules


def _dsl(attr: str, data) -> str:
    """The call `f()` with the attribute as a `_name=value` keyword argument."""
    out = ', _outputPath=†state.x' if attr == "_outputMethod" else ""
    return f"f({attr}={json.dumps(data, ensure_ascii=False)}{out})\n"


def _json(attr: str, data) -> str:
    call = {"_tool": "f", attr: data}
    if attr == "_outputMethod":
        call["_outputPath"] = "†state.x"
    return json.dumps([call], ensure_ascii=False)


def _yaml(attr: str, data) -> str:
    """A block-style YAML call; the value in flow style (JSON is YAML)."""
    out = "\n  _outputPath: †state.x" if attr == "_outputMethod" else ""
    return f"- _tool: f\n  {attr}: {json.dumps(data, ensure_ascii=False)}{out}\n"


def loads(text: str, format: str):
    """(plan, diagnostics) of plan text; never raises."""
    result = parse(text, format)
    return result.plan, result.diagnostics


def _errors(text: str, fmt: str):
    plan, diags = loads(text, format=fmt)
    return plan, [(d.code, d.message) for d in diags]


@pytest.mark.parametrize("attr,data,expected", INVALID)
def test_same_message_in_every_form(attr, data, expected):
    want = [("E103", message) for message, _ in expected]
    for fmt, text in (("dsl", _dsl(attr, data)), ("json", _json(attr, data)), ("yaml", _yaml(attr, data))):
        plan, got = _errors(text, fmt)
        assert got == want, (fmt, text)
        if fmt != "dsl":  # a bad call is left out of a document
            assert plan.calls == ()


@pytest.mark.parametrize("attr,data,field,value", VALID)
def test_same_value_in_every_form(attr, data, field, value):
    dsl_plan, dsl_diags = loads(_dsl(attr, data), format="dsl")
    json_plan, json_diags = loads(_json(attr, data), format="json")
    yaml_plan, yaml_diags = loads(_yaml(attr, data), format="yaml")
    assert dsl_diags == json_diags == yaml_diags == []
    for plan in (dsl_plan, json_plan, yaml_plan):
        (call,) = plan.calls
        got = call.output.method if attr == "_outputMethod" else getattr(call, field)
        assert got == value and type(got) is type(value)
    assert dsl_plan == json_plan == yaml_plan
    texts = {fmt: dumps(plan, format=fmt) for fmt, plan in
             (("dsl", dsl_plan), ("json", json_plan), ("yaml", yaml_plan))}
    assert len({dumps(parse(t, fmt).plan, format="json") for fmt, t in texts.items()}) == 1


@pytest.mark.parametrize("text,attr", [
    ("@risk(extreme) f()", "_risk"),
    ("@timeout(-5) f()", "_timeout"),
    ("@retry(0) f()", "_retry"),
    ("@retry(tries=3) f()", "_retry"),
    ('@retry(interval=-1, jitter="yes") f()', "_retry"),
    ('@retry(errors=["A", 1]) f()', "_retry"),
    ('@model("big") f()', "_modelHint"),
    ("@after(1) f()", "_after"),
    ('@id("") f()', "_id"),
    ('@success(" ") f()', "_successCriterion"),
    ("@scopes(1) f()", "_scopes"),
])
def test_decorators_build_the_json_value_and_share_the_message(text, attr):
    """A decorator only builds the JSON value; the message is the one of that value in JSON."""
    data = {
        "@risk(extreme)": "extreme", "@timeout(-5)": -5, "@retry(0)": 0, "@retry(tries=3)": {"tries": 3},
        '@retry(interval=-1, jitter="yes")': {"interval": -1, "jitter": "yes"},
        '@retry(errors=["A", 1])': {"errors": ["A", 1]}, '@model("big")': "big", "@after(1)": [1],
        '@id("")': "", '@success(" ")': " ", "@scopes(1)": [1],
    }[text[:-4]]
    _, dsl_got = _errors(text + "\n", "dsl")
    _, json_got = _errors(_json(attr, data), "json")
    _, yaml_got = _errors(_yaml(attr, data), "yaml")
    assert dsl_got == json_got == yaml_got and dsl_got and all(c == "E103" for c, _ in dsl_got)


def test_decorator_shorthands_still_accepted():
    (call,) = loads('@retry(3) @after(a, b) @model(k=1, s="†raw") @scopes(state) @risk(HIGH) '
                    '@timeout(1.5) f()\n', format="dsl")[0].calls
    assert call.retry == RetryPolicy(3) and call.after == ("a", "b") and call.scopes == ("state",)
    assert call.model_hint == {"k": 1, "s": "†raw"} and call.risk is Risk.HIGH and call.timeout == 1.5


def test_json_points_at_the_sub_node():
    text = ('[{"_tool": "f",\n'
            '  "_retry": {"max_attempts": 2,\n'
            '             "max_delay": -1,\n'
            '             "errors": ["A", 7]}}]')
    plan, diags = loads(text, format="json")
    assert plan.calls == ()
    assert [(d.code, d.line, d.column, d.path) for d in diags] == [
        ("E103", 3, 27, "$[0]._retry.max_delay"),
        ("E103", 4, 24, "$[0]._retry.errors"),
    ]


def test_output_method_without_path_same_message():
    _, dsl_got = _errors('f(_outputMethod="push")\n', "dsl")
    _, json_got = _errors('[{"_tool": "f", "_outputMethod": "push"}]', "json")
    assert dsl_got == json_got == [("E103", OUTPUT_METHOD_WITHOUT_PATH)]
