"""One durable run, as the runtime's API drives it (:mod:`sophon_dsl.runtime.api`).

A :class:`DurableRun` registers the run in the store (what a resume needs: the plan text,
its input, state and context, the tool-source hash), gives the scheduler its
:class:`~.journal.Journal`, restores what an earlier process committed, keeps approval
decisions (asked once, reused on resume), decides about calls found in doubt, and records
how the run ended.  A run whose approver is ``"wait"`` and that needs a decision nobody
gave yet ends with status ``waiting``; ``sophon-dsl approve`` (or :func:`~.resume.resume`
with ``approve=...``) continues it later, from any process.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import os
import socket
from typing import TYPE_CHECKING, Any, Callable

from ..errors import OptionError
from ..maps import body_ids
from ..model import Call, Plan, Risk
from ..runtime.approval import ApprovalDecision, ApprovalRequest, Approver, decide
from ..runtime.errors import ErrorInfo
from ..runtime.result import RunResult, new_record
from .journal import CALL_OUTCOME_UNKNOWN, BeforeStart, Journal, replay, restore_record
from ..ids import uuid4_hex

if TYPE_CHECKING:  # (the runtime imports this package's journal: only named here)
    from ..runtime.runstate import DurableHost
    from ..tools import ToolRegistry, ToolSpec
    from .base import RunStore

__all__ = ["CANCEL_POLL", "WAIT", "DurableRun", "begin", "covers", "new_run_id", "owner_id", "plan_hash", "shown",
           "watch_cancel",
           "waiting_calls"]

WAIT = "wait"  # approve="wait": a decision nobody gave yet leaves the run waiting


class _RunWaiting(BaseException):
    """Raised through the plan-level approval gate when the run is left waiting, and caught
    by :meth:`DurableRun.guard` (a plan run) or the agent loop (a lazy turn's plan, through
    ``DurableRun.waiting_signal``); a signal, not an error: a BaseException, so that
    ``decide`` does not turn it into a rejection."""


def new_run_id() -> str:
    return uuid4_hex()


def plan_hash(plan_text: str, registry: ToolRegistry, plan: Plan) -> str:
    """Hash of the plan text and of the source of every tool function it calls."""
    h = hashlib.sha256(plan_text.encode())
    for name in sorted({c.tool for c in plan.calls} | {c.activity for c in plan.calls if c.activity}):
        spec = registry.get(name)
        func = spec.func if spec is not None else None
        func = getattr(func, "__wrapped__", func)
        try:
            src = inspect.getsource(func) if func is not None else repr((spec.input_schema, spec.output_schema)
                                                                         if spec is not None else None)
        except (OSError, TypeError):
            src = getattr(func, "__qualname__", repr(func))
        h.update(f"\0{name}\0{src}".encode())
    return h.hexdigest()


# how often a running durable run looks for a cancel request in its store: `sophon-dsl cancel`
# is observed within this (plus one store round trip), well inside the second the seed allows
CANCEL_POLL = 0.25


async def watch_cancel(backend: RunStore, run_id: str, on_cancel: Callable[[], Any],
                       every: float = CANCEL_POLL) -> dict:
    """Poll ``backend`` for a cancel request of ``run_id`` (``RunStore.request_cancel``) and
    call ``on_cancel()`` once one is there; returns the request.  The read runs in a thread, on
    a connection of its own (``RunStore.cancel_reader``): not through the writer's queue."""
    loop = asyncio.get_running_loop()
    read = backend.cancel_reader()
    try:
        while True:
            try:
                request = await loop.run_in_executor(None, read, run_id)
            except Exception:  # noqa: BLE001 - a store that cannot answer now: asked again next time
                request = None
            if request is not None:
                on_cancel()
                return request
            await asyncio.sleep(every)
    finally:
        read.close()


def owner_id() -> str:
    """Who holds a run's lease: ``host:pid:nonce`` (a resume may take over the lease of a
    process of this host that no longer exists)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid4_hex()[:8]}"


def begin(run_id: str, plan_id: str, store: str | RunStore, plan: Plan, registry: ToolRegistry, data: dict,
          approver: Approver | str | None) -> tuple[DurableRun, Approver]:
    """Make run ``run_id`` durable in ``store`` (a URL or a store): its :class:`DurableRun`
    (registered) and the approver to use (the run handle's owner keeps both)."""
    from . import open_owned
    from ..syntax.doc_printer import encode_plan
    from .base import dumps

    backend, owned = open_owned(store)
    run = DurableRun(backend, run_id)
    run.owns_backend = owned
    # the plan as compact JSON (a JSON plan document; read back with loads(text, "json"))
    text = encode_plan(plan, dumps)
    run.register(text, plan, registry, {**data, "plan_id": plan_id})
    return run, run.approver(approver)


def _idempotent(spec: ToolSpec | None) -> bool:
    return spec is None or spec.func is None or spec.idempotent


class DurableRun:
    """See the module docstring.  ``committed`` (resume) maps call ids to their committed
    records, ``intents`` call ids to idempotency keys, ``decisions`` names to decisions."""

    # what the plan gate raises when it leaves the run waiting (a caller that runs the gate
    # itself, as the agent loop does for a lazy turn, catches it)
    waiting_signal: type[BaseException] = _RunWaiting

    def __init__(self, backend: RunStore, run_id: str, *, unknown: str = "fail",
                 base_approver: Approver | str | None = None,
                 committed: dict | None = None, log: list | None = None, intents: dict | None = None,
                 decisions: dict | None = None, owner: str | None = None) -> None:
        if unknown not in ("ask", "rerun", "fail"):
            raise OptionError(f"unknown must be 'ask', 'rerun' or 'fail', not {unknown!r}")
        self.backend = backend
        self.run_id = run_id
        self.unknown = unknown
        self.base_approver = base_approver
        self.committed = committed or {}
        self.intents = intents or {}
        self.decisions = dict(decisions or {})
        self.owner = owner or owner_id()
        self.journal = Journal(backend, run_id)
        self.journal.hooks = self
        self.host: DurableHost | None = None  # what this run gets of the running plan, once built (attach)
        self.resumed = committed is not None
        self.waiting: dict | None = None
        self.owns_backend = False  # opened from a URL for this run: closed when it ends
        # resumed with force=True: the plan or its tools may have changed, so a stored
        # decision that does not say what it was given for (stored before "shown") is not reused
        self.forced = False
        self.lease_s = 60.0
        self.doubt = {cid for cid in self.intents if cid not in self.committed}
        self.doubted = frozenset(self.doubt)  # (doubt shrinks as its calls are decided)
        self.replayed_kinds = {e["kind"] for e in log} if log else set()
        # what maps expanding their items wrote (each item under its own kind): a map not
        # committed expands again on resume and would write them a second time (a committed
        # one does not expand again)
        self.expansions = {e for e in _expansion_entries(log) if e[2] not in self.committed} if log else set()
        if log:
            replay(self.journal, log)
            # the scheduler writes the run's initial data again: it is in the replayed log
            self.journal.write = _drop_initial(self.journal)

    # -- starting -------------------------------------------------------------------

    def register(self, plan_text: str, plan: Plan, registry: ToolRegistry, spec: dict) -> None:
        """A new run: its row (status running, this process's lease)."""
        self.backend.create_run(self.run_id, plan_id=plan.id, goal=plan.goal, spec={"plan": plan_text, **spec},
                                plan_hash=plan_hash(plan_text, registry, plan), owner=self.owner,
                                lease_s=self.lease_s, plan_file=plan.file, calls_total=len(plan.calls)).result()

    def approver(self, base: Approver | str | None) -> Approver:
        """The run's approver: a stored decision is reused, a new one is stored."""
        self.base_approver = base

        async def approve(request: ApprovalRequest) -> ApprovalDecision:
            name = request.kind if request.kind == "plan" else f"{request.kind}:{request.call_id}"
            stored = self.decisions.get(name)
            if stored is not None and covers(stored, request, self.forced):
                return _decision(stored, request)
            # no decision yet, or the stored one was given for less than is asked now (a
            # call newly risky or riskier, after a forced resume): asked again
            if base == WAIT:
                return await self._wait(name, request)
            decision = await decide(base, request, None)
            self.decisions[name] = {**_decision_json(decision), "shown": shown(request.calls)}
            await asyncio.wrap_future(self.backend.put_decision(self.run_id, name, self.decisions[name]))
            return decision

        return approve

    async def _wait(self, name: str, request: ApprovalRequest) -> ApprovalDecision:
        # decision_run: the run id the decision is stored under (an agent turn's own, t{n})
        self.waiting = {"decision": name, "kind": request.kind, "call_id": request.call_id,
                        "calls": waiting_calls(request), "decision_run": self.run_id}
        if request.kind == "plan":
            raise _RunWaiting(name)
        assert self.host is not None  # (a call's gate: the scheduler runs)
        self.host.cancel("waiting")  # the call stays uncommitted: it asks again when the run continues
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    def attach(self, host: DurableHost) -> None:
        """The scheduler is built (with the journal as its store) and hands over what this run
        needs of it (``Scheduler.durable_host()``): restore committed calls."""
        self.host = host
        host.set_run_id(self.run_id)
        if not self.resumed:
            return
        restored = len(self.restore_joined(host, range(len(host.records))))
        # item calls of maps that did not end are restored as their maps expand again: counted
        # here too (a run cut mid-map restores them), as are their calls in doubt
        top = {cid for cid in self.committed if "[" not in cid}
        items = sum(1 for cid in self.committed if "[" in cid and cid.split("[", 1)[0] not in top)
        host.hide_restored(self.replayed_kinds)  # (the replayed items' kinds stay out of the run's state)
        rerun = sum(1 for cid in self.doubt if self.unknown == "rerun" or _idempotent(self._spec(cid)))
        self.journal.write = self._expansions_once(self.expansions) if self.expansions else self.journal.log.write
        host.emit("plan_resumed", "running", data={"run_id": self.run_id, "restored": restored + items,
                                                     "restored_items": items, "in_doubt": len(self.doubt),
                                                     "rerun": rerun})

    def _expansions_once(self, replayed: set) -> Any:
        """The journal's ``write`` while maps expand again the items an earlier process
        expanded: their item and index entries are in the replayed log already, so the
        second write is dropped (the log stays what an uninterrupted run's is); once each
        has come back, the log's own ``write`` again."""
        journal = self.journal
        log_write = journal.log.write

        def write(kind: str, path: tuple, value: Any, method: Any = None, call: Any = None) -> None:
            key = (kind, path, call)
            if key in replayed:
                replayed.discard(key)
                if not replayed:
                    journal.write = log_write
                return
            log_write(kind, path, value, method, call) if method is not None else log_write(kind, path, value,
                                                                                            call=call)

        return write

    def restore_items(self, indices: range) -> list[int]:
        """:meth:`restore_joined` for calls joining the running scheduler (a resumed run only)."""
        return self.restore_joined(self.host, indices) if self.resumed and self.host is not None else []

    def restore_joined(self, host: DurableHost, indices: range) -> list[int]:
        """Restore the calls among ``indices`` that an earlier process committed (their
        records; their writes are in the replayed log); their indexes.  The plan's calls
        join before the run starts, a map's item calls when their item expands."""
        done = []
        committed, records = self.committed, host.records
        for i in indices:
            data = committed.get(records[i].id)
            if data is not None:
                wrote = _restored(records[i], host.calls[i], data)
                host.restore(i, wrote)
                done.append(i)
        return done

    def _spec(self, call_id: str) -> Any:
        host = self.host
        assert host is not None
        i = host.index_of(call_id)
        if i is not None:
            call = host.calls[i]
            return host.tool(call.activity) if call.activity else host.spec(i)
        call = item_call(host, call_id)  # an item call of a map not expanded yet
        return host.tool(call.activity or call.tool) if call is not None else None

    # -- per call ---------------------------------------------------------------------

    async def before_start(self, i: int, call: Any, args: dict, *, intent: bool = True) -> ErrorInfo | None:
        """Before call ``i``'s tool starts: the in-doubt decision on resume, else its intent
        (``intent=False``: the runner commits it later, with :meth:`intent_now`)."""
        journal = self.journal  # (the runner skips this for calls Journal.start_after_intent cleared)
        if self._intent_free(i, call):
            return None
        cid = journal.records[i].id
        if cid in self.doubt:
            self.doubt.discard(cid)
            return await self._in_doubt(i, call, args)
        if not intent:
            return None
        # (commit_intent without a coroutine of its own: once per call)
        return journal.intent_outcome(await journal.intent_landing(cid))

    async def intent_now(self, i: int, call: Any) -> ErrorInfo | None:
        """Call ``i`` got its slot under ``max_concurrency`` and its tool starts next: its
        intent is committed now, not while it waited for the slot (a crash then leaves in
        doubt only the calls that held a slot).  Nothing for a call that needs no intent;
        a call in doubt that is run again keeps its first intent (the insert is a no-op)."""
        if self._intent_free(i, call):  # (no call is cleared ahead in runs with slots)
            return None
        journal = self.journal
        return journal.intent_outcome(await journal.intent_landing(journal.records[i].id))

    def _intent_free(self, i: int, call: Any) -> bool:
        """Call ``i`` commits no intent: it has an inline result, or its tool is idempotent."""
        host = self.host
        assert host is not None
        spec = host.tool(call.activity) if call.activity else host.spec(i)
        return call.inline_output is not None or _idempotent(spec)

    def need_before_start(self, i: int) -> BeforeStart:
        """What call ``i`` (as planned) needs before its tool starts (see before_start: an
        idempotent call or one with an inline result needs nothing, even in doubt)."""
        host = self.host
        assert host is not None
        call = host.calls[i]  # (_intent_free inline: once per call of the run)
        if call.inline_output is not None or _idempotent(host.tool(call.activity) if call.activity else host.spec(i)):
            return BeforeStart.NOTHING
        doubt = self.doubt
        return BeforeStart.IN_TASK if doubt and host.records[i].id in doubt else BeforeStart.INTENT

    async def _in_doubt(self, i: int, call: Any, args: dict) -> ErrorInfo | None:
        host = self.host
        assert host is not None
        cid = host.records[i].id
        action = self.unknown
        if action == "ask":
            req = ApprovalRequest("unknown", host.plan(), ({"id": cid, "tool": call.tool, "risk": "unknown",
                                                            "index": i},), call, cid, args, host.plan_id)
            decision = await self.approver(self.base_approver)(req)
            action = "rerun" if decision.action == "approve" else "fail"
        host.emit("plan_step_unknown", action, i, reason="started before the crash; its outcome is unknown",
                   data={"key": f"{self.run_id}:{cid}", "decision": action})
        if action == "rerun":
            return None
        return ErrorInfo(CALL_OUTCOME_UNKNOWN, f"{cid} ({call.tool}) started before the run was interrupted "
                                               "and its outcome is unknown")

    # -- ending -------------------------------------------------------------------------

    async def _renew(self) -> None:
        """Keep the lease while the run goes on (another process may take an expired one)."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.lease_s / 3)
            await loop.run_in_executor(None, self.backend.acquire_lease, self.run_id, self.owner, self.lease_s)

    async def guard(self, coro: Any, on_cancel: Callable[[], Any] | None = None) -> RunResult:
        """Run the API's coroutine; record how the run ended (or that it waits).  ``on_cancel``
        (the run handle's ``cancel``) is called when another process asks the store to cancel
        the run (``sophon-dsl cancel RUN_ID``): see :func:`watch_cancel`."""
        renew = asyncio.ensure_future(self._renew())
        watch = None if on_cancel is None else asyncio.ensure_future(watch_cancel(self.backend, self.run_id, on_cancel))
        try:
            try:
                result = await coro
            except _RunWaiting:
                result = None
            await self.journal.flush()
            if self.waiting is not None:
                result = self._waiting_result(result)
            if self.resumed and result is not None:
                self.join_unexpanded_items(result)
            if result is not None:
                await self.forget_unstarted(result.calls)
            if self.journal.failure is None:
                summary = {"status": result.status, "output": result.output,
                           "error": result.error.to_json() if result.error else None, "waiting": self.waiting}
                try:
                    await asyncio.wrap_future(self.backend.set_status(self.run_id, result.status, summary))
                except Exception as exc:  # noqa: BLE001 - how it ended is not recorded: resume finds out
                    self.journal.fail(exc)
            err = self.journal.failure_error()
            if err is not None and self.waiting is None:
                result.status, result.error = "failed", err
        finally:
            renew.cancel()
            if watch is not None:
                watch.cancel()
            try:
                await asyncio.wrap_future(self.backend.release_lease(self.run_id, self.owner))
            except Exception:  # noqa: BLE001 - a failed store: the lease expires by itself
                pass
            if self.owns_backend:
                self.backend.close()
        return result

    async def forget_unstarted(self, calls: Any) -> None:
        """The run stopped (cancelled, left waiting) before these calls' tools started: the
        intents some of them committed are dropped, so that a resume runs them rather than
        asking what became of a call that never ran.  (Calls found in doubt when this run
        began keep theirs: their tool may have started in the earlier process.)"""
        unstarted = [rec.id for rec in calls if rec.status == "cancelled" and rec.attempts == 0
                     and rec.id not in self.doubted]
        if not unstarted or self.journal.failure is not None:
            return
        try:
            await asyncio.wrap_future(self.backend.drop_intents(self.run_id, unstarted))
        except Exception as exc:  # noqa: BLE001 - they stay in doubt: the resume asks about them
            self.journal.fail(exc)

    def join_unexpanded_items(self, result: RunResult) -> None:
        """Item calls an earlier process committed, of maps this run did not expand again (the
        map itself was committed): calls of the run all the same, so their records join
        the result (in the order they ran)."""
        seen = {rec.id for rec in result.calls}
        rows = sorted((d for cid, d in self.committed.items() if cid not in seen), key=lambda d: d.get("index", 0))
        host = self.host
        for data in rows:
            call = item_call(host, data["id"]) if host is not None else None
            rec = new_record(data["id"], call.tool if call is not None else "", len(result.calls))
            if call is not None:
                _restored(rec, call, data)
            else:
                restore_record(rec, data)
            result.calls.append(rec)

    def _waiting_result(self, result: RunResult | None) -> RunResult:
        if result is None or self.host is None:
            return RunResult("waiting", {}, None, list(self.journal.records), [], run_id=self.run_id)
        result.status, result.error = "waiting", None
        return result


def waiting_calls(request: ApprovalRequest) -> list[dict]:
    """The calls a waiting run asks about, each with ``args``: its arguments as the prompt
    shows them (the values read at run time for a call, the plan's own for the plan gate;
    long values cut, control and bidi characters escaped), so that ``sophon-dsl approve`` and
    ``runs show`` show what is being approved."""
    from ..runtime.approval import shown_arguments

    return [{**c, "args": shown_arguments(request, c)} for c in request.calls]


def shown(calls: Any) -> list[list]:
    """``[[call id, tool, risk], ...]``: what an approval was given for (stored with it)."""
    return [[c.get("id"), c.get("tool"), c.get("risk")] for c in calls if isinstance(c, dict)]


def _risk(label: Any) -> Risk | None:
    try:
        return Risk.parse(label)
    except ValueError:
        return None


def covers(stored: dict, request: ApprovalRequest, forced: bool = False) -> bool:
    """Whether a stored decision answers ``request``: every call asked about now was shown
    when it was given, for the same tool, at a risk no lower than its effective risk now
    (issue 24, item 3: a ``low`` tool now ``critical`` asks again).  A decision stored
    before decisions recorded what they were shown (no ``shown``) is reused unless the run
    was resumed with force (then plan and tools may differ from what it was given for)."""
    if request.kind == "unknown":  # an in-doubt call: a question about re-running, not about risk
        return True
    had = stored.get("shown")
    if had is None:
        return not forced
    if not isinstance(had, list):
        return False
    before: dict[tuple, Risk] = {}
    for entry in had:
        if isinstance(entry, list) and len(entry) == 3:
            r = _risk(entry[2])
            if r is not None:
                before[(entry[0], entry[1])] = r
    for c in request.calls:
        was, now = before.get((c.get("id"), c.get("tool"))), _risk(c.get("risk"))
        if was is None or now is None or now > was:
            return False
    return True


def _restored(rec: Any, call: Call, data: dict) -> tuple:
    """Fill in ``rec`` from its committed ``data``; the output paths the call wrote."""
    restore_record(rec, data)
    out = call.output
    wrote = tuple(out.paths[k] for k in data.get("written", ())) if out is not None else ()
    if wrote:
        rec.add_written(wrote)
    return wrote


def item_call(host: DurableHost, call_id: str) -> Call | None:
    """The body call an item call's id names (``c3[2].translate``, ``c1[0].inner[3].fetch``),
    or None."""
    head, sep, rest = call_id.partition("[")
    j = host.index_of(head) if sep else None
    if j is None:
        return None
    call = host.calls[j]
    while rest:
        if call.map is None:
            return None
        _, sep, rest = rest.partition("].")  # past the item's number
        name, _, rest = rest.partition("[")
        ids = body_ids(call.map)
        if not sep or name not in ids:
            return None
        call = call.map.body[ids.index(name)]
    return call


def _expansion_entries(log: list[dict]) -> set[tuple]:
    """``(kind, path, call)`` of the replayed entries a map wrote when it expanded an item:
    the item's own kind (``v@c3[2]``, ``index@c3[2]``, ``x@c5[0].map[1]``) written by the
    map call itself (``c3``, ``c5[0].map``), not by one of the item's calls."""
    found = set()
    for e in log:
        call = e["call"]
        if call is not None:
            item = e["kind"].partition("@")[2]
            if item.startswith(call) and item[len(call):len(call) + 1] == "[" and item[len(call) + 1:-1].isdigit():
                found.add((e["kind"], tuple(e["path"]), call))
    return found


def _drop_initial(journal: Journal) -> Any:
    log_write = journal.log.write

    def write(kind: str, path: tuple, value: Any, method: Any = None, call: Any = None) -> None:
        if call is not None:
            if method is not None:
                log_write(kind, path, value, method, call)
            else:
                log_write(kind, path, value, call=call)

    return write


def _decision_json(d: ApprovalDecision) -> dict:
    out: dict[str, Any] = {"action": d.action, "reason": d.reason}
    if d.plan is not None:
        from ..loader import dumps

        out["plan"] = dumps(d.plan, "json")
    if d.call is not None:
        from ..loader import dumps

        out["call"] = dumps(Plan(calls=(d.call,)), "json")
    return out


def _decision(data: dict, request: ApprovalRequest) -> ApprovalDecision:
    action, reason = data.get("action", "reject"), data.get("reason", "")
    if action == "edit" and data.get("plan"):
        from ..loader import loads

        return ApprovalDecision.edit(loads(data["plan"], "json"), reason)
    if action == "edit" and data.get("call"):
        from ..loader import loads

        return ApprovalDecision.edit(loads(data["call"], "json").calls[0], reason)
    return ApprovalDecision("approve" if action in ("approve", "edit") else "reject", reason or "")
