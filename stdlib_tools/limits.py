"""Size bounds for what a tool builds (issue 17, High 4: output amplification).

A risk-none tool may not turn a small input into a huge output: ``text.join`` of fifty
references to one value, chained five times, or a JMESPath expression that repeats its
input at every level.  Tools count what they are about to produce against a
:class:`Budget` and stop with ``Result.TooLarge`` before allocating past it.  The runtime
bounds every call's result, and a run's results together, the same way (RunOptions
``max_result_bytes`` / ``max_run_result_bytes``); these bounds stop the work earlier,
inside the tool.
"""

from __future__ import annotations

import json
from typing import Any

from sophon_dsl.runtime.validation import RESULT_TOO_LARGE, json_size

from .errors import ToolError

__all__ = ["Budget", "RESULT_TOO_LARGE", "bounded_json_text"]


class Budget:
    """What one tool call may still produce, in bytes (characters for text)."""

    __slots__ = ("limit", "used", "tool")

    def __init__(self, limit: int, tool: str) -> None:
        self.limit = limit
        self.used = 0
        self.tool = tool

    @property
    def left(self) -> int:
        return max(self.limit - self.used, 0)

    def charge(self, size: int) -> None:
        self.used += size
        if self.used > self.limit:
            raise ToolError(RESULT_TOO_LARGE, f"{self.tool} would produce more than {self.limit:,} bytes "
                            "(max_result_bytes)")

    def measure(self, value: Any) -> int:
        """Charge ``value``'s JSON size (bounded work, see json_size) and return it."""
        size = json_size(value, self.left)
        if size is None:
            size = len(str(value))
        self.charge(size)
        return size


def bounded_json_text(value: Any, budget: Budget) -> str:
    """``value`` as text (strings as they are, the rest as JSON), charged to ``budget``
    before it is serialized."""
    if isinstance(value, str):
        budget.charge(len(value))
        return value
    budget.measure(value)
    if value is None or isinstance(value, (bool, int, float, dict, list)):
        try:
            return json.dumps(value, ensure_ascii=False)
        except ValueError as exc:  # an integer over the conversion limit, a cycle
            raise ToolError("Text.InvalidValue", f"cannot write the value as JSON: {exc}") from None
    return str(value)
