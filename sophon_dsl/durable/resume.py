"""Resuming a durable run: ``resume(run_id, store=..., tools=...)`` / ``aresume``.

Committed calls never run again (their writes come back from the log, in order); calls with
no intent never started and just run; calls with an intent and no committed result are *in
doubt*: idempotent ones re-run with the same idempotency key, the others follow ``unknown``
(``"rerun"``, ``"fail"``: error ``Call.OutcomeUnknown``, which a branching output catches,
``"ask"``: the approver decides).  Stored approval decisions are reused, never asked again.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

from ..runtime.api import finish_run, make_run
from ..runtime.errors import RunError
from ..runtime.result import RunResult
from . import default_store_url, open_store
from .base import RunStore, display_url
from .planload import load_stored_plan
from .session import WAIT, DurableRun, owner_id, plan_hash

__all__ = ["LEASE_HELD", "PLAN_CHANGED", "RUN_NOT_FOUND", "WRONG_KIND", "StoreRunError", "aresume", "resume"]

RUN_NOT_FOUND = "Store.RunNotFound"
LEASE_HELD = "Store.LeaseHeld"
PLAN_CHANGED = "Store.PlanChanged"
WRONG_KIND = "Store.WrongKind"


class StoreRunError(RunError):
    """The run cannot be resumed (``error``: ``Store.RunNotFound``, ``Store.LeaseHeld``,
    ``Store.PlanChanged``); nothing ran."""


def _dead_owner(owner: str | None) -> str | None:
    """``owner`` when it names a process of this host that no longer exists."""
    if not owner:
        return None
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return owner
    except PermissionError:
        return None
    return None


def _take_lease(backend: RunStore, run_id: str, owner: str, row: dict) -> None:
    if backend.acquire_lease(run_id, owner):
        return
    stale = _dead_owner(backend.get_run(run_id).get("lease_owner"))
    if stale is None or not backend.acquire_lease(run_id, owner, stale=stale):
        raise StoreRunError(LEASE_HELD, f"run {run_id} is being run by another process "
                                        f"({row.get('lease_owner')}); wait for its lease to expire")


async def aresume(run_id: str, store: Any = None, tools: Any = None, *, approve: Any = None,
                  unknown: str = "fail", force: bool = False, **options: Any) -> RunResult:
    """Continue run ``run_id`` from what its store committed (see the module docstring).
    ``force`` resumes even when the plan or the tools' sources changed since the run began."""
    backend = open_store(store if store is not None else default_store_url())
    owned = backend is not store
    try:
        row = backend.get_run(run_id)
        if row is None:
            raise StoreRunError(RUN_NOT_FOUND, f"no run {run_id!r} in {display_url(backend.url)}")
        spec = row["spec"]
        if spec.get("kind"):  # an agent run (Agent.aresume) or a goal (GoalRunner.aresume)
            raise StoreRunError(WRONG_KIND, f"run {run_id} is a{'n' if spec['kind'][0] in 'aeiou' else ''} "
                                            f"{spec['kind']} run, not a plan run: continue it with "
                                            f"'sophon-dsl resume {run_id}' or its own aresume")
        plan = load_stored_plan(spec["plan"])
        wait = isinstance(approve, str) and approve.lower() == WAIT
        opts = {**options, "approve": None if wait else approve}
        if spec.get("context"):
            opts["context"] = spec["context"]
        opts["plan_id"] = spec.get("plan_id")
        if spec.get("cascade") and "cascade" not in options:  # the run's own cascade, unless given now
            opts["cascade"] = spec["cascade"]
        handle, run_opts, context, prep, input, state = make_run(plan, tools, opts, spec.get("state"),
                                                                 spec.get("input"))
        if not force and plan_hash(spec["plan"], prep.registry, plan) != row["plan_hash"]:
            raise StoreRunError(PLAN_CHANGED, f"the plan or the sources of its tools changed since run {run_id} "
                                              "began; resume with force=True (--force) to run it anyway")
        owner = owner_id()
        _take_lease(backend, run_id, owner, row)
        durable = DurableRun(backend, run_id, unknown=unknown, committed=backend.load_calls(run_id),
                             log=backend.load_log(run_id), intents=backend.load_intents(run_id),
                             decisions=backend.load_decisions(run_id), owner=owner)
        durable.forced = force
        handle.run_id, handle.durable = run_id, durable
        run_opts.approver = durable.approver(WAIT if wait else run_opts.approver)
        await asyncio.wrap_future(backend.set_status(run_id, "running"))
        return await finish_run(handle, plan, tools, input, state, run_opts, context, prep)
    finally:
        if owned:
            backend.close()


def resume(run_id: str, store: Any = None, tools: Any = None, **options: Any) -> RunResult:
    """:func:`aresume`, synchronously (creates an event loop)."""
    return asyncio.run(aresume(run_id, store, tools, **options))
