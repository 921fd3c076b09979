"""Canonical DSL text for a :class:`~sophon_dsl.model.Plan`.

Layout rules (the formatter's contract):

* header first, in the order ``goal``, ``mode`` (only when lazy), ``id``,
  ``input``, ``state``, ``output``, then ``tool name = {...}`` declarations,
  then a blank line when calls follow;
* one statement per call; decorators on one line above the call, in the order
  ``@id`` (only when the id is not a plain name), ``@risk``, ``@retry``,
  ``@timeout``, ``@after``, ``@model``, ``@success``, ``@activity``,
  ``@instance``, ``@delegate``, ``@scopes``, ``@reason``;
* ``label: target op tool(name=value, ...) -> inline`` on one line when it
  fits in 88 columns, else one argument per line (4-space indent, trailing comma);
* JSON-style ``true``/``false``/``null``, double-quoted strings, bare object
  keys and parameter names when they are plain names, bare references;
* ``return value`` last;
* comments (``Call.comments``, ``Plan.comments`` and friends) each on their own
  line above their statement, a trailing comment two spaces after its
  statement's last line, file comments first and followed by a blank line,
  trailing comments last; each is normalised to ``# text`` (see
  :func:`format_comment`).

``parse_dsl(print_dsl(plan)) == plan`` for every plan whose names and values
are representable (finite numbers, references with identifier paths).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ..errors import OptionError, OptionTypeError
from ..model import (
    Call,
    Expression,
    ListValue,
    Literal,
    Mode,
    ObjectValue,
    OutputMethod,
    OutputTarget,
    Plan,
    Reference,
    RetryPolicy,
    Template,
    Value,
)
from ..refs import literal_string_to_source, template_to_string
from .map_syntax import map_args

__all__ = ["print_dsl", "format_value", "format_comment", "CANONICAL_DAGGER", "MAX_WIDTH"]

#: Dagger used for bare references in canonical output (chosen by token count, see
#: tests/test_token_ratio.py).  Strings always use `†` (inside quotes `$` is text).
CANONICAL_DAGGER = "$"
MAX_WIDTH = 88
INDENT = "    "

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*\Z")
_DOTTED_RE = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*(?:\.[A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*)*\Z")
_CONSTANTS = frozenset(("true", "false", "null", "True", "False", "None"))

_METHOD_OPS = {
    OutputMethod.SET: "=",
    OutputMethod.ASSIGN: "|=",
    OutputMethod.MERGE: "&=",
    OutputMethod.CONCAT: "+=",
    OutputMethod.PUSH: "<<=",
}


def _q(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _is_name(text: str) -> bool:
    return bool(_NAME_RE.match(text))


def _key(k: str) -> str:
    return k if _NAME_RE.match(k) else _q(k)


def _bare_word(s: str) -> str:
    """A name argument of a decorator: bare when it cannot be mistaken for a constant."""
    return s if _NAME_RE.match(s) and s not in _CONSTANTS else _q(s)


def _num(v: int | float) -> str:
    if isinstance(v, float):
        if not math.isfinite(v):
            raise OptionError(f"cannot print non-finite number {v!r}", code="Print.NotPrintable")
        if v.is_integer() and abs(v) < 1e16:
            return repr(v)
        return repr(v)
    return str(v)


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return _num(v)
    raise OptionTypeError(f"not a scalar: {v!r}")


def format_value(value: Value, dagger: str = CANONICAL_DAGGER) -> str:
    """One plan value in DSL syntax, on one line."""
    tp = type(value)
    if tp is Literal:
        v = value.value
        if isinstance(v, str):
            return _q(literal_string_to_source(v))
        return _scalar(v)
    if tp is Reference:
        return value.text(dagger)
    if tp is Expression:
        return value.text(dagger)
    if tp is Template:
        return _q(template_to_string(value, "†"))
    if tp is ListValue:
        return "[" + ", ".join(format_value(x, dagger) for x in value.items) + "]"
    if tp is ObjectValue:
        return "{" + ", ".join(f"{_key(k)}: {format_value(x, dagger)}" for k, x in value.entries) + "}"
    raise OptionTypeError(f"not a plan value: {value!r}")


def format_json(data: Any) -> str:
    """Plain JSON data (schemas, model hints) in DSL syntax; strings are written verbatim."""
    if isinstance(data, str):
        return _q(data)
    if isinstance(data, dict):
        return "{" + ", ".join(f"{_key(str(k))}: {format_json(v)}" for k, v in data.items()) + "}"
    if isinstance(data, (list, tuple)):
        return "[" + ", ".join(format_json(v) for v in data) + "]"
    return _scalar(data)


def format_comment(text: str) -> list[str]:
    """Comment lines for one comment in canonical form.

    A comment is normally one line starting with ``#``; text without the ``#`` gets
    ``# `` in front.  Trailing whitespace is dropped and a space is put after the ``#``
    unless the text is empty or starts with a space, ``!``, ``:`` or another ``#``
    (``#!``, ``#:`` and ``##`` banners are kept as written; a leading tab becomes a
    space).  Text containing line breaks becomes several comment lines, so a comment
    can never turn into code.
    """
    out = []
    for line in text.splitlines() or [""]:
        line = line.rstrip()
        if not line.startswith("#"):
            line = "# " + line.lstrip() if line.strip() else "#"
        body = line[1:]
        if body:
            if body[0] == "\t":
                body = " " + body[1:]
            elif body[0] not in " !:#":
                body = " " + body
        out.append("#" + body)
    return out


def _with_comments(lines: list[str], leading, trailing: str | None) -> list[str]:
    """``lines`` of one statement with its leading comments above and trailing comment after."""
    out: list[str] = []
    for c in leading:
        out.extend(format_comment(c))
    out.extend(lines)
    if trailing is not None:
        out[-1] += "  " + " ".join(format_comment(trailing))
    return out


def _target(out: OutputTarget, dagger: str) -> str:
    return out.text(dagger) + " " + _METHOD_OPS[out.method]


def _decorators(call: Call, label_ok: bool) -> list[str]:
    out: list[str] = []
    if call.id is not None and not label_ok:
        out.append(f"@id({_q(call.id)})")
    if call.risk is not None:
        out.append(f"@risk({call.risk.label})")
    if call.retry is not None:
        r = call.retry
        if r == RetryPolicy(max_attempts=r.max_attempts):
            out.append(f"@retry({r.max_attempts})")
        else:
            out.append("@retry(" + ", ".join(f"{k}={format_json(v)}" for k, v in r.to_json().items()) + ")")
    if call.timeout is not None:
        out.append(f"@timeout({_num(call.timeout)})")
    if call.after:
        out.append("@after(" + ", ".join(_bare_word(a) for a in call.after) + ")")
    if call.model_hint is not None:
        mh = call.model_hint
        if isinstance(mh, dict) and mh and all(isinstance(k, str) and _is_name(k) and not k.startswith("_")
                                                for k in mh):
            out.append("@model(" + ", ".join(f"{k}={format_json(v)}" for k, v in mh.items()) + ")")
        else:
            out.append(f"@model({format_json(mh)})")
    if call.success_criterion is not None:
        out.append(f"@success({_q(call.success_criterion)})")
    if call.activity is not None:
        out.append(f"@activity({_bare_word(call.activity)})")
    if call.instance is not None:
        out.append(f"@instance({_q(call.instance)})")
    if call.delegate is not None:
        out.append(f"@delegate({_q(call.delegate)})")
    if call.scopes is not None:
        out.append("@scopes(" + ", ".join(_bare_word(s) for s in call.scopes) + ")")
    if call.reasoning is not None:
        out.append(f"@reason({_q(call.reasoning)})")
    return out


def _param_name(name: str) -> str:
    return name if _NAME_RE.match(name) and not name.startswith("_") else _q(name)


def _arg(name: str, value: Value, dagger: str) -> str:
    if (type(value) is Reference and value.path and value.path[-1] == name
            and not name.startswith("_") and value.query is None):
        return value.text(dagger)  # shorthand: `$input.text` passes text=$input.text
    return f"{_param_name(name)}={format_value(value, dagger)}"


def format_call(call: Call, dagger: str = CANONICAL_DAGGER, width: int = MAX_WIDTH,
                comments: bool = True, body_comments: bool | None = None) -> str:
    """One call statement (decorator line and, unless ``comments=False``, its comments
    included) without a trailing newline.  ``body_comments`` (default: as ``comments``):
    the comments of a map's body calls, kept at their calls."""
    label_ok = call.id is not None and _is_name(call.id)
    lines = []
    decos = _decorators(call, label_ok)
    if decos:
        lines.append(" ".join(decos))
    head = f"{call.id}: " if label_ok else ""
    if call.output is not None:
        head += _target(call.output, dagger) + " "
    head += call.tool if _DOTTED_RE.match(call.tool) else _q(call.tool)
    if call.map is not None:
        args = map_args(call.map, lambda v: format_value(v, dagger))
    else:
        args = [_arg(p.name, p.value, dagger) for p in call.params]
    tail = ""
    if call.inline_output is not None:
        tail = " -> " + format_value(call.inline_output, dagger)
    one = head + "(" + ", ".join(args) + ")" + tail
    if len(one) > width and args:
        one = head + "(\n" + "".join(f"{INDENT}{a},\n" for a in args) + ")" + tail
    lines.append(one)
    if call.map is not None:
        lines[-1] += " {"
        for b in call.map.body:
            inner = comments if body_comments is None else body_comments
            lines += [INDENT + line for line in format_call(b, dagger, width - len(INDENT), inner).split("\n")]
        if call.map.result is not None:
            lines.append(INDENT + "return " + format_value(call.map.result, dagger))
        lines.append("}")
    if comments and (call.comments or call.trailing_comment is not None):
        lines = _with_comments(lines, call.comments, call.trailing_comment)
    return "\n".join(lines)


def print_dsl(plan: Plan, dagger: str = CANONICAL_DAGGER) -> str:
    """Canonical DSL text for ``plan`` (ends with a newline unless the plan is empty)."""
    if dagger not in ("†", "$"):
        raise OptionError("dagger must be '†' or '$'")
    notes = {key: (lead, trail) for key, lead, trail in plan.field_comments}
    pending: list[str] = []  # comments of a statement that is not printed (e.g. `mode = eager`)

    def stmt(key: str | None, line: str | None) -> list[str]:
        lead, trail = notes.pop(key, ((), None)) if key is not None else ((), None)
        if line is None:  # not printed: its comments go to the next statement
            pending.extend(lead)
            if trail is not None:
                pending.append(trail)
            return []
        out = _with_comments([line], [*pending, *lead], trail)
        pending.clear()
        return out

    header: list[str] = []
    header += stmt("goal", f"goal = {_q(plan.goal)}" if plan.goal is not None else None)
    header += stmt("mode", f"mode = {Mode(plan.mode).value}" if plan.mode is not Mode.EAGER else None)
    header += stmt("id", f"id = {_q(plan.id)}" if plan.id is not None else None)
    for name, schema in (("input", plan.input_schema), ("state", plan.state_schema),
                         ("output", plan.output_schema)):
        header += stmt(name, f"{name} = {format_json(schema)}" if schema is not None else None)
    for tool in plan.tools:
        name = tool.name if _DOTTED_RE.match(tool.name) else _q(tool.name)
        header += stmt("tool " + tool.name, f"tool {name} = {format_json(tool.to_json())}")
    for key in [k for k in notes if k != "return"]:  # comments of fields the plan no longer has
        stmt(key, None)
    body: list[str] = []
    for c in plan.calls:
        text = format_call(c, dagger, comments=False, body_comments=True)  # (its own: below)
        lead = c.comments
        if pending:
            lead = (*pending, *lead)
            pending.clear()
        if lead or c.trailing_comment is not None:
            text = "\n".join(_with_comments(text.split("\n"), lead, c.trailing_comment))
        body.append(text)
    body += stmt("return", "return " + format_value(plan.output, dagger) if plan.output is not None else None)
    tail = [line for c in (*pending, *plan.trailing_comments) for line in format_comment(c)]
    if body:
        body += tail
    else:
        header += tail
    parts = []
    if plan.comments:
        head = [line for c in plan.comments for line in format_comment(c)]
        parts.append("\n".join(head) + "\n")
    if header:
        parts.append("\n".join(header) + "\n")
    if body:
        parts.append("\n".join(body) + "\n")
    return "\n".join(parts)
