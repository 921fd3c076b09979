"""sophon-dsl's standard tool library: real tools, safe by default.

>>> from stdlib_tools import all_tools, StdlibConfig
>>> tools = all_tools(StdlibConfig(sandbox_root="work"), only=["http", "files", "text.truncate"])

Every tool is built per configuration (closures over the fields of a :class:`StdlibConfig`
its group declares, so a shipped tool carries no other group's secrets), declares
input and output JSON Schemas and a risk level, and raises :class:`ToolError` with a
stable code (``Http.Blocked``, ``Files.OutsideSandbox``...) when it fails.

The library is a plugin of sophon-dsl, which finds it by name
(``sophon_dsl.stdlib_hook``) and asks :func:`source_for` for its tools.  A
:func:`source` is built once per process and configuration and builds each group of
tools the first time one of its tools is looked up, so importing this package and
checking a plan that uses no standard tool cost almost nothing.
"""

from __future__ import annotations

import importlib
import threading
from functools import lru_cache
from typing import Any, Iterable

from sophon_dsl.errors import SophonError
from sophon_dsl.tools import ToolSpec

from .config import StdlibConfig, default_memory_path

__all__ = ["GROUPS", "GroupMismatch", "StdlibConfig", "StdlibSource", "ToolError", "MemoryStore", "all_tools",
           "cache_info", "check_url", "default_memory_path", "source", "source_for", "tool_names", "truncate_result"]

# group name -> its tool names; the order is the order of all_tools().  Each group is
# built by ``build(config)`` of the module of the same name in _MODULES.
GROUPS: dict[str, tuple[str, ...]] = {
    "http": ("http.request", "http.get"),
    "files": ("files.read", "files.write", "files.list"),
    "data": ("data.query", "data.pick", "data.merge", "data.set", "data.validate"),
    "text": ("text.template", "text.split", "text.join", "text.regex_extract", "text.truncate"),
    "math": ("math.eval",),
    "time": ("datetime.now", "time.sleep"),
    "memory": ("memory.write", "memory.search"),
    "documents": ("document.create",),
    "email": ("email.send",),
    "shell": ("shell.run",),
}
_MODULES = {group: group for group in GROUPS}
_GROUP_OF = {name: group for group, names in GROUPS.items() for name in names}
_ALIASES = {"datetime": "time", "document": "documents", "doc": "documents", "mail": "email",
            "file": "files", "memories": "memory"}


class GroupMismatch(SophonError):
    """A group's module built a tool its entry in :data:`GROUPS` does not list, or did not
    build one it lists: a bug of the library, reported when the group is built rather than
    the tool silently dropped (or failing later with a KeyError)."""


# names re-exported from the modules, imported on first use (the modules import pydantic)
_LAZY = {"ToolError": "errors", "MemoryStore": "memory", "check_url": "netguard", "truncate_result": "text"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def tool_names(config: StdlibConfig | None = None) -> list[str]:
    """Every standard tool name available under ``config`` (shell only when enabled)."""
    enable_shell = config.enable_shell if config is not None else False
    return [n for g, names in GROUPS.items() if g != "shell" or enable_shell for n in names]


def _selected(config: StdlibConfig, only: Iterable[str] | None) -> tuple[str, ...]:
    """The tool names ``only`` picks under ``config``, in GROUPS order; ValueError names a bad one."""
    if only is None:
        return tuple(tool_names(config))
    if isinstance(only, str):
        only = [only]
    wanted: set[str] = set()
    for item in only:
        key = str(item).strip()
        group = _ALIASES.get(key, key)
        if group in GROUPS:
            wanted.update(GROUPS[group])
        elif key in _GROUP_OF:
            wanted.add(key)
        else:
            raise ValueError(f"unknown standard tool or group {key!r}; groups: {', '.join(GROUPS)}")
    if not config.enable_shell and "shell.run" in wanted:
        # (the CLI prints this message as it is: say how a command-line user turns it on too)
        raise ValueError("shell.run is disabled: set StdlibConfig(enable_shell=True) to use it "
                         "(CLI: `enable_shell: true` in the --stdlib-config file, or "
                         "`enable_shell = true` under [tool.sophon-dsl.stdlib])")
    return tuple(n for names in GROUPS.values() for n in names if n in wanted)


class StdlibSource:
    """The standard tools of one configuration and selection, built group by group on demand.

    A tool source for :class:`sophon_dsl.tools.ToolRegistry`: ``names()`` lists the
    tools without building any, ``get(name)`` builds the tool's group once, calling it
    returns every tool.  Tools of one source share their state (the memory store).
    """

    origin = "stdlib"

    def __init__(self, config: StdlibConfig | None = None, only: Iterable[str] | None = None):
        self.config = config if config is not None else StdlibConfig()
        self._names = _selected(self.config, only)
        self._wanted = frozenset(self._names)
        self._tools: dict[str, ToolSpec] = {}
        self._built: set[str] = set()
        self._lock = threading.Lock()  # tools may be looked up from worker threads

    def names(self) -> tuple[str, ...]:
        return self._names

    def get(self, name: str) -> ToolSpec | None:
        if name not in self._wanted:
            return None
        spec = self._tools.get(name)
        if spec is None:
            self._build(_GROUP_OF[name])
            spec = self._tools[name]
        return spec

    def __call__(self) -> list[ToolSpec]:
        for group in dict.fromkeys(_GROUP_OF[n] for n in self._names):
            self._build(group)
        return [self._tools[n] for n in self._names]

    @property
    def groups_built(self) -> tuple[str, ...]:
        """The groups built so far (each is built at most once)."""
        return tuple(self._built)

    def _build(self, group: str) -> None:
        with self._lock:
            if group in self._built:
                return
            module = importlib.import_module(f"{__name__}.{_MODULES[group]}")
            listed = GROUPS[group]
            built = []
            for spec in module.build(self.config):
                if spec.name not in listed:
                    raise GroupMismatch(f"stdlib_tools.{_MODULES[group]} builds {spec.name!r}, which "
                                        f"GROUPS[{group!r}] does not list: add it there")
                built.append(spec.name)
                if spec.name in self._wanted:
                    self._tools[spec.name] = spec
            # (shell.run is built only when enabled: a listed tool the configuration turns off)
            missing = [n for n in listed if n in self._wanted and n not in built]
            if missing:
                raise GroupMismatch(f"GROUPS[{group!r}] lists {', '.join(map(repr, missing))}, which "
                                    f"stdlib_tools.{_MODULES[group]} does not build")
            self._built.add(group)


@lru_cache(maxsize=32)
def _cached_source(config: StdlibConfig, only: tuple[str, ...] | None) -> StdlibSource:
    return StdlibSource(config, only)


def source(config: StdlibConfig | None = None, *, only: Iterable[str] | None = None) -> StdlibSource:
    """The standard tools for ``config`` and ``only`` (see :func:`all_tools`), shared by every
    caller in this process that asks for an equal configuration and selection: each tool is
    built once, and the memory store stays open from one run to the next."""
    config = config if config is not None else StdlibConfig()
    key = None if only is None else tuple(dict.fromkeys(str(x).strip() for x in ([only] if isinstance(only, str)
                                                                                  else only)))
    try:
        return _cached_source(config, key)
    except TypeError:  # a configuration that cannot be hashed (an unhashable http_transport)
        return StdlibSource(config, key)


def cache_info() -> Any:
    """Hits and misses of :func:`source`: ``misses`` counts the sources built in this process."""
    return _cached_source.cache_info()


def source_for(choice: Any = True) -> StdlibSource:
    """The source for what ``sophon_dsl`` callers pass as ``stdlib``: ``True`` (every tool,
    default configuration), a :class:`StdlibConfig`, a source, or group / tool names."""
    if choice is True:
        return source()
    if isinstance(choice, StdlibConfig):
        return source(choice)
    if isinstance(choice, StdlibSource):
        return choice
    return source(only=[choice] if isinstance(choice, str) else list(choice))


def all_tools(config: StdlibConfig | None = None, *,
              only: Iterable[str] | None = None) -> list[ToolSpec]:
    """Build a fresh set of the standard tools for ``config`` (default: ``StdlibConfig()``).

    ``only`` selects groups (``"http"``, ``"files"``, ``"data"``, ``"text"``, ``"math"``,
    ``"time"``, ``"memory"``, ``"documents"``, ``"email"``, ``"shell"``) and/or tool names
    (``"text.truncate"``).  ``shell.run`` exists only with ``enable_shell=True``; asking for
    it otherwise is an error, as is an unknown name.  Unlike :func:`source`, nothing is
    shared with other calls.
    """
    return StdlibSource(config, only)()
