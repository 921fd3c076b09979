"""Executor specs -> tool executors: :func:`executor_from_spec` and the table of spec prefixes.

An executor spec (``--executor``, ``$SOPHON_DSL_EXECUTOR``, the config key ``executor``) is
``PREFIX`` or ``PREFIX:ARGUMENT``; the prefix picks a factory in :data:`EXECUTORS`, which
gets the whole spec and the ``--executor-config`` file (or None) and returns a
:class:`~.invoker.ToolExecutor`, or None for calls run in this process.  Adding an engine (Ray,
a subprocess pool) is one module with its executor and factory plus one line here, as for
providers (``llm/providers/registry.py``).  A factory imports its engine when called, so
reading this table imports none of them.

Problems are :class:`ExecutorConfigError` with a diagnostic: E701 for the spec, E702 for the
config file.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from .invoker import ExecutorConfigError, ToolExecutor, refuse

__all__ = ["EXECUTORS", "ExecutorConfigError", "ExecutorFactory", "bad_spec", "executor_from_spec"]


class ExecutorFactory(NamedTuple):
    usage: tuple[str, ...]  # the spec's forms, listed when a spec names no known executor
    build: Callable[[str, "str | None"], "ToolExecutor | None"]  # (the whole spec, the config file)


def _local(spec: str, config: str | None) -> None:
    if spec != "local":
        raise bad_spec(spec, "expected one of " + ", ".join(_forms()))
    if config:
        raise refuse("E702", "--executor-config routes tools to a Dask executor, but the executor is local: "
                             "add --executor dask:...", config)
    return None


def _dask(spec: str, config: str | None) -> ToolExecutor | None:
    from ..scaleout import executor_from_spec as dask_executor

    return dask_executor(spec, config)


EXECUTORS: dict[str, ExecutorFactory] = {
    "local": ExecutorFactory(("local",), _local),
    "dask": ExecutorFactory(("dask:local", "dask:local-threads", "dask:tcp://HOST:PORT", "dask:scheduler-file:PATH"),
                            _dask),
}


def _forms() -> list[str]:
    return [form for factory in EXECUTORS.values() for form in factory.usage]


def bad_spec(text: str, why: str) -> ExecutorConfigError:
    return refuse("E701", f"executor {text!r} is not valid: {why}", "--executor")


def executor_from_spec(spec: str | None, config: str | None = None) -> ToolExecutor | None:
    """The tool executor a spec names (None: calls run in this process); ``config`` is the
    ``--executor-config`` file.  :class:`ExecutorConfigError` (E701 / E702) for bad ones."""
    text = (spec or "local").strip()
    factory = EXECUTORS.get(text.partition(":")[0].strip().lower())
    if factory is None:
        raise bad_spec(spec or "", "expected one of " + ", ".join(_forms()))
    return factory.build(text, config)
