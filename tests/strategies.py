"""Hypothesis strategies generating plan-model values and whole :class:`Plan` objects.

Everything generated is representable in every form: finite numbers, reference
kinds/paths made of identifiers, templates in normal form (they re-parse to
themselves), output targets whose ``op`` is ``None`` exactly when there is one path.
Import freely from other test modules: ``from tests.strategies import plans``
(or ``from strategies import plans`` with tests/ on sys.path).
"""

from __future__ import annotations

import jsonschema
from hypothesis import strategies as st

from sophon_dsl.model import (
    Call,
    Expression,
    ListValue,
    Literal,
    Mode,
    ObjectValue,
    OutputMethod,
    OutputTarget,
    Param,
    Plan,
    Reference,
    RetryPolicy,
    Risk,
    Template,
    ToolDecl,
)
from sophon_dsl.refs import parse_string_value, template_to_string

__all__ = [
    "identifiers",
    "references",
    "expressions",
    "templates",
    "values",
    "json_data",
    "calls",
    "plans",
    "tool_names",
    "comments",
]

_ID_FIRST = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
_ID_REST = _ID_FIRST + "0123456789"

identifiers = st.builds(
    lambda a, b: a + b,
    st.sampled_from(_ID_FIRST),
    st.text(_ID_REST, max_size=8),
)

# Names that may contain '-' between word characters (tool-name segments, parameters).
hyphen_names = st.builds(
    lambda parts: "-".join(parts),
    st.lists(identifiers, min_size=1, max_size=2),
)

tool_names = st.one_of(
    st.builds(lambda parts: ".".join(parts), st.lists(hyphen_names, min_size=1, max_size=3)),
    st.sampled_from(["goal", "tool", "return", "mode", "input", "true", "null"]),
    st.text(min_size=1, max_size=10).filter(str.strip),  # needs quoting
)

kinds = st.sampled_from(["input", "state", "data"]) | identifiers
path_segments = st.one_of(identifiers, st.integers(0, 50))
references = st.builds(Reference, kinds, st.lists(path_segments, max_size=4).map(tuple))

expressions = st.builds(
    Expression,
    st.sampled_from(["||", "&&"]),
    st.lists(references, min_size=2, max_size=4).map(tuple),
)

_text = st.text(max_size=20)
_text_with_daggers = st.text(alphabet=st.sampled_from(list("ab †.${}[]|&\"'\\\n#x0")), max_size=12)
strings = st.one_of(_text, _text_with_daggers)


def _normal_template(parts):
    merged: list = []
    for p in parts:
        if isinstance(p, str):
            if not p:
                continue
            if merged and isinstance(merged[-1], str):
                merged[-1] += p
                continue
        merged.append(p)
    return Template(tuple(merged))


def _round_trips(t: Template) -> bool:
    if not any(isinstance(p, Reference) for p in t.parts):
        return False
    try:
        return parse_string_value(template_to_string(t)) == t
    except ValueError:
        return False


templates = st.lists(st.one_of(strings, references), min_size=1, max_size=5).map(
    _normal_template).filter(_round_trips)

finite_floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**12, 10**12), finite_floats, strings,
).map(Literal)


def _values(leaves):
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=4).map(lambda xs: ListValue(tuple(xs))),
            st.dictionaries(strings | identifiers, children, max_size=4).map(
                lambda d: ObjectValue(tuple(d.items()))),
        ),
        max_leaves=10,
    )


values = _values(st.one_of(scalars, references, expressions, templates))

json_data = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), finite_floats, strings),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(strings | identifiers, children, max_size=3),
    ),
    max_leaves=8,
)
# Declarations are validated against the JSON Schema metaschema (E109): generated schemas
# use no keyword of it (unknown keywords are allowed), so they are always valid schemas.
_SCHEMA_KEYWORDS = frozenset(jsonschema.Draft202012Validator.VALIDATORS) | {
    "$schema", "$id", "$defs", "$ref", "$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveRef",
    "$recursiveAnchor", "$vocabulary", "$comment", "definitions", "then", "else", "dependencies",
    "maxContains", "minContains", "additionalItems",
    "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "format",
    "contentEncoding", "contentMediaType", "contentSchema"}
schemas = st.one_of(st.booleans(), st.dictionaries((identifiers | strings).filter(
    lambda k: k not in _SCHEMA_KEYWORDS), json_data, max_size=3))

param_names = st.one_of(hyphen_names, st.text(min_size=1, max_size=8))

output_targets = st.one_of(
    st.builds(lambda r, m: OutputTarget((r,), None, m), references, st.sampled_from(list(OutputMethod))),
    st.builds(lambda e, m: OutputTarget(e.operands, e.op, m), expressions, st.sampled_from(list(OutputMethod))),
)

retries = st.one_of(
    st.integers(1, 10).map(lambda n: RetryPolicy(max_attempts=n)),
    st.builds(
        RetryPolicy,
        max_attempts=st.integers(1, 10),
        interval=st.floats(0, 100, allow_nan=False),
        backoff_rate=st.floats(0, 10, allow_nan=False),
        max_delay=st.none() | st.floats(0, 1000, allow_nan=False),
        jitter=st.booleans(),
        errors=st.lists(strings.filter(str.strip), max_size=3).map(tuple),
    ),
)

ids = st.one_of(identifiers, hyphen_names, st.text(min_size=1, max_size=6).filter(str.strip))
model_hints = st.dictionaries(identifiers, json_data, max_size=3)


# One comment line in the printer's canonical form: `#`, `# text` or `##`/`#!`/`#:` text,
# no line breaks (any of str.splitlines' separators) and no trailing whitespace.
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_comment_text = st.text(st.characters(blacklist_characters=_LINE_BREAKS), max_size=15).map(str.strip)
comments = st.one_of(
    _comment_text.map(lambda t: "# " + t if t else "#"),
    st.builds(lambda m, t: m + t, st.sampled_from(["##", "#!", "#:"]), _comment_text),
).map(str.rstrip)
_comment_block = st.lists(comments, max_size=2).map(tuple)


@st.composite
def calls(draw, comments: bool = False) -> Call:
    names = draw(st.lists(param_names, max_size=4, unique=True))
    params = tuple(Param(n, draw(values)) for n in names)
    opt = lambda s: draw(st.none() | s)
    return Call(
        tool=draw(tool_names),
        params=params,
        output=opt(output_targets),
        inline_output=opt(values),
        id=opt(ids),
        activity=opt(ids),
        instance=opt(strings.filter(str.strip)),
        delegate=opt(strings.filter(str.strip)),
        scopes=opt(st.lists(ids, max_size=3).map(tuple)),
        reasoning=opt(strings.filter(str.strip)),
        risk=opt(st.sampled_from(list(Risk))),
        retry=opt(retries),
        timeout=opt(st.floats(0.001, 10**6, allow_nan=False) | st.integers(1, 3600)),
        after=draw(st.lists(ids, max_size=3).map(tuple)),
        model_hint=opt(model_hints),
        success_criterion=opt(strings.filter(str.strip)),
        **(_call_comments(draw) if comments else {}),
    )


tool_decls = st.builds(
    ToolDecl,
    name=tool_names,
    description=strings,
    input_schema=st.none() | schemas,
    output_schema=st.none() | schemas,
    risk=st.sampled_from(list(Risk)),
    latent=st.booleans(),
)


def _call_comments(draw) -> dict:
    return {"comments": draw(_comment_block), "trailing_comment": draw(st.none() | comments)}


def _plan_comments(draw, plan: Plan) -> Plan:
    """Comments on the statements ``plan`` has, in printing order (see dsl_printer)."""
    keys = [k for k, present in (
        ("goal", plan.goal is not None), ("mode", plan.mode is not Mode.EAGER), ("id", plan.id is not None),
        ("input", plan.input_schema is not None), ("state", plan.state_schema is not None),
        ("output", plan.output_schema is not None)) if present]
    keys += ["tool " + t.name for t in plan.tools]
    if plan.output is not None:
        keys.append("return")
    fields = []
    for key in keys:
        lead, trail = draw(_comment_block), draw(st.none() | comments)
        if lead or trail is not None:
            fields.append((key, lead, trail))
    return Plan(
        calls=plan.calls, goal=plan.goal, mode=plan.mode, id=plan.id, input_schema=plan.input_schema,
        state_schema=plan.state_schema, output_schema=plan.output_schema, tools=plan.tools,
        output=plan.output, comments=draw(_comment_block), field_comments=tuple(fields),
        trailing_comments=draw(_comment_block),
    )


@st.composite
def plans(draw, max_calls: int = 5, comments: bool = False) -> Plan:
    """Whole plans; ``comments=True`` also puts DSL comments everywhere they can go."""
    tools = draw(st.lists(tool_decls, max_size=2, unique_by=lambda t: t.name))
    plan = Plan(
        calls=tuple(draw(st.lists(calls(comments), max_size=max_calls))),
        goal=draw(st.none() | strings),
        mode=draw(st.sampled_from(list(Mode))),
        id=draw(st.none() | strings),
        input_schema=draw(st.none() | schemas),
        state_schema=draw(st.none() | schemas),
        output_schema=draw(st.none() | schemas),
        tools=tuple(tools),
        output=draw(st.none() | values),
    )
    return _plan_comments(draw, plan) if comments else plan


# ---------------------------------------------------------------------------- maps (issue 12)
# An optional generator: plans whose calls include maps (the strategies above never make one).

_scope_names = identifiers.filter(lambda n: n not in ("input", "state", "data", "local"))


@st.composite
def map_calls(draw, depth: int = 1) -> Call:
    """A map call with a body of generated calls (and, ``depth`` > 0, maybe a nested map)."""
    from sophon_dsl.maps import make_map_call
    from sophon_dsl.model import ListValue, MapSpec

    item = draw(st.just("item") | _scope_names)
    index = draw((st.just("index") | _scope_names).filter(lambda n: n != item))
    body = draw(st.lists(calls() | (map_calls(depth - 1) if depth > 0 else calls()), max_size=3))
    tolerate = draw(st.none() | st.integers(0, 5))
    percent = draw(st.none() | st.integers(0, 200).map(lambda n: n / 2)) if tolerate is None else None
    spec = MapSpec(
        over=draw(references | st.lists(values, max_size=3).map(lambda xs: ListValue(tuple(xs)))),
        body=tuple(body),
        item=item,
        index=index,
        result=draw(st.none() | values),
        concurrency=draw(st.none() | st.integers(1, 64)),
        tolerate=tolerate,
        tolerate_percent=percent,
    )
    opt = lambda s: draw(st.none() | s)
    return make_map_call(spec, output=opt(output_targets), id=opt(ids), risk=opt(st.sampled_from(list(Risk))),
                         timeout=opt(st.integers(1, 3600)), after=draw(st.lists(ids, max_size=2).map(tuple)))


@st.composite
def plans_with_maps(draw, max_calls: int = 4) -> Plan:
    """Plans of generated calls and maps (no header: the maps are what is tested)."""
    return Plan(calls=tuple(draw(st.lists(calls() | map_calls(), max_size=max_calls))))
