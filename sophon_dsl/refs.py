"""Reference strings: ``†kind.path``, expressions, templates and their escaping.

The same rules apply to every string in every form (a JSON string, a YAML
scalar, a DSL string literal):

* A string that is exactly one reference (``"†state.user.name"``) is a
  :class:`~sophon_dsl.model.Reference`; the parameter receives the referenced
  value with its JSON type.
* A string made only of references joined by one operator (``"†a || †b"`` or
  ``"†a && †b"``, spaces optional) is an :class:`~sophon_dsl.model.Expression`.
* Any other string containing ``†`` is a :class:`~sophon_dsl.model.Template`:
  each reference is replaced by its value rendered as text.  ``†{state.a}``
  delimits a reference explicitly (``"†{state.name}.txt"``).
* ``††`` is a literal dagger.  A lone ``†`` not followed by a kind name or
  ``{`` is an error, so a typo never silently becomes text.

Path syntax: ``kind`` is ``[A-Za-z_][A-Za-z0-9_]*``; each segment is
``.name`` with the same pattern or ``[N]`` with N a non-negative integer.

JMESPath: after the path, a reference may go on with a JMESPath expression that
is applied to the value at the path (``Reference.query``).  Written bare, it
starts with a bracket that is not a plain index (``†state.items[-1]``,
``†state.hits[*].url``, ``†state.items[1:3]``, ``†state.hits[]``,
``†state.orders[?total > `100`].id``); any other expression is written in
braces (``†{state.items | [0]}``, ``†{state.user."first-name"}``).  The
expression is compiled when the reference is read from the source, so a
malformed one (or one nested more than 128 levels) is reported there (E105), and
once per distinct text.  It is evaluated by the bounded interpreter of
:mod:`sophon_dsl.jmes_bounded` (steps, size, the run's deadline).
"""

from __future__ import annotations

import re
import sys
from typing import Any

from .diagnostics import Span
from .errors import OptionTypeError, SophonError
from .model import Expression, ListValue, Literal, ObjectValue, Reference, Template, Value
from .values import QUERY_SEGMENT, escape_text, template_to_string  # template_to_string: re-exported

__all__ = [
    "DAGGER",
    "ReferenceSyntaxError",
    "json_to_value",
    "parse_reference",
    "parse_string_value",
    "parse_template",
    "query_value",
    "template_to_string",
]

DAGGER = "†"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_SEG = rf"(?:\.{_NAME}|\[[0-9]+\])"
_REF_BODY = rf"{_NAME}(?:{_SEG}|{QUERY_SEGMENT})*"
_QUOTED = r"""(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\\n]|\\.)*`)"""
# a braced reference holds any JMESPath expression (one level of nested braces)
_BRACED = rf"\{{(?:[^{{}}\n\"'`]|{_QUOTED}|\{{[^{{}}\n]*\}})+\}}"
REF_RE = re.compile(rf"†(?:({_REF_BODY})|({_BRACED}))")
_SEG_RE = re.compile(rf"\.({_NAME})|\[([0-9]+)\]")
_EXPR_SPLIT = re.compile(r"\s*(\|\||&&)\s*")
WHOLE_REF = re.compile(rf"†(?:{_REF_BODY}|{_BRACED})")
_NAME_RE = NAME_RE = re.compile(_NAME)


class ReferenceSyntaxError(SophonError, ValueError):
    """A malformed reference; ``offset`` is the 0-based index into the string."""

    def __init__(self, message: str, offset: int = 0):
        super().__init__(message)
        self.offset = offset


_intern = sys.intern


def _split_body(body: str, offset: int = 0) -> tuple[str, tuple, str | None]:
    """Kind, plain path and JMESPath query of a reference body (``state.a[0]`` or a braced
    ``{state.a[?x > `1`].b}``); ``offset`` is where the body starts, for error offsets."""
    if "[" not in body and "{" not in body:  # names only: the common case, no regex
        names = body.split(".")
        # the kind is one of a few words (state, input, ...): one shared string, not a new
        # one per reference (about 50 bytes each, a 100k-call plan holds 200k of them)
        return _intern(names[0]), tuple(names[1:]), None
    if body[0] == "{":
        inner = body[1:-1]
        lead = len(inner) - len(inner.lstrip())
        inner = inner.strip()
        offset += 1 + lead
        body = inner
    m = _NAME_RE.match(body)
    if m is None:
        raise ReferenceSyntaxError("a braced reference starts with its kind: †{kind.path...}", offset)
    end = m.end()
    if end == len(body):
        return body, (), None  # a whole kind: †state
    kind = _intern(body[:end])
    path: list[Any] = []
    plain_end = end
    for seg in _SEG_RE.finditer(body, end):
        if seg.start() != plain_end:  # the plain path ended: JMESPath from here
            break
        name, index = seg.group(1), seg.group(2)
        path.append(name if name is not None else int(index))
        plain_end = seg.end()
    query = body[plain_end:].strip() or None
    if query is not None:
        compile_reference_query(query, offset + plain_end + (len(body[plain_end:]) - len(body[plain_end:].lstrip())))
    return kind, tuple(path), query


_COMPILED: dict[str, Any] = {}


def compile_reference_query(query: str, offset: int = 0) -> Any:
    """The compiled JMESPath expression of a reference's query (one per distinct text),
    nested at most ``jmes_bounded.MAX_QUERY_DEPTH`` levels (deeper is malformed here, E105:
    the parser and the interpreter recurse per level)."""
    hit = _COMPILED.get(query)
    if hit is not None:
        return hit
    from jmespath.exceptions import JMESPathError

    from .jmes_bounded import MAX_QUERY_DEPTH, QueryTooExpensive, compile_query

    prefix = "@" if query[0] in ".[" else "@ "
    try:
        compiled = compile_query(prefix + query)
    except JMESPathError as exc:
        pos = getattr(exc, "lex_position", None)
        at = offset + max(0, (pos if isinstance(pos, int) else len(prefix)) - len(prefix))
        reason = getattr(exc, "msg", None) or str(exc).splitlines()[0]
        raise ReferenceSyntaxError(f"malformed JMESPath expression {query!r} in a reference: {reason}",
                                   at) from None
    except QueryTooExpensive:  # (the only bound a compile checks: nesting)
        shown = query if len(query) <= 60 else query[:57] + "..."
        raise ReferenceSyntaxError(f"JMESPath expression {shown!r} in a reference is nested more than "
                                   f"{MAX_QUERY_DEPTH} levels deep", offset) from None
    if len(_COMPILED) > 4096:  # plans written by a model may hold many distinct queries
        _COMPILED.clear()
    _COMPILED[query] = compiled
    return compiled


def query_value(query: str, value: Any, limits: Any = None) -> Any:
    """The value of a reference's JMESPath ``query`` applied to the value at its path.

    JMESPath has no "missing": a field that is not there, an index past the end, a
    function given the wrong type all give null, so a reference whose path has a value
    always has one (possibly null).  The evaluation is bounded (``jmes_bounded``: steps,
    size, and the run's deadline and stop flag when ``limits`` carries them): past a bound
    it raises ``jmes_bounded.QueryTooExpensive``, which fails the reading call
    (``Ref.TooExpensive``) instead of building a gigabyte string."""
    from jmespath.exceptions import JMESPathError

    from .jmes_bounded import DEFAULT_LIMITS, search

    try:
        return search(compile_reference_query(query), value, limits or DEFAULT_LIMITS)
    except JMESPathError:
        return None


def has_path(data: Any, path: list | tuple) -> bool:
    """Whether JSON data ``data`` has something at ``path`` (``None`` data has nothing).

    Shared by the checker (the document's own input messages hold a read) and the
    runtime's preflight (the given state or input holds it), so both agree on what
    "present" means: a negative index counts from the end, a bool is never an index.
    """
    if data is None:
        return False
    for seg in path:
        if isinstance(seg, int) and not isinstance(seg, bool) and isinstance(data, list) and \
                -len(data) <= seg < len(data):
            data = data[seg]
        elif isinstance(seg, str) and isinstance(data, dict) and seg in data:
            data = data[seg]
        else:
            return False
    return True


def parse_reference(text: str, span: Span | None = None, dagger_aliases: str = "†") -> Reference:
    """Parse exactly one reference such as ``†state.items[0].name``.

    ``dagger_aliases`` lists the characters accepted as the dagger (the DSL
    also accepts ``$``).
    """
    if not text or text[0] not in dagger_aliases:
        raise ReferenceSyntaxError(f"expected a reference starting with '†', got {text!r}")
    candidate = text if text[0] == "†" else "†" + text[1:]
    m = REF_RE.fullmatch(candidate)  # the same language as WHOLE_REF, with the body grouped
    if m is None:
        raise ReferenceSyntaxError(
            f"malformed reference {text!r}: expected †kind.name.name[index]", 0)
    kind, path, query = _split_body(m.group(1) or m.group(2), 1)
    return Reference(kind, path, span, query)


def parse_string_value(text: str, span: Span | None = None) -> Value:
    """Interpret a string from any form: literal, reference, expression or template."""
    if "†" not in text:
        return Literal(text, span)
    m = REF_RE.fullmatch(text)
    if m is not None:
        kind, path, query = _split_body(m.group(1) or m.group(2), 1)
        return Reference(kind, path, span, query)
    stripped = text.strip()
    if stripped.startswith("†") and ("||" in stripped or "&&" in stripped):
        pieces = _EXPR_SPLIT.split(stripped) if "[" not in stripped and "{" not in stripped \
            else _split_operators(stripped)
        operands, ops = pieces[0::2], set(pieces[1::2])
        if not WHOLE_REF.fullmatch(operands[0]):
            # Not an expression (e.g. "††|| x" starts with an escaped dagger): plain template.
            return _parse_template(text, span)
        if all(WHOLE_REF.fullmatch(p) for p in operands):
            if len(ops) > 1:
                raise ReferenceSyntaxError(
                    "cannot mix '||' and '&&' in one expression", stripped.find("&&"))
            return Expression(ops.pop(), tuple(parse_reference(p, span) for p in operands), span)
        bad = next(p for p in operands if not WHOLE_REF.fullmatch(p))
        raise ReferenceSyntaxError(
            f"malformed operand {bad!r} in expression: each operand must be a reference †kind.path",
            max(text.find(bad), 0))
    return _parse_template(text, span)


def _split_operators(text: str) -> list[str]:
    """``_EXPR_SPLIT.split`` that leaves the ``||`` / ``&&`` of a JMESPath filter alone
    (inside brackets, braces or quotes)."""
    out: list[str] = []
    depth, quote, start, i, n = 0, "", 0, 0, len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'`":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif depth == 0 and text.startswith(("||", "&&"), i):
            out += [text[start:i].rstrip(), text[i:i + 2]]
            i += 2
            while i < n and text[i] in " \t":
                i += 1
            start = i
            continue
        i += 1
    out.append(text[start:])
    return out


def parse_template(text: str, span: Span | None) -> Value:
    """``text`` read as a template (text with ``†`` references; ``††`` a dagger), never as
    a whole-value reference or expression."""
    return _parse_template(text, span)


def _parse_template(text: str, span: Span | None) -> Value:
    parts: list[Any] = []
    buf: list[str] = []
    i, n = 0, len(text)
    while i < n:
        j = text.find("†", i)
        if j < 0:
            buf.append(text[i:])
            break
        buf.append(text[i:j])
        if text.startswith("††", j):
            buf.append("†")
            i = j + 2
            continue
        m = REF_RE.match(text, j)
        if m is None:
            raise ReferenceSyntaxError(
                f"'†' at offset {j} does not start a reference; write '††' for a literal dagger", j)
        pending = "".join(buf)
        if pending:
            parts.append(pending)
        buf = []
        kind, path, query = _split_body(m.group(1) or m.group(2), j + 1)
        parts.append(Reference(kind, path, span, query))
        i = m.end()
    if buf and "".join(buf):
        parts.append("".join(buf))
    if not any(isinstance(p, Reference) for p in parts):
        return Literal("".join(parts), span)
    return Template(tuple(parts), span)


def literal_string_to_source(text: str) -> str:
    """Escape a literal string (no references) so that re-parsing yields the same literal."""
    return escape_text(text)


def json_to_value(data: Any, span: Span | None = None) -> Value:
    """Convert plain JSON (no positions) into a value tree, interpreting strings."""
    if isinstance(data, str):
        return parse_string_value(data, span)
    if isinstance(data, dict):
        return ObjectValue(tuple((str(k), json_to_value(v, span)) for k, v in data.items()), span)
    if isinstance(data, (list, tuple)):
        return ListValue(tuple(json_to_value(v, span) for v in data), span)
    if data is None or isinstance(data, (bool, int, float)):
        return Literal(data, span)
    raise OptionTypeError(f"not JSON: {type(data).__name__}")
