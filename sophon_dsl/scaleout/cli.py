"""``--executor`` / ``--executor-config`` for the ``run`` and ``agent`` commands."""

from __future__ import annotations

import os
import sys
from typing import Any

from ..diagnostics import render_text
from ..runtime.executors import ExecutorConfigError, executor_from_spec
from .config import ENV_VAR

__all__ = ["print_refusal", "tool_executor_for"]


def tool_executor_for(args: Any) -> Any:
    """The tool executor the flags (or ``$SOPHON_DSL_EXECUTOR``) ask for, through the table
    of executor specs (runtime/executors.py); None for local.  Raises
    :class:`ExecutorConfigError` (E701, E702) for a bad spec or config."""
    spec = getattr(args, "executor", None) or os.environ.get(ENV_VAR) or None
    return executor_from_spec(spec, getattr(args, "executor_config", None))


def print_refusal(exc: ExecutorConfigError) -> None:
    print(render_text(exc.diagnostics), file=sys.stderr)
    print("nothing was started", file=sys.stderr)
