"""Trace context of the calls that run now (no OpenTelemetry import at module level).

The span recorder registers each call's current attempt span here while it runs; code that
runs for the call (a tool, the ``http.*`` tools, ``current_call().traceparent``) reads it.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
# (run id, call id) -> the span of the call's current attempt, while it runs: what
# traceparent() and call_context() hand to the code that runs for the call
_LIVE: dict[tuple[str, str], Any] = {}


class Remote:
    """A call's span started in another process (the coordinator of a Dask worker), known by
    its ``traceparent``: what the worker registers while it runs the call, so that
    ``current_call().traceparent``, :func:`call_context` and the ``http.*`` tools see the
    call's span there too."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def otel_span(self) -> Any:
        """The span as OpenTelemetry's non-recording span of a remote parent (None when the
        value is malformed)."""
        parsed = parse_traceparent(self.value)
        if parsed is None:
            return None
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        trace_id, span_id, flags = parsed
        return NonRecordingSpan(SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags)))


def adopt(run_id: str, call_id: str, value: str | None) -> Any:
    """On a worker: the call ``(run_id, call_id)`` runs under the coordinator's span
    ``value`` (a ``traceparent``) until :func:`release`.  When OpenTelemetry is installed
    here, that span is also made the current context, so spans a tool starts with the
    default context are children of its call's span.  Returns what :func:`release` needs."""
    if parse_traceparent(value) is None:
        return None
    remote = Remote(value)  # type: ignore[arg-type]
    _register(run_id, call_id, remote)
    token = None
    try:
        from opentelemetry import context, trace
    except ImportError:
        pass
    else:
        token = context.attach(trace.set_span_in_context(remote.otel_span()))
    return (run_id, call_id, remote, token)


def release(adopted: Any) -> None:
    """Undo :func:`adopt` (same thread)."""
    if adopted is None:
        return
    run_id, call_id, remote, token = adopted
    if token is not None:
        from opentelemetry import context

        context.detach(token)
    _unregister(run_id, call_id, remote)


def _register(run_id: str, call_id: str, span: Any) -> None:
    with _lock:
        _LIVE[(run_id, call_id)] = span


def _unregister(run_id: str, call_id: str, span: Any) -> None:
    with _lock:
        if _LIVE.get((run_id, call_id)) is span:
            del _LIVE[(run_id, call_id)]


def _span_for(run_id: str | None, call_id: str | None) -> Any:
    if run_id is None or call_id is None:
        from ..durable.current import current_call

        cur = current_call()
        if cur is None:
            return None
        run_id, call_id = cur.run_id, cur.call_id
    with _lock:
        return _LIVE.get((run_id, call_id))


def traceparent(run_id: str | None = None, call_id: str | None = None) -> str | None:
    """The W3C ``traceparent`` of a call's span (by default the call the caller runs for), or
    None when tracing is off or the call has no span."""
    if not _LIVE:
        return None
    span = _span_for(run_id, call_id)
    if span is None:
        return None
    if isinstance(span, Remote):
        return span.value
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def call_context(run_id: str | None = None, call_id: str | None = None) -> Any:
    """An OpenTelemetry ``Context`` whose current span is the call's, for a tool that starts
    spans of its own (``tracer.start_as_current_span(name, context=call_context())``); None
    when there is none."""
    span = _span_for(run_id, call_id) if _LIVE else None
    if isinstance(span, Remote):
        span = span.otel_span()
    if span is None:
        return None
    from opentelemetry import trace

    return trace.set_span_in_context(span)


def inject(headers: dict) -> dict:
    """``headers`` with the current call's ``traceparent`` added (when it has a span and the
    caller did not set one): what the ``http.*`` tools send."""
    tp = traceparent()
    if tp is not None and not any(k.lower() == "traceparent" for k in headers):
        headers["traceparent"] = tp
    return headers


def parse_traceparent(value: Any) -> tuple[int, int, int] | None:
    """``(trace id, span id, flags)`` of a W3C ``traceparent`` value, None when malformed."""
    if not isinstance(value, str):
        return None
    parts = value.strip().split("-")
    if len(parts) != 4 or len(parts[0]) != 2 or len(parts[1]) != 32 or len(parts[2]) != 16 or len(parts[3]) != 2:
        return None
    try:
        version, trace_id, span_id, flags = (int(p, 16) for p in parts)
    except ValueError:
        return None
    if version == 0xFF or trace_id == 0 or span_id == 0:
        return None
    return trace_id, span_id, flags
