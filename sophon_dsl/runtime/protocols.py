"""Small public types: :class:`Branch` (an activity picks an output branch) and the
:class:`LatentExecutor` protocol (who runs latent calls without an inline ``_output``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..model import Call, Plan
from ..tools import ToolSpec

__all__ = ["Branch", "LatentExecutor", "LatentRequest"]


@dataclass(frozen=True, slots=True)
class Branch:
    """Returned by an activity whose output path is ``†a || †b || ...``: write ``value``
    to the alternative ``target`` (0-based index, or the path text ``"†state.b"`` /
    ``"state.b"``).  An activity that returns a plain value writes to the first
    alternative; one that raises sends ``{error, cause}`` to the last."""

    target: int | str
    value: Any = None


@dataclass(frozen=True)
class LatentRequest:
    call: Call
    call_id: str
    tool: ToolSpec | None
    args: dict
    plan: Plan
    attempt: int = 1


@runtime_checkable
class LatentExecutor(Protocol):
    """Runs a latent call (no Python implementation, no inline ``_output``), e.g. with an LLM.

    Return the call's result (may be a :class:`Branch`); raise to fail it.
    """

    async def execute(self, request: LatentRequest) -> Any: ...
