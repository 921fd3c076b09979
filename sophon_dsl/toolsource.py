"""Where tools come from: Python files, importable modules and declaration files.

``--tools`` accepts:

* ``path/to/tools.py``: the file is imported and every :class:`ToolSpec` at its
  top level (what ``@tool`` returns, or a list/tuple of them) is registered;
* ``package.module``: the same, for an importable module;
* ``tools.yaml`` / ``tools.json``: schema-only declarations (latent tools), so a
  plan can be checked without any code;
* ``mcp:stdio:COMMAND ARGS...``, ``mcp:http:URL``, ``mcp:CONFIG.json`` and
  config files ``mcp.json`` / ``*.mcp.json`` (or any JSON file with an
  ``mcpServers`` object, as Claude Desktop's; ``#name,...`` picks servers): the
  tools of Model Context Protocol servers (optional extra ``mcp``; see
  :mod:`sophon_dsl.mcp` and ``docs/mcp.md``).  The connection stays open for
  the calls a run makes, and is closed at exit or by ``sophon_dsl.mcp.close_all()``.

Problems are reported as E110 diagnostics, never as tracebacks.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import linecache
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterable

from .diagnostics import Diagnostic, DiagnosticError, Span
from .tools import ToolSpec
from .ids import checksum_hex

__all__ = ["ToolSourceError", "load_tool_source", "load_tool_sources", "resolve_tools", "tools_in_module"]


class ToolSourceError(DiagnosticError):
    """A tools source given to the Python API (a path, a module name, a declarations file,
    an MCP spec) that cannot be loaded: its E110 diagnostics, as ``--tools`` prints them."""


def tools_in_module(module: ModuleType) -> list[ToolSpec]:
    """Every ToolSpec defined at the top level of ``module``, in definition order."""
    found: list[ToolSpec] = []
    seen: set[int] = set()
    for value in vars(module).values():
        candidates = value if isinstance(value, (list, tuple)) else (value,)
        for item in candidates:
            if isinstance(item, ToolSpec) and id(item) not in seen:
                seen.add(id(item))
                found.append(item)
    return found


def _import_file(path: Path) -> ModuleType:
    # a name per file (two tool files of one stem both load)
    digest = checksum_hex(str(path.resolve()).encode())
    name = f"_sophon_tools_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    parent = str(path.resolve().parent)
    added = parent not in sys.path
    if added:
        sys.path.insert(0, parent)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        if added:
            sys.path.remove(parent)
    return module


def _failure(source: str, exc: BaseException) -> Diagnostic:
    # where it went wrong: a caret in the --tools file itself, else the other file's name and line
    if isinstance(exc, SyntaxError) and exc.lineno:
        file, line, column, message = exc.filename or source, exc.lineno, exc.offset or 1, exc.msg
        span = Span.point(line, column)
    else:
        # the last frame of the user's code, not of the import machinery
        machinery = (os.path.dirname(importlib.__file__), __file__)
        import traceback  # (a failing tools file only: a clean load never imports it)

        tb = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(("<frozen ", *machinery))]
        message = str(exc)
        if not tb:
            return Diagnostic("E110", f"cannot load tools from {source!r}: {type(exc).__name__}: {message}",
                              file=source)
        last = tb[-1]
        file, line = last.filename, last.lineno or 1
        span, column = Span.point(line, 1), 1
        if last.colno is not None and last.end_lineno == line and last.end_colno is not None:
            # frame columns are UTF-8 byte offsets; spans count characters
            text = linecache.getline(file, line).encode("utf-8")
            column = len(text[:last.colno].decode("utf-8", "replace")) + 1
            span = Span(line, column, line, len(text[:last.end_colno].decode("utf-8", "replace")) + 1)
    if _same_file(file, source):
        return Diagnostic("E110", f"cannot load tools from {source!r}: {type(exc).__name__}: {message}",
                          span=span, file=source)
    return Diagnostic("E110", f"cannot load tools from {source!r}: {type(exc).__name__}: {message} "
                              f"({file}:{line}:{column})", file=source)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def load_tool_source(source: str) -> tuple[list[ToolSpec], list[Diagnostic]]:
    """Load the tools named by one ``--tools`` argument."""
    if not source.strip():
        return [], [Diagnostic("E110", "empty --tools source: expected FILE.py, an importable MODULE, a "
                                       "YAML/JSON declarations file or mcp:...", file="--tools")]
    if _is_mcp(source):
        return _load_mcp(source)
    path = Path(source)
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml", ".json"):
        return _load_declarations(path)
    if suffix == ".py" or os.sep in source or "/" in source:
        if path.is_dir():
            return [], [Diagnostic("E110", f"tools file {source!r} is a directory: expected FILE.py, an "
                                           "importable MODULE or a YAML/JSON declarations file", file=source)]
        if not path.is_file():
            return [], [Diagnostic("E110", f"tools file {source!r} does not exist", file=source)]
        try:
            module = _import_file(path)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - user code: report, never crash
            return [], [_failure(source, exc)]
    else:
        try:
            module = importlib.import_module(source)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - user code: report, never crash
            return [], [_failure(source, exc)]
    tools = tools_in_module(module)
    if not tools:
        return [], [Diagnostic("E110", f"{source!r} defines no tools: decorate functions with "
                                       "@sophon_dsl.tool", file=source)]
    problems = [d for d in map(_schema_problem, tools, [source] * len(tools)) if d is not None]
    return ([], problems) if problems else (tools, [])


def _schema_problem(spec: ToolSpec, source: str) -> Diagnostic | None:
    """E110 when a loaded tool's type hints have no JSON Schema, at the function's ``def``.

    ``@tool`` derives schemas on first read; reading them here makes a bad hint a
    diagnostic of the file that declares it, not an exception in whatever reads it first.
    """
    try:
        spec.input_schema  # noqa: B018 - the read derives both schemas
    except TypeError as exc:
        # the user's function, not the argument-converting wrapper @tool puts around it
        code = getattr(inspect.unwrap(spec.func), "__code__", None) if spec.func is not None else None
        where = code.co_filename if code is not None else source
        if code is not None and _same_file(where, source):
            return Diagnostic("E110", f"cannot load tools from {source!r}: TypeError: {exc}",
                              span=Span.point(code.co_firstlineno, 1), file=source)
        at = f" ({where}:{code.co_firstlineno}:1)" if code is not None else ""
        return Diagnostic("E110", f"cannot load tools from {source!r}: TypeError: {exc}{at}", file=source)
    return None


def _is_mcp(source: str) -> bool:
    if source.startswith("mcp:"):
        return True
    base = source.partition("#")[0]
    if not base.lower().endswith(".json"):
        return False
    from .mcp import is_mcp_config_file

    return is_mcp_config_file(source)


def _load_mcp(source: str) -> tuple[list[ToolSpec], list[Diagnostic]]:
    from .mcp import load_mcp_tools

    try:
        tools, problems = load_mcp_tools(source)
    except ImportError as exc:
        return [], [Diagnostic("E110", f"cannot load tools from {source!r}: {exc}", file=source)]
    except ValueError as exc:
        return [], [Diagnostic("E110", f"cannot load tools from {source!r}: {exc}", file=source)]
    diags = [Diagnostic("E110", f"cannot load tools from {source!r}: {p}", file=source) for p in problems]
    if not tools and not problems:
        diags.append(Diagnostic("E110", f"{source!r}: the MCP server(s) offer no tools", file=source))
    return tools, diags


def _load_declarations(path: Path) -> tuple[list[ToolSpec], list[Diagnostic]]:
    from .loader import format_for_path
    from .syntax.documents import tool_decls_from_node

    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [], [Diagnostic("E110", f"cannot read tools file {name!r}: {exc}", file=name)]
    if format_for_path(path) == "json":
        from .syntax.json_source import parse_json as parse_source
    else:
        from .syntax.yaml_source import parse_yaml as parse_source
    node, diags = parse_source(text, file=name)
    if node is None:
        return [], [d.with_file(name) for d in diags]
    decls, more = tool_decls_from_node(node, file=name)
    specs = [ToolSpec.from_decl(d, origin="decl") for d in decls]
    return specs, [d.with_file(name) for d in (*diags, *more)]


def load_tool_sources(sources: Iterable[str]) -> tuple[list[ToolSpec], list[Diagnostic]]:
    tools: list[ToolSpec] = []
    diags: list[Diagnostic] = []
    for source in sources:
        t, d = load_tool_source(source)
        tools.extend(t)
        diags.extend(d)
    return tools, diags


def _is_source(item: object) -> bool:
    return isinstance(item, (str, os.PathLike, ModuleType))


def resolve_tools(tools: object) -> object:
    """``tools`` as the Python API takes it, with what ``--tools`` accepts loaded by the one
    loader: a path (``"shop_tools.py"``, a ``Path``), an importable module name, a
    declarations file, an ``mcp:...`` spec, or a module object, alone or among the items
    of a list / tuple.  Anything else is returned as it is (``as_registry`` takes it).
    Raises :class:`ToolSourceError` (a ``SophonError``) with the E110 diagnostics when a
    source cannot be loaded."""
    if _is_source(tools):
        items: list = [tools]
    elif isinstance(tools, (list, tuple)) and any(_is_source(t) for t in tools):
        items = list(tools)
    else:
        return tools
    out: list = []
    problems: list[Diagnostic] = []
    for item in items:
        if isinstance(item, ModuleType):
            found = tools_in_module(item)
            if not found:
                problems.append(Diagnostic("E110", f"module {item.__name__!r} defines no tools: decorate "
                                                   "functions with @sophon_dsl.tool", file=item.__name__))
            out.extend(found)
        elif isinstance(item, (str, os.PathLike)):
            found, diags = load_tool_source(os.fspath(item))
            problems.extend(d for d in diags if d.is_error)
            out.extend(found)
        else:
            out.append(item)
    if problems:
        raise ToolSourceError(problems)
    return out

