"""A durable run's trace context, kept with the run so that a resume continues its trace.

It is stored in the run's ``decisions`` table under the name ``telemetry.trace`` (a row
``{"traceparent": ...}``): decisions are looked up by name only, so the row is invisible
to approvals, and no schema migration is needed for one value per run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (durable imports telemetry's users; named for the reader and checker only)
    from ..durable.session import DurableRun

NAME = "telemetry.trace"


def stored_traceparent(durable: DurableRun) -> str | None:
    """The ``traceparent`` of the run's first root span, when an earlier process stored one."""
    row = durable.decisions.get(NAME)
    value = row.get("traceparent") if isinstance(row, dict) else None
    return value if isinstance(value, str) else None


def store_traceparent(durable: DurableRun, span: Any) -> None:
    """Keep ``span``'s context with the run (queued on the store's writer, not waited for:
    the trace is an observation, it must not slow the run or fail it)."""
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return
    row = {"traceparent": f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"}
    try:
        durable.decisions[NAME] = row
        durable.backend.put_decision(durable.run_id, NAME, row)
    except Exception:  # noqa: BLE001 - a store that refuses only loses the trace link
        pass
