"""Old home of ``sophon-dsl agent``: now :mod:`sophon_dsl.cli.agent`.

:func:`register` still adds the ``agent`` command to a parser of your own, with your
``--tools`` flags and your registry function.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

from ..cli.agent import AgentProgress, run
from ..cli.parser import agent_args

__all__ = ["AgentProgress", "cmd_agent", "register"]


def cmd_agent(args: argparse.Namespace, registry_for: Callable[[argparse.Namespace], Any]) -> int:
    return run(args, registry_for)


def register(sub: Any, add_source_args: Callable[[argparse.ArgumentParser], None] | None,
             add_tools_arg: Callable[[argparse.ArgumentParser], None],
             registry_for: Callable[[argparse.Namespace], Any]) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add the ``agent`` subcommand to ``sub``; return ``{"agent": handler}``."""
    agent_args(sub, add_tools_arg)
    return {"agent": lambda args: run(args, registry_for)}
