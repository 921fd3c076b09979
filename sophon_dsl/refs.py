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
"""

from __future__ import annotations

import re
from typing import Any

from .diagnostics import Span
from .errors import SophonError
from .model import Expression, ListValue, Literal, ObjectValue, Reference, Template, Value
from .values import escape_text, template_to_string  # template_to_string: re-exported

__all__ = [
    "DAGGER",
    "ReferenceSyntaxError",
    "json_to_value",
    "parse_reference",
    "parse_string_value",
    "template_to_string",
]

DAGGER = "†"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_SEG = rf"(?:\.{_NAME}|\[[0-9]+\])"
_REF_BODY = rf"{_NAME}{_SEG}*"
REF_RE = re.compile(rf"†(?:({_REF_BODY})|\{{\s*({_REF_BODY})\s*\}})")
_SEG_RE = re.compile(rf"\.({_NAME})|\[([0-9]+)\]")
_EXPR_SPLIT = re.compile(r"\s*(\|\||&&)\s*")
_WHOLE_REF = re.compile(rf"†(?:{_REF_BODY}|\{{\s*{_REF_BODY}\s*\}})")
_NAME_RE = re.compile(_NAME)


class ReferenceSyntaxError(SophonError, ValueError):
    """A malformed reference; ``offset`` is the 0-based index into the string."""

    def __init__(self, message: str, offset: int = 0):
        super().__init__(message)
        self.offset = offset


def _split_body(body: str) -> tuple[str, tuple]:
    m = _NAME_RE.match(body)
    assert m is not None
    end = m.end()
    if end == len(body):
        return body, ()  # a whole kind: †state
    kind = body[:end]
    path: list[Any] = []
    for seg in _SEG_RE.finditer(body, m.end()):
        name, index = seg.group(1), seg.group(2)
        path.append(name if name is not None else int(index))
    return kind, tuple(path)


def parse_reference(text: str, span: Span | None = None, dagger_aliases: str = "†") -> Reference:
    """Parse exactly one reference such as ``†state.items[0].name``.

    ``dagger_aliases`` lists the characters accepted as the dagger (the DSL
    also accepts ``$``).
    """
    if not text or text[0] not in dagger_aliases:
        raise ReferenceSyntaxError(f"expected a reference starting with '†', got {text!r}")
    candidate = text if text[0] == "†" else "†" + text[1:]
    m = REF_RE.fullmatch(candidate)  # the same language as _WHOLE_REF, with the body grouped
    if m is None:
        raise ReferenceSyntaxError(
            f"malformed reference {text!r}: expected †kind.name.name[index]", 0)
    kind, path = _split_body(m.group(1) or m.group(2))
    return Reference(kind, path, span)


def parse_string_value(text: str, span: Span | None = None) -> Value:
    """Interpret a string from any form: literal, reference, expression or template."""
    if "†" not in text:
        return Literal(text, span)
    stripped = text.strip()
    if stripped.startswith("†") and ("||" in stripped or "&&" in stripped):
        pieces = _EXPR_SPLIT.split(stripped)
        operands, ops = pieces[0::2], set(pieces[1::2])
        if not _WHOLE_REF.fullmatch(operands[0]):
            # Not an expression (e.g. "††|| x" starts with an escaped dagger): plain template.
            return _parse_template(text, span)
        if all(_WHOLE_REF.fullmatch(p) for p in operands):
            if len(ops) > 1:
                raise ReferenceSyntaxError(
                    "cannot mix '||' and '&&' in one expression", stripped.find("&&"))
            return Expression(ops.pop(), tuple(parse_reference(p, span) for p in operands), span)
        bad = next(p for p in operands if not _WHOLE_REF.fullmatch(p))
        raise ReferenceSyntaxError(
            f"malformed operand {bad!r} in expression: each operand must be a reference †kind.path",
            max(text.find(bad), 0))
    m = REF_RE.fullmatch(text)
    if m is not None:
        kind, path = _split_body(m.group(1) or m.group(2))
        return Reference(kind, path, span)
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
        kind, path = _split_body(m.group(1) or m.group(2))
        parts.append(Reference(kind, path, span))
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
    raise TypeError(f"not JSON: {type(data).__name__}")
