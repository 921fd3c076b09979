"""``DaskRun``: one run's :class:`~sophon_dsl.runtime.invoker.Invoker` on a Dask cluster.

Calls routed to the cluster go there; the others (inline outputs, latent, MCP and delegated
calls, ``placement="local"``, tools the routing keeps local, tools needing a
:class:`~sophon_dsl.tools.CallContext`) run in the coordinator through the local invoker.

* Keys are ``{run_id}/{call_id}/{attempt}``: Dask runs a key once, so each attempt has its own.
* Calls that become ready in the same pass of the event loop are submitted together, one
  ``client.map`` per resource set.
* Cancellation (a timeout, ``handle.cancel()``) cancels the remote future; the key leaves
  the scheduler.  A lost worker or client is ``Executor.Lost``, which retry policies retry.
* Before anything runs, :meth:`DaskRun.open` checks every routed tool on the workers
  (``preflight.py``) and refuses the plan with a diagnostic.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Callable

from ..maps import every_call
from ..model import Call
from ..runtime.errors import TOOL_FAILED, PlanInvalid, RunError
from ..runtime.invoker import Invocation, Invoker, RunInfo
from ..runtime.protocols import Branch
from ..telemetry.context import traceparent
from ..tools import ToolSpec
from .preflight import Route, check_routes, refused_error, route_for
from .worker import Payload, run_call

__all__ = ["EXECUTOR_LOST", "DaskRun"]

EXECUTOR_LOST = "Executor.Lost"
_CLOSE_WITHIN = 5.0  # seconds for cancelling and closing at the end of a run
_LOST_TYPES = ("KilledWorker", "FutureCancelledError", "CancelledError", "CommClosedError", "FutureLostError")


class DaskRun:
    """See the module docstring.  Made by :meth:`DaskExecutor.invoker_for`."""

    def __init__(self, executor: Any, run: RunInfo, local: Invoker) -> None:
        self.executor = executor  # its DaskExecutor (not imported: executor.py imports this module)
        self.run = run
        self.local = local
        # the durable run's id when the run has one, else one per run
        self.run_id = run.run_id() or f"run-{uuid.uuid4().hex[:12]}"
        self.client: Any = None
        self._owned = False
        self._routes: dict[str, Route | None] = {}
        self._pending: list[tuple[str, Route, Payload, asyncio.Future]] = []
        self._futures: dict[str, Any] = {}
        self._cancels: set[asyncio.Task] = set()
        self._flush_at: Any = None
        self._connecting: asyncio.Future | None = None
        self.submitted: list[str] = []  # every key sent (tests, benchmarks)

    # -- routing ---------------------------------------------------------------------

    def _route(self, code: ToolSpec | None) -> Route | None:
        if code is None:
            return None
        try:
            return self._routes[code.name]
        except KeyError:
            route = self._routes[code.name] = route_for(code, self.executor.routing)
            return route

    def _code(self, call: Call, spec: ToolSpec | None) -> ToolSpec | None:
        if call.inline_output is not None or call.delegate is not None:
            return None
        if call.activity is None:
            return spec
        registry = self.run.tools()
        return registry.get(call.activity) if registry is not None else None

    def direct(self, call: Call, spec: ToolSpec | None) -> Callable[..., Any] | None:
        if call.activity is None and self._route(self._code(call, spec)) is None:
            return self.local.direct(call, spec)
        return None

    # -- lifetime --------------------------------------------------------------------

    async def open(self) -> None:
        """Connect and check every routed tool of the plan on the workers (PlanInvalid)."""
        self.run_id = self.run.run_id() or self.run_id  # (a durable run's is set after the invoker was made)
        routes = {}
        registry = self.run.tools()
        # map bodies too (nested ones included): their items come through invoke() as calls
        # of the same tools, so a body tool no worker can run is refused here, up front, as
        # it is at top level, rather than failing each item with Executor.Refused mid-run
        for call in every_call(self.run.calls):
            if call.map is not None:
                continue  # a map call runs nothing itself; its body's calls follow it
            spec = registry.get(call.tool) if registry is not None else None
            route = self._route(self._code(call, spec))
            if route is not None:
                routes[route.name] = route
        if not routes:
            return  # nothing goes to the cluster (yet: a streamed call connects when it needs to)
        await self._connect()
        try:
            await check_routes(self.client, list(routes.values()), self.run_id, self.executor.preflight_timeout)
        except BaseException:
            await self.aclose()
            raise

    async def _connect(self) -> None:
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self.executor.connect())
        client, owned = await asyncio.shield(self._connecting)
        if self.client is None:
            self.client, self._owned = client, owned

    def close(self) -> None:
        self.local.close()

    async def aclose(self) -> None:
        """Cancel what is still running, release the tools' data, close an owned client."""
        conn = self._connecting
        if self.client is None and conn is not None:  # a connection under way when the run ended
            if not conn.done():
                conn.cancel()
            await asyncio.gather(conn, return_exceptions=True)
            if not conn.cancelled() and conn.exception() is None:
                self.client, self._owned = conn.result()
        futures = list(self._futures.values())
        self._futures.clear()
        for route in self._routes.values():
            if route is not None and route.blob_future is not None:
                futures.append(route.blob_future)
                route.blob_future = None
        client = self.client
        if client is None:
            return
        # bounded: a client that lost its scheduler may wait for it to come back
        alive = client.status == "running"
        try:
            async with asyncio.timeout(_CLOSE_WITHIN):
                if futures and alive:
                    await client.cancel(futures)
                if self._cancels:
                    await asyncio.gather(*self._cancels, return_exceptions=True)
        except Exception:  # noqa: BLE001 - a client that is gone has nothing left to cancel
            pass
        if self._owned:
            self.client = None
            try:
                async with asyncio.timeout(_CLOSE_WITHIN):
                    await client.close(timeout=_CLOSE_WITHIN if alive else 0.1)
            except Exception:  # noqa: BLE001 - nothing more to do for a lost client
                pass

    # -- calls -----------------------------------------------------------------------

    async def invoke(self, inv: Invocation) -> Any:
        call = inv.call
        route = self._route(self._code(call, inv.spec))
        if route is None:
            return await self.local.invoke(inv)
        if not route.checked:  # a streamed call brought a tool the preflight did not see
            try:
                await self._connect()
            except PlanInvalid as exc:
                raise RunError(EXECUTOR_LOST, "; ".join(d.message for d in exc.diagnostics)) from None
            await check_routes(self.client, [route], self.run_id, self.executor.preflight_timeout, raise_=False)
        if route.refused is not None:
            raise refused_error(route)
        key = f"{self.run_id}/{inv.call_id}/{inv.attempt}"
        slot = asyncio.get_running_loop().create_future()
        # the attempt's span travels as a traceparent (None when the run is not traced)
        span_of = traceparent(self.run.run_id() or "", inv.call_id)
        payload = Payload(route.digest, call.tool, inv.args, route.is_async, self.run_id, inv.call_id, inv.attempt,
                          span_of)
        self._pending.append((key, route, payload, slot))
        if self._flush_at is None:
            self._flush_at = asyncio.get_running_loop().call_soon(self._flush)
        future = None
        try:
            future = await slot
            out = await future
        except asyncio.CancelledError:
            self._cancel(key, slot)
            raise
        except RunError:
            raise
        except Exception as exc:  # noqa: BLE001 - the cluster failed us, not the tool
            raise _infrastructure_error(call.tool, exc) from None
        finally:
            if future is not None and self._futures.pop(key, None) is not None:
                future.release()
        return _unpack(out)

    def _flush(self) -> None:
        """Submit every call queued in this pass of the loop: one ``client.map`` per resource set."""
        self._flush_at = None
        batch, self._pending = self._pending, []
        groups: dict[tuple, list] = {}
        for item in batch:
            if not item[3].done():  # (cancelled before it was sent)
                groups.setdefault(item[1].resource_key, []).append(item)
        for resource_key, items in groups.items():
            keys = [k for k, _, _, _ in items]
            try:
                futures = self.client.map(run_call, [r.blob_future for _, r, _, _ in items],
                                          [p for _, _, p, _ in items], key=keys, pure=False,
                                          resources=dict(resource_key) or None)
            except Exception as exc:  # noqa: BLE001 - a closed client: every call of the batch is lost
                err = _infrastructure_error("the batch", exc)
                for *_, slot in items:
                    slot.set_exception(err)
                continue
            self.submitted.extend(keys)
            for (key, _, _, slot), fut in zip(items, futures):
                self._futures[key] = fut
                slot.set_result(fut)

    def _cancel(self, key: str, slot: asyncio.Future) -> None:
        if not slot.done():
            slot.cancel()  # not sent yet: the flush skips it
            return
        future = self._futures.pop(key, None)
        if future is not None and self.client is not None:
            task = asyncio.ensure_future(self.client.cancel([future], reason="cancelled by sophon-dsl"))
            self._cancels.add(task)
            task.add_done_callback(self._cancels.discard)


def _unpack(out: Any) -> Any:
    tag = out[0]
    if tag == "ok":
        return out[1]
    if tag == "branch":
        return Branch(out[1], out[2])
    raise RunError(out[1], out[2])


def _infrastructure_error(tool: str, exc: BaseException) -> RunError:
    name = type(exc).__name__
    if name in _LOST_TYPES or isinstance(exc, (OSError, EOFError)):
        return RunError(EXECUTOR_LOST, f"{tool}: the Dask worker or client was lost ({name}: {exc})")
    return RunError(TOOL_FAILED, f"{tool} failed on the Dask cluster: {name}: {exc}")
