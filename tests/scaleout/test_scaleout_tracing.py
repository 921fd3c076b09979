"""Trace context crosses to the Dask workers (issue 29 item 2): a tool that runs in a worker
process sees its call's span (``current_call().traceparent``, OpenTelemetry's current
context), so the spans it starts there are children of its call's span."""

from __future__ import annotations

import pytest
from opentelemetry.sdk import trace as otel_sdk

import sophon_dsl
from sophon_dsl import current_call, telemetry, tool
from sophon_dsl.scaleout import DaskExecutor


@pytest.fixture
def spans():
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )

    exporter = InMemorySpanExporter()
    provider = otel_sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        telemetry.set_tracer_provider(None)
        provider.shutdown()


@tool
def traced_remotely(x: str) -> dict:
    """Starts a span of its own in the worker process (with the worker's own SDK provider and
    the default context) and reports what it saw."""
    import os

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("the-tool").start_as_current_span("inside " + x):
        pass
    (inner,) = exporter.get_finished_spans()
    provider.shutdown()
    return {"pid": os.getpid(), "traceparent": current_call().traceparent,
            "trace": f"{inner.context.trace_id:032x}",
            "parent": f"{inner.parent.span_id:016x}" if inner.parent is not None else None}


def _tp(span) -> str:
    c = span.context
    return f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}"


def test_a_tools_spans_on_a_worker_are_children_of_its_calls_span(proc_cluster, spans):
    import os

    plan = ('†state.a = traced_remotely(x="one")\n'
            '†state.m = map(†input.xs, as=it) {\n    †local.r = traced_remotely(x=†it)\n}\n')
    r = sophon_dsl.run(plan, [traced_remotely], input={"xs": ["p", "q"]},
                       tool_executor=DaskExecutor(proc_cluster.scheduler_address))
    assert r.status == "succeeded", r.error
    calls = {s.attributes["sophon.call.id"]: s for s in spans.get_finished_spans() if s.name.startswith("sophon.call")}
    seen = {"c1": r.state["state"]["a"], "c2[0].traced_remotely": r.state["state"]["m"][0]["r"],
            "c2[1].traced_remotely": r.state["state"]["m"][1]["r"]}
    for call_id, got in seen.items():
        span = calls[call_id]
        assert got["pid"] != os.getpid()  # it ran in a worker process
        assert got["traceparent"] == _tp(span)
        assert got["trace"] == f"{span.context.trace_id:032x}" and got["parent"] == f"{span.context.span_id:016x}"


def test_untraced_runs_send_no_trace_context(proc_cluster):
    r = sophon_dsl.run('†state.a = traced_remotely(x="one")', [traced_remotely],
                       tool_executor=DaskExecutor(proc_cluster.scheduler_address))
    assert r.status == "succeeded", r.error
    got = r.state["state"]["a"]
    assert got["traceparent"] is None
    assert got["parent"] is None  # a root span: no parent was current
