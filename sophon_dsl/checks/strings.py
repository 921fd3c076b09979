"""W101: text that looks like a reference but is not one.

A reference inside a string starts with ``†``.  Writers coming from other
languages write ``"Hello $input.name"`` (``$`` is the dagger's alias only outside
quotes in the DSL, and no alias at all in JSON and YAML), ``"${input.name}"``
(a JavaScript template literal), ``"{input.name}"`` (a Python format string) or
``"{{input.name}}"`` (Mustache, Jinja): each stays literal text, which is rarely
what was meant.  The rule reports such text when its first name is a kind the
plan can read (``input``, ``state``, ``data`` or a kind some call writes) and it
goes on with a path, and names the spelling that interpolates.
"""

from __future__ import annotations

import re
from typing import Any

from ..model import Call, ListValue, Literal, ObjectValue, Reference, Template
from .rule import Rule

__all__ = ["ReferenceLikeText"]

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_PATH = rf"{_NAME}(?:\.{_NAME}|\[[0-9]+\])+"
# $kind.path, ${kind.path}, {{ kind.path }}, {kind.path}
_LOOKALIKE = re.compile(rf"\$\{{\s*({_PATH})\s*\}}|\$({_PATH})|\{{\{{\s*({_PATH})\s*\}}\}}|\{{\s*({_PATH})\s*\}}")
_BUILTIN = frozenset({"input", "state", "data"})


class ReferenceLikeText(Rule):
    """W101 text in a string that looks like a reference ($input.name, {input.name}) but is text."""

    codes = ("W101",)
    __slots__ = ("_kinds",)

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._kinds: frozenset[str] | None = None

    def kinds(self) -> frozenset[str]:
        if self._kinds is None:
            written = {p.kind.split("@", 1)[0] for c in self.ctx.calls if c.output is not None
                       for p in c.output.paths}
            self._kinds = _BUILTIN | written
        return self._kinds

    def check_call(self, i: int, call: Call) -> None:
        self._kinds = None  # a streamed call may write a new kind
        for p in call.params:
            self.value(p.value, i)

    def check_calls(self) -> None:
        # value() inlined one level: a parameter that is a reference, or a list or object
        # of references (most parameters that are not literals), costs no call
        value = self.value
        for i, call in enumerate(self.ctx.calls):
            for p in call.params:
                v = p.value
                tv = type(v)
                if tv is Reference:
                    continue
                if tv is Literal:
                    s = v.value
                    if type(s) is str and ("$" in s or "{" in s):
                        self.text(s, v, i)
                elif tv is ListValue:
                    for x in v.items:
                        if type(x) is not Reference:
                            value(x, i)
                elif tv is ObjectValue:
                    for _, x in v.entries:
                        if type(x) is not Reference:
                            value(x, i)
                else:
                    value(v, i)

    def check_output(self, value: Any) -> None:
        if value is not None:
            self.value(value, None)

    def value(self, v: Any, i: int | None) -> None:
        tv = type(v)
        if tv is Literal:
            s = v.value
            if type(s) is str and ("$" in s or "{" in s):
                self.text(s, v, i)
        elif tv is ListValue:
            for x in v.items:
                self.value(x, i)
        elif tv is ObjectValue:
            for _, x in v.entries:
                self.value(x, i)
        elif tv is Template:
            for part in v.parts:
                if type(part) is str and ("$" in part or "{" in part):
                    self.text(part, v, i)

    def text(self, s: str, node: Any, i: int | None) -> None:
        for m in _LOOKALIKE.finditer(s):
            path = next(g for g in m.groups() if g is not None)
            if path.split(".", 1)[0].split("[", 1)[0] not in self.kinds():
                continue
            braced = m.group(0).startswith(("{", "${"))
            fix = f"†{{{path}}}" if braced else f"†{path}"
            form = self.ctx.plan.form
            where = " (in the DSL `$` stands for `†` only outside quotes)" if form == "dsl" and \
                m.group(0)[0] == "$" else ""
            bare = f"; to pass the value itself write ${path} outside quotes" if form == "dsl" else ""
            self.ctx.diag("W101", f"{m.group(0)!r} in a string is text, not a reference{where}: write "
                                  f"{fix} to put its value in the text{bare}",
                          node.span, call=i)
