"""How a call's function runs: the :class:`Invoker` seam.

The scheduler decides *when* a call runs and what happens to its result; an
invoker decides *how* the call runs.  :class:`LocalInvoker` is the default: the
inline ``_output`` of a latent call is its result, an ``async def`` tool is
awaited, a plain function runs in a pool of daemon threads (a tool still blocked when
its run is cancelled or times out never keeps the process alive), and a latent call without an
inline output goes to the run's :class:`~sophon_dsl.runtime.protocols.LatentExecutor`.
A call naming an ``_activity`` runs the function registered under that name instead of
its tool's (the tool gives the interface: schemas, risk; the activity the code, Acts
003), and a function with a :class:`~sophon_dsl.tools.CallContext` parameter receives
the call's context there, its ``_scopes`` data included (Acts 015).
Other invokers wrap or replace it: delegated sub-agents (``_delegate``), mocks for
dry runs, a remote cluster.

An invoker may also offer :meth:`Invoker.direct`: a coroutine function the
scheduler may await itself for plain calls, skipping :meth:`Invoker.invoke`'s
layers (the common case of a local ``async def`` tool).  Returning None always
routes the call through :meth:`Invoker.invoke`.

Every run opens its invoker before the first call (``open``: connect, check what will run
where; an error there fails the run before anything started) and closes it at the end
(``close``, then ``aclose``).  A :class:`ToolExecutor` (``RunOptions.tool_executor``, e.g.
a Dask cluster) makes one invoker per run around the local one, from a :class:`RunInfo`:
what it may know of the run, not the scheduler.  Executor specs (``--executor``) name one
through the table in :mod:`.executors`.
"""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from ..diagnostics import Diagnostic, DiagnosticError, Severity
from ..durable.current import current_call, in_thread_for
from ..model import Call, Plan
from ..tools import CallContext, ToolSpec
from .errors import TOOL_FAILED, RunError
from .protocols import LatentExecutor, LatentRequest

__all__ = ["DEFAULT_MAX_THREADS", "DaemonThreadPool", "ExecutorConfigError", "Invocation", "Invoker", "LocalInvoker",
           "RunInfo", "ToolExecutor", "call_context", "call_in_thread", "refuse", "scoped_data"]

# Sync tools are mostly I/O-bound (HTTP clients, databases, files): a thread waiting on I/O costs
# no CPU, so the pool is sized for waiting, not for cores.  asyncio's and ThreadPoolExecutor's
# min(32, CPUs + 4) gave 6 threads on 2 cores: 20 sync tools of 0.6 s took four waves (2.4 s).
# CPU-bound tools gain nothing from more threads (the GIL): they belong on the Dask executor
# or in processes (docs/runtime.md).
DEFAULT_MAX_THREADS = 64


@dataclass(slots=True)
class Invocation:
    """One attempt of one call, as an invoker sees it.

    ``state`` returns the run's resolved data (``{kind: value}``) when an invoker needs
    more than the arguments (a delegated agent, a scoped call).  ``tools`` is the run's
    registry, where a call's ``_activity`` is found (None: no activity can be resolved).
    """

    call: Call
    call_id: str
    index: int
    spec: ToolSpec | None
    args: dict
    inline: Any
    attempt: int
    plan: Plan
    state: Callable[[], dict]
    tools: Mapping[str, ToolSpec] | None = None

    def latent_request(self) -> LatentRequest:
        return LatentRequest(self.call, self.call_id, self.spec, self.args, self.plan, self.attempt)


@runtime_checkable
class Invoker(Protocol):
    """Runs calls (see the module docstring)."""

    def direct(self, call: Call, spec: ToolSpec | None) -> Callable[..., Any] | None: ...

    async def invoke(self, invocation: Invocation) -> Any: ...

    async def open(self) -> None:
        """Before the run's first call (connect, check the tools where they will run)."""

    def close(self) -> None: ...

    async def aclose(self) -> None:
        """After :meth:`close`, at the end of the run (release what :meth:`open` took)."""


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What a :class:`ToolExecutor`'s invoker may know of its run: ``run_id()`` (a durable
    run's id, set once the run is attached; None before), ``tools()`` (the run's registry:
    a streamed reply may replace it), ``calls`` (the run's calls by index, grown in place)."""

    run_id: Callable[[], "str | None"]
    tools: Callable[[], Mapping[str, ToolSpec]]
    calls: Sequence[Call]


@runtime_checkable
class ToolExecutor(Protocol):
    """Where a run's tool calls may go instead of this process (``RunOptions.tool_executor``).

    ``invoker_for(run, local)`` makes the run's invoker (once per run): it routes what it
    takes and hands the rest to ``local``; ``close()`` releases what the executor holds
    across runs (a cluster it started)."""

    def invoker_for(self, run: RunInfo, local: Invoker) -> Invoker: ...

    def close(self) -> None: ...


class ExecutorConfigError(DiagnosticError):
    """A bad executor spec (E701) or executor config (E702): nothing was started."""


def refuse(code: str, message: str, file: str | None = None) -> ExecutorConfigError:
    """The error for a bad executor spec (E701, ``file="--executor"``) or config file (E702)."""
    return ExecutorConfigError([Diagnostic(code, message, file=file, severity=Severity.ERROR)])


def scoped_data(scopes: Any, data: Mapping[str, Any], instance: str | None = None) -> dict[str, Any]:
    """The run's data a call's ``_scopes`` allow, ``{kind: value}``: for a call with
    ``_instance`` X, X's own ``kind@X`` when the run has it, else the shared kind (Acts 015;
    delegated sub-requests use the same rule); kinds without data are left out."""
    out: dict[str, Any] = {}
    for scope in scopes or ():
        name = str(scope)
        kind = f"{name}@{instance}" if instance and f"{name}@{instance}" in data else name
        if kind in data:
            out[name] = data[kind]
    return out


def call_context(inv: "Invocation") -> CallContext:
    """The :class:`~sophon_dsl.tools.CallContext` of one invocation (its scoped data is a copy
    taken now)."""
    call = inv.call
    scoped = scoped_data(call.scopes, inv.state(), call.instance) if call.scopes else {}
    return CallContext(inv.call_id, call, inv.spec, scoped, inv.attempt)


def call_in_thread(func: Callable[..., Any], args: dict) -> Any:
    """Run a sync tool in a worker thread.  ``SystemExit``, ``KeyboardInterrupt`` or any other
    ``BaseException`` raised there comes from the tool, never from the user (signals reach the
    main thread), so it becomes an ordinary failure instead of tearing the run down."""
    try:
        return func(**args)
    except Exception:
        raise
    except BaseException as exc:
        raise RunError(TOOL_FAILED, f"tool raised {type(exc).__name__}({exc})") from exc


class DaemonThreadPool(Executor):
    """A thread pool whose workers are daemon threads.

    :class:`concurrent.futures.ThreadPoolExecutor` joins its workers when the interpreter
    exits, so a sync tool still blocked after its run ended (cancelled, timed out: a thread
    cannot be interrupted) would keep the process alive until the tool returned.  Here such
    a thread is abandoned at exit; its result was discarded anyway.  Idle workers are reused;
    at most ``max_workers`` run at once (the default of ThreadPoolExecutor).
    """

    def __init__(self, max_workers: int | None = None, thread_name_prefix: str = "sophon-tool") -> None:
        self._max = max_workers or DEFAULT_MAX_THREADS
        self._prefix = thread_name_prefix
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads = 0
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot run a call after the pool shut down")
            future: Future = Future()
            self._work.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and self._threads < self._max:
                self._threads += 1
                threading.Thread(target=self._worker, name=f"{self._prefix}_{self._threads}",
                                 daemon=True).start()
        return future

    def _worker(self) -> None:
        while True:
            item = self._work.get()
            if item is None:  # shut down
                return
            future, fn, args, kwargs = item
            del item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # noqa: BLE001 - handed to whoever awaits the future
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args, kwargs
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Workers end once the calls already submitted are done (``wait`` is not honoured:
        waiting for a blocked tool is what this pool exists to avoid)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if cancel_futures:
                self._drain()
            for _ in range(self._threads):
                self._work.put(None)

    def _drain(self) -> None:
        while True:
            try:
                item = self._work.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                item[0].cancel()


class LocalInvoker:
    """Runs calls in this process (see the module docstring).

    ``executor`` runs latent calls without an inline output; ``max_workers`` sizes the
    thread pool for sync tools (the run option ``max_threads``; default :data:`DEFAULT_MAX_THREADS`;
    created on first use, shut down by :meth:`close`).
    """

    def __init__(self, executor: LatentExecutor | None = None, max_workers: int | None = None) -> None:
        self.executor = executor
        self.max_workers = max_workers
        self._pool: DaemonThreadPool | None = None

    def direct(self, call: Call, spec: ToolSpec | None) -> Callable[..., Any] | None:
        if call.inline_output is not None or spec is None or spec.func is None or call.activity is not None \
                or spec.context_param is not None:
            return None  # an activity is looked up, a context is built: invoke() does both
        func = spec.func
        return func if spec.is_async or inspect.iscoroutinefunction(func) else None

    async def invoke(self, inv: Invocation) -> Any:
        call, spec = inv.call, inv.spec
        if call.inline_output is not None:
            return inv.inline
        code = spec if call.activity is None else self.activity(inv)
        if code is not None and code.func is not None:
            func, args = code.func, inv.args
            if code.context_param is not None:
                args = {**args, code.context_param: call_context(inv)}
            if code.is_async or inspect.iscoroutinefunction(func):
                out = func(**args)
            else:
                if self._pool is None:
                    self._pool = DaemonThreadPool(self.max_workers)
                # sophon_dsl.current_call() in the thread: the call it runs for goes along
                out = asyncio.get_running_loop().run_in_executor(
                    self._pool, partial(in_thread_for, current_call(), call_in_thread, func, args))
            if inspect.isawaitable(out):
                try:
                    out = await out
                except SystemExit as exc:  # a tool must not end the program: it failed
                    raise RunError(TOOL_FAILED, f"{call.tool} raised SystemExit({exc.code!r})") from exc
            return out
        if code is not None and code.explicit:
            what = call.tool if code is spec else f"activity {code.name!r} of call {inv.call_id}"
            raise RunError(TOOL_FAILED, f"{what} is declared as an activity but no implementation "
                                        "is registered: pass its Python function in tools")
        if self.executor is None:
            raise RunError(TOOL_FAILED, f"latent call {inv.call_id} ({call.tool}) needs an LLM executor")
        return await self.executor.execute(inv.latent_request())

    @staticmethod
    def activity(inv: Invocation) -> ToolSpec:
        """The tool registered under the call's ``_activity`` (checked before the run: E209).
        Without a function it runs as a tool without one would: a dry run strips every
        function, so its mocks answer the call."""
        name = inv.call.activity
        code = inv.tools.get(name) if inv.tools is not None and name is not None else None
        if code is None:
            raise RunError(TOOL_FAILED, f"call {inv.call_id} names activity {name!r}, but nothing is "
                                        "registered under that name: pass its Python function in tools")
        return code

    async def open(self) -> None:
        pass  # nothing to connect: the thread pool starts with the first sync tool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    async def aclose(self) -> None:
        pass  # close() released the thread pool
