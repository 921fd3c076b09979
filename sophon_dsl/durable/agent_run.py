"""A durable agent run (:class:`~sophon_dsl.llm.agent.Agent` with ``store=``): the loop's
replies and the calls its turns run, kept in a run store so that a resume asks the provider
nothing it was already answered and runs no committed call again.

* The run's row has ``spec = {"kind": "agent", "request", "input", "state", "instances",
  "mode", "planning", "options", "meta", "session"}``: what the loop needs to start again (the
  planning decision too, so a resume does not ask for it again); ``session`` holds the
  ``user_message`` logged when the run began, and the summary's ``agent.session`` the pair
  once it ended (seed 002's session log).  Its hash covers the tools' sources
  and the loop's options (``Store.PlanChanged`` unless forced).
* Each turn's reply is appended to the store (table ``agent_replies``) as it streams: before
  a call's tool starts, the reply so far is handed to the store and committed (the store
  commits its queue in order, so the call's intent and completion come after the text that
  holds the call); text goes to the store every 512 characters too, and at the end, with a
  final marker.
* Each turn's calls are a :class:`~.session.DurableRun` of their own, under the run id
  ``{run_id}/t{turn}`` (log, call records, intents, approval decisions; no row in ``runs``):
  committed calls are restored, calls in doubt follow ``unknown``, exactly as in a plan run.
* On resume the loop replays every recorded turn from its text and its committed calls
  (no request, no tool), then goes on live.  A reply cut off mid-stream keeps the statements
  complete in its recorded prefix (they run, or are restored); the cut statement and anything
  after it are dropped, the turn gets the error ``Reply.Interrupted``, and the loop continues
  with the next turn, which sees the state the kept calls left.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from typing import TYPE_CHECKING, Any, Callable

from . import default_store_url, open_owned
from .base import display_url, dumps
from .resume import PLAN_CHANGED, RUN_NOT_FOUND, WRONG_KIND, StoreRunError, _take_lease
from .journal import BeforeStart
from .session import DurableRun, owner_id, watch_cancel

if TYPE_CHECKING:
    from ..runtime.approval import Approver
    from ..tools import ToolRegistry
    from .base import RunStore

__all__ = ["AGENT_KIND", "REPLY_INTERRUPTED", "WAIT_UNSUPPORTED", "AgentRecord", "TurnRecorder", "complete_prefix",
           "stored_agent", "turn_run_id"]

AGENT_KIND = "agent"
REPLY_INTERRUPTED = "Reply.Interrupted"
# Kept for programs that imported it: agent runs support approve="wait" since 2026-11-27
# (a turn's gate leaves the run waiting), so nothing reports this code any more.
WAIT_UNSUPPORTED = "Agent.WaitUnsupported"


def turn_run_id(run_id: str, turn: int) -> str:
    """Where turn ``turn``'s calls are kept (and the prefix of their idempotency keys)."""
    return f"{run_id}/t{turn}"


def agent_hash(registry: ToolRegistry, options: dict) -> str:
    """Hash of the loop's options and of the source of every tool the agent may call."""
    h = hashlib.sha256(dumps(options).encode())
    for name in sorted(registry):
        spec = registry.get(name)
        func = spec.func if spec is not None else None
        func = getattr(func, "__wrapped__", func)
        try:
            src = inspect.getsource(func) if func is not None else dumps([spec.input_schema, spec.output_schema])
        except (OSError, TypeError, ValueError):
            src = getattr(func, "__qualname__", repr(func))
        h.update(f"\0{name}\0{src}".encode())
    return h.hexdigest()


def complete_prefix(text: str) -> str:
    """The part of a cut reply that holds only complete statements (DSL) or complete call
    objects (JSON): the text up to the end of the last one."""
    from ..llm.json_stream import JsonReplyScanner
    from ..llm.stream import StatementSplitter, strip_fences

    body = strip_fences(text).lstrip()
    if body[:1] in ("{", "["):
        scanner, end = JsonReplyScanner(), 0
        for i, ch in enumerate(text):
            if scanner.feed(ch):
                end = i + 1
        return text[:end]
    splitter, end = StatementSplitter(), 0
    for i, ch in enumerate(text):
        if splitter.feed(ch):
            end = i + 1
    return text[:end]


class TurnRun(DurableRun):
    """One turn's calls (a :class:`DurableRun`): a call's tool starts only once the reply
    that holds the call is committed."""

    recorder: "TurnRecorder | None" = None

    async def before_start(self, i: int, call: Any, args: dict, *, intent: bool = True) -> Any:
        if self.recorder is not None:
            exc = await self.recorder.landed()
            if exc is not None:
                self.journal.fail(exc)
                return self.journal.failure_error()
        return await super().before_start(i, call, args, intent=intent)

    def need_before_start(self, i: int) -> BeforeStart:
        # Not before the reply holding the call is committed: while a turn records its reply,
        # each call's task waits for that in before_start, then commits its intent there
        # (a turn's few calls need no intents gathered without tasks).
        return BeforeStart.IN_TASK if self.recorder is not None else super().need_before_start(i)


class TurnRecorder:
    """Turn ``turn``'s reply, appended to the store as it streams.

    Pieces are gathered and handed to the store together when a call is about to start (so
    the text holding it is queued before the call's intent or completion), every
    ``flush_chars`` characters, and at the end of the reply: text no call started from yet
    may be lost in a crash, which only makes the recorded prefix shorter."""

    flush_chars = 512

    def __init__(self, backend: RunStore, run_id: str, turn: int) -> None:
        self.backend = backend
        self.run_id = run_id
        self.turn = turn
        self._seq = 0
        self._pending: list[str] = []
        self._size = 0
        self._last: Any = None   # the future of the last piece handed to the store

    def append(self, text: str) -> None:
        self._pending.append(text)
        self._size += len(text)
        if self._size >= self.flush_chars:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self._last = self.backend.append_reply(self.run_id, self.turn, self._seq, "".join(self._pending))
            self._seq += 1
            self._pending.clear()
            self._size = 0

    def complete(self) -> None:
        self.flush()
        self._last = self.backend.append_reply(self.run_id, self.turn, self._seq, "", final=True)
        self._seq += 1

    async def landed(self) -> BaseException | None:
        """Hand the reply so far to the store and wait until it is committed; the store's
        error if it is not."""
        self.flush()
        last = self._last
        if last is None:
            return None
        if not last.done():
            await _settled(last)
        return last.exception()


class AgentRecord:
    """An agent run in a store: its row, its lease, and each turn's recorder and calls."""

    def __init__(self, backend: RunStore, run_id: str, owner: str, *, owns_backend: bool, unknown: str = "fail",
                 replies: dict | None = None) -> None:
        self.backend = backend
        self.run_id = run_id
        self.owner = owner
        self.owns_backend = owns_backend
        self.unknown = unknown
        self.replies: dict[int, tuple[str, bool]] = replies or {}   # recorded turns (a resume)
        self.resumed = replies is not None
        self.lease_s = 60.0
        self._renewal: asyncio.Task | None = None
        self._watch: asyncio.Future | None = None   # the cancel request watcher (keep_lease)

    # -- opening --------------------------------------------------------------------

    @classmethod
    def create(cls, store: Any, run_id: str, spec: dict, hash_: str) -> "AgentRecord":
        backend, owned = open_owned(store if store is not None else default_store_url())
        owner = owner_id()
        try:
            backend.create_run(run_id, plan_id=AGENT_KIND, goal=spec["request"][:200],
                               spec={"kind": AGENT_KIND, **spec}, plan_hash=hash_, owner=owner).result()
        except BaseException:
            if owned:
                backend.close()
            raise
        return cls(backend, run_id, owner, owns_backend=owned)

    @classmethod
    def reopen(cls, store: Any, run_id: str, hash_of: Any, *, unknown: str = "fail",
               force: bool = False) -> tuple["AgentRecord", dict]:
        """The recorded agent run ``run_id`` (its lease taken) and its spec; ``hash_of(spec)``
        is the hash the tools and options given now have."""
        backend, owned = open_owned(store if store is not None else default_store_url())
        try:
            row = backend.get_run(run_id)
            if row is None:
                raise StoreRunError(RUN_NOT_FOUND, f"no run {run_id!r} in {display_url(backend.url)}")
            spec = row["spec"] or {}
            if spec.get("kind") != AGENT_KIND:
                raise StoreRunError(WRONG_KIND, f"run {run_id} is not an agent run "
                                                f"(it is a {spec.get('kind') or 'plan'} run)")
            if not force and hash_of(spec) != row["plan_hash"]:
                raise StoreRunError(PLAN_CHANGED, f"the tools' sources or the agent's options changed since "
                                                         f"run {run_id} began; resume with force=True (--force) to "
                                                         "run it anyway")
            owner = owner_id()
            _take_lease(backend, run_id, owner, row)
            record = cls(backend, run_id, owner, owns_backend=owned, unknown=unknown,
                         replies=backend.load_replies(run_id))
            backend.set_status(run_id, "running").result()
        except BaseException:
            if owned:
                backend.close()
            raise
        return record, spec

    # -- turns ----------------------------------------------------------------------

    def recorded(self, turn: int) -> tuple[str, bool] | None:
        """Turn ``turn``'s recorded reply and whether it was complete (None: never asked)."""
        return self.replies.get(turn)

    def turn_run(self, turn: int, approver: Approver | str | None) -> tuple[TurnRun, TurnRecorder]:
        """Turn ``turn``'s calls (restored from the store when the turn was recorded) and its
        reply recorder; ``approver`` is the turn's approver, wrapped to keep its decisions."""
        cid = turn_run_id(self.run_id, turn)
        b = self.backend
        if turn in self.replies:
            run = TurnRun(b, cid, unknown=self.unknown, committed=b.load_calls(cid), log=b.load_log(cid),
                          intents=b.load_intents(cid), decisions=b.load_decisions(cid), owner=self.owner)
        else:
            run = TurnRun(b, cid, unknown=self.unknown, owner=self.owner)
        recorder = TurnRecorder(b, self.run_id, turn)
        run.recorder = recorder
        run.wrapped_approver = run.approver(approver)
        return run, recorder

    # -- the lease and the end ---------------------------------------------------------

    def keep_lease(self, on_cancel: Callable[[], Any] | None = None) -> None:
        """Renew the run's lease while the loop goes on; ``on_cancel`` is called when another
        process asks the store to cancel the run (``sophon-dsl cancel RUN_ID``)."""
        if on_cancel is not None:
            self._watch = asyncio.ensure_future(watch_cancel(self.backend, self.run_id, on_cancel))

        async def renew() -> None:
            loop = asyncio.get_running_loop()
            while True:
                await asyncio.sleep(self.lease_s / 3)
                await loop.run_in_executor(None, self.backend.acquire_lease, self.run_id, self.owner, self.lease_s)

        self._renewal = asyncio.ensure_future(renew())

    async def finish(self, summary: dict | None) -> None:
        """Record how the run ended (``summary`` None: it did not end, it was interrupted),
        release the lease, close a store opened for the run."""
        if self._renewal is not None:
            self._renewal.cancel()
        if self._watch is not None:
            self._watch.cancel()
        try:
            if summary is not None:
                await _settled(self.backend.set_status(self.run_id, summary["status"], summary))
            await _settled(self.backend.release_lease(self.run_id, self.owner))
        finally:
            if self.owns_backend:
                self.backend.close()


async def _settled(fut: Any) -> None:
    """Wait for a store operation's future without ever cancelling it (``asyncio.wrap_future``
    would: the writer thread then cannot set its result)."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def landed(_fut: Any) -> None:
        try:
            loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    fut.add_done_callback(landed)
    await done


def stored_agent(store: RunStore, row: dict) -> dict:
    """A recorded agent run as ``runs show`` prints it: how it ended (when it did) and, per
    recorded turn, whether its reply was complete and what became of its calls (calls with an
    intent and no result flagged ``in_doubt``)."""
    run_id = row["run_id"]
    summary = row.get("summary") or {}
    spec = row.get("spec") or {}
    turns = []
    for turn, (text, complete) in sorted(store.load_replies(run_id).items()):
        cid = turn_run_id(run_id, turn)
        committed, intents = store.load_calls(cid), store.load_intents(cid)
        calls = [{"id": c, "status": r["status"], "attempts": r["attempts"], "error": r.get("error")}
                 for c, r in sorted(committed.items(), key=lambda kv: kv[1].get("index", 0))]
        calls += [{"id": c, "status": "pending", "attempts": 0, "error": None, "in_doubt": True}
                  for c in intents if c not in committed]
        turns.append({"turn": turn, "reply": text, "complete": complete, "calls": calls})
    agent = summary.get("agent") or {}
    return {"run_id": run_id, "kind": AGENT_KIND, "status": row["status"], "request": spec.get("request"),
            "output": summary.get("output"), "error": summary.get("error"), "state": agent.get("state"),
            "waiting": summary.get("waiting") if row["status"] == "waiting" else None, "recorded_turns": turns,
            # the session log: the request logged when the run began, the answer when it ended
            "session": agent.get("session") or spec.get("session") or []}
