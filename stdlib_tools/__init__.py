"""sophon-dsl's standard tool library: real tools, safe by default.

>>> from stdlib_tools import all_tools, StdlibConfig
>>> tools = all_tools(StdlibConfig(sandbox_root="work"), only=["http", "files", "text.truncate"])

Every tool is built per configuration (closures over a :class:`StdlibConfig`), declares
input and output JSON Schemas and a risk level, and raises :class:`ToolError` with a
stable code (``Http.Blocked``, ``Files.OutsideSandbox``...) when it fails.
"""

from __future__ import annotations

from typing import Callable, Iterable

from sophon_dsl.tools import ToolSpec

from . import data, documents, email, files, http, math, memory, shell, text, time
from .config import StdlibConfig
from .errors import ToolError
from .memory import MemoryStore
from .netguard import check_url
from .text import truncate_result

__all__ = ["GROUPS", "StdlibConfig", "ToolError", "MemoryStore", "all_tools", "tool_names",
           "check_url", "truncate_result"]

# group name -> (builder, tool names); the order is the order of all_tools()
GROUPS: dict[str, tuple[Callable[[StdlibConfig], list[ToolSpec]], tuple[str, ...]]] = {
    "http": (http.build, ("http.request", "http.get")),
    "files": (files.build, ("files.read", "files.write", "files.list")),
    "data": (data.build, ("data.query", "data.pick", "data.merge", "data.set", "data.validate")),
    "text": (text.build, ("text.template", "text.split", "text.join", "text.regex_extract",
                          "text.truncate")),
    "math": (math.build, ("math.eval",)),
    "time": (time.build, ("datetime.now", "time.sleep")),
    "memory": (memory.build, ("memory.write", "memory.search")),
    "documents": (documents.build, ("document.create",)),
    "email": (email.build, ("email.send",)),
    "shell": (shell.build, ("shell.run",)),
}
_ALIASES = {"datetime": "time", "document": "documents", "doc": "documents", "mail": "email",
            "file": "files", "memories": "memory"}


def tool_names(config: StdlibConfig | None = None) -> list[str]:
    """Every standard tool name available under ``config`` (shell only when enabled)."""
    enable_shell = config.enable_shell if config is not None else False
    return [n for g, (_, names) in GROUPS.items() if g != "shell" or enable_shell for n in names]


def all_tools(config: StdlibConfig | None = None, *,
              only: Iterable[str] | None = None) -> list[ToolSpec]:
    """Build the standard tools for ``config`` (default: ``StdlibConfig()``).

    ``only`` selects groups (``"http"``, ``"files"``, ``"data"``, ``"text"``, ``"math"``,
    ``"time"``, ``"memory"``, ``"documents"``, ``"email"``, ``"shell"``) and/or tool names
    (``"text.truncate"``).  ``shell.run`` exists only with ``enable_shell=True``; asking for
    it otherwise is an error, as is an unknown name.
    """
    config = config if config is not None else StdlibConfig()
    by_name = {n: g for g, (_, names) in GROUPS.items() for n in names}
    wanted_groups: set[str] = set()
    wanted_names: set[str] = set()
    if only is None:
        wanted_groups = {g for g in GROUPS if g != "shell" or config.enable_shell}
    else:
        if isinstance(only, str):
            only = [only]
        for item in only:
            key = str(item).strip()
            group = _ALIASES.get(key, key)
            if group in GROUPS:
                wanted_groups.add(group)
            elif key in by_name:
                wanted_names.add(key)
            else:
                raise ValueError(f"unknown standard tool or group {key!r}; groups: "
                                 f"{', '.join(GROUPS)}")
        if not config.enable_shell and ("shell" in wanted_groups or "shell.run" in wanted_names):
            raise ValueError("shell.run is disabled: set StdlibConfig(enable_shell=True) to use it")
    out: list[ToolSpec] = []
    for group, (builder, names) in GROUPS.items():
        if group in wanted_groups:
            out.extend(builder(config))
        elif wanted_names.intersection(names):
            out.extend(t for t in builder(config) if t.name in wanted_names)
    return out
