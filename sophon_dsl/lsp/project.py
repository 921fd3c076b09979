"""The tools and settings a plan is checked against in the editor: its project config file
(:mod:`sophon_dsl.config`), read as ``sophon-dsl check`` reads it, and the tool registry
built from it.  Built once per config file and rebuilt when that file or one of its tool
files changes on disk (checked by modification time on every re-check: a ``stat`` each).

Nothing here raises for bad input: a config file that is not valid, or a tools file that
fails to import, becomes one diagnostic shown at the top of the plan.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import ConfigError, ProjectConfig, discover, find_config
from ..diagnostics import Diagnostic
from ..errors import SophonError

if TYPE_CHECKING:  # (the core's tools load when a project is built)
    from ..tools import ToolRegistry

__all__ = ["Project", "Projects"]


@dataclass
class Project:
    config: ProjectConfig
    registry: ToolRegistry
    problems: list[Diagnostic] = field(default_factory=list)   # shown on every plan of the project
    stamps: dict[str, float | None] = field(default_factory=dict)  # watched file -> mtime


class Projects:
    def __init__(self) -> None:
        self._by_config: dict[str | None, Project] = {}

    def for_file(self, path: str | None) -> Project:
        start = path if path and os.path.exists(os.path.dirname(path) or ".") else None
        try:
            found = find_config(start)
        except OSError:
            found = None
        key = str(found) if found is not None else None
        project = self._by_config.get(key)
        if project is None or any(_mtime(f) != t for f, t in project.stamps.items()):
            project = self._by_config[key] = _build(start, found)
        return project


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _build(start: str | None, found: Any) -> Project:
    from ..cli.registry import stdlib_source
    from ..cli.settings import apply_config
    from ..tools import ToolRegistry
    from ..toolsource import load_tool_sources

    stamps: dict[str, float | None] = {}
    if found is not None:
        stamps[str(found)] = _mtime(str(found))
    problems: list[Diagnostic] = []
    args = argparse.Namespace(command="lsp", tools=[], no_stdlib=False, stdlib=None, sandbox=None,
                              stdlib_config=None, allow_host=[])
    try:
        config = apply_config(args, discover(start))
    except ConfigError as exc:
        config = ProjectConfig(None)
        problems.append(Diagnostic("E110", f"project config {exc.file}:{exc.line}:{exc.column}: {exc.message} "
                                           "(checked with the default settings until it is fixed)"))
    for source in args.tools:
        if os.path.isfile(source):
            stamps[source] = _mtime(source)
    try:
        tools, diags = load_tool_sources(args.tools)
    except Exception as exc:  # noqa: BLE001 - user code: a diagnostic, never a dead server
        tools, diags = [], [Diagnostic("E110", f"cannot load tools: {type(exc).__name__}: {exc}")]
    for d in diags:
        where = f" ({d.file}:{d.span.line}:{d.span.column})" if d.file and d.span else ""
        problems.append(Diagnostic("E110", f"{d.message}{where}", severity=d.severity))
    try:
        registry = ToolRegistry(tools, fallback=stdlib_source(args))
    except (SophonError, ValueError, TypeError) as exc:
        problems.append(Diagnostic("E110", f"standard tool library settings: {exc}"))
        registry = ToolRegistry(tools)
    return Project(config, registry, problems, stamps)
