"""``--executor`` / ``--executor-config`` for the ``run`` and ``agent`` commands."""

from __future__ import annotations

import os
import sys
from typing import Any

from ..diagnostics import render_text
from . import executor_from_spec
from .config import ENV_VAR, ExecutorConfigError, _refuse, parse_executor_spec

__all__ = ["print_refusal", "tool_executor_for"]


def tool_executor_for(args: Any) -> Any:
    """The DaskExecutor the flags (or ``$SOPHON_DSL_EXECUTOR``) ask for; None for local.
    Raises :class:`ExecutorConfigError` (E701, E702) for a bad spec or config."""
    spec = getattr(args, "executor", None) or os.environ.get(ENV_VAR) or None
    config = getattr(args, "executor_config", None)
    if config and (spec is None or parse_executor_spec(spec).is_local):
        raise _refuse("E702", "--executor-config routes tools to a Dask executor, but the executor is local: "
                              "add --executor dask:...", config)
    return executor_from_spec(spec, config)


def print_refusal(exc: ExecutorConfigError) -> None:
    print(render_text(exc.diagnostics), file=sys.stderr)
    print("nothing was started", file=sys.stderr)
