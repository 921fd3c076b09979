"""One MCP session in the caller's event loop: :class:`McpToolSource`, an async context manager.

::

    async with McpToolSource.stdio("python", ["server.py"]) as src:
        result = await sophon_dsl.runtime.arun(plan, tools=src.tools)

It connects in ``__aenter__`` and disconnects in ``__aexit__``, in the same
task, as the SDK's anyio-based transports require (stdio or streamable HTTP);
its tools only work inside that ``async with`` block and that event loop.  The
thread-owned :class:`~sophon_dsl.mcp.connection.McpConnection` wraps one of
these for synchronous callers.  The official ``mcp`` SDK (1.x and 2.x) is
imported only when a session connects.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from contextlib import AsyncExitStack
from dataclasses import replace
from typing import Any, Iterable, Mapping

from ..errors import MissingExtra
from ..runtime.errors import TOOL_TIMEOUT, RunError
from ..tools import ToolSpec
from .config import McpServerConfig, one_server
from .conversion import CallFn, convert_result, tool_to_spec, wire
from .errors import MCP_CONNECTION_FAILED, MCP_ERROR, connection_failed, exc_text

__all__ = ["McpToolSource", "require_sdk"]

_INSTALL_HINT = "MCP tool sources need the official SDK: pip install 'sophon-dsl[mcp]' (or pip install mcp)"


def require_sdk() -> None:
    """Raise ``ImportError`` naming the extra to install when the ``mcp`` SDK is missing."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise MissingExtra(_INSTALL_HINT) from exc


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



class McpToolSource:
    """One connected MCP server and its tools, as an async context manager.

    ``server`` is a :class:`McpServerConfig` or a source string
    (``"mcp:stdio:python server.py"``, ``"mcp:http:http://127.0.0.1:8000/mcp"``).
    After ``__aenter__``, :attr:`tools` holds the ToolSpecs, whose funcs call
    the server through this session (same event loop only).
    """

    def __init__(self, server: McpServerConfig | str, **overrides: Any):
        server = one_server(server, "McpToolSource")
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
        require_sdk()
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
                info = wire(getattr(init, "serverInfo", None) or getattr(init, "server_info", None))
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
            raise connection_failed(self.config.label, failure, tail) from exc
        self._stack = stack
        self._session = session
        self.tools = self.specs(self.call)
        return self.tools

    async def _list_tools(self, session: Any) -> list[dict]:
        tools: list[dict] = []
        result = wire(await session.list_tools())
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
            result = wire(page)
        include = self.config.include
        if include is not None:
            tools = [t for t in tools if t.get("name") in include]
        return tools

    def specs(self, call: CallFn) -> list[ToolSpec]:
        """The listed tools as ToolSpecs whose funcs await ``call(name, arguments)``."""
        return [tool_to_spec(t, call, prefix=self.config.prefix, risk=self.config.risk, origin=self.origin,
                             min_risk=self.config.min_risk)
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
                with anyio.fail_after(self.config.timeout) as deadline:
                    result = await session.call_tool(name, args)
            else:
                result = await session.call_tool(name, args)
        except TimeoutError:
            # the config's timeout is a deadline like the run's own: Tool.Timeout (a plain
            # TimeoutError would be an ordinary tool failure, runtime/errors.py)
            if self.config.timeout is not None and deadline.cancel_called:
                raise RunError(TOOL_TIMEOUT, f"{self.config.label}: {name} did not finish within "
                                             f"{self.config.timeout:g} s") from None
            raise
        except (RunError, asyncio.CancelledError):
            raise
        except Exception as exc:  # protocol errors (unknown tool, invalid params, connection closed)
            if _connection_lost(exc):
                self.lost = True
            raise RunError(MCP_ERROR, f"{self.config.label}: {name}: {exc_text(exc)}") from exc
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
