"""The exception every standard tool raises: ``ToolError(code, message)``.

``code`` is a dotted, stable identifier (``Http.Blocked``, ``Files.OutsideSandbox``,
``Math.InvalidExpression``...) that plans can match in retry policies and that the
runtime reports as the error ``cause``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ToolError"]

try:  # the runtime records a RunError as {error, cause} with our code, not as Tool.Failed
    from sophon_dsl.runtime.errors import RunError as _Base
except Exception:  # noqa: BLE001  # pragma: no cover - runtime absent or broken: a plain exception still works
    _Base = Exception  # type: ignore[misc,assignment]


class ToolError(_Base):  # type: ignore[misc,valid-type]
    """A tool failed in a way the caller should see: a stable ``code`` plus a message.

    ``error`` / ``cause`` mirror ``code`` / ``message`` (the runtime's ``{error, cause}``).
    """

    def __init__(self, code: str, message: str, **details: Any):
        Exception.__init__(self, f"{code}: {message}")
        self.code = code
        self.message = message
        self.error = code
        self.cause = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.code, "cause": self.message}
        if self.details:
            out["details"] = self.details
        return out

    def __repr__(self) -> str:
        return f"ToolError({self.code!r}, {self.message!r})"
