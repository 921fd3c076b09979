"""The project config file: ``[tool.sophon-dsl]`` in ``pyproject.toml``, or ``sophon.toml``.

Found by walking up from a plan file's directory (or the working directory) to the first
``sophon.toml``, or ``pyproject.toml`` holding a ``[tool.sophon-dsl]`` table (a
``pyproject.toml`` without one is passed over, as ruff does).  ``sophon.toml`` wins over a
``pyproject.toml`` in the same directory.  Paths in it are relative to the file's directory.

Keys (docs/config.md)::

    tools = ["tools.py", "mcp:stdio:python server.py"]   # --tools
    stdlib = false                                       # --no-stdlib; or a table:
    [tool.sophon-dsl.stdlib]                             # StdlibConfig keys, plus
    groups = ["http", "text"]                            # --stdlib
    sandbox_root = "sandbox"
    store = "sqlite:///runs.db"                          # --store
    executor = "local"                                   # --executor
    strict = true                                        # check --strict
    approve = "ask"                                      # run/agent --approve
    plans = ["plans/**/*.yaml"]                          # YAML/JSON plans the language server checks

Command-line flags win over it.  A bad file is a :class:`ConfigError` naming the file, line
and column: the CLI prints it and exits 2, the language server shows it on the plan.

Light on purpose (``tomllib``, no compiler): every command reads it before it starts.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import SophonError

__all__ = ["APPROVE_CHOICES", "ConfigError", "KEYS", "ProjectConfig", "Setting", "discover", "find_config",
           "load_config"]

CONFIG_NAMES = ("sophon.toml", "pyproject.toml")
SECTION = ("tool", "sophon-dsl")
APPROVE_CHOICES = ("yes", "no", "ask", "wait")
# key -> what it must be (for messages); the order `sophon-dsl config` prints them in
KEYS: dict[str, str] = {
    "tools": "a list of tool sources (FILE.py, MODULE, declarations file, mcp:...)",
    "stdlib": "true, false or a table of StdlibConfig settings (and 'groups')",
    "store": "a run store URL (sqlite:///PATH.db, postgresql://...)",
    "executor": "an executor spec (local, dask:local, dask:tcp://HOST:PORT, ...)",
    "strict": "true or false",
    "approve": f"one of {', '.join(APPROVE_CHOICES)}",
    "plans": "a list of glob patterns of plan files (relative to the config file)",
}
# the DSL extensions every tool already treats as plans (loader.format_for_path)
DEFAULT_PLAN_PATTERNS = ("**/*.plan", "**/*.sophon", "**/*.dsl")
_PATH_SETTINGS = ("sandbox_root", "memory_db_path")  # StdlibConfig paths: relative to the file


class ConfigError(SophonError):
    """A project config file that cannot be used: ``file:line:column: message``."""

    def __init__(self, file: str, line: int, column: int, message: str) -> None:
        self.file, self.line, self.column, self.message = file, line, column, message
        super().__init__(f"{file}:{line}:{column}: {message}")


@dataclass(frozen=True)
class Setting:
    """One effective setting: its value and where it came from (``file:line`` or ``default``)."""

    value: Any
    origin: str


@dataclass
class ProjectConfig:
    """The settings of one config file (``file`` None: no file found, every default)."""

    file: str | None = None
    root: Path = field(default_factory=Path.cwd)
    values: dict[str, Setting] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        s = self.values.get(key)
        return default if s is None else s.value

    def origin(self, key: str) -> str:
        s = self.values.get(key)
        return "default" if s is None else s.origin

    def plan_patterns(self) -> tuple[str, ...]:
        return tuple(self.get("plans") or ()) + DEFAULT_PLAN_PATTERNS

    def is_plan(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` matches one of the plan patterns (relative to the config's root)."""
        p = Path(path)
        try:
            rel = p.resolve().relative_to(self.root.resolve()).as_posix()
        except (ValueError, OSError):
            rel = p.name
        for pattern in self.plan_patterns():
            if fnmatch.fnmatchcase(rel, pattern) or (
                    pattern.startswith("**/") and fnmatch.fnmatchcase(rel, pattern[3:])):
                return True
        return False

    def stdlib_kwargs(self) -> dict[str, Any] | None:
        """The StdlibConfig settings of a ``stdlib`` table (paths made absolute), else None."""
        value = self.get("stdlib")
        if not isinstance(value, dict):
            return None
        return {k: v for k, v in value.items() if k != "groups"}


def find_config(start: str | os.PathLike[str] | None = None) -> Path | None:
    """The config file that applies to ``start`` (a file or a directory; default: the cwd)."""
    here = Path(start) if start is not None else Path.cwd()
    try:
        here = here.resolve()
    except OSError:
        return None
    if not here.is_dir():
        here = here.parent
    for directory in (here, *here.parents):
        candidate = directory / "sophon.toml"
        if candidate.is_file():
            return candidate
        candidate = directory / "pyproject.toml"
        if candidate.is_file() and _has_section(candidate):
            return candidate
    return None


def _has_section(path: Path) -> bool:
    # a cheap test before parsing: most pyproject.toml files have nothing for us
    try:
        text = path.read_text(encoding="utf-8", errors="replace").removeprefix("\ufeff")
    except OSError:
        return False
    return re.search(r"^\s*\[\s*tool\s*\.\s*[\"']?sophon-dsl[\"']?\s*[.\]]", text, re.M) is not None


def discover(start: str | os.PathLike[str] | None = None) -> ProjectConfig:
    """The config that applies to ``start``, loaded; every default when there is none.
    Raises :class:`ConfigError` for a file that is not valid."""
    path = find_config(start)
    if path is None:
        return ProjectConfig(None, Path(start).resolve().parent if start and Path(start).is_file()
                             else Path(start or Path.cwd()).resolve())
    return load_config(path)


def load_config(path: str | os.PathLike[str]) -> ProjectConfig:
    import tomllib

    path = Path(path)
    name = str(path)
    try:
        # (a byte order mark, as Windows editors write, is no TOML: dropped, as plan files'
        # are; kept, it made a pyproject.toml's table unseen and sophon.toml invalid)
        text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except OSError as exc:
        raise ConfigError(name, 1, 1, f"cannot read the config file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(name, 1, 1, f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        lines = text.splitlines() or [""]
        # "(at end of document)": the end of the last line
        line, col = (int(found.group(1)), int(found.group(2))) if found else (len(lines), len(lines[-1]) + 1)
        reason = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", str(exc)) or "not valid TOML"
        raise ConfigError(name, line, col, f"not valid TOML: {reason}") from None
    table: Any = data
    prefix: tuple[str, ...] = ()
    if path.name != "sophon.toml":
        prefix = SECTION
        table = data.get("tool", {}).get("sophon-dsl") if isinstance(data.get("tool"), dict) else None
        if table is None:
            return ProjectConfig(None, path.parent.resolve())
    where = _Locator(text, name)
    if not isinstance(table, dict):
        raise ConfigError(name, *where.key(prefix[:-1], prefix[-1]), "[tool.sophon-dsl] must be a table")
    root = path.parent.resolve()
    values: dict[str, Setting] = {}
    for key, value in table.items():
        line, col = where.key(prefix, key)
        if key not in KEYS:
            close = difflib.get_close_matches(key, KEYS, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(KEYS)})"
            raise ConfigError(name, line, col, f"unknown setting '{key}'{hint}")
        value = _check(key, value, root, where, prefix, (line, col))
        values[key] = Setting(value, f"{name}:{line}")
    return ProjectConfig(name, root, values)


class _Locator:
    """Where a key is in the TOML text (tomllib keeps no positions): the line of ``key =``
    in its table, else the table's header, else line 1."""

    def __init__(self, text: str, name: str) -> None:
        self.lines = text.splitlines()
        self.name = name

    def key(self, table: tuple[str, ...], key: str) -> tuple[int, int]:
        current: tuple[str, ...] = ()
        header_line = None
        for n, line in enumerate(self.lines, 1):
            head = re.match(r"\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$", line)
            if head:
                current = tuple(p.strip().strip("\"'") for p in head.group(1).split("."))
                if current == table + (key,):
                    return n, line.index("[") + 1
                if current == table:
                    header_line = n
                continue
            found = re.match(r"(\s*)[\"']?([A-Za-z0-9_.-]+?)[\"']?\s*=", line)
            if found:
                dotted = tuple(p.strip("\"'") for p in found.group(2).split("."))
                full = current + dotted
                if full[:len(table) + 1] == table + (key,):
                    return n, len(found.group(1)) + 1
        return (header_line or 1), 1


def _check(key: str, value: Any, root: Path, where: _Locator, prefix: tuple[str, ...],
           pos: tuple[int, int]) -> Any:
    def fail(message: str, at: tuple[int, int] = pos) -> ConfigError:
        return ConfigError(where.name, at[0], at[1], message)

    if key in ("tools", "plans"):
        if not (isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)):
            raise fail(f"'{key}' must be {KEYS[key]}, got {_show(value)}")
        return tuple(_tool_source(v, root) for v in value) if key == "tools" else tuple(value)
    if key in ("store", "executor"):
        if not isinstance(value, str) or not value.strip():
            raise fail(f"'{key}' must be {KEYS[key]}, got {_show(value)}")
        if key == "store" and value.startswith("sqlite:///") and not value.startswith("sqlite:////"):
            return "sqlite:///" + str(root / value[len("sqlite:///"):])  # relative to the file
        return value
    if key == "strict":
        if not isinstance(value, bool):
            raise fail(f"'strict' must be true or false, got {_show(value)}")
        return value
    if key == "approve":
        if value not in APPROVE_CHOICES:
            raise fail(f"'approve' must be {KEYS['approve']}, got {_show(value)}")
        return value
    # stdlib
    if isinstance(value, bool):
        return value
    if not isinstance(value, dict):
        raise fail(f"'stdlib' must be {KEYS['stdlib']}, got {_show(value)}")
    return _check_stdlib(value, root, where, prefix + ("stdlib",), fail)


def _check_stdlib(value: dict, root: Path, where: _Locator, table: tuple[str, ...], fail: Any) -> dict:
    from . import stdlib_hook

    out: dict[str, Any] = {}
    library = stdlib_hook.library()
    fields = ({f.name: str(f.type) for f in dataclasses.fields(library.StdlibConfig)}
              if library is not None else {})
    fields.pop("http_transport", None)
    for k, v in value.items():
        at = where.key(table, k)
        if k == "groups":
            if not (isinstance(v, list) and v and all(isinstance(g, str) and g.strip() for g in v)):
                raise fail(f"'stdlib.groups' must be a non-empty list of standard groups or tools, got {_show(v)}",
                           at)
            out[k] = tuple(v)
            continue
        if fields and k not in fields:
            close = difflib.get_close_matches(k, fields, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise fail(f"unknown standard library setting 'stdlib.{k}'{hint}", at)
        check = _TYPES.get(fields.get(k, ""))
        if k == "http_allow_list":
            if isinstance(v, str):
                v = [v]
            if not (isinstance(v, list) and all(isinstance(h, str) for h in v)):
                raise fail(f"'stdlib.http_allow_list' must be a list of hosts or CIDR networks, got {_show(v)}", at)
            v = tuple(v)
        elif check is not None and not check[1](v):
            raise fail(f"'stdlib.{k}' must be {check[0]}, got {_show(v)}", at)
        if k in _PATH_SETTINGS and isinstance(v, str):
            v = str((root / os.path.expanduser(v)).resolve())
            if k == "sandbox_root" and not Path(v).is_dir():
                raise fail(f"'stdlib.sandbox_root': {v} is not a directory", at)
        out[k] = v
    return out


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and v == v and v != float("inf")


# annotation of a StdlibConfig field -> (what it must be, check)
_TYPES: dict[str, tuple[str, Any]] = {
    "int": ("a whole number >= 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
    "float": ("a number >= 0", _is_number),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "bool | None": ("true or false", lambda v: isinstance(v, bool)),
    "str": ("a string", lambda v: isinstance(v, str)),
    "str | None": ("a string", lambda v: isinstance(v, str)),
}


def _tool_source(source: str, root: Path) -> str:
    """A path in ``tools`` is relative to the config file; MCP specs and modules stay as written."""
    if source.startswith("mcp:"):
        return source
    if source.endswith((".py", ".yaml", ".yml", ".json")) or "/" in source or os.sep in source:
        return str(root / os.path.expanduser(source))
    return source


def _show(value: Any) -> str:
    import json

    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return repr(value)
