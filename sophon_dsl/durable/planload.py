"""Reading back the plan a durable run stored: compact JSON that the plan printer wrote.

The text is trusted (we wrote it), so it is read with ``json.loads`` and handed to the
document reader as a node tree without source positions: a 10,000-call plan loads in a
fraction of the time the position-tracking JSON reader takes.
"""

from __future__ import annotations

import json
from typing import Any

from ..diagnostics import Span
from ..model import Plan
from ..runtime.errors import PlanInvalid
from ..syntax.documents import document_to_plan
from ..syntax.located import ARRAY, OBJECT, SCALAR, LocatedNode

__all__ = ["load_stored_plan"]

_AT = Span(1, 1, 1, 1)


class _Keys(dict):
    """Every key of a stored object is at the one (unknown) position."""

    def __missing__(self, key: str) -> Span:
        return _AT


def _node(value: Any, path: str) -> LocatedNode:
    kind = type(value)
    if kind is dict:
        return LocatedNode(OBJECT, [(k, _node(v, path)) for k, v in value.items()], _AT, path, _Keys())
    if kind is list:
        return LocatedNode(ARRAY, [_node(v, path) for v in value], _AT, path)
    return LocatedNode(SCALAR, value, _AT, path, quoted=kind is str)


def load_stored_plan(text: str) -> Plan:
    plan, diagnostics = document_to_plan(_node(json.loads(text), "$"), source=text, form="json")
    errors = [d for d in diagnostics if d.is_error]
    if errors:
        raise PlanInvalid(errors, text)
    return plan
