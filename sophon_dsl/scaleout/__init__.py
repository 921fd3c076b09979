"""Scale-out: tool calls on a Dask distributed cluster, behind the runtime's Invoker seam
(docs/scale-out.md).  Nothing here imports Dask until a Dask executor connects.

::

    from sophon_dsl.scaleout import DaskExecutor
    sophon_dsl.run(plan, tools, tool_executor=DaskExecutor("tcp://127.0.0.1:8786"))
"""

from __future__ import annotations

from .config import ExecutorConfigError, ExecutorSpec, Routing, load_routing, parse_executor_spec, routing_from_data
from .executor import DaskExecutor

__all__ = ["DaskExecutor", "ExecutorConfigError", "ExecutorSpec", "Routing", "executor_from_spec", "load_routing",
           "parse_executor_spec", "routing_from_data"]


def executor_from_spec(spec: str | None, config: str | None = None) -> DaskExecutor | None:
    """The tool executor for a ``--executor`` spec and ``--executor-config`` file: None for
    ``local`` (or no spec); :class:`ExecutorConfigError` (E701 / E702) for bad ones."""
    parsed = parse_executor_spec(spec) if spec else None
    routing = load_routing(config) if config else None
    if parsed is None or parsed.is_local:
        return None
    return DaskExecutor.from_spec(parsed, routing=routing)
