"""JSON-aware truncation of what is fed back to the model (seed 002: results capped at
8,000 characters).

:func:`truncate_json` returns compact JSON text of at most ``limit`` characters that always
parses, and says how much was left out *inside* the JSON: a list keeps its first items and
ends with ``"[...truncated, showing X/Y items]"``; an object keeps its first keys and gains
``"…truncated": "showing X/Y keys"``; a long string is cut at its last word boundary and ends
with ``"…[N more characters]"``.  Nothing is ever cut in the middle of a token (an escape, a
number, a key).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["RESULT_LIMIT", "truncate_json"]

RESULT_LIMIT = 8000
_MARK_ROOM = 48          # room kept for the marker of a cut container
_KEY = "…truncated"


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def truncate_json(value: Any, limit: int = RESULT_LIMIT) -> str:
    """``value`` as compact JSON of at most ``limit`` characters (see the module docstring)."""
    text = _dump(value)
    if len(text) <= limit:
        return text
    cut = _shrink(json.loads(text), max(limit, 2 * _MARK_ROOM))
    out = _dump(cut)
    if len(out) > limit:  # a pathological shape (deep nesting of markers): say so and stop
        out = _dump(f"…[{len(text)} characters of JSON left out]")
    return out


def _shrink(value: Any, budget: int) -> Any:
    """A smaller value whose JSON fits in ``budget`` characters."""
    if len(_dump(value)) <= budget:
        return value
    if isinstance(value, str):
        return _cut_string(value, budget)
    if isinstance(value, list):
        return _cut_list(value, budget)
    if isinstance(value, dict):
        return _cut_object(value, budget)
    return f"…[{len(_dump(value))} characters left out]"


def _cut_string(text: str, budget: int) -> str:
    keep = max(0, budget - 40)
    while keep > 0 and len(_dump(text[:keep])) > budget - 30:  # escapes make JSON longer
        keep = keep * 3 // 4
    head = text[:keep]
    space = head.rfind(" ")
    if space > keep // 2:
        head = head[:space]
    return head + f"…[{len(text) - len(head)} more characters]"


def _cut_list(items: list, budget: int) -> list:
    """The most leading items that fit (binary search), then the marker."""
    room = budget - _MARK_ROOM
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(_dump(items[:mid])) <= room:
            lo = mid
        else:
            hi = mid - 1
    kept = list(items[:lo])
    if lo == 0 and items and room > _MARK_ROOM:
        kept = [_shrink(items[0], room - 2)]
        lo = 1
    return kept + [f"[...truncated, showing {lo}/{len(items)} items]"]


def _cut_object(obj: dict, budget: int) -> dict:
    """Leading keys whole while they fit; the first that does not is shrunk into what is left."""
    room = budget - _MARK_ROOM
    out: dict = {}
    used = 2
    for key, val in obj.items():
        piece = len(_dump({key: val})) - 1
        if used + piece <= room:
            out[key] = val
            used += piece
            continue
        left = room - used - len(_dump(key)) - 2
        if left > _MARK_ROOM:
            out[key] = _shrink(val, left)
        break
    out[_KEY] = f"showing {len(out)}/{len(obj)} keys"
    return out
