"""data.*, text.* and math.eval as functions."""

from __future__ import annotations

import json

import pytest

from stdlib_tools import StdlibConfig
from stdlib_tools.errors import ToolError
from stdlib_tools.math import safe_eval
from stdlib_tools.text import truncate_result

from stdlib_helpers import tools_by_name


@pytest.fixture(scope="module")
def t():
    return tools_by_name(StdlibConfig(), ["data", "text", "math"])


# --- data -------------------------------------------------------------------------------------

def test_query(t):
    value = {"items": [{"name": "a", "price": 5}, {"name": "b", "price": 15}]}
    assert t["data.query"](value=value, expression="items[?price < `10`].name") == ["a"]
    assert t["data.query"](value=value, expression="length(items)") == 2
    with pytest.raises(ToolError) as err:
        t["data.query"](value=value, expression="items[?")
    assert err.value.code == "Data.InvalidQuery"


def test_pick(t):
    v = {"a": 1, "b": {"c": 2, "d": 3}, "e": 4}
    assert t["data.pick"](value=v, keys=["a", "b.c", "missing"]) == {"a": 1, "b": {"c": 2}}
    with pytest.raises(ToolError) as err:
        t["data.pick"](value=v, keys=["missing"], strict=True)
    assert err.value.code == "Data.MissingKey"


def test_merge_is_deep_and_pure(t):
    a = {"x": {"y": 1, "z": [1]}, "k": 1}
    b = {"x": {"z": [2], "w": 3}}
    out = t["data.merge"](values=[a, b, {"k": None}])
    assert out == {"x": {"y": 1, "z": [2], "w": 3}, "k": None}
    assert a == {"x": {"y": 1, "z": [1]}, "k": 1}


def test_set(t):
    v = {"a": {"b": [1, 2]}}
    assert t["data.set"](value=v, path="a.b[1]", new=9) == {"a": {"b": [1, 9]}}
    assert t["data.set"](value=v, path="a.b[2]", new=3) == {"a": {"b": [1, 2, 3]}}
    assert t["data.set"](value=v, path=["x", "y"], new=True) == {"a": {"b": [1, 2]}, "x": {"y": True}}
    assert t["data.set"](value=None, path="p.q", new=1) == {"p": {"q": 1}}
    assert v == {"a": {"b": [1, 2]}}
    with pytest.raises(ToolError) as err:
        t["data.set"](value=v, path="a.b[7]", new=1)
    assert err.value.code == "Data.InvalidPath"


def test_validate(t):
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0},
                                               "m": {"type": "string", "format": "email"}},
              "required": ["n"]}
    assert t["data.validate"](value={"n": 1}, schema=schema) == {"valid": True, "errors": []}
    out = t["data.validate"](value={"n": -1, "m": "nope"}, schema=schema)
    assert out["valid"] is False
    assert {(e["path"], e["validator"]) for e in out["errors"]} == {(".n", "minimum"), (".m", "format")}
    with pytest.raises(ToolError) as err:
        t["data.validate"](value=1, schema={"type": "nonsense"})
    assert err.value.code == "Data.InvalidSchema"


# --- text -------------------------------------------------------------------------------------

def test_template(t):
    values = {"name": "Ada", "user": {"langs": ["py", "ml"]}, "n": 3, "obj": {"a": 1}}
    assert t["text.template"](template="Hi {name}, {user.langs.0}; n={n} {obj} {{x}}", values=values) \
        == 'Hi Ada, py; n=3 {"a": 1} {x}'
    with pytest.raises(ToolError) as err:
        t["text.template"](template="{missing}", values={})
    assert err.value.code == "Text.MissingValue"
    assert t["text.template"](template="{missing}", values={}, strict=False) == "{missing}"
    # no format-string attribute access
    with pytest.raises(ToolError):
        t["text.template"](template="{name.__class__}", values=values)


def test_split_join(t):
    assert t["text.split"](text=" a  b\nc ") == ["a", "b", "c"]
    assert t["text.split"](text="a, b,,c", separator=",", drop_empty=True) == ["a", "b", "c"]
    assert t["text.split"](text="a1b22c", separator=r"\d+", regex=True) == ["a", "b", "c"]
    assert t["text.join"](items=["a", 1, None, {"k": 2}], separator="|") == 'a|1|null|{"k": 2}'


def test_regex_extract(t):
    out = t["text.regex_extract"](text="Price: 10 USD, 20 EUR", pattern=r"(?P<n>\d+) (\w+)")
    assert [m["match"] for m in out] == ["10 USD", "20 EUR"]
    assert out[0]["groups"] == ["10", "USD"] and out[0]["named"] == {"n": "10"}
    assert out[0]["start"] == 7
    assert len(t["text.regex_extract"](text="A a", pattern="a", flags=["i"])) == 2
    assert len(t["text.regex_extract"](text="a a", pattern="a", first_only=True)) == 1
    with pytest.raises(ToolError) as err:
        t["text.regex_extract"](text="x", pattern="(")
    assert err.value.code == "Text.InvalidRegex"


def test_truncate_default_is_8000_chars(t):
    assert t["text.truncate"].input_schema["properties"]["max_chars"]["default"] == 8000
    short = t["text.truncate"](value="hello")
    assert short == {"text": "hello", "truncated": False, "original_chars": 5,
                     "shown_items": None, "total_items": None}


def test_truncate_json_array_binary_search():
    items = [{"id": i, "name": f"item {i}"} for i in range(1000)]
    out = truncate_result(items, 500)
    assert out["truncated"] and len(out["text"]) <= 500
    k, n = out["shown_items"], out["total_items"]
    assert n == 1000 and 0 < k < 1000
    body, marker = out["text"].split("[...truncated", 1)
    assert json.loads(body) == items[:k]
    assert marker == f", showing {k}/{n} items]"
    # k is the maximum: one more item would not fit
    longer = json.dumps(items[:k + 1]) + f"[...truncated, showing {k + 1}/{n} items]"
    assert len(longer) > 500
    # a string holding a JSON array is treated the same way
    assert truncate_result(json.dumps(items), 500)["shown_items"] == k


def test_truncate_text_at_word_boundary():
    text = "alpha beta gamma delta " * 100
    out = truncate_result(text, 60)
    assert out["truncated"] and len(out["text"]) <= 60
    assert out["text"].endswith("...[truncated]")
    kept = out["text"][: -len("...[truncated]")]
    assert text.startswith(kept) and text[len(kept)] == " "  # cut between words
    obj = truncate_result({"k": "v" * 100}, 50)
    assert obj["truncated"] and len(obj["text"]) <= 50


# --- math -------------------------------------------------------------------------------------

@pytest.mark.parametrize("expr,expected", [
    ("1 + 2 * 3", 7), ("(1 + 2) * 3", 9), ("7 / 2", 3.5), ("7 // 2", 3), ("7 % 4", 3),
    ("2 ** 10", 1024), ("-3 + +2", -1), ("abs(-4)", 4), ("min(3, 1, 2)", 1), ("max(1, 5)", 5),
    ("round(3.14159, 2)", 3.14), ("round(2.6)", 3), ("1 < 2 < 3", True), ("1 < 3 < 2", False),
    ("2 >= 2 and 3 != 4", True), ("not 1 == 1 or 0", 0), ("10 if 1 > 2 else 20", 20),
    ("sqrt(16)", 4.0), ("x * y + 1", 13), ("price * qty > 100", False), ("pi > 3", True),
    ("2 ** -1", 0.5), ("1e3 + .5", 1000.5), ("True + 1", 2),
])
def test_math_eval(t, expr, expected):
    vars_ = {"x": 3, "y": 4, "price": 9.5, "qty": 10}
    assert t["math.eval"](expression=expr, variables=vars_) == expected


@pytest.mark.parametrize("expr,code", [
    ("__import__('os').system('true')", "Math.InvalidExpression"),
    ("(1).__class__", "Math.InvalidExpression"),
    ("x.real", "Math.InvalidExpression"),
    ("[1, 2][0]", "Math.InvalidExpression"),
    ("open('f')", "Math.InvalidExpression"),
    ("abs.__call__(1)", "Math.InvalidExpression"),
    ("'a' * 3", "Math.InvalidExpression"),
    ("lambda: 1", "Math.InvalidExpression"),
    ("(y := 1)", "Math.InvalidExpression"),
    ("[i for i in range(3)]", "Math.InvalidExpression"),
    ("1 if", "Math.InvalidExpression"),
    ("max(*[1])", "Math.InvalidExpression"),
    ("round(1.5, ndigits=1)", "Math.InvalidExpression"),
    ("9 ** 9 ** 9", "Math.Overflow"),
    ("10 ** 100000", "Math.Overflow"),
    ("2 ** 5000", "Math.Overflow"),
    ("10.0 ** 400", "Math.Overflow"),
    ("1 / 0", "Math.DivisionByZero"),
    ("5 % 0", "Math.DivisionByZero"),
    ("unknown + 1", "Math.UnknownName"),
    ("sqrt(-1)", "Math.DomainError"),
    ("1 in 2", "Math.InvalidExpression"),
    ("1 << 100000", "Math.InvalidExpression"),
    ("-" * 100 + "1", "Math.InvalidExpression"),
])
def test_math_rejects(t, expr, code):
    with pytest.raises(ToolError) as err:
        t["math.eval"](expression=expr, variables={"x": 1})
    assert err.value.code == code


def test_math_rejects_big_products_and_bad_variables():
    big = "*".join(["99999999999999999999"] * 300)
    with pytest.raises(ToolError) as err:
        safe_eval(big)
    assert err.value.code in ("Math.Overflow", "Math.InvalidExpression")
    with pytest.raises(ToolError) as err:
        safe_eval("x", {"x": "1"})
    assert err.value.code == "Math.TypeError"
    with pytest.raises(ToolError):
        safe_eval("1" * 5000)
