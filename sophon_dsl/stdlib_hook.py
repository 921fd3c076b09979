"""Where the core finds the standard tool library: the one place it is looked up.

The core (``tools``, ``compiler``, ``runtime``) never imports ``stdlib_tools``: the
library is a plugin that depends on the core, not the other way round.  Callers that
want the standard tools by default (``sophon_dsl.check``, ``sophon_dsl.run`` through
``as_registry``'s ``stdlib=True``, the CLI) ask this module, which imports the plugin by
name on first use and answers None when it is not installed.

A standard library module offers ``source_for(choice)``: a lazy tool source for
``True`` (every tool, default configuration), a configuration object, or group / tool
names; it builds each tool once per process and configuration.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["STDLIB_MODULE", "library", "tool_source"]

STDLIB_MODULE = "stdlib_tools"

_MISSING = object()
_found: Any = _MISSING


def library() -> ModuleType | None:
    """The standard library module, imported on first use; None when it is not installed."""
    global _found
    if _found is _MISSING:
        try:
            _found = importlib.import_module(STDLIB_MODULE)
        except ModuleNotFoundError as exc:
            if exc.name != STDLIB_MODULE:  # installed but broken: say so, do not hide it
                raise
            _found = None
    return _found


def tool_source(choice: Any = True) -> Any:
    """The lazy source of standard tools for ``choice`` (see ``as_registry``'s ``stdlib``),
    or None for ``False`` / ``None`` or when the library is not installed."""
    if choice is None or choice is False:
        return None
    lib = library()
    return None if lib is None else lib.source_for(choice)
