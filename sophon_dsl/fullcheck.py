"""Every problem of a plan source in one pass: loading errors and the static checks together.

Loading keeps what it can: a call with an unknown meta-property loses the
attribute, a malformed reference becomes its text, a statement with a syntax
error is left out.  The checks then run on that plan, so fixing the two loading
errors of a file does not reveal twelve more.  What a loading error took away
would make some checks guess, so their findings are held back:

* checks over the whole set of writers and readers (a read nobody writes,
  unordered or unread writers, an unknown ``after`` id) when a statement, a
  call or an output path did not load (E001-E006, E101, E102, E106): the
  missing part may have been the writer or the reader;
* any finding on a node a loading error already reports (an E204 on the text
  a malformed reference left behind), and a missing required parameter (E202)
  of a call that lost an argument to a syntax error or an unknown `_name`;
* an unknown tool (E201) while a tool declaration does not load (E109), and
  the mode rules while ``mode`` does not (E107).

A plan that loads without errors gets exactly the checker's diagnostics.
"""

from __future__ import annotations

from typing import Any

from .diagnostics import Diagnostic, Span, sort_key

__all__ = ["check_loaded"]

_LOST_STATEMENT = frozenset({"E001", "E002", "E003", "E004", "E005", "E006", "E101", "E102", "E106"})
_NEEDS_EVERY_STATEMENT = frozenset({"E301", "W303", "W305", "W301", "W302", "E304"})
_MODE_RULES = frozenset({"E401", "E402", "W401"})
_LOST_ARGUMENT = frozenset({"E001", "E006", "E104"})  # an argument left out (`_from` meant as one)


def check_loaded(loaded: Any, tools: Any = None, **kw: Any) -> list[Diagnostic]:
    """The diagnostics of a :class:`~sophon_dsl.loader.LoadResult` and of the static checks
    of its plan (keywords as :func:`~sophon_dsl.compiler.check`), sorted by position."""
    from .compiler import check

    load_diags = list(loaded.diagnostics)
    load_errors = [d for d in load_diags if d.is_error]
    plan = loaded.plan
    file = plan.file
    found = check(plan, tools=tools, **kw)
    if file is not None:
        found = [d.with_file(file) for d in found]
    if not load_errors:
        return load_diags + found
    if any(d.code == "E101" for d in load_errors) or not (plan.calls or plan.output is not None):
        return load_diags  # nothing of the plan loaded: nothing to check
    kept = [d for d in found if not _held_back(d, load_errors, plan)]
    return sorted(load_diags + kept, key=sort_key)


def _held_back(d: Diagnostic, load_errors: list[Diagnostic], plan: Any) -> bool:
    codes = {e.code for e in load_errors}
    if d.code in _NEEDS_EVERY_STATEMENT and (codes & _LOST_STATEMENT or (
            plan.form != "dsl" and "E103" in codes)):  # JSON/YAML leave out a call with a bad attribute
        return True
    if d.code == "E201" and "E109" in codes:
        return True
    if d.code in _MODE_RULES and any(e.code == "E107" and "mode" in e.message for e in load_errors):
        return True
    span = d.span
    if span is None:
        return False
    if any(e.span is not None and _overlap(span, e.span) for e in load_errors):
        return True
    if d.code == "E202":
        for call in plan.calls:
            if call.span is not None and _inside(span, call.span) and any(
                    e.code in _LOST_ARGUMENT and e.span is not None and _inside(e.span, call.span)
                    for e in load_errors):
                return True
    return False


def _overlap(a: Span, b: Span) -> bool:
    return (a.line, a.column) < (b.end_line, b.end_column) and (b.line, b.column) < (a.end_line, a.end_column)


def _inside(a: Span, b: Span) -> bool:
    return (b.line, b.column) <= (a.line, a.column) and (a.end_line, a.end_column) <= (b.end_line, b.end_column)
