"""Constrained decoding: the DSL grammar for grammar-constrained decoders, and a
JSON Schema of the solution object for structured outputs (OpenAI strict mode).

* :func:`decoder_grammar` derives, from ``grammar/sophon.lark``, a grammar in
  llguidance's Lark dialect (Earley parser, dynamic lexer, Rust regexes, no
  lookarounds, no terminal priorities).  It is derived programmatically from
  the rules Lark compiles, so it follows the source grammar when it changes;
  what the parser's post-lexer does in code (newlines dropped inside brackets,
  ``;`` as a statement separator, runs of separators collapsed) is encoded in
  the grammar here.  See docs/constrained-decoding.md.
* :func:`solution_schema` builds the JSON Schema of ``{"calls": [...],
  "output": ...}`` specialised to a tool registry: one ``anyOf`` branch per
  tool, each an object with ``_tool`` fixed to the tool's name, the tool's
  parameters and the meta-properties, and one for a map call (``_map``).  In strict mode (the default) it keeps
  to the subset OpenAI structured outputs accept: every object has
  ``additionalProperties: false`` and lists every property in ``required``
  (optional ones are nullable), and unsupported keywords are dropped.
* :func:`solution_from_strict` turns a strict-mode reply back into the seed's
  JSON shape (null meta-properties and null optional parameters removed).
"""

from __future__ import annotations

import copy
import json
import re
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ..errors import OptionError
from ..syntax.attributes import param_key, param_name

if TYPE_CHECKING:  # (named in annotations only)
    from ..tools import ToolSpec

__all__ = [
    "ALL_META",
    "DEFAULT_META",
    "REFERENCE_PATTERN",
    "OUTPUT_PATH_PATTERN",
    "decoder_grammar",
    "solution_from_strict",
    "solution_schema",
    "strict_problems",
]

# ---------------------------------------------------------------------------
# Grammar

_OPEN = {"LPAR", "LSQB", "LBRACE"}
_CLOSE = {"RPAR", "RSQB", "RBRACE"}
# Tokens that exist for error recovery only: a valid plan never contains them,
# so the decoder grammar leaves them out (the parser reports them as E105/E106).
_RECOVERY_TERMINALS = {"BADREF"}
# `name =` as one token is a lexer optimisation of the LALR parser; the Earley
# grammar spells it `NAME "="` (same language, and no `[ \t]*` inside a lexeme,
# which a greedy lexer could not give back).
_SPLIT_TERMINALS = {"KW": ("NAME", "_EQ")}
# The rules of a map body (`map(...) { ... }`): the post-lexer keeps line breaks inside them.
_BLOCK_RULES = {"block", "block_open"}
_LOOKAROUND_AT_END = re.compile(r"\(\?<?[!=](?:\\.|\[(?:\\.|[^\]\\])*\]|[^()\\\[])*\)$")


def _lark_grammar_text() -> str:
    from ..syntax.dsl_parser import grammar_text

    return grammar_text()


def _rx(pattern: str) -> str:
    """A Python regex of the source grammar as an llguidance ``/.../`` regex."""
    while True:
        stripped = _LOOKAROUND_AT_END.sub("", pattern)
        if stripped == pattern:
            break
        pattern = stripped
    if re.search(r"\(\?<?[!=]", pattern):
        # (the grammar is ours: a terminal written with a lookaround is a bug of this package)
        raise AssertionError(f"lookaround inside a terminal is not translatable: {pattern!r}")
    out = []
    for ch in pattern:
        if ch == "/":
            out.append("\\/")
        elif ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "/" + "".join(out) + "/"


def _tname(name: str) -> str:
    if name == "_NL":
        return "NL"
    return "T" + name.strip("_") if name.startswith("_") else name


def _rname(name: str, bracket: bool) -> str:
    base = re.sub(r"^_+", "", name)
    base = re.sub(r"[^a-z0-9_]", "_", base.lower())
    prefix = "in_" if bracket else ("h_" if name.startswith("_") else "")
    return prefix + base


def _llguidance_grammar() -> str:
    from lark import Lark
    from lark.lexer import PatternRE, PatternStr

    src = Lark(_lark_grammar_text(), parser="lalr", lexer="basic")
    terminals = {t.name: t for t in src.terminals}
    ignore_parts = []
    for name in src.ignore_tokens:
        pat = terminals[name].pattern
        ignore_parts.append(pat.value if isinstance(pat, PatternRE) else re.escape(pat.value))
    ignore_rx = "(?:" + "|".join(ignore_parts) + ")"

    rules: dict[str, list[list[str]]] = {}
    for r in src.rules:
        exp = []
        for s in r.expansion:
            exp.extend(_SPLIT_TERMINALS.get(s.name, (s.name,)))
        if any(s in _RECOVERY_TERMINALS for s in exp):
            continue
        alts = rules.setdefault(r.origin.name, [])
        if exp not in alts:
            alts.append(exp)

    used_terms: set[str] = set()
    out_rules: dict[str, list[str]] = {}
    todo = [("start", False)]
    seen = set(todo)
    while todo:
        name, bracket = todo.pop()
        alts_out = []
        for exp in rules.get(name, []):
            depth = 1 if bracket else 0
            parts: list[str] = []
            ok = True
            for sym in exp:
                if sym in terminals:
                    if sym == "_NL" and depth:
                        ok = False  # the post-lexer never emits a newline inside brackets
                        break
                    used_terms.add(sym)
                    parts.append(("BNL? " if depth else "") + _tname(sym))
                    if name in _BLOCK_RULES:
                        pass  # a map body's braces: statements inside are separated as at top level
                    elif sym in _OPEN:
                        depth += 1
                    elif sym in _CLOSE:
                        depth -= 1
                else:
                    key = (sym, depth > 0)
                    parts.append(_rname(*key))
                    if key not in seen:
                        seen.add(key)
                        todo.append(key)
            if ok:
                alts_out.append(" ".join(parts))
        out_rules[_rname(name, bracket)] = alts_out

    lines = [
        "%llguidance {}",
        "",
        "// sophon-dsl text grammar for grammar-constrained decoders (llguidance Lark dialect).",
        "// GENERATED from grammar/sophon.lark by sophon_dsl.llm.constrained.decoder_grammar();",
        "// do not edit.  Differences from the source: no terminal priorities or lookaheads",
        "// (Earley with a contextual, longest-match lexer), `name =` is NAME \"=\", error-",
        "// recovery tokens (BADREF) are left out, and the parser's post-lexer is spelled",
        "// out: NL is a run of newlines / ';' between statements, BNL a run of newlines",
        "// inside brackets (allowed before any token there), LEAD what may precede the plan.",
        "",
        "start: LEAD? plan",
    ]
    for name, alts in out_rules.items():
        if name == "start":
            name = "plan"
        if not alts:
            continue
        lines.append(f"{name}: " + "\n    | ".join(a if a else "" for a in alts))
    lines.append("")
    for name in sorted(used_terms):
        if name == "_NL":
            continue
        pat = terminals[name].pattern
        if isinstance(pat, PatternStr):
            body = json.dumps(pat.value, ensure_ascii=False)
        else:
            body = _rx(pat.value)
        lines.append(f"{_tname(name)}: {body}")
    # llguidance applies %ignore between lexemes, not before the first one
    lines.append("LEAD: " + _rx(r"(?:[\n;]|" + ignore_rx + ")+"))
    lines.append("NL: " + _rx(r"[\n;](?:[\n;]|" + ignore_rx + ")*"))
    lines.append("BNL: " + _rx(r"\n(?:\n|" + ignore_rx + ")*"))
    lines.append("")
    lines.append("%ignore " + _rx(ignore_rx))
    return "\n".join(lines) + "\n"


_CACHE: dict[str, str] = {}


def decoder_grammar(format: str = "llguidance") -> str:
    """The DSL grammar as text.

    ``format="llguidance"`` (default): llguidance's Lark dialect, accepted by
    ``llguidance.LLMatcher.grammar_from_lark`` and by servers built on
    llguidance (vLLM, SGLang, llama.cpp with LLGUIDANCE).  ``format="lark"``:
    the source grammar ``grammar/sophon.lark`` as the parser uses it (Lark
    LALR with the bracket-aware post-lexer of ``dsl_lexing.py``).
    """
    if format == "lark":
        return _lark_grammar_text()
    if format != "llguidance":
        raise OptionError(f"unknown grammar format {format!r}; expected 'llguidance' or 'lark'")
    src = _lark_grammar_text()
    if _CACHE.get("src") != src:
        _CACHE["src"] = src
        _CACHE["out"] = _llguidance_grammar()
    return _CACHE["out"]


# ---------------------------------------------------------------------------
# Solution schema

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_REF = rf"†{_NAME}(?:\.{_NAME}|\[[0-9]+\])*"
#: a whole-value reference or an ``||`` / ``&&`` expression of references (JSON form)
REFERENCE_PATTERN = rf"^{_REF}(?:(?: *\|\| *{_REF})*|(?: *&& *{_REF})*)$"
#: an output path: the same shapes (a path, branches joined by ``||``, fan-out by ``&&``)
OUTPUT_PATH_PATTERN = REFERENCE_PATTERN

_OUTPUT_METHODS = ["set", "assign", "merge", "concat", "push"]
_RISKS = ["none", "low", "medium", "high", "critical"]

#: meta-properties every call branch carries by default (``_output`` on latent tools only)
DEFAULT_META = ("_id", "_outputPath", "_outputMethod", "_after", "_output")
#: every meta-property strict mode can express (``_modelHint`` is a free-form object: left out)
ALL_META = DEFAULT_META + ("_risk", "_retry", "_timeout", "_successCriterion", "_activity",
                           "_instance", "_delegate", "_scopes", "_reasoningForCall")

# keywords kept, per type, in strict mode (OpenAI structured outputs' supported subset)
_KEEP_COMMON = ("description",)
_KEEP = {
    "string": ("pattern",),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "integer": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "array": ("minItems", "maxItems"),
}
_MAX_REF_DEPTH = 8
_PERCENT_PATTERN = r"^[0-9]+(?:\.[0-9]+)?%$"
# a map body's calls are the calls array's items (a JSON pointer: no copy of every tool's branch)
_CALL_ITEMS = "#/properties/calls/items"
_NULL = {"type": "null"}


class _Builder:
    def __init__(self, strict: bool, patterns: bool):
        self.strict = strict
        self.patterns = patterns
        self.defs: dict[str, Any] = {}

    # -- helpers ----------------------------------------------------------

    def any_value(self) -> dict:
        """Any JSON value strict mode can express (open objects cannot be: see the docs)."""
        if not self.strict:
            return {}
        if "json" not in self.defs:
            self.defs["json"] = {"anyOf": [
                {"type": "string"}, {"type": "number"}, {"type": "boolean"}, dict(_NULL),
                {"type": "array", "items": {"$ref": "#/$defs/json"}},
            ]}
        return {"$ref": "#/$defs/json"}

    def reference(self) -> dict:
        s: dict = {"type": "string", "description": "a reference such as †state.x"}
        if self.patterns:
            s["pattern"] = REFERENCE_PATTERN
        return s

    def nullable(self, s: dict) -> dict:
        if _allows_null(s, self.defs):
            return s
        if set(s) <= {"type", "description"} and isinstance(s.get("type"), str):
            out = dict(s)
            out["type"] = [s["type"], "null"]
            return out
        if "anyOf" in s and len(s) == 1:
            return {"anyOf": [*s["anyOf"], dict(_NULL)]}
        return {"anyOf": [s, dict(_NULL)]}

    def empty_object(self) -> dict:
        if self.strict:
            return {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
        return {"type": "object"}

    def obj(self, props: dict[str, dict], required: Iterable[str], description: str = "") -> dict:
        req = set(required)
        out: dict = {"type": "object"}
        if description:
            out["description"] = description
        if self.strict:
            out["properties"] = {k: (v if k in req else self.nullable(v)) for k, v in props.items()}
            out["required"] = list(props)
        else:
            out["properties"] = props
            out["required"] = [k for k in props if k in req]
        out["additionalProperties"] = False
        return out

    # -- schemas ----------------------------------------------------------

    def convert(self, s: Any, root: Any, depth: int = 0) -> dict:
        """A tool's JSON Schema within the strict subset (or unchanged but for refs, when not strict)."""
        if s is True or s is None or s == {}:
            return self.any_value()
        if s is False:
            return dict(_NULL)
        if not isinstance(s, Mapping):
            return self.any_value()
        s = dict(s)
        if "$ref" in s:
            if depth >= _MAX_REF_DEPTH:
                return self.any_value()
            target = _resolve(root, s.pop("$ref"))
            if not isinstance(target, Mapping):
                return self.any_value()
            merged = {**target, **s}
            return self.convert(merged, root, depth + 1)
        if "allOf" in s:
            parts = s.pop("allOf")
            for p in parts:
                if isinstance(p, Mapping):
                    p = dict(p)
                    if "$ref" in p:
                        p = {**(_resolve(root, p.pop("$ref")) or {}), **p}
                    for k, v in p.items():
                        if k == "properties":
                            s.setdefault("properties", {}).update(v)
                        elif k == "required":
                            s["required"] = [*s.get("required", []), *v]
                        else:
                            s.setdefault(k, v)
        desc = s.get("description") if isinstance(s.get("description"), str) else None
        alts = s.get("anyOf") or s.get("oneOf")
        if isinstance(alts, list) and alts:
            rest = {k: v for k, v in s.items() if k not in ("anyOf", "oneOf")}
            branches = []
            for a in alts:
                b = self.convert({**rest, **a} if isinstance(a, Mapping) and "type" not in rest
                                 else a, root, depth + 1)
                for x in (b["anyOf"] if set(b) == {"anyOf"} else [b]):
                    if x not in branches:
                        branches.append(x)
            out: dict = {"anyOf": branches} if len(branches) > 1 else branches[0]
            if desc and "description" not in out and "$ref" not in out:
                out = {**out, "description": desc}
            return out
        if "const" in s:
            return _with_desc({"enum": [s["const"]]}, desc)
        if "enum" in s and isinstance(s["enum"], list):
            out = {"enum": list(s["enum"])}
            t = s.get("type")
            if isinstance(t, str):
                out = {"type": t, **out}
            return _with_desc(out, desc)
        t = s.get("type")
        if isinstance(t, list):
            branches = [self.convert({**s, "type": x}, root, depth + 1) for x in t]
            return branches[0] if len(branches) == 1 else {"anyOf": branches}
        if t is None:
            if "properties" in s:
                t = "object"
            elif "items" in s:
                t = "array"
            else:
                return _with_desc(self.any_value(), desc) if not self.strict else self.any_value()
        if t == "object":
            props = s.get("properties")
            if not isinstance(props, Mapping) or not props:
                return _with_desc(self.empty_object(), desc)
            conv = {k: self.convert(v, root, depth + 1) for k, v in props.items()}
            return self.obj(conv, s.get("required") or (), desc or "")
        if t == "array":
            items = s.get("items")
            out = {"type": "array", "items": self.convert(items, root, depth + 1)}
        elif t in ("string", "number", "integer", "boolean", "null"):
            out = {"type": t}
        else:
            return self.any_value()
        for k in _KEEP.get(t, ()):
            if k in s and (self.patterns or k != "pattern") and not isinstance(s[k], bool):
                out[k] = s[k]
        if not self.strict:
            for k, v in s.items():
                if k not in out and k not in ("title",):
                    out[k] = v
        return _with_desc(out, desc)

    def param(self, s: Any, root: Any) -> dict:
        """A parameter: its schema, or a reference/expression string that supplies it."""
        conv = self.convert(s, root)
        if _accepts_any_string(conv):
            return conv
        ref = self.reference()
        if set(conv) == {"anyOf"}:
            return {"anyOf": [*conv["anyOf"], ref]}
        return {"anyOf": [conv, ref]}

    def meta(self, name: str, tool: ToolSpec | None) -> dict | None:
        if name == "_id":
            return {"type": "string", "description": "the call's id, for _after and diagnostics"}
        if name == "_outputPath":
            s: dict = {"type": "string", "description": "where the output goes: †kind.path, "
                       "†a || †b (branches) or †a && †b (fan-out)"}
            if self.patterns:
                s["pattern"] = OUTPUT_PATH_PATTERN
            return s
        if name == "_outputMethod":
            return {"type": "string", "enum": list(_OUTPUT_METHODS)}
        if name in ("_after", "_scopes"):
            return {"type": "array", "items": {"type": "string"}}
        if name == "_output":
            if tool is None or not tool.latent:
                return None
            out = self.convert(tool.output_schema, tool.output_schema)
            return {**out, "description": "inline output (latent tool, eager mode)"} \
                if "$ref" not in out and "anyOf" not in out else out
        if name == "_risk":
            return {"type": "string", "enum": list(_RISKS)}
        if name == "_retry":
            return {"type": "integer", "description": "maximum attempts"}
        if name == "_timeout":
            return {"type": "number", "description": "seconds"}
        if name in ("_successCriterion", "_activity", "_instance", "_delegate", "_reasoningForCall"):
            return {"type": "string"}
        return None

    def call(self, tool: Any, meta: Iterable[str]) -> dict:
        root = tool.input_schema or {}
        props: dict[str, dict] = {"_tool": {"type": "string", "enum": [tool.name]}}
        required = ["_tool"]
        first = [m for m in meta if m == "_id"]
        for m in first:
            props[m] = self.meta(m, tool)  # type: ignore[assignment]
        params = root.get("properties") or {}
        req = set(root.get("required") or ())
        for pname, pschema in params.items():
            key = param_key(pname)  # `_from` is spelled `__from`: a single `_` is a meta-property
            if key in props:
                continue
            props[key] = self.param(pschema, root)
            if pname in req:
                required.append(key)
        for m in meta:
            if m in first:
                continue
            s = self.meta(m, tool)
            if s is not None:
                props[m] = s
        desc = (tool.description or "").strip().split("\n", 1)[0][:300]
        return self.obj(props, required, desc)

    def map_call(self, meta: Iterable[str]) -> dict:
        """A map call (``{"_map": {...}, ...}``): its body's calls are calls of the same
        tools (or maps), so ``do`` points back at the calls array's item schema."""
        name: dict = {"type": "string", "description": "a name, not input, state, data or local"}
        percent: dict = {"type": "string", "description": 'a percentage of the items, as "10%"'}
        if self.patterns:
            name["pattern"] = f"^{_NAME}$"
            percent["pattern"] = _PERCENT_PATTERN
        listed = {"type": "array", "items": self.any_value()}
        options = {
            "over": {"anyOf": [self.reference(), listed], "description": "the list to map over"},
            "as": {**name, "description": "the item's name (default item)"},
            "index": {**name, "description": "the index's name (default index)"},
            "concurrency": {"type": "integer", "description": "at most this many items in flight"},
            "tolerate": {"anyOf": [{"type": "integer"}, percent],
                         "description": "how many items may fail before the map fails"},
            "do": {"type": "array", "items": {"$ref": _CALL_ITEMS},
                   "description": "the body: calls run once per item, writing under †local"},
            # strict mode has no open object: a result object is written to †local and returned whole
            "return": self.any_value(),
        }
        props: dict[str, dict] = {"_map": self.obj(options, ("over", "do"))}
        for m in meta:
            s = self.meta(m, None)
            if s is not None:
                props[m] = s
        return self.obj(props, ("_map",), "run the body's calls once per item of a list")


def _with_desc(s: dict, desc: str | None) -> dict:
    if desc and "$ref" not in s and "description" not in s:
        return {**s, "description": desc}
    return s


def _resolve(root: Any, ref: str) -> Any:
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node = root
    for part in ref[1:].split("/"):
        if not part:
            continue
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            return None
    return node


def _allows_null(s: dict, defs: dict) -> bool:
    if "$ref" in s:
        target = defs.get(s["$ref"].rsplit("/", 1)[-1], {})
        return _allows_null(target, defs) if target is not s else False
    t = s.get("type")
    if t == "null" or (isinstance(t, list) and "null" in t):
        return True
    if "enum" in s and None in s["enum"]:
        return True
    return any(_allows_null(a, defs) for a in s.get("anyOf", ()))


def _accepts_any_string(s: dict) -> bool:
    if s.get("type") == "string" and "pattern" not in s and "enum" not in s:
        return True
    return any(_accepts_any_string(a) for a in s.get("anyOf", ()))


def _tools_of(tools: Any) -> list:
    if tools is None:
        return []
    if isinstance(tools, Mapping):
        return list(tools.values())
    return list(tools)


def solution_schema(tools: Any, *, output_schema: Any = None, meta: Iterable[str] = DEFAULT_META,
                    strict: bool = True, patterns: bool = True, maps: bool = True) -> dict:
    """JSON Schema of the solution ``{"calls": [...], "output": ...}`` for these tools.

    ``tools``: a :class:`~sophon_dsl.tools.ToolRegistry`, a mapping name ->
    :class:`~sophon_dsl.tools.ToolSpec` or an iterable of specs.
    ``output_schema``: the request's output schema (the final ``output`` is it
    or null); without one the output is any value strict mode can express.
    ``meta``: the meta-properties each call branch carries (:data:`DEFAULT_META`,
    :data:`ALL_META`).  ``strict=False`` keeps open objects open and leaves
    optional properties optional (for decoders without OpenAI's restrictions).
    ``patterns=False`` drops ``pattern`` (fine-tuned OpenAI models reject it).
    ``maps``: one more branch, the map call ``{"_map": {...}}`` (its body's calls are
    the same branches, reached by a ``$ref`` to the calls' items).
    """
    specs = sorted(_tools_of(tools), key=lambda t: t.name)
    if not specs:
        raise OptionError("no tools: the solution schema needs at least one registered tool")
    b = _Builder(strict, patterns)
    meta = tuple(meta)
    unknown = [m for m in meta if m not in ALL_META]
    if unknown:
        raise OptionError(f"unknown meta-properties {unknown}; choose from {', '.join(ALL_META)}")
    branches = [b.call(t, meta) for t in specs]
    if maps:
        branches.append(b.map_call(meta))
    calls = {"type": "array", "description": "tool calls to run this turn",
             "items": branches[0] if len(branches) == 1 else {"anyOf": branches}}
    if output_schema is None:
        output = b.any_value()
        if not strict:
            output = {}
    else:
        output = b.convert(output_schema, output_schema)
    output = b.nullable(output) if strict else output
    schema = {
        "type": "object",
        "properties": {"calls": calls, "output": output},
        "required": ["calls", "output"],
        "additionalProperties": False,
    }
    if b.defs:
        schema["$defs"] = b.defs
    return schema


def solution_from_strict(solution: Mapping[str, Any], tools: Any = None) -> dict:
    """A strict-mode reply in the seed's shape: null meta-properties dropped, and null
    parameters dropped where the tool does not require them."""
    by_name = {t.name: t for t in _tools_of(tools)}
    return {"calls": _calls_from_strict(solution.get("calls"), by_name), "output": solution.get("output")}


def _calls_from_strict(calls: Any, by_name: Mapping[str, Any]) -> list:
    out = []
    for c in calls or []:
        if not isinstance(c, Mapping):
            out.append(c)
            continue
        if isinstance(c.get("_map"), Mapping):
            # a map's null options take their defaults; its body's calls are calls like these
            options = {k: v for k, v in c["_map"].items() if v is not None}
            if "do" in options:
                options["do"] = _calls_from_strict(options["do"], by_name)
            out.append({k: (options if k == "_map" else v) for k, v in c.items() if v is not None})
            continue
        spec = by_name.get(c.get("_tool"))
        req = set(spec.required) if spec is not None else set()
        # nulls go, but a required parameter's (`folder`, `__from`: keys that spell a parameter)
        out.append({k: v for k, v in c.items()
                    if v is not None or (param_key(param_name(k)) == k and param_name(k) in req)})
    return out


# ---------------------------------------------------------------------------
# Strict-mode check

_STRICT_UNSUPPORTED = frozenset({
    "allOf", "oneOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
    "patternProperties", "propertyNames", "unevaluatedProperties", "unevaluatedItems",
    "minProperties", "maxProperties", "contains", "minContains", "maxContains", "uniqueItems",
    "prefixItems", "default", "format", "examples", "title", "minLength", "maxLength", "const",
    "$schema", "$id", "nullable", "discriminator",
})


def strict_problems(schema: Mapping[str, Any], *, max_depth: int = 10,
                    max_properties: int = 5000) -> list[str]:
    """Every way ``schema`` breaks the rules of OpenAI strict structured outputs (as
    documented in docs/constrained-decoding.md); an empty list when it keeps them."""
    problems: list[str] = []
    count = 0
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("$: the root must be an object schema, not anyOf")

    def walk(s: Any, path: str, depth: int) -> None:
        nonlocal count
        if not isinstance(s, Mapping):
            problems.append(f"{path}: a schema must be an object, got {s!r}")
            return
        for k in s:
            if k in _STRICT_UNSUPPORTED:
                problems.append(f"{path}: keyword {k!r} is not supported in strict mode")
        if "$ref" in s and len(s) > 1:
            problems.append(f"{path}: $ref must stand alone")
        t = s.get("type")
        types = t if isinstance(t, list) else [t]
        if "object" in types or "properties" in s:
            if depth > max_depth:
                problems.append(f"{path}: nested deeper than {max_depth} objects")
            props = s.get("properties")
            if not isinstance(props, Mapping):
                problems.append(f"{path}: an object needs properties")
                props = {}
            if s.get("additionalProperties") is not False:
                problems.append(f"{path}: additionalProperties must be false")
            if list(s.get("required", [])) != list(props) and set(s.get("required", [])) != set(props):
                problems.append(f"{path}: required must list every property")
            count += len(props)
            for k, v in props.items():
                walk(v, f"{path}.{k}", depth + 1)
        if "items" in s:
            walk(s["items"], f"{path}[]", depth)
        for i, a in enumerate(s.get("anyOf", ())):
            walk(a, f"{path}|{i}", depth)
        for k, v in (s.get("$defs") or {}).items():
            walk(v, f"$defs.{k}", depth)

    walk(schema, "$", 1)
    if count > max_properties:
        problems.append(f"$: {count} properties in all, more than {max_properties}")
    return problems


def _copy(schema: dict) -> dict:  # pragma: no cover - convenience for callers that mutate
    return copy.deepcopy(schema)
