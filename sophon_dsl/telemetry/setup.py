"""The CLI's tracing set-up from the standard OpenTelemetry environment variables.

Setting ``OTEL_EXPORTER_OTLP_ENDPOINT`` is all a user does: the commands that run something
(``run``, ``agent``, ``goal``, ``resume``, ``approve``) then install an SDK tracer provider
with a batch processor and the OTLP exporter, and flush it before the process exits.  Read:
``OTEL_SDK_DISABLED``, ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``, ``none``; a list),
``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``, ``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL``
(``http/protobuf``, or ``grpc`` with its exporter installed), ``OTEL_SERVICE_NAME`` and
``OTEL_RESOURCE_ATTRIBUTES`` (default service name ``sophon-dsl``); the exporter reads its
own (headers, timeout, compression).  This module imports OpenTelemetry only in
:func:`configure`.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Mapping

__all__ = ["wanted", "configure", "SetupError"]

from ..errors import SophonError


class SetupError(SophonError):
    """The environment asks for tracing this installation cannot do (the CLI exits 2)."""


def _exporters(env: Mapping[str, str]) -> list[str]:
    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if not names:
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        return ["otlp"] if endpoint else []
    return [n for n in names if n != "none"]


def wanted(env: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for traces (no OpenTelemetry import)."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(_exporters(env))


def configure(env: Mapping[str, str] | None = None,
              warn: Callable[[str], None] | None = None) -> Callable[[], None] | None:
    """Install the tracer provider the environment describes; returns the function that
    flushes and shuts it down (None when nothing was installed).  Without the SDK (the
    ``otel`` extra) it warns and returns None: a run is never refused for its traces.
    Raises :class:`SetupError` for a protocol or exporter that cannot be honoured."""
    env = os.environ if env is None else env
    warn = warn or (lambda m: print(f"warning: {m}", file=sys.stderr))
    if not wanted(env):
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        warn("OpenTelemetry is configured in the environment but its SDK is not installed; "
             "no traces are sent (pip install 'sophon-dsl[otel]')")
        return None
    processors: list[Any] = []
    for name in _exporters(env):
        processors.append(BatchSpanProcessor(_exporter(name, env)))
    attrs = {} if env.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: "sophon-dsl"}
    provider = TracerProvider(resource=Resource.create(attrs))
    for p in processors:
        provider.add_span_processor(p)
    trace.set_tracer_provider(provider)
    return provider.shutdown


def _exporter(name: str, env: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)  # standard output stays the run's (--json)
    if name != "otlp":
        raise SetupError(f"OTEL_TRACES_EXPORTER={name!r} is not supported (use otlp, console or none)")
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf").strip().lower()
    if protocol == "http/protobuf":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise SetupError("OTLP over HTTP needs opentelemetry-exporter-otlp-proto-http "
                             "(pip install 'sophon-dsl[otel]')") from None
        return OTLPSpanExporter()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
        except ImportError:
            raise SetupError("OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc; "
                             "install it, or use http/protobuf (the default)") from None
        return GrpcExporter()
    raise SetupError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported (use http/protobuf or grpc)")
