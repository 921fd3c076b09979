"""OpenTelemetry traces of runs (issue 29): spans made from a run's events.

Nothing here imports ``opentelemetry`` at import time, and a run pays for tracing only
when it is on: :func:`active` is true when a tracer provider was given to
:func:`set_tracer_provider`, or when ``opentelemetry.trace`` is already imported *and* a
real (SDK) provider is installed globally.  A program that configures the SDK has imported
``opentelemetry.trace``; one that has not gets no subscriber, no import, no per-event work.

The spans are made by :class:`sophon_dsl.telemetry.spans.RunSpans`, a subscriber of the
run's :class:`~sophon_dsl.runtime.events.EventBus` (``docs/telemetry.md``):

* ``sophon.run`` (root): ``sophon.run.id``, ``sophon.plan.id``, ``sophon.goal``,
  ``sophon.run.status``, ``sophon.calls.*`` counts;
* ``sophon.turn`` (agent runs): each turn, the parent of its calls;
* ``sophon.call <tool>``, one per attempt: ``sophon.call.id``, ``sophon.tool``,
  ``sophon.call.attempt``, ``sophon.call.risk``, ``sophon.call.status``,
  ``sophon.error.code`` / ``sophon.error.cause``, ``sophon.map.item``; events for retries,
  approval waits and skips;
* ``chat <model>`` / ``text_completion`` (LLM requests), with the GenAI semantic conventions.

Trace context leaves a run through :func:`traceparent` (``current_call().traceparent``,
the standard library's ``http.*`` tools, the Dask workers).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (spans imports OpenTelemetry: loaded only when tracing is on)
    from .protocols import PreparedRun, TracedRun
    from .spans import RunSpans

__all__ = ["active", "set_tracer_provider", "tracer", "run_subscriber", "traceparent", "call_context",
           "inject", "agent_subscriber", "parse_traceparent", "request_span"]

_override: Any = None           # a provider given to set_tracer_provider (tests, embedding programs)

TRACER_NAME = "sophon_dsl"


def set_tracer_provider(provider: Any) -> None:
    """Trace runs with ``provider`` (an SDK ``TracerProvider``) instead of the global one;
    None goes back to the global provider."""
    global _override
    _override = provider


def active() -> bool:
    """Whether runs are traced now (see the module docstring); cheap when they are not."""
    if _override is not None:
        return True
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def tracer() -> Any:
    """The tracer runs use (only call when :func:`active`)."""
    from opentelemetry import trace

    # (the package's version without importing the package: telemetry is imported by it)
    version = getattr(sys.modules.get("sophon_dsl"), "__version__", None)
    provider = _override if _override is not None else trace.get_tracer_provider()
    return provider.get_tracer(TRACER_NAME, version)


def run_subscriber(handle: TracedRun | None, prep: PreparedRun | None = None) -> RunSpans | None:
    """An event callback that turns a plan run's events into spans, or None when tracing is
    off.  ``handle`` (the run's ``RunHandle``) gives the run id and, for a durable run, the
    store that keeps the trace id (read when the run starts: a resume sets them after this);
    ``prep`` (the run's ``Prepared``) gives each call's risk."""
    if not active():
        return None
    from .spans import RunSpans

    return RunSpans(tracer(), handle=handle, prep=prep)


def agent_subscriber(run_id: str | None, request: str | None = None, kind: str = "agent",
                     durable: bool = False) -> RunSpans | None:
    """An event callback for an agent run (its turns, their calls and LLM requests:
    ``.llm_request(provider, model)``), or None when tracing is off."""
    if not active():
        return None
    from .spans import RunSpans

    return RunSpans(tracer(), run_id=run_id or "", kind=kind, goal=request, durable_turns=durable)


def request_span(provider: Any, model: str | None, operation: str = "chat") -> Any:
    """A GenAI span for one LLM request made outside an agent's turn (a goal's planner and
    evaluator, latent calls, the planning pipeline's requests: ``llm.provider.collect``), a
    child of the call the code runs for, else of the current context; None when tracing is
    off.  The caller reports ``.delta(text)``, ``.fail(exc)`` and ``.end(messages)``."""
    if not active():
        return None
    from .spans import LLMSpan

    return LLMSpan(tracer(), provider, model, operation, context=call_context())


from .context import call_context, inject, parse_traceparent, traceparent  # noqa: E402
