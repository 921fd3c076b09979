"""The project config file (:mod:`sophon_dsl.config`) applied to a command's flags.

A flag given on the command line wins; a setting of the file fills only what the command
line left at its default.  ``store`` and ``executor`` also yield to ``$SOPHON_DSL_STORE`` /
``$SOPHON_DSL_EXECUTOR`` (the environment is the more specific choice, as for a CI job).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..config import ProjectConfig, discover

__all__ = ["APPLIES_TO", "apply_config", "config_start"]

# commands that take settings from the file; resume / approve keep the tools their run was
# recorded with (docs/security.md), so they take only the store from it
APPLIES_TO = frozenset({"check", "graph", "run", "dry-run", "schema", "agent", "goal", "lsp",
                        "runs", "resume", "approve"})
_TOOLS_COMMANDS = frozenset({"check", "graph", "run", "dry-run", "schema", "agent", "goal", "lsp"})
_STDLIB_FLAGS = ("no_stdlib", "stdlib", "sandbox", "stdlib_config", "allow_host")


def config_start(args: argparse.Namespace) -> str | None:
    """Where the walk up for the config file starts: the first plan file named, else the cwd."""
    names = list(getattr(args, "plans", None) or ())
    if getattr(args, "plan", None):
        names.insert(0, args.plan)
    for name in names:
        if name != "-" and os.path.exists(name):
            return name
    return None


def apply_config(args: argparse.Namespace, config: ProjectConfig | None = None) -> ProjectConfig:
    """Fill ``args`` from the project config (found from :func:`config_start` unless given).
    Raises :class:`~sophon_dsl.config.ConfigError` for a config file that is not valid."""
    if config is None:
        config = discover(config_start(args))
    args.project_config = config
    if config.file is None:
        return config
    command = args.command
    if command in _TOOLS_COMMANDS:
        _fill_tools(args, config)
    if hasattr(args, "strict") and not args.strict and config.get("strict"):
        args.strict = True
    approve = config.get("approve")
    if approve is not None and getattr(args, "approve", "") is None:
        # goal has no 'wait': its file setting falls back to the command's own default there
        if not (command == "goal" and approve == "wait"):
            args.approve = approve
    store = config.get("store")
    if (store is not None and hasattr(args, "store") and args.store is None
            and not getattr(args, "no_store", False) and not os.environ.get("SOPHON_DSL_STORE")):
        args.store = store
    executor = config.get("executor")
    if (executor is not None and hasattr(args, "executor") and args.executor is None
            and not os.environ.get("SOPHON_DSL_EXECUTOR")):
        args.executor = executor
    return config


def _fill_tools(args: argparse.Namespace, config: ProjectConfig) -> None:
    if hasattr(args, "tools") and not args.tools and config.get("tools"):
        args.tools = list(config.get("tools"))
    stdlib = config.get("stdlib")
    if stdlib is None or not hasattr(args, "no_stdlib"):
        return
    if any(getattr(args, flag, None) not in (None, False, [], ()) for flag in _STDLIB_FLAGS):
        return  # any standard-library flag: the command line decides the library alone
    if stdlib is False:
        args.no_stdlib = True
    elif isinstance(stdlib, dict):
        groups = stdlib.get("groups")
        if groups:
            args.stdlib = ",".join(groups)
        args.project_stdlib = (config.stdlib_kwargs(), config.origin("stdlib"))


def effective(config: ProjectConfig) -> list[tuple[str, Any, str]]:
    """(key, value, origin) for every setting, as ``sophon-dsl config`` shows them."""
    from ..config import DEFAULT_PLAN_PATTERNS, KEYS

    defaults: dict[str, tuple[Any, str]] = {
        "tools": ((), "default (none; --tools)"),
        "stdlib": (True, "default"),
        "store": (os.environ.get("SOPHON_DSL_STORE") or None,
                  "$SOPHON_DSL_STORE" if os.environ.get("SOPHON_DSL_STORE") else "default (per-user SQLite file)"),
        "executor": (os.environ.get("SOPHON_DSL_EXECUTOR") or "local",
                     "$SOPHON_DSL_EXECUTOR" if os.environ.get("SOPHON_DSL_EXECUTOR") else "default"),
        "strict": (False, "default"),
        "approve": (None, "default (ask on a terminal, else no)"),
        "plans": ((), "default"),
    }
    rows = []
    for key in KEYS:
        if key in config.values and not (key in ("store", "executor") and
                                          os.environ.get(f"SOPHON_DSL_{key.upper()}")):
            value, origin = config.get(key), config.origin(key)
        else:
            value, origin = defaults[key]
        if key == "plans":
            value = tuple(value) + DEFAULT_PLAN_PATTERNS
        rows.append((key, value, origin))
    return rows
