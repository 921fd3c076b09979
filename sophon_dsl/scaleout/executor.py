"""``DaskExecutor``: where a run's tool calls go when they leave this process.

It owns the connection to a cluster (an address, a scheduler file, a client of yours, or an
embedded LocalCluster) and the routing; for each run the scheduler asks it for an
:class:`~.invoker.DaskRun`, the run's :class:`~sophon_dsl.runtime.invoker.Invoker`.
Dask is imported only here and in the run invoker, never by ``import sophon_dsl``.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from ..diagnostics import Diagnostic, Severity
from ..runtime.errors import PlanInvalid
from ..runtime.invoker import Invoker, RunInfo
from .config import ExecutorConfigError, ExecutorSpec, Routing, parse_executor_spec, read_scheduler_file

__all__ = ["DaskExecutor"]


def _cannot_reach(message: str) -> PlanInvalid:
    return PlanInvalid([Diagnostic("E703", message, severity=Severity.ERROR)])


class DaskExecutor:
    """Runs routed tool calls on a Dask distributed cluster::

        run(plan, tools, tool_executor=DaskExecutor("tcp://10.0.0.5:8786"))
        run(plan, tools, tool_executor=DaskExecutor(client=client))
        run(plan, tools, tool_executor=DaskExecutor.from_spec("dask:local"))

    ``routing`` (a :class:`~.config.Routing`, or the data of an executor config) narrows
    which tools go to the cluster.  ``preflight_timeout`` bounds the check on the workers
    made before a run starts (30 s: a worker process imports the tools file, and whatever it
    imports, the first time it is asked; a cluster that does not answer at all is E703).
    An embedded cluster (``dask:local``) starts on first use and stops at :meth:`close` (or
    when the process exits).
    """

    def __init__(self, address: str | None = None, *, client: Any = None, routing: Any = None,
                 scheduler_file: str | None = None, local: bool = False, processes: bool = True,
                 n_workers: int | None = None, connect_timeout: float = 10.0,
                 preflight_timeout: float = 30.0) -> None:
        if sum(x is not None and x is not False for x in (address, client, scheduler_file, local)) != 1:
            raise ValueError("DaskExecutor needs exactly one of: an address, client=, scheduler_file= or local=True")
        if routing is not None and not isinstance(routing, Routing):
            from .config import routing_from_data

            routing = routing_from_data(routing)
        self.address = address
        self.client = client
        self.scheduler_file = scheduler_file
        self.local = local
        self.processes = processes
        self.n_workers = n_workers
        self.routing: Routing = routing or Routing()
        self.connect_timeout = connect_timeout
        self.preflight_timeout = preflight_timeout
        self._cluster: Any = None
        self._lock = threading.Lock()
        self.last_keys: list[str] = []

    @classmethod
    def from_spec(cls, spec: str | ExecutorSpec, routing: Routing | None = None, **kwargs: Any) -> "DaskExecutor":
        """An executor for ``dask:local``, ``dask:local-threads``, ``dask:tcp://HOST:PORT`` or
        ``dask:scheduler-file:PATH`` (:class:`~.config.ExecutorConfigError` E701 otherwise)."""
        parsed = parse_executor_spec(spec) if isinstance(spec, str) else spec
        if parsed.kind == "cluster":
            return cls(local=True, processes=parsed.processes, routing=routing, **kwargs)
        if parsed.kind == "address":
            return cls(parsed.target, routing=routing, **kwargs)
        if parsed.kind == "scheduler-file":
            read_scheduler_file(parsed.target)  # a bad file is a bad flag (E701), before anything starts
            return cls(scheduler_file=parsed.target, routing=routing, **kwargs)
        raise ValueError("'local' is not a Dask executor: leave tool_executor unset")

    # -- connection ------------------------------------------------------------------

    def _start_cluster(self) -> str:
        with self._lock:
            if self._cluster is None:
                from distributed import LocalCluster

                n = self.n_workers or os.cpu_count() or 1
                if self.processes:
                    self._cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                                 dashboard_address=":0", host="127.0.0.1")
                else:
                    self._cluster = LocalCluster(n_workers=1, threads_per_worker=n, processes=False,
                                                 dashboard_address=":0")
            return self._cluster.scheduler_address

    async def connect(self) -> tuple[Any, bool]:
        """A client on the running loop, and whether this run owns it (and closes it)."""
        from distributed import Client

        given = self.client
        where = ""
        if given is not None:
            if getattr(given, "asynchronous", False) and given.loop.asyncio_loop is asyncio.get_running_loop():
                return given, False
            address = given.scheduler.address
        elif self.local:
            address = await asyncio.to_thread(self._start_cluster)
        elif self.scheduler_file is not None:
            # read here, bounded, on each connection (a restarted scheduler rewrites it)
            try:
                address = await asyncio.to_thread(read_scheduler_file, self.scheduler_file)
            except ExecutorConfigError as exc:
                raise PlanInvalid(exc.diagnostics) from None
            where = f" (from {self.scheduler_file})"
        else:
            address = self.address
        try:
            client = await asyncio.wait_for(
                Client(address, asynchronous=True, timeout=self.connect_timeout, set_as_default=False),
                self.connect_timeout + 1)
        except (OSError, TimeoutError, ValueError) as exc:
            raise _cannot_reach(f"cannot reach the Dask scheduler at {address}{where}: {exc}") from None
        return client, True

    def invoker_for(self, run: RunInfo, local: Invoker) -> Invoker:
        """The run's invoker (the scheduler calls it once per run: a
        :class:`~sophon_dsl.runtime.invoker.ToolExecutor`)."""
        from .invoker import DaskRun

        invoker = DaskRun(self, run, local)
        self.last_keys = invoker.submitted  # the Dask keys of the latest run (tests, benchmarks)
        return invoker

    # -- lifetime --------------------------------------------------------------------

    def close(self) -> None:
        """Stop the embedded cluster, if this executor started one."""
        with self._lock:
            cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.close()

    def __enter__(self) -> "DaskExecutor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        where = ("local cluster" if self.local else self.scheduler_file or self.address or "client")
        return f"DaskExecutor({where})"
