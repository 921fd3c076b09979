"""Old home of ``sophon-dsl grammar`` and ``sophon-dsl schema``: now
:mod:`sophon_dsl.cli.grammar` and :mod:`sophon_dsl.cli.schema`.

:func:`register` still adds both commands to a parser of your own, with your
``--tools`` flags and your registry function.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

from ..cli.grammar import run as cmd_grammar
from ..cli.parser import grammar_args, schema_args
from ..cli.schema import run as _schema

__all__ = ["cmd_grammar", "cmd_schema", "register"]


def cmd_schema(args: argparse.Namespace, registry_for: Callable[[argparse.Namespace], Any]) -> int:
    return _schema(args, registry_for)


def register(sub: Any, add_tools_arg: Callable[[argparse.ArgumentParser], None],
             registry_for: Callable[[argparse.Namespace], Any]) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add the ``grammar`` and ``schema`` subcommands to ``sub`` (an argparse subparsers
    action); return ``{command name: handler(args) -> exit code}``.

    ``add_tools_arg(parser)`` adds ``--tools`` / ``--no-stdlib``;
    ``registry_for(args)`` returns the tool registry (or ``(registry, notes)``).
    """
    grammar_args(sub)
    schema_args(sub, add_tools_arg)
    return {"grammar": cmd_grammar, "schema": lambda args: _schema(args, registry_for)}
