"""What runs on a Dask worker: the entry function every routed call goes through, and the
preflight check.  Workers import this module by reference, so they need sophon-dsl (the
same version; the preflight checks it) and whatever installed modules the tools import.

A call's function arrives as a pickle (``ship.py``), cached here by its hash so a worker
unpickles each tool once.  Only JSON-ready data goes back: the result converted here
(pydantic models, dataclasses...), or a named error, or the branch a ``Branch`` picked.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Callable

__all__ = ["Payload", "preflight", "run_call", "version"]

_FUNCS: dict[str, Callable[..., Any]] = {}


class Payload:
    """One call's arguments as Dask sees them: an opaque object, so Dask never looks inside
    the arguments for task keys."""

    __slots__ = ("digest", "tool", "args", "is_async", "run_id", "call_id", "attempt", "traceparent")

    def __init__(self, digest: str, tool: str, args: dict, is_async: bool, run_id: str = "", call_id: str = "",
                 attempt: int = 1, traceparent: str | None = None) -> None:
        self.digest, self.tool, self.args, self.is_async = digest, tool, args, is_async
        self.run_id, self.call_id, self.attempt = run_id, call_id, attempt
        # the W3C traceparent of the call attempt's span in the coordinator (None: not traced)
        self.traceparent = traceparent

    def __reduce__(self):
        return Payload, (self.digest, self.tool, self.args, self.is_async, self.run_id, self.call_id, self.attempt,
                         self.traceparent)


class _Record:
    """What ``sophon_dsl.current_call()`` reads of a call record, on the worker."""

    __slots__ = ("id", "attempts")

    def __init__(self, call_id: str, attempt: int) -> None:
        self.id, self.attempts = call_id, attempt


def function(digest: str, blob: bytes) -> Callable[..., Any]:
    """The tool function of ``blob``, unpickled once per worker process."""
    func = _FUNCS.get(digest)
    if func is None:
        import cloudpickle

        shipped = cloudpickle.loads(blob)
        func = _FUNCS[digest] = _rebuild(shipped)
    return func


def _rebuild(shipped: tuple) -> Callable[..., Any]:
    how, name, func, hints = shipped
    if how == "convert":  # a @tool function: its arguments are converted here, as locally
        from ..tools import ArgumentConverter

        if hints is not None:
            func.__annotations__ = hints  # resolved by the coordinator (see ship.py)

        return ArgumentConverter(func, name).wrap()
    return func


async def _awaited(aw: Any) -> Any:
    return await aw


def run_call(blob: bytes, payload: Payload) -> tuple:
    """Run one call: ``("ok", json)``, ``("branch", target, json)`` or ``("error", name, cause)``.
    Nothing the tool raises escapes (a worker must not count a tool's failure as its own)."""
    from ..runtime.errors import TOOL_FAILED, TOOL_OUTPUT_INVALID, error_from_exception
    from ..runtime.protocols import Branch
    from ..runtime.state import to_json_value

    from ..durable.current import CURRENT

    # sophon_dsl.current_call() (the idempotency key) works in the tool's code here too
    token = CURRENT.set((payload.run_id, _Record(payload.call_id, payload.attempt)))
    # the call's span in the coordinator is this call's span here too: its traceparent for
    # current_call() and the http.* tools, and the parent of the spans the tool starts
    adopted = None
    if payload.traceparent is not None:
        from ..telemetry.context import adopt

        adopted = adopt(payload.run_id, payload.call_id, payload.traceparent)
    try:
        func = function(payload.digest, blob)
        out = func(**payload.args)
        if inspect.isawaitable(out):
            # its own loop in this worker thread: the worker's loop (heartbeats) never waits for it
            out = asyncio.run(_awaited(out))
    except Exception as exc:  # noqa: BLE001 - every failure becomes a named error
        err = error_from_exception(exc)
        return ("error", err.error, err.cause)
    except BaseException as exc:  # noqa: BLE001 - SystemExit, a tool's own BaseException: the call failed
        if payload.is_async and isinstance(exc, SystemExit):
            return ("error", TOOL_FAILED, f"{payload.tool} raised SystemExit({exc.code!r})")
        return ("error", TOOL_FAILED, f"tool raised {type(exc).__name__}({exc})")
    finally:
        if adopted is not None:
            from ..telemetry.context import release

            release(adopted)
        CURRENT.reset(token)
    target = None
    if isinstance(out, Branch):
        target, out = out.target, out.value
        if not isinstance(target, (int, str)):
            target = str(target)
    if type(out) is not float:  # a NaN is refused by the coordinator, with its own message
        try:
            out = to_json_value(out)
        except (TypeError, ValueError) as exc:
            return ("error", TOOL_OUTPUT_INVALID, f"result is not JSON: {exc}")
    return ("ok", out) if target is None else ("branch", target, out)


def version() -> str:
    """This installation's sophon-dsl version (read from its metadata: importing the package
    ``sophon_dsl`` from here would be an import loop)."""
    from importlib.metadata import PackageNotFoundError, version as dist_version

    try:
        return dist_version("sophon-dsl")
    except PackageNotFoundError:
        return "unknown"


def preflight(blobs: dict[str, bytes], dask_worker: Any = None) -> dict:
    """On each worker before a run: sophon-dsl's version, the worker's resources, and the
    tools that do not unpickle here (``{digest: why}``)."""
    from ..runtime import errors, protocols, state  # noqa: F401 - what run_call needs, imported now

    failed = {}
    for digest, blob in blobs.items():
        try:
            function(digest, blob)
        except BaseException as exc:  # noqa: BLE001 - reported, the plan is refused
            failed[digest] = f"{type(exc).__name__}: {exc}"
    resources = {}
    if dask_worker is not None:
        resources = dict(getattr(dask_worker.state, "total_resources", None) or {})
    return {"version": version(), "resources": resources, "failed": failed}
