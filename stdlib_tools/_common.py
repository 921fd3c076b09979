"""Helpers shared by the tool modules: building a ToolSpec with clean schemas."""

from __future__ import annotations

import copy
import functools
import importlib.util
import inspect
import json
import os
import sys
import threading
import warnings
from typing import Any, Callable

from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolSpec, schemas_from_function

from .errors import ToolError

__all__ = ["Field", "make_tool", "clean_schema"]


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = copy.deepcopy(defs[ref[len("#/$defs/"):]])
            rest = {k: v for k, v in node.items() if k != "$ref"}
            target.update(rest)
            return _inline_refs(target, defs)
        return {k: _inline_refs(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


def _strip(node: Any, in_properties: bool = False) -> Any:
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if in_properties:
                out[k] = _strip(v)
                continue
            if k == "title" and isinstance(v, str):
                continue
            out[k] = _strip(v, in_properties=(k == "properties"))
        if (not in_properties and out.get("type") == "object" and "properties" in out
                and "additionalProperties" not in out):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def clean_schema(schema: dict | None) -> dict | None:
    """Inline ``$defs``, drop pydantic's titles, close TypedDict objects."""
    if schema is None:
        return None
    defs = schema.get("$defs", {})
    body = {k: v for k, v in schema.items() if k != "$defs"}
    return _strip(_inline_refs(body, defs))


_DERIVING = threading.local()


def Field(**kwargs: Any) -> Any:  # pydantic's name, used the same way
    """``pydantic.Field(**kwargs)`` while a schema is derived; elsewhere (the runtime reading
    a tool's hints to convert its arguments) a :class:`_LaterField` that becomes one only if
    pydantic is asked for a schema of it.  The tool modules' hints are text (postponed
    annotations), evaluated on first use: with the schemas in the cache, a run imports no
    pydantic for the standard tools."""
    if getattr(_DERIVING, "on", False):
        from pydantic import Field as pydantic_field

        return pydantic_field(**kwargs)
    return _LaterField(kwargs)


class _LaterField:
    """``Field(**kwargs)`` not made yet (see :func:`Field`)."""

    __slots__ = ("kwargs",)

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.kwargs = kwargs

    def __repr__(self) -> str:
        return f"Field({', '.join(f'{k}={v!r}' for k, v in self.kwargs.items())})"

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from typing import Annotated

        from pydantic import Field as pydantic_field

        return handler(Annotated[source, pydantic_field(**self.kwargs)])


class _SchemaCache:
    """The standard tools' cleaned schemas, kept in the per-user cache directory
    (``sophon_dsl.cachedir``) as JSON: deriving them with pydantic costs ~50 ms per tool and
    importing pydantic more than every other start-up step of a one-call run.

    One file per version of what the schemas come from (this package's and the deriving
    code's files, pydantic's, Python's), found by their sizes and modification times; an
    entry per tool and signature (its annotations' text and defaults), so a tool that
    changes with the configuration gets its own entry.  An unreadable file is a miss."""

    def __init__(self) -> None:
        self._entries: dict[str, list] | None = None
        self._path: str | None = None
        self._lock = threading.Lock()

    def _file(self) -> str | None:
        from sophon_dsl import tools as core_tools
        from sophon_dsl.cachedir import cache_dir

        directory = cache_dir()
        if directory is None:
            return None
        here = os.path.dirname(os.path.abspath(__file__))
        sources = sorted(os.path.join(here, f) for f in os.listdir(here) if f.endswith(".py"))
        # the deriving code's files, found beside tools.py: importing typed_dicts for its path
        # would import typing_extensions (~20 ms) on every run of a standard tool
        core = os.path.dirname(os.path.abspath(core_tools.__file__))
        sources += [core_tools.__file__, os.path.join(core, "typed_dicts.py"), os.path.join(core, "hint_schemas.py")]
        for package in ("pydantic", "pydantic_core"):
            spec = importlib.util.find_spec(package)
            if spec is not None and spec.origin:
                sources.append(spec.origin)
        stamp = [sys.version_info[:3]]
        for source in sources:
            st = os.stat(source)
            stamp.append((source, st.st_size, st.st_mtime_ns))
        # (a stamp differs in sizes and times, not by an attacker: the directory is the user's own)
        from sophon_dsl.ids import checksum_hex

        digest = checksum_hex(repr(stamp).encode("utf-8"))
        return str(directory / f"stdlib-schemas-{digest}.json")

    def _load(self) -> dict[str, list]:
        if self._entries is None:
            entries: dict[str, list] = {}
            try:
                self._path = self._file()
                if self._path is not None and os.path.exists(self._path):
                    with open(self._path, encoding="utf-8") as fh:
                        data = json.load(fh)
                    if isinstance(data, dict):
                        entries = {k: v for k, v in data.items() if isinstance(v, list) and len(v) == 2}
            except (OSError, ValueError):
                pass
            self._entries = entries
        return self._entries

    def get(self, key: str) -> tuple[dict | None, dict | None] | None:
        with self._lock:
            found = self._load().get(key)
        return None if found is None else (found[0], found[1])

    def put(self, key: str, value: tuple[dict | None, dict | None]) -> None:
        from sophon_dsl.files import write_file

        with self._lock:
            entries = self._load()
            entries[key] = [value[0], value[1]]
            if self._path is None:
                return
            new = not os.path.exists(self._path)
            try:
                write_file(self._path, json.dumps(entries, sort_keys=True))
            except (OSError, TypeError, ValueError):  # no cache this time
                return
            if new:  # a new version's file: the files of versions long unused go
                from pathlib import Path

                from sophon_dsl.cachedir import prune_stale

                path = Path(self._path)
                prune_stale(path.parent, "stdlib-schemas-*.json", path.name)
                prune_stale(path.parent, "lalr-*.pickle", "", max_age=0)  # the parser's old cache: unread


_CACHE = _SchemaCache()


def _cache_key(fn: Callable[..., Any], name: str, given: tuple[dict | None, dict | None]) -> str | None:
    """What the derived schemas of ``fn`` depend on, as text; None when that text would differ
    from one process to the next (a default whose repr names an address)."""
    try:
        key = repr((name, fn.__module__, fn.__qualname__, fn.__code__.co_firstlineno, fn.__annotations__,
                    fn.__defaults__, fn.__kwdefaults__, json.dumps(given, sort_keys=True)))
    except (AttributeError, TypeError, ValueError):
        return None
    return None if " at 0x" in key else key


def make_tool(fn: Callable[..., Any], name: str, risk: Risk, description: str, *,
              input_schema: dict | None = None, output_schema: dict | None = None,
              placement: str = "any") -> ToolSpec:
    """A standard tool whose schemas are derived from ``fn``'s hints and cleaned on first read
    (building every tool's pydantic schemas at start cost more than a second), or read from
    the per-user cache (:class:`_SchemaCache`)."""
    def derive() -> tuple[dict | None, dict | None]:
        derived_in = derived_out = None
        if input_schema is None or output_schema is None:
            with warnings.catch_warnings():
                # parameters named "schema" / "json" shadow BaseModel attributes: harmless here
                warnings.filterwarnings("ignore", message=".*shadows an attribute.*")
                _DERIVING.on = True
                try:
                    derived_in, derived_out = schemas_from_function(fn)
                finally:
                    _DERIVING.on = False
        return (clean_schema(input_schema if input_schema is not None else derived_in),
                clean_schema(output_schema if output_schema is not None else derived_out))

    def schemas() -> tuple[dict | None, dict | None]:
        if input_schema is not None and output_schema is not None:
            return derive()  # nothing to derive
        key = _cache_key(fn, name, (input_schema, output_schema))
        found = _CACHE.get(key) if key is not None else None
        if found is not None:
            return found
        value = derive()
        if key is not None:
            _CACHE.put(key, value)
        return value

    return ToolSpec.deferred(name, schemas, description=description, risk=risk, func=_named_failures(fn, name),
                             is_async=inspect.iscoroutinefunction(fn), origin="stdlib", placement=placement)


_GROUPS = {"datetime": "Time", "document": "Document", "files": "Files", "http": "Http", "email": "Email"}
# what a value the tool could not handle raises (an integer past the 4,300-digit limit, a
# number out of range, a structure nested past the recursion limit...)
_VALUE_ERRORS = (ValueError, TypeError, OverflowError, RecursionError, UnicodeError, KeyError, IndexError)


def _named_failures(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` whose unexpected value errors become ``<Group>.InvalidArgument`` ToolErrors, so
    every failure of a standard tool has a documented dotted code, never a raw exception."""
    group = name.split(".", 1)[0]
    code = _GROUPS.get(group, group.capitalize()) + ".InvalidArgument"

    def named(exc: Exception) -> ToolError:
        return ToolError(code, f"{name}: {type(exc).__name__}: {exc}")

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except ToolError:
                raise
            except _VALUE_ERRORS as exc:
                raise named(exc) from exc
        return run_async

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except _VALUE_ERRORS as exc:
            raise named(exc) from exc
    return run
