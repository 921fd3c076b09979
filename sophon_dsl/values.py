"""One walk over plan value trees, shared by every module that reads or rewrites them.

A parameter value is a tree of six node types (``sophon_dsl.model``): ``Literal``
(a JSON scalar), ``ListValue`` and ``ObjectValue`` (containers), and the three
that read data: ``Reference``, ``Expression`` (``†a || †b``, ``†a && †b``) and
``Template`` (text with embedded references).  Each node class names itself in
a class attribute, ``node_kind``: ``"literal"``, ``"list"``, ``"object"``,
``"reference"``, ``"expression"`` or ``"template"``.  This module dispatches on
that name, so it imports nothing from the package and the model can use it.

API
---
:class:`ValueVisitor`
    Subclass it and override one method per node kind you care about::

        class Resolve(ValueVisitor):
            def reference(self, node):          # a whole-value reference
                return lookup(node.kind, node.path)

        Resolve()(value)                         # or .visit(value)

    ``visit(node)`` calls the method named by ``node.node_kind`` with the node.
    The defaults: ``literal`` returns ``node.value``; ``list`` returns a Python
    list of its visited items; ``object`` a dict of its visited entries (source
    order); ``reference``, ``expression`` and ``template`` raise
    :class:`NotLiteral` (a ``TypeError``), so the bare class turns a literal tree
    into JSON.  Containers visit their children through ``self.visit``, so an
    override of ``list``/``object`` decides whether and how to descend.
    ``expression`` and ``template`` receive the whole node: ``||`` stops at the
    first operand that has a value and a template renders its references as
    text, which are choices for the caller, not for the walk.  A visitor may keep
    state in attributes (the runtime's evaluator keeps the reading call and what
    was pending); make one per use, or reset it, when it does.
    Hot paths may test ``type(v) is Literal`` before calling ``visit``: literals
    are most nodes.

:func:`fold`
    The same walk with functions instead of a subclass:
    ``fold(value, reference=lambda r: ..., template=...)``.

Ready-made walks:
:func:`references` (every reference in source order, iterative: deep trees are
fine), :func:`has_references`, :func:`literal_json` (a literal tree as JSON;
:class:`NotLiteral` otherwise), :func:`map_references` (a copy with each
reference replaced; unchanged subtrees are shared), :func:`to_source_json` (the
seed's JSON form: references as ``"†kind.path"`` strings, daggers escaped), and
:func:`template_to_string` / :func:`escape_text` for template text.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Callable, Iterator

from .errors import OptionTypeError, SophonError

__all__ = [
    "NotLiteral",
    "ValueVisitor",
    "UNBRACED_QUERY",
    "escape_text",
    "fold",
    "has_references",
    "literal_json",
    "map_references",
    "query_text",
    "references",
    "template_to_string",
    "to_source_json",
]


class NotLiteral(SophonError, TypeError):
    """A reference, expression or template where only literals were expected."""


class ValueVisitor:
    """Visits a value tree: one method per node kind (see the module docstring)."""

    __slots__ = ()

    def __call__(self, node: Any) -> Any:
        return self.visit(node)

    def visit(self, node: Any) -> Any:
        try:
            kind = node.node_kind
        except AttributeError:
            raise OptionTypeError(f"not a plan value: {node!r}") from None
        return getattr(self, kind)(node)

    def literal(self, node: Any) -> Any:
        return node.value

    def list(self, node: Any) -> Any:
        visit = self.visit
        return [visit(x) for x in node.items]

    def object(self, node: Any) -> Any:
        visit = self.visit
        return {k: visit(x) for k, x in node.entries}

    def reference(self, node: Any) -> Any:
        raise NotLiteral(f"not a literal: {node.text()}")

    def expression(self, node: Any) -> Any:
        raise NotLiteral(f"not a literal: {node.text()}")

    def template(self, node: Any) -> Any:
        raise NotLiteral("not a literal: a template")


class _Fold(ValueVisitor):
    __slots__ = ("_fns",)

    def __init__(self, fns: dict[str, Callable[[Any], Any]]) -> None:
        self._fns = fns

    def visit(self, node: Any) -> Any:
        try:
            kind = node.node_kind
        except AttributeError:
            raise OptionTypeError(f"not a plan value: {node!r}") from None
        fn = self._fns.get(kind)
        return fn(node) if fn is not None else getattr(self, kind)(node)


def fold(value: Any, **fns: Callable[[Any], Any]) -> Any:
    """Visit ``value`` with functions by node kind (``literal=``, ``reference=``, ...);
    the kinds not given behave as :class:`ValueVisitor`'s defaults."""
    unknown = set(fns) - {"literal", "list", "object", "reference", "expression", "template"}
    if unknown:
        raise OptionTypeError(f"fold() got unknown node kinds: {', '.join(sorted(unknown))}")
    return _Fold(fns).visit(value)


# ---------------------------------------------------------------------------
# ready-made walks

_LITERAL_JSON = ValueVisitor()


def literal_json(value: Any) -> Any:
    """A literal tree (literals, lists, objects) as JSON; :class:`NotLiteral` otherwise."""
    if value.node_kind == "literal":
        return value.value
    return _LITERAL_JSON.visit(value)


def references(value: Any) -> Iterator[Any]:
    """Every reference inside a value tree (``None``: none), in source order: whole values,
    expression operands and template parts, at any depth."""
    if value is None:
        return
    stack = [value]
    pop, push = stack.pop, stack.extend
    while stack:
        v = pop()
        kind = v.node_kind
        if kind == "reference":
            yield v
        elif kind == "list":
            push(reversed(v.items))
        elif kind == "object":
            push([x for _, x in reversed(v.entries)])
        elif kind == "expression":
            yield from v.operands
        elif kind == "template":
            for part in v.parts:
                if type(part) is not str:
                    yield part


def has_references(value: Any) -> bool:
    """Whether a value tree reads anything (a literal tree does not)."""
    return next(references(value), None) is not None


class _MapReferences(ValueVisitor):
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def literal(self, node: Any) -> Any:
        return node

    def list(self, node: Any) -> Any:
        visit = self.visit
        return replace(node, items=tuple([visit(x) for x in node.items]))

    def object(self, node: Any) -> Any:
        visit = self.visit
        return replace(node, entries=tuple([(k, visit(x)) for k, x in node.entries]))

    def reference(self, node: Any) -> Any:
        return self.fn(node)

    def expression(self, node: Any) -> Any:
        fn = self.fn
        return replace(node, operands=tuple([fn(r) for r in node.operands]))

    def template(self, node: Any) -> Any:
        fn = self.fn
        return replace(node, parts=tuple([p if type(p) is str else fn(p) for p in node.parts]))


def map_references(value: Any, fn: Callable[[Any], Any]) -> Any:
    """A copy of the value tree with every reference ``r`` replaced by ``fn(r)``
    (``None`` and literals come back as they are)."""
    if value is None or value.node_kind == "literal":
        return value
    return _MapReferences(fn).visit(value)


# ---------------------------------------------------------------------------
# source text


def escape_text(text: str) -> str:
    """A literal string as written in any form: each dagger doubled."""
    return text.replace("†", "††")


_EXTENDS_REF = re.compile(r"[A-Za-z0-9_.\[]")

# JMESPath after a reference's path, as written without braces (†state.items[-1],
# †state.hits[*].url, †state.orders[?total > `100`].id): bracket segments that are not a
# plain index ([-1], slices, [*], [], [?filter]), then any segments.  Anything else is
# written in braces, †{state.items | [0]}.  refs.py reads the same language.
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_QUOTED = r"""(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\\n]|\\.)*`)"""
FILTER = rf"(?:[^\[\]\n\"'`]|{_QUOTED}|\[[^\[\]\n]*\])+"
QUERY_SEGMENT = rf"\[(?:-[0-9]+|-?[0-9]*:-?[0-9]*(?::-?[0-9]*)?|\*|\?{FILTER})?\]"
PLAIN_SEGMENT = rf"(?:\.{_NAME}|\[[0-9]+\])"
UNBRACED_QUERY = re.compile(rf"{QUERY_SEGMENT}(?:{PLAIN_SEGMENT}|{QUERY_SEGMENT})*")


def query_text(parts: list, query: str) -> str:
    """A reference with a JMESPath query as written: ``parts`` is the dagger, the kind and
    the path segments; braces when the query cannot be written bare."""
    if UNBRACED_QUERY.fullmatch(query):
        return "".join(parts) + query
    sep = "" if query[:1] in (".", "[") else " "
    return f"{parts[0]}{{{''.join(parts[1:])}{sep}{query}}}"


def template_to_string(template: Any, dagger: str = "†") -> str:
    """A template's source text: references use the braced form when text follows that
    could extend them."""
    out: list[str] = []
    parts = template.parts
    for idx, part in enumerate(parts):
        if isinstance(part, str):
            out.append(escape_text(part))
            continue
        nxt = parts[idx + 1] if idx + 1 < len(parts) else None
        body = part.text("")
        if body[:1] == "{":  # a query only braces can hold
            out.append(dagger + body)
            continue
        needs_braces = isinstance(nxt, str) and bool(_EXTENDS_REF.match(nxt))
        out.append(f"{dagger}{{{body}}}" if needs_braces else f"{dagger}{body}")
    return "".join(out)


class _SourceJson(ValueVisitor):
    __slots__ = ("dagger",)

    def __init__(self, dagger: str) -> None:
        self.dagger = dagger

    def literal(self, node: Any) -> Any:
        v = node.value
        return escape_text(v) if isinstance(v, str) else v

    def reference(self, node: Any) -> Any:
        return node.text(self.dagger)

    def expression(self, node: Any) -> Any:
        return node.text(self.dagger)

    def template(self, node: Any) -> Any:
        return template_to_string(node, self.dagger)


_SOURCE_JSON = _SourceJson("†")


def to_source_json(value: Any, dagger: str = "†") -> Any:
    """A value tree in the seed's JSON form: references, expressions and templates as
    ``"†kind.path"`` strings, literal strings with their daggers escaped."""
    return (_SOURCE_JSON if dagger == "†" else _SourceJson(dagger)).visit(value)
