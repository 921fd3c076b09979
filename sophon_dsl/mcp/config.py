"""Which MCP servers to reach: :class:`McpServerConfig`, ``--tools mcp:...`` specs and config files.

``mcp:stdio:COMMAND ARGS...``, ``mcp:http:URL`` (or ``mcp:URL``), ``mcp:FILE`` and
``FILE.mcp.json`` (optionally ``#server,...``); a config file is the ``mcpServers``
format of Claude Desktop / Claude Code, with ``${VAR}`` / ``${VAR:-default}``
expanded from the environment.  Everything here is pure: no SDK, no I/O beyond
reading the config file.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..errors import OptionError
from ..model import Risk

__all__ = ["McpConfigError", "McpServerConfig", "config_key", "is_mcp_config_file", "is_mcp_source", "load_mcp_config",
           "one_server", "parse_mcp_source"]


class McpConfigError(OptionError):
    """An MCP source or config file that cannot be used (a ``ValueError`` too)."""

    code = "Mcp.ConfigInvalid"


@dataclass(frozen=True)
class McpServerConfig:
    """How to reach one MCP server, and how its tools are presented.

    ``transport`` is ``"stdio"`` (``command``, ``args``, ``env``, ``cwd``) or
    ``"http"`` (streamable HTTP: ``url``, ``headers``).  ``prefix`` is put in
    front of every tool name (``"fs."`` makes ``read_file`` ``fs.read_file``);
    ``risk`` overrides the risk derived from the tools' annotations;
    ``include`` keeps only the named tools (names before prefixing);
    ``timeout`` bounds each call (seconds); ``stderr`` is ``"capture"`` (the
    server's stderr is kept and its tail shown when the connection fails) or
    ``"inherit"``.
    """

    transport: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] | None = None
    name: str | None = None
    prefix: str = ""
    risk: Risk | None = None
    min_risk: Risk | None = None  # "minRisk": the server's annotations cannot go below it
    include: tuple[str, ...] | None = None
    timeout: float | None = None
    connect_timeout: float = 60.0
    stderr: str = "capture"

    def __post_init__(self) -> None:
        if self.transport not in ("stdio", "http"):
            raise McpConfigError(f"unknown MCP transport {self.transport!r}; expected 'stdio' or 'http'")
        if self.transport == "stdio" and not self.command:
            raise McpConfigError("an MCP stdio server needs a command")
        if self.transport == "http" and not self.url:
            raise McpConfigError("an MCP HTTP server needs a url")
        if self.stderr not in ("capture", "inherit"):
            raise McpConfigError(f"stderr must be 'capture' or 'inherit', not {self.stderr!r}")

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.transport == "stdio":
            return shlex.join([self.command or "", *self.args])
        return self.url or "?"


def is_mcp_source(source: str) -> bool:
    """Is this ``--tools`` argument an MCP source (``mcp:...`` or an MCP config file)?"""
    return source.startswith("mcp:") or is_mcp_config_file(source)


def _split_fragment(source: str) -> tuple[str, tuple[str, ...] | None]:
    base, sep, frag = source.partition("#")
    if not sep:
        return source, None
    names = tuple(n.strip() for n in frag.split(",") if n.strip())
    return base, names or None


def is_mcp_config_file(source: str) -> bool:
    """``mcp.json``, ``*.mcp.json`` (optionally ``#server,...``), or any JSON file with ``mcpServers``."""
    base, _ = _split_fragment(source)
    name = Path(base).name.lower()
    if name == "mcp.json" or name.endswith(".mcp.json"):
        return True
    if not name.endswith(".json"):
        return False
    try:
        if Path(base).stat().st_size > 1_000_000:
            return False
        data = json.loads(Path(base).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("mcpServers"), dict)


def parse_mcp_source(source: str) -> list[McpServerConfig]:
    """``mcp:stdio:COMMAND ARGS...``, ``mcp:http:URL`` (or ``mcp:URL``), ``mcp:FILE`` / ``FILE.mcp.json``.

    A config file may end with ``#name1,name2`` to pick servers.  Raises :class:`McpConfigError` (a ``ValueError``).
    """
    if source.startswith("mcp:"):
        rest = source[4:]
        if rest.startswith("stdio:"):
            try:
                argv = shlex.split(rest[6:])
            except ValueError as exc:
                raise McpConfigError(f"cannot split the command line {rest[6:]!r}: {exc}") from None
            if not argv:
                raise McpConfigError("mcp:stdio: needs a command, e.g. "
                                     "mcp:stdio:'npx -y @modelcontextprotocol/server-everything'")
            return [McpServerConfig("stdio", command=argv[0], args=tuple(argv[1:]))]
        for tag in ("http:", "streamable-http:", "https:"):
            if rest.startswith(tag) and not rest.startswith(("http://", "https://")):
                url = rest[len(tag):]
                if tag == "https:" and not url.startswith("https://"):
                    url = "https:" + url
                return [McpServerConfig("http", url=_check_url(url))]
        if rest.startswith(("http://", "https://")):
            return [McpServerConfig("http", url=_check_url(rest))]
        if rest.startswith("sse:"):
            raise McpConfigError("the legacy SSE transport is not supported; use streamable HTTP (mcp:http:URL)")
        if not rest:
            raise McpConfigError("empty MCP source; expected mcp:stdio:COMMAND, mcp:http:URL or mcp:CONFIG.json")
        base, names = _split_fragment(rest)
        return load_mcp_config(base, names)
    base, names = _split_fragment(source)
    return load_mcp_config(base, names)


def _check_url(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise McpConfigError(f"an MCP HTTP source needs an http:// or https:// URL, not {url!r}")
    return url


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand(value: Any, where: str) -> Any:
    """``${VAR}`` and ``${VAR:-default}`` in config strings (as Claude Code's ``.mcp.json``)."""
    if isinstance(value, str):
        def sub(m: re.Match) -> str:
            var, default = m.group(1), m.group(2)
            if var in os.environ:
                return os.environ[var]
            if default is not None:
                return default
            raise McpConfigError(f"{where}: environment variable {var} is not set")
        return _VAR.sub(sub, value)
    if isinstance(value, list):
        return [_expand(v, where) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, where) for k, v in value.items()}
    return value


def load_mcp_config(path: str | os.PathLike, names: Iterable[str] | None = None) -> list[McpServerConfig]:
    """Read an ``mcpServers`` config file (Claude Desktop / Claude Code format).

    ``{"mcpServers": {name: {"command", "args", "env", "cwd"} | {"url", "headers"}}}``; each
    entry may also say ``"type"`` (``stdio`` / ``http`` / ``streamable-http``), ``"prefix"``,
    ``"risk"``, ``"minRisk"``, ``"include"``, ``"timeout"``, ``"stderr"`` and ``"disabled": true``.  A relative
    ``cwd`` (and the default ``cwd`` of a stdio server) is the config file's directory.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise McpConfigError(f"cannot read MCP config {str(p)!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise McpConfigError(f"MCP config {str(p)!r} is not valid JSON: {exc}") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise McpConfigError(f"MCP config {str(p)!r} has no \"mcpServers\" object")
    wanted = list(names) if names else None
    if wanted:
        missing = [n for n in wanted if n not in servers]
        if missing:
            raise McpConfigError(f"MCP config {str(p)!r} has no server named {', '.join(map(repr, missing))}; "
                                 f"it has {', '.join(map(repr, servers)) or 'none'}")
    out: list[McpServerConfig] = []
    for name, entry in servers.items():
        if wanted is not None and name not in wanted:
            continue
        if not isinstance(entry, dict):
            raise McpConfigError(f"MCP config {str(p)!r}: server {name!r} must be an object")
        if entry.get("disabled") and wanted is None:
            continue
        out.append(_server_from_entry(name, entry, p.resolve().parent, f"{p}: server {name!r}"))
    return out


_ENTRY_KEYS = {"type", "transport", "command", "args", "env", "cwd", "url", "headers", "prefix", "risk",
               "minRisk", "include", "timeout", "connectTimeout", "stderr", "disabled", "description"}


def _server_from_entry(name: str, entry: Mapping[str, Any], base_dir: Path, where: str) -> McpServerConfig:
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if unknown:
        raise McpConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
    entry = _expand(dict(entry), where)
    kind = str(entry.get("type") or entry.get("transport") or ("http" if "url" in entry else "stdio")).lower()
    if kind in ("streamable-http", "streamablehttp", "streamable_http", "http"):
        kind = "http"
    elif kind == "sse":
        raise McpConfigError(f"{where}: the legacy SSE transport is not supported; use streamable HTTP")
    elif kind != "stdio":
        raise McpConfigError(f"{where}: unknown type {kind!r}; expected stdio or http")

    def strings(key: str) -> tuple[str, ...]:
        value = entry.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise McpConfigError(f"{where}: {key!r} must be a list of strings")
        return tuple(value)

    def mapping(key: str) -> dict[str, str] | None:
        value = entry.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise McpConfigError(f"{where}: {key!r} must be an object of strings")
        return {str(k): str(v) for k, v in value.items()}

    risk, floor = entry.get("risk"), entry.get("minRisk")
    try:
        level = Risk.parse(risk) if risk is not None else None
        min_level = Risk.parse(floor) if floor is not None else None
    except ValueError as exc:
        raise McpConfigError(f"{where}: {exc}") from None
    include = strings("include") if "include" in entry else None
    common: dict[str, Any] = dict(name=name, prefix=str(entry.get("prefix", "")), risk=level, min_risk=min_level,
                                  include=include,
                                  timeout=_number(entry.get("timeout"), where, "timeout"),
                                  stderr=str(entry.get("stderr", "capture")))
    if entry.get("connectTimeout") is not None:
        common["connect_timeout"] = _number(entry["connectTimeout"], where, "connectTimeout")
    if kind == "http":
        url = entry.get("url")
        if not isinstance(url, str):
            raise McpConfigError(f"{where}: an HTTP server needs a \"url\" string")
        return McpServerConfig("http", url=_check_url(url), headers=mapping("headers"), **common)
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        raise McpConfigError(f"{where}: a stdio server needs a \"command\" string")
    cwd = entry.get("cwd")
    cwd_path = base_dir if cwd is None else (base_dir / str(cwd))
    return McpServerConfig("stdio", command=command, args=strings("args"), env=mapping("env"),
                           cwd=str(cwd_path), **common)


def _number(value: Any, where: str, key: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise McpConfigError(f"{where}: {key!r} must be a positive number of seconds")
    return float(value)


def config_key(cfg: McpServerConfig) -> str:
    """A stable text key for ``cfg``: equal configurations (field by field) give equal keys."""
    data = {f: getattr(cfg, f) for f in cfg.__dataclass_fields__}
    return json.dumps(data, sort_keys=True, default=lambda v: v.name if isinstance(v, Risk) else dict(v))


def one_server(source: McpServerConfig | str, taker: str) -> McpServerConfig:
    """``source`` as the single server it must name (``taker`` is who needs exactly one)."""
    if isinstance(source, McpServerConfig):
        return source
    configs = parse_mcp_source(source)
    if len(configs) != 1:
        raise McpConfigError(f"{source!r} names {len(configs)} MCP servers; {taker} takes one")
    return configs[0]
