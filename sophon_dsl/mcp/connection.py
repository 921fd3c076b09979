"""A session owned by a background thread: :class:`McpConnection`, for synchronous entry points.

The CLI, ``load_tool_source("mcp:stdio:...")`` and ``sophon_dsl.runtime.run``
make a new event loop per run, but an MCP session must be entered and left in
one task of one loop.  So a dedicated thread runs its own loop holding an
:class:`~sophon_dsl.mcp.session.McpToolSource`; it outlives any one
``asyncio.run`` and its tools can be awaited from any event loop in any thread.
It connects lazily (on the first listing or call), is reused by every later
call, reconnects after a lost connection, and is closed by
:meth:`McpConnection.close`, :func:`close_all` or at interpreter exit.
:func:`shared_connection` keeps one per distinct server configuration.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..runtime.errors import RunError
from ..tools import ToolSpec
from .config import McpServerConfig, config_key, one_server
from .errors import MCP_ERROR, connection_failed
from .session import McpToolSource

__all__ = ["McpConnection", "close_all", "shared_connection"]


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
        self.config = one_server(config, "McpConnection")
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
        except BaseException as exc:  # noqa: BLE001 - whatever ends the attempt goes to its waiter
            if not r.ready.done():
                r.ready.set_exception(exc if isinstance(exc, Exception)
                                      else connection_failed(self.config.label, exc))
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
            raise connection_failed(self.config.label, "timed out") from None

    def tools(self) -> list[ToolSpec]:
        """Connect if needed (blocking) and return the server's tools as ToolSpecs."""
        source = self._wait_ready(self._start())
        return source.specs(self.acall)

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


def shared_connection(config: McpServerConfig | str) -> McpConnection:
    """The process-wide :class:`McpConnection` for ``config`` (one per distinct configuration)."""
    config = one_server(config, "McpConnection")
    key = config_key(config)
    with _SHARED_LOCK:
        conn = _SHARED.get(key)
        if conn is None:
            conn = _SHARED[key] = McpConnection(config)
        return conn
