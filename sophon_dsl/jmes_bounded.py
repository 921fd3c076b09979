"""JMESPath with bounds: the one interpreter for plan references and ``data.query``.

JMESPath is a small language, but a short expression can ask for a great deal:
``join('', [@, @])`` piped twenty times doubles a string twenty times (a 1.3 KB plan
built a 1 GB string), ``[@,@,@,@,@,@,@,@,@,@][]`` repeated makes a list ten times
longer per level, ``[@,@,@]`` a value whose JSON is three times larger per level (shared
in memory, so free to build, but not to compare, serialize or store), and a long pipe
chain recurses once per stage.  Plans are written by a model (docs/security.md), so
every evaluation here is bounded:

* **steps**: each AST node visited, each element flattened and each 32 bytes of a value
  a function or an equality receives cost one step; past ``max_steps`` (1,000,000) the
  evaluation stops.  Steps make the bound deterministic: the same expression over the
  same value passes or fails whatever the machine's speed;
* **size**: what a function or an equality receives, and the result, is measured as
  JSON before it is used (shared sub-values counted where they appear, the walk bounded
  by the limit); past ``max_bytes`` the evaluation stops;
* **nesting**: an expression nests at most ``MAX_QUERY_DEPTH`` (128) levels (checked when
  it is compiled, so a plan holding a deeper one is refused when it is read);
* **time**: every ``_CHECK_EVERY`` steps the interpreter looks at an optional deadline
  (``time.monotonic()``) and an optional ``stop()`` predicate, so a run's ``max_time``
  or its cancellation stops a busy evaluation instead of waiting for its step bound.

Past a bound :class:`QueryTooExpensive` is raised, with ``bound`` saying which.  The run
time reports it as ``Ref.TooExpensive`` (``sophon_dsl.runtime.inputs``), ``data.query``
as ``Data.QueryTooExpensive`` or ``Result.TooLarge``.  This module is part of the core
(the standard library is a plugin, docs/design.md): ``stdlib_tools.data`` imports it.
"""

from __future__ import annotations

import time
from typing import Any

import jmespath
from jmespath import visitor as _visitor

from .jmes_limits import (DEFAULT_LIMITS, DEFAULT_MAX_BYTES, MAX_QUERY_DEPTH, MAX_QUERY_STEPS,  # noqa: F401
                          QueryLimits, QueryTooExpensive)

_CHECK_EVERY = 1024  # steps between two looks at the clock (about a millisecond of work)
_SCALAR_TYPES = (str, int, float, bool, type(None))
_STOPPED = {"memory": "its memory budget, max_memory, was exceeded", "cancelled": "it was cancelled"}

__all__ = ["DEFAULT_LIMITS", "MAX_QUERY_DEPTH", "MAX_QUERY_STEPS", "QueryLimits", "QueryTooExpensive",
           "compile_query", "query_depth", "search"]


def query_depth(node: Any) -> int:
    """The nesting of a JMESPath AST (walked without recursion: the tree may be deep)."""
    deepest = 0
    stack = [(node, 1)]
    while stack:
        n, d = stack.pop()
        if d > deepest:
            deepest = d
        for child in n.get("children") or ():
            if isinstance(child, dict):
                stack.append((child, d + 1))
    return deepest


def compile_query(expression: str) -> Any:
    """``jmespath.compile(expression)`` nesting at most :data:`MAX_QUERY_DEPTH` levels.

    Raises ``jmespath.exceptions.ParseError`` (or another ``JMESPathError``) for a
    malformed expression and :class:`QueryTooExpensive` (``bound="depth"``) for one nested
    too deeply (the parser recurses on brackets, so the deepest ones never finish parsing)."""
    try:
        compiled = jmespath.compile(expression)
    except RecursionError:
        raise QueryTooExpensive("depth", f"the JMESPath expression is nested more than {MAX_QUERY_DEPTH} "
                                         "levels deep") from None
    if query_depth(compiled.parsed) > MAX_QUERY_DEPTH:
        raise QueryTooExpensive("depth", f"the JMESPath expression is nested more than {MAX_QUERY_DEPTH} "
                                         "levels deep")
    return compiled


def search(compiled: Any, value: Any, limits: QueryLimits = DEFAULT_LIMITS) -> Any:
    """The value of ``compiled`` (from :func:`compile_query`) applied to ``value``, within
    ``limits``; raises :class:`QueryTooExpensive` past one of them, and what JMESPath
    raises (``JMESPathError``) for an error of the expression itself."""
    interp = _BoundedInterpreter(limits)
    try:
        result = interp.visit(compiled.parsed, value)
    except RecursionError:  # comparing or sorting values nested deeper than Python recurses
        raise QueryTooExpensive("depth", "the values the JMESPath expression compares are nested too "
                                         "deeply") from None
    except ValueError as exc:  # a slice step of 0 (`[1:2:0]`): JMESPath's invalid-value error
        from jmespath.exceptions import JMESPathError

        raise JMESPathError(f"invalid value: {exc}") from None
    interp.measure(result)
    return result


class _BoundedInterpreter(_visitor.TreeInterpreter):
    """JMESPath's interpreter with a work bound, a size bound and a deadline."""

    def __init__(self, limits: QueryLimits) -> None:
        super().__init__()
        self.limits = limits
        self.steps = limits.max_steps
        # the next step count at which the clock and the bound are looked at (_checkpoint)
        self.check_at = max(self.steps - _CHECK_EVERY, 0)
        from .runtime.validation import json_size  # (the run time's own measure: one notion of size)

        self.json_size = json_size

    def _spend(self, n: int) -> None:
        self.steps -= n
        if self.steps < self.check_at:
            self._checkpoint()

    def _checkpoint(self) -> None:
        limits = self.limits
        if self.steps < 0:
            raise QueryTooExpensive("steps", f"the JMESPath expression needs more than {limits.max_steps:,} steps")
        self.check_at = max(self.steps - _CHECK_EVERY, 0)
        why = limits.stop() if limits.stop is not None else None
        if why == "timeout" or (limits.deadline is not None and time.monotonic() > limits.deadline):
            raise QueryTooExpensive("time", "the run's time limit (max_time) passed while the JMESPath "
                                            "expression was evaluated")
        if why:
            raise QueryTooExpensive("stopped", f"the run stopped ({_STOPPED.get(why, why)}) while the JMESPath "
                                               "expression was evaluated")

    def measure(self, value: Any) -> int:
        """``value``'s JSON size once it is known to fit ``max_bytes`` (else QueryTooExpensive)."""
        limit = self.limits.max_bytes
        size = self.json_size(value, limit)
        if size is None:  # not JSON data (a Python value handed to data.query): its text
            size = len(str(value))
        if size > limit:
            raise QueryTooExpensive("size", f"the JMESPath expression would produce more than {limit:,} bytes")
        return size

    def _sized(self, value: Any) -> Any:
        """``value`` once its JSON size is known to fit (the walk is paid in steps).  A long
        string counts too: ``to_string`` doubles the backslashes of a string of quotes, so
        it nested thirty times makes a gigabyte from one character."""
        if type(value) is str:
            n = len(value)
            if n > 4096:
                if n > self.limits.max_bytes:
                    raise QueryTooExpensive("size", "the JMESPath expression would produce more than "
                                                    f"{self.limits.max_bytes:,} bytes")
                self._spend(n // 32)
        elif not isinstance(value, _SCALAR_TYPES):
            self._spend(self.measure(value) // 32)
        return value

    def visit(self, node: Any, *args: Any, **kwargs: Any) -> Any:
        self.steps -= 1
        if self.steps < self.check_at:
            self._checkpoint()
        node_type = node["type"]  # (jmespath's Visitor.visit, inline: one frame less per node)
        method = self._method_cache.get(node_type)
        if method is None:
            method = getattr(self, "visit_" + node_type, self.default_visit)
            self._method_cache[node_type] = method
        return method(node, *args, **kwargs)

    def visit_flatten(self, node: Any, value: Any) -> Any:
        base = self.visit(node["children"][0], value)
        if not isinstance(base, list):
            return None
        self._spend(sum(len(e) if isinstance(e, list) else 1 for e in base))  # before building it
        out: list[Any] = []
        for element in base:
            if isinstance(element, list):
                out.extend(element)
            else:
                out.append(element)
        return out

    def visit_function_expression(self, node: Any, value: Any) -> Any:
        args = [self._sized(self.visit(child, value)) for child in node["children"]]
        return self._functions.call_function(node["value"], args)

    def visit_comparator(self, node: Any, value: Any) -> Any:
        if node["value"] in self._EQUALITY_OPS:
            left = self._sized(self.visit(node["children"][0], value))
            right = self._sized(self.visit(node["children"][1], value))
            return self.COMPARATOR_FUNC[node["value"]](left, right)
        return super().visit_comparator(node, value)
