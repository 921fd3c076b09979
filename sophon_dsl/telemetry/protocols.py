"""What the span recorder reads of the run it traces, declared here rather than imported
from the runtime: the runtime imports telemetry (``runtime/api.py`` makes the subscriber),
so naming its classes would close an import loop.  ``runtime.api.RunHandle`` and
``runtime.api.Prepared`` are the implementations."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

from ..model import Plan
from ..tools import ToolRegistry

if TYPE_CHECKING:  # (the durable package is imported only by a run with a store)
    from ..durable.session import DurableRun

__all__ = ["PreparedRun", "TracedRun"]


class TracedRun(Protocol):
    """A plan run's handle, read when the run's first event arrives (a resume sets both
    after the subscriber is made): its id, and its checkpoints when it is durable (they
    keep the trace id, so that a resume continues the trace)."""

    @property
    def run_id(self) -> str | None: ...

    @property
    def durable(self) -> DurableRun | None: ...


class PreparedRun(Protocol):
    """A checked plan ready to run: its calls, their ids and the tools they run (each
    call's span gets its effective risk)."""

    @property
    def plan(self) -> Plan: ...

    @property
    def registry(self) -> ToolRegistry: ...

    @property
    def ids(self) -> Sequence[str]: ...
