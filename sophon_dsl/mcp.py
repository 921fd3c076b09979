"""Tools from Model Context Protocol servers (optional extra: ``pip install 'sophon-dsl[mcp]'``).

A server's tools become :class:`~sophon_dsl.tools.ToolSpec` objects: the tool's
name (with an optional prefix), description, input schema and, when the server
declares one, output schema, so ``check`` understands them and ``run`` calls
them.  Uses the official ``mcp`` Python SDK (1.x and 2.x), stdio and streamable
HTTP transports.  See ``docs/mcp.md``.

Two ways to hold a connection:

* :class:`McpToolSource`, an async context manager for code that owns an event
  loop::

      async with McpToolSource.stdio("python", ["server.py"]) as src:
          result = await sophon_dsl.runtime.arun(plan, tools=src.tools)

  It connects in ``__aenter__`` and disconnects in ``__aexit__``, in the same
  task, as the SDK's anyio-based transports require.  Its tools only work
  inside that ``async with`` block and that event loop.

* :class:`McpConnection`, for synchronous entry points (the CLI,
  ``load_tool_source("mcp:stdio:...")``, ``sophon_dsl.runtime.run``): the
  session is owned by a dedicated background thread running its own event
  loop, so it outlives any one ``asyncio.run`` and its tools can be awaited
  from any event loop in any thread.  It connects lazily (on the first listing
  or call), is reused by every later call, and is closed by
  :meth:`McpConnection.close`, :func:`close_all` or at interpreter exit.

Results: ``structuredContent`` when present; else the text content, parsed as
JSON when it is JSON; several content blocks give a list; non-text blocks are
returned as their MCP JSON form.  ``isError`` raises :class:`McpToolError`
(run-time error name ``Mcp.ToolError``); a protocol error (unknown tool, bad
request) raises ``Mcp.Error``; a server that cannot be started or reached
raises ``Mcp.ConnectionFailed``.

Risk: a tool is ``medium`` unless its annotations say ``readOnlyHint: true``
(``low``) or ``destructiveHint: true`` (``high``); a server-wide ``risk`` in
the configuration overrides both.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import json
import os
import re
import shlex
import sys
import tempfile
import threading
import weakref
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Mapping

from .model import Risk
from .runtime.errors import RunError
from .tools import ToolSpec

__all__ = [
    "MCP_CONNECTION_FAILED",
    "MCP_ERROR",
    "MCP_TOOL_ERROR",
    "McpConnection",
    "McpServerConfig",
    "McpToolError",
    "McpToolSource",
    "close_all",
    "convert_result",
    "is_mcp_config_file",
    "is_mcp_source",
    "load_mcp_config",
    "load_mcp_tools",
    "parse_mcp_source",
    "risk_from_annotations",
    "shared_connection",
    "tool_to_spec",
]

MCP_TOOL_ERROR = "Mcp.ToolError"
MCP_ERROR = "Mcp.Error"
MCP_CONNECTION_FAILED = "Mcp.ConnectionFailed"

_INSTALL_HINT = "MCP tool sources need the official SDK: pip install 'sophon-dsl[mcp]' (or pip install mcp)"


class McpToolError(RunError):
    """The server ran the tool and reported a failure (``isError: true``)."""

    def __init__(self, tool: str, cause: str, result: dict | None = None):
        super().__init__(MCP_TOOL_ERROR, cause or f"the MCP tool {tool!r} failed")
        self.tool = tool
        self.result = result


def _connection_failed(label: str, exc: BaseException | str, stderr_tail: str = "") -> RunError:
    if isinstance(exc, str):
        msg = exc
    elif getattr(exc, "exceptions", None):  # an exception group: its leaves say what happened
        msg = _exc_text(exc)
    else:
        msg = f"{type(exc).__name__}: {_exc_text(exc)}"
    cause = f"cannot connect to the MCP server {label}: {msg}"
    if stderr_tail:
        cause += f"\n--- server stderr (last lines) ---\n{stderr_tail}"
    return RunError(MCP_CONNECTION_FAILED, cause)


def _exc_text(exc: BaseException) -> str:
    """Readable text of an exception, unwrapping (anyio / asyncio) exception groups."""
    subs = getattr(exc, "exceptions", None)
    if subs:
        return "; ".join(f"{type(e).__name__}: {_exc_text(e)}" for e in subs)
    return str(exc) or type(exc).__name__


# ---------------------------------------------------------------------------
# Configuration


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
    include: tuple[str, ...] | None = None
    timeout: float | None = None
    connect_timeout: float = 60.0
    stderr: str = "capture"

    def __post_init__(self) -> None:
        if self.transport not in ("stdio", "http"):
            raise ValueError(f"unknown MCP transport {self.transport!r}; expected 'stdio' or 'http'")
        if self.transport == "stdio" and not self.command:
            raise ValueError("an MCP stdio server needs a command")
        if self.transport == "http" and not self.url:
            raise ValueError("an MCP HTTP server needs a url")
        if self.stderr not in ("capture", "inherit"):
            raise ValueError(f"stderr must be 'capture' or 'inherit', not {self.stderr!r}")

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

    A config file may end with ``#name1,name2`` to pick servers.  Raises ``ValueError``.
    """
    if source.startswith("mcp:"):
        rest = source[4:]
        if rest.startswith("stdio:"):
            try:
                argv = shlex.split(rest[6:])
            except ValueError as exc:
                raise ValueError(f"cannot split the command line {rest[6:]!r}: {exc}") from None
            if not argv:
                raise ValueError("mcp:stdio: needs a command, e.g. mcp:stdio:'npx -y @modelcontextprotocol/server-everything'")
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
            raise ValueError("the legacy SSE transport is not supported; use streamable HTTP (mcp:http:URL)")
        if not rest:
            raise ValueError("empty MCP source; expected mcp:stdio:COMMAND, mcp:http:URL or mcp:CONFIG.json")
        base, names = _split_fragment(rest)
        return load_mcp_config(base, names)
    base, names = _split_fragment(source)
    return load_mcp_config(base, names)


def _check_url(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"an MCP HTTP source needs an http:// or https:// URL, not {url!r}")
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
            raise ValueError(f"{where}: environment variable {var} is not set")
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
    ``"risk"``, ``"include"``, ``"timeout"``, ``"stderr"`` and ``"disabled": true``.  A relative
    ``cwd`` (and the default ``cwd`` of a stdio server) is the config file's directory.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read MCP config {str(p)!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"MCP config {str(p)!r} is not valid JSON: {exc}") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ValueError(f"MCP config {str(p)!r} has no \"mcpServers\" object")
    wanted = list(names) if names else None
    if wanted:
        missing = [n for n in wanted if n not in servers]
        if missing:
            raise ValueError(f"MCP config {str(p)!r} has no server named {', '.join(map(repr, missing))}; "
                             f"it has {', '.join(map(repr, servers)) or 'none'}")
    out: list[McpServerConfig] = []
    for name, entry in servers.items():
        if wanted is not None and name not in wanted:
            continue
        if not isinstance(entry, dict):
            raise ValueError(f"MCP config {str(p)!r}: server {name!r} must be an object")
        if entry.get("disabled") and wanted is None:
            continue
        out.append(_server_from_entry(name, entry, p.resolve().parent, f"{p}: server {name!r}"))
    return out


_ENTRY_KEYS = {"type", "transport", "command", "args", "env", "cwd", "url", "headers", "prefix", "risk",
               "include", "timeout", "connectTimeout", "stderr", "disabled", "description"}


def _server_from_entry(name: str, entry: Mapping[str, Any], base_dir: Path, where: str) -> McpServerConfig:
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}")
    entry = _expand(dict(entry), where)
    kind = str(entry.get("type") or entry.get("transport") or ("http" if "url" in entry else "stdio")).lower()
    if kind in ("streamable-http", "streamablehttp", "streamable_http", "http"):
        kind = "http"
    elif kind == "sse":
        raise ValueError(f"{where}: the legacy SSE transport is not supported; use streamable HTTP")
    elif kind != "stdio":
        raise ValueError(f"{where}: unknown type {kind!r}; expected stdio or http")

    def strings(key: str) -> tuple[str, ...]:
        value = entry.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{where}: {key!r} must be a list of strings")
        return tuple(value)

    def mapping(key: str) -> dict[str, str] | None:
        value = entry.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ValueError(f"{where}: {key!r} must be an object of strings")
        return {str(k): str(v) for k, v in value.items()}

    risk = entry.get("risk")
    try:
        level = Risk.parse(risk) if risk is not None else None
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    include = strings("include") if "include" in entry else None
    common: dict[str, Any] = dict(name=name, prefix=str(entry.get("prefix", "")), risk=level, include=include,
                                  timeout=_number(entry.get("timeout"), where, "timeout"),
                                  stderr=str(entry.get("stderr", "capture")))
    if entry.get("connectTimeout") is not None:
        common["connect_timeout"] = _number(entry["connectTimeout"], where, "connectTimeout")
    if kind == "http":
        url = entry.get("url")
        if not isinstance(url, str):
            raise ValueError(f"{where}: an HTTP server needs a \"url\" string")
        return McpServerConfig("http", url=_check_url(url), headers=mapping("headers"), **common)
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        raise ValueError(f"{where}: a stdio server needs a \"command\" string")
    cwd = entry.get("cwd")
    cwd_path = base_dir if cwd is None else (base_dir / str(cwd))
    return McpServerConfig("stdio", command=command, args=strings("args"), env=mapping("env"),
                           cwd=str(cwd_path), **common)


def _number(value: Any, where: str, key: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{where}: {key!r} must be a positive number of seconds")
    return float(value)


# ---------------------------------------------------------------------------
# Tools and results


def risk_from_annotations(annotations: Mapping[str, Any] | None) -> Risk:
    """``readOnlyHint: true`` -> low, ``destructiveHint: true`` -> high, otherwise medium."""
    ann = annotations or {}
    if ann.get("readOnlyHint") is True:
        return Risk.LOW
    if ann.get("destructiveHint") is True:
        return Risk.HIGH
    return Risk.MEDIUM


def _clean_schema(schema: Any) -> dict | None:
    """Drop pydantic's decorative titles (top level and per property); keep everything else."""
    if not isinstance(schema, dict):
        return None
    out = {k: v for k, v in schema.items() if k != "title"}
    props = out.get("properties")
    if isinstance(props, dict):
        out["properties"] = {k: ({kk: vv for kk, vv in v.items() if kk != "title"} if isinstance(v, dict) else v)
                             for k, v in props.items()}
    return out


CallFn = Callable[[str, dict], Awaitable[Any]]


def tool_to_spec(tool: Mapping[str, Any], call: CallFn, *, prefix: str = "", risk: Risk | None = None,
                 origin: str = "mcp") -> ToolSpec:
    """An MCP tool (its JSON form, as in ``tools/list``) -> a ToolSpec whose func awaits ``call(name, args)``."""
    mcp_name = str(tool["name"])
    annotations = tool.get("annotations") or {}
    description = tool.get("description") or tool.get("title") or annotations.get("title") or ""

    async def call_mcp_tool(**arguments: Any) -> Any:
        return await call(mcp_name, arguments)

    call_mcp_tool.__name__ = re.sub(r"\W", "_", mcp_name) or "mcp_tool"
    call_mcp_tool.__qualname__ = call_mcp_tool.__name__
    call_mcp_tool.__doc__ = description
    call_mcp_tool.mcp_tool_name = mcp_name  # type: ignore[attr-defined]
    input_schema = _clean_schema(tool.get("inputSchema")) or {"type": "object", "properties": {}}
    return ToolSpec(
        name=f"{prefix}{mcp_name}",
        description=description,
        input_schema=input_schema,
        output_schema=_clean_schema(tool.get("outputSchema")),
        risk=risk if risk is not None else risk_from_annotations(annotations),
        func=call_mcp_tool,
        is_async=True,
        origin=origin,
    )


def _wire(obj: Any) -> Any:
    """An SDK pydantic model -> its MCP JSON form (camelCase keys) in SDK 1.x and 2.x alike."""
    dump = getattr(obj, "model_dump", None)
    if dump is None:
        return obj
    return dump(mode="json", by_alias=True, exclude_none=True)


def _connection_lost(exc: BaseException) -> bool:
    """Did a call fail because the connection is gone (rather than because of the request)?"""
    import anyio

    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream,
                        BrokenPipeError, ConnectionError)):
        return True
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None)
    if code is None:
        code = getattr(exc, "code", None)
    if code == -32000:  # CONNECTION_CLOSED in the SDK (1.x and 2.x)
        return True
    subs = getattr(exc, "exceptions", None)
    return bool(subs) and any(_connection_lost(e) for e in subs)


def _reject_constant(text: str) -> Any:
    raise ValueError(text)


def _text_value(text: str) -> Any:
    stripped = text.strip()
    if stripped:
        try:
            return json.loads(stripped, parse_constant=_reject_constant)
        except ValueError:
            pass
    return text


def convert_result(result: Any, tool: str = "?") -> Any:
    """A ``CallToolResult`` (model or JSON form) -> the value a plan sees; raises on ``isError``."""
    data = _wire(result)
    content = data.get("content") or []
    if data.get("isError"):
        texts = [c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text"]
        cause = "\n".join(t for t in texts if t)
        if not cause and data.get("structuredContent") is not None:
            cause = json.dumps(data["structuredContent"], ensure_ascii=False)
        if len(cause) > 4000:
            cause = cause[:4000] + "…"
        raise McpToolError(tool, cause, data)
    if data.get("structuredContent") is not None:
        return data["structuredContent"]
    values = [_text_value(c.get("text", "")) if isinstance(c, dict) and c.get("type") == "text" else c
              for c in content]
    if not values:
        return None
    return values[0] if len(values) == 1 else values


# ---------------------------------------------------------------------------
# The async context manager


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc


class McpToolSource:
    """One connected MCP server and its tools, as an async context manager.

    ``server`` is a :class:`McpServerConfig` or a source string
    (``"mcp:stdio:python server.py"``, ``"mcp:http:http://127.0.0.1:8000/mcp"``).
    After ``__aenter__``, :attr:`tools` holds the ToolSpecs, whose funcs call
    the server through this session (same event loop only).
    """

    def __init__(self, server: McpServerConfig | str, **overrides: Any):
        if isinstance(server, str):
            configs = parse_mcp_source(server)
            if len(configs) != 1:
                raise ValueError(f"{server!r} names {len(configs)} MCP servers; McpToolSource takes one")
            server = configs[0]
        self.config: McpServerConfig = replace(server, **overrides) if overrides else server
        self.tools: list[ToolSpec] = []
        self.raw_tools: list[dict] = []
        self.server_name: str | None = None
        self._session: Any = None
        self.lost = False  # the connection closed under us (server exited, HTTP session gone)
        self._stack: AsyncExitStack | None = None
        self._errlog: Any = None

    @classmethod
    def stdio(cls, command: str, args: Iterable[str] = (), *, env: Mapping[str, str] | None = None,
              cwd: str | os.PathLike | None = None, **options: Any) -> "McpToolSource":
        return cls(McpServerConfig("stdio", command=command, args=tuple(args), env=env,
                                   cwd=None if cwd is None else str(cwd), **options))

    @classmethod
    def http(cls, url: str, *, headers: Mapping[str, str] | None = None, **options: Any) -> "McpToolSource":
        return cls(McpServerConfig("http", url=url, headers=headers, **options))

    @property
    def connected(self) -> bool:
        return self._session is not None

    @property
    def origin(self) -> str:
        return f"mcp:{self.config.name or self.server_name or self.config.label}"

    async def __aenter__(self) -> "McpToolSource":
        await self.connect()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def _stderr_tail(self, lines: int = 20) -> str:
        f = self._errlog
        if f is None:
            return ""
        try:
            f.flush()
            f.seek(0)
            text = f.read()
        except (OSError, ValueError):
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    async def _open_transport(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        cfg = self.config
        if cfg.transport == "stdio":
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            params = StdioServerParameters(command=cfg.command, args=list(cfg.args),
                                           env=dict(cfg.env) if cfg.env else None, cwd=cfg.cwd)
            if cfg.stderr == "capture":
                self._errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
                errlog = self._errlog
            else:
                errlog = sys.stderr
            streams = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        else:
            import mcp.client.streamable_http as http_mod

            modern = getattr(http_mod, "streamable_http_client", None)
            if modern is not None:
                http_client = None
                if cfg.headers:
                    from mcp.shared._httpx_utils import create_mcp_http_client

                    http_client = await stack.enter_async_context(
                        create_mcp_http_client(headers=dict(cfg.headers)))
                streams = await stack.enter_async_context(modern(cfg.url, http_client=http_client))
            else:  # mcp 1.x
                streams = await stack.enter_async_context(
                    http_mod.streamablehttp_client(cfg.url, headers=dict(cfg.headers or {})))
        return streams[0], streams[1]

    async def connect(self) -> list[ToolSpec]:
        """Start / reach the server, initialize the session and list its tools."""
        _require_sdk()
        import anyio
        from mcp import ClientSession

        if self._session is not None:
            return self.tools
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            read, write = await self._open_transport(stack)
            session = await stack.enter_async_context(ClientSession(read, write))
            with anyio.fail_after(self.config.connect_timeout):
                init = await session.initialize()
                info = _wire(getattr(init, "serverInfo", None) or getattr(init, "server_info", None))
                self.server_name = info.get("name") if isinstance(info, dict) else None
                self.raw_tools = await self._list_tools(session)
        except BaseException as exc:
            tail = self._stderr_tail()
            failure: BaseException = exc
            try:
                await stack.aclose()
            except BaseException as close_exc:  # noqa: BLE001
                # A transport failure (connection refused, ...) cancels the session from inside
                # (a CancelledError here); the transport's task group then raises the real cause.
                if isinstance(exc, asyncio.CancelledError):
                    failure = close_exc
            self._close_errlog()
            task = asyncio.current_task()
            really_cancelled = isinstance(exc, asyncio.CancelledError) and task is not None and task.cancelling()
            if really_cancelled or isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            raise _connection_failed(self.config.label, failure, tail) from exc
        self._stack = stack
        self._session = session
        self.tools = self._specs(self.call)
        return self.tools

    async def _list_tools(self, session: Any) -> list[dict]:
        tools: list[dict] = []
        result = _wire(await session.list_tools())
        while True:
            tools.extend(result.get("tools") or [])
            cursor = result.get("nextCursor")
            if not cursor:
                break
            try:
                from mcp.types import PaginatedRequestParams

                page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
            except (TypeError, ImportError):  # mcp 1.x
                page = await session.list_tools(cursor)
            result = _wire(page)
        include = self.config.include
        if include is not None:
            tools = [t for t in tools if t.get("name") in include]
        return tools

    def _specs(self, call: CallFn) -> list[ToolSpec]:
        return [tool_to_spec(t, call, prefix=self.config.prefix, risk=self.config.risk, origin=self.origin)
                for t in self.raw_tools]

    async def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> Any:
        """Call the MCP tool ``name`` (its own name, without prefix) and convert the result."""
        import anyio

        session = self._session
        if session is None:
            raise RunError(MCP_CONNECTION_FAILED, f"the MCP server {self.config.label} is not connected")
        args = dict(arguments or {})
        try:
            if self.config.timeout is not None:
                with anyio.fail_after(self.config.timeout):
                    result = await session.call_tool(name, args)
            else:
                result = await session.call_tool(name, args)
        except (RunError, TimeoutError, asyncio.CancelledError):
            raise
        except Exception as exc:  # protocol errors (unknown tool, invalid params, connection closed)
            if _connection_lost(exc):
                self.lost = True
            raise RunError(MCP_ERROR, f"{self.config.label}: {name}: {_exc_text(exc)}") from exc
        return convert_result(result, name)

    async def aclose(self) -> None:
        stack, self._stack, self._session = self._stack, None, None
        try:
            if stack is not None:
                await stack.aclose()
        finally:
            self._close_errlog()

    def _close_errlog(self) -> None:
        if self._errlog is not None:
            try:
                self._errlog.close()
            except OSError:
                pass
            self._errlog = None


# ---------------------------------------------------------------------------
# The thread-owned connection (sync entry points)


@dataclass
class _Running:
    ready: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    thread: threading.Thread | None = None
    loop: asyncio.AbstractEventLoop | None = None
    stop: asyncio.Event | None = None
    source: McpToolSource | None = None


_LIVE: "weakref.WeakSet[McpConnection]" = weakref.WeakSet()


class McpConnection:
    """A lazily opened, reusable connection to one MCP server, owned by a background thread.

    The thread runs its own event loop and a single task that enters and later
    exits the SDK's transport and session (anyio needs both in one task).  The
    ToolSpecs from :meth:`tools` can be awaited from any event loop in any
    thread (``sophon_dsl.runtime.run`` makes a new loop per run): each call is
    handed to the connection's loop and its result handed back.  After
    :meth:`close` the next listing or call reconnects.
    """

    def __init__(self, config: McpServerConfig | str):
        if isinstance(config, str):
            configs = parse_mcp_source(config)
            if len(configs) != 1:
                raise ValueError(f"{config!r} names {len(configs)} MCP servers; McpConnection takes one")
            config = configs[0]
        self.config = config
        self._lock = threading.Lock()
        self._running: _Running | None = None

    def __repr__(self) -> str:
        state = "connected" if self.connected else "idle"
        return f"<McpConnection {self.config.label} {state}>"

    @property
    def connected(self) -> bool:
        r = self._running
        return (r is not None and r.ready.done() and not r.ready.cancelled() and r.ready.exception() is None
                and r.thread is not None and r.thread.is_alive())

    def _start(self) -> _Running:
        with self._lock:
            r = self._running
            if r is not None and r.thread is not None and r.thread.is_alive():
                return r
            r = _Running()  # first use, or the previous thread ended (closed, failed): start again
            r.thread = threading.Thread(target=self._thread_main, args=(r,), daemon=True,
                                        name=f"sophon-mcp:{self.config.label[:40]}")
            self._running = r
            _LIVE.add(self)
            r.thread.start()
            return r

    def _thread_main(self, r: _Running) -> None:
        try:
            asyncio.run(self._serve(r))
        except BaseException as exc:  # noqa: BLE001 - reported through ready
            if not r.ready.done():
                r.ready.set_exception(exc)

    async def _serve(self, r: _Running) -> None:
        r.loop = asyncio.get_running_loop()
        r.stop = asyncio.Event()
        source = McpToolSource(self.config)
        try:
            await source.connect()
        except BaseException as exc:
            if not r.ready.done():
                r.ready.set_exception(exc if isinstance(exc, Exception)
                                      else _connection_failed(self.config.label, exc))
            return
        r.source = source
        if r.ready.done():  # nobody can use it any more
            await source.aclose()
            return
        r.ready.set_result(source)
        try:
            await r.stop.wait()
        finally:
            await source.aclose()

    def _wait_ready(self, r: _Running) -> McpToolSource:
        try:
            return r.ready.result(timeout=self.config.connect_timeout + 10)
        except concurrent.futures.TimeoutError:
            raise _connection_failed(self.config.label, "timed out") from None

    def tools(self) -> list[ToolSpec]:
        """Connect if needed (blocking) and return the server's tools as ToolSpecs."""
        source = self._wait_ready(self._start())
        return source._specs(self.acall)

    def raw_tools(self) -> list[dict]:
        return list(self._wait_ready(self._start()).raw_tools)

    async def _ready(self) -> tuple[_Running, McpToolSource]:
        r = self._start()
        try:
            source = await asyncio.shield(asyncio.wrap_future(r.ready))
        except RunError:
            self._discard(r)  # let the next call try again
            raise
        if source.lost:  # the server went away since the last call: start it again
            self._discard(r)
            r = self._start()
            try:
                source = await asyncio.shield(asyncio.wrap_future(r.ready))
            except RunError:
                self._discard(r)
                raise
        return r, source

    def _discard(self, r: _Running) -> None:
        """Forget a failed or lost connection without waiting for it to wind down."""
        with self._lock:
            if self._running is not r:
                return
            self._running = None
        if r.loop is not None and r.stop is not None:
            try:
                r.loop.call_soon_threadsafe(r.stop.set)
            except RuntimeError:
                pass

    async def acall(self, name: str, arguments: Mapping[str, Any] | None = None) -> Any:
        """Call a tool from any event loop; connects on first use, reconnects after a lost connection."""
        r, source = await self._ready()
        assert r.loop is not None
        try:
            future = asyncio.run_coroutine_threadsafe(source.call(name, dict(arguments or {})), r.loop)
        except RuntimeError as exc:  # the connection's loop has ended (closed meanwhile)
            raise RunError(MCP_ERROR, f"{self.config.label}: the connection was closed") from exc
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # our caller was cancelled (timeout, plan cancelled)
            raise RunError(MCP_ERROR, f"{self.config.label}: {name}: the connection closed during the call") from None

    def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> Any:
        """Blocking call, for scripts without an event loop."""
        r = self._start()
        source = self._wait_ready(r)
        if source.lost:
            self._discard(r)
            r = self._start()
            source = self._wait_ready(r)
        assert r.loop is not None
        return asyncio.run_coroutine_threadsafe(source.call(name, dict(arguments or {})), r.loop).result()

    def close(self, timeout: float = 10.0) -> None:
        """Disconnect (stop the server process / end the HTTP session). Safe to call twice."""
        thread = self._stop(timeout)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _stop(self, timeout: float) -> threading.Thread | None:
        """Ask the owner task to close the session; return the thread to join."""
        with self._lock:
            r, self._running = self._running, None
        if r is None or r.thread is None:
            return None
        try:
            r.ready.result(timeout=timeout)
        except BaseException:  # noqa: BLE001 - failed or still connecting: nothing more to stop
            pass
        loop, stop = r.loop, r.stop
        if loop is not None and stop is not None:
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # loop already closed
                pass
        return r.thread

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)


def close_all() -> None:
    """Close every :class:`McpConnection` still open (also run at interpreter exit)."""
    threads = []
    for conn in list(_LIVE):  # stop them all first, then wait: they shut down in parallel
        try:
            threads.append(conn._stop(timeout=5.0))
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass
    for thread in threads:
        if thread is not None and thread is not threading.current_thread():
            thread.join(5.0)


atexit.register(close_all)


_SHARED: dict[str, McpConnection] = {}
_SHARED_LOCK = threading.Lock()


def _config_key(cfg: McpServerConfig) -> str:
    data = {f: getattr(cfg, f) for f in cfg.__dataclass_fields__}
    return json.dumps(data, sort_keys=True, default=lambda v: v.name if isinstance(v, Risk) else dict(v))


def shared_connection(config: McpServerConfig | str) -> McpConnection:
    """The process-wide :class:`McpConnection` for ``config`` (one per distinct configuration)."""
    if isinstance(config, str):
        config = McpConnection(config).config  # parses and checks it names exactly one server
    key = _config_key(config)
    with _SHARED_LOCK:
        conn = _SHARED.get(key)
        if conn is None:
            conn = _SHARED[key] = McpConnection(config)
        return conn


def load_mcp_tools(source: str | McpServerConfig) -> tuple[list[ToolSpec], list[str]]:
    """Tools of every server ``source`` names, over :class:`McpConnection` (kept open for calls).

    Returns ``(tools, problems)``; a server that cannot be listed is a problem, the others load.
    The same server configuration loaded twice shares one connection (:func:`shared_connection`).
    Raises ``ValueError`` for a malformed source and ``ImportError`` without the SDK.
    """
    configs = [source] if isinstance(source, McpServerConfig) else parse_mcp_source(source)
    _require_sdk()
    tools: list[ToolSpec] = []
    problems: list[str] = []
    for cfg in configs:
        conn = shared_connection(cfg)
        try:
            tools.extend(conn.tools())
        except RunError as exc:
            conn.close()
            problems.append(exc.cause)
        except Exception as exc:  # noqa: BLE001
            conn.close()
            problems.append(f"MCP server {cfg.label}: {type(exc).__name__}: {_exc_text(exc)}")
    return tools, problems
