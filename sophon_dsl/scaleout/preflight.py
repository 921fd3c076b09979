"""Which tools go to the cluster (:func:`route_for`) and the check made on the workers
before a run (:func:`check_routes`): every routed tool pickles here and unpickles on every
worker, the workers run this sophon-dsl version, and some worker has the resources each
tool asks for.  A task that no worker can import or place would wait forever; the check
refuses the plan instead, within its time bound:

* E703 the cluster cannot be reached, has no workers, or does not answer in time;
* E704 a tool cannot be pickled here or unpickled on a worker;
* E705 no worker has the resources a tool asks for;
* E706 a worker lacks sophon-dsl or runs another version.
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping

from ..diagnostics import Diagnostic, Severity
from ..runtime.errors import PlanInvalid, RunError
from ..tools import ToolSpec
from .config import Routing
from .ship import ship
from .worker import preflight, version as local_version

__all__ = ["EXECUTOR_REFUSED", "Route", "check_routes", "refused_error", "route_for"]

EXECUTOR_REFUSED = "Executor.Refused"


class Route:
    """A tool that runs on the cluster: its function, resources, and what the check found."""

    __slots__ = ("name", "spec", "resources", "resource_key", "is_async", "digest", "blob", "blob_future",
                 "checked", "refused", "code")

    def __init__(self, spec: ToolSpec, resources: Mapping[str, float]) -> None:
        self.name = spec.name
        self.spec = spec
        self.resources = dict(resources)
        self.resource_key = tuple(sorted(self.resources.items()))
        self.is_async = bool(spec.is_async)
        self.digest = ""
        self.blob: bytes | None = None
        self.blob_future: Any = None
        self.checked = False
        self.refused: str | None = None
        self.code = "E704"


def route_for(spec: ToolSpec, routing: Routing) -> Route | None:
    """The tool's route to the cluster, or None when it runs in the coordinator."""
    if spec.func is None or spec.origin == "mcp" or spec.context_param is not None:
        return None  # latent / declared only, an MCP session, a CallContext built here
    if spec.placement == "local":
        return None
    remote, resources = routing.decide(spec.name)
    if not remote:
        return None
    return Route(spec, {**(spec.resources or {}), **(resources or {})})


def refused_error(route: Route) -> RunError:
    return RunError(EXECUTOR_REFUSED, f"tool {route.name} cannot run on the cluster: {route.refused}")


def _diag(code: str, message: str) -> Diagnostic:
    return Diagnostic(code, message, severity=Severity.ERROR)


async def check_routes(client: Any, routes: list[Route], run_id: str, timeout: float, raise_: bool = True) -> None:
    """Check ``routes`` on the workers (see the module docstring).  With ``raise_``, problems
    raise :class:`PlanInvalid`; without, each refused route keeps its reason."""
    todo = [r for r in routes if not r.checked]
    if not todo:
        return
    for route in todo:
        shipped = ship(route.name, route.spec.func)
        route.blob, route.digest = shipped.blob, shipped.digest
        if shipped.error is not None:
            route.refused = shipped.error
    ok = [r for r in todo if r.refused is None]
    cluster: list[Diagnostic] = []
    try:
        async with asyncio.timeout(timeout):
            cluster = await _check_workers(client, ok)
            if not cluster and ok:
                data = {f"{run_id}/tool/{r.digest}": r.blob for r in ok}
                futures = await client.scatter(data, broadcast=True, hash=False)
                for r in ok:
                    r.blob_future = futures[f"{run_id}/tool/{r.digest}"]
    except TimeoutError:
        cluster = [_diag("E703", f"the Dask cluster did not answer the preflight check within {timeout:g} s")]
    for route in todo:
        route.checked = True
        if cluster and route.refused is None:
            route.refused = cluster[0].message
    diags = cluster + [_diag(r.code, f"tool {r.name} cannot run on the cluster: {r.refused}")
                       for r in todo if r.refused is not None and not cluster]
    if diags and raise_:
        raise PlanInvalid(diags)


async def _check_workers(client: Any, routes: list[Route]) -> list[Diagnostic]:
    """Cluster-wide problems (no workers, wrong sophon-dsl); per-route ones go on the routes."""
    __version__ = local_version()
    info = await client.run(preflight, {r.digest: r.blob for r in routes}, on_error="return")
    if not info:
        await client.wait_for_workers(1)  # a cluster still starting (bounded by the caller)
        info = await client.run(preflight, {r.digest: r.blob for r in routes}, on_error="return")
    problems = []
    for worker, answer in sorted(info.items()):
        if isinstance(answer, BaseException):
            problems.append(_diag("E706", f"worker {worker} cannot run sophon-dsl's entry function "
                                          f"(is sophon-dsl installed there?): {type(answer).__name__}: {answer}"))
        elif answer.get("version") != __version__:
            problems.append(_diag("E706", f"worker {worker} runs sophon-dsl {answer.get('version')}, this "
                                          f"process {__version__}: install the same version on the workers"))
    if problems:
        return problems
    for route in routes:
        failed = [(w, a["failed"][route.digest]) for w, a in sorted(info.items()) if route.digest in a["failed"]]
        if failed:
            worker, why = failed[0]
            route.refused = f"worker {worker} cannot load it: {why}"
            continue
        if route.resources and not any(_fits(route.resources, a["resources"]) for a in info.values()):
            offered = sorted({f"{k}={v:g}" for a in info.values() for k, v in a["resources"].items()})
            wanted = ", ".join(f"{k}={v:g}" for k, v in route.resource_key)
            route.refused = (f"it needs resources {wanted}, which no worker has (workers offer: "
                             f"{', '.join(offered) or 'no resources'})")
            route.code = "E705"
    return []


def _fits(wanted: Mapping[str, float], offered: Mapping[str, float]) -> bool:
    return all(offered.get(k, 0) >= v for k, v in wanted.items())
