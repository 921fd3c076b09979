"""The exception every standard tool raises: ``ToolError(code, message)``.

``code`` is a dotted, stable identifier (``Http.Blocked``, ``Files.OutsideSandbox``,
``Math.InvalidExpression``...) that plans can match in retry policies and that the
runtime reports as the error ``cause``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ToolError"]


class ToolError(Exception):
    """A tool failed in a way the caller should see: a stable ``code`` plus a message."""

    def __init__(self, code: str, message: str, **details: Any):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details

    @property
    def error(self) -> str:
        return self.code

    @property
    def cause(self) -> str:
        return self.message

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.code, "cause": self.message}
        if self.details:
            out["details"] = self.details
        return out

    def __repr__(self) -> str:
        return f"ToolError({self.code!r}, {self.message!r})"
