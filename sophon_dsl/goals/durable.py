"""A goal in the run store: a goal that ends ``hitl`` with nobody to ask is kept there,
status ``waiting``, and continues later from any process with the person's answer
(``GoalRunner.aresume``; ``sophon-dsl approve RUN_ID [--reject]``).

The store's run row holds ``spec = {"kind": "goal", "input", "meta", "checkpoint"}``: the
loop's state (facts, every step's record and result, the plans, the counters) and the steps
waiting for a person with what their sub-agent produced. Everything is JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from .result import StepRecord, StepStatus
from .steps import PlannedStep

if TYPE_CHECKING:  # (the durable package is imported only by a recorded goal)
    from ..durable.base import RunStore

__all__ = ["GOAL_KIND", "GoalState", "PlanView", "decision_name", "dump_state", "load_state"]

GOAL_KIND = "goal"


def decision_name(run_id: str) -> str:
    """The one decision a waiting goal asks for: it answers every step that waits."""
    return f"goal:{run_id}:hitl"


def _step(data: dict) -> PlannedStep:
    return PlannedStep(data["id"], data["task"], data["success_criterion"], tuple(data.get("expected_findings", ())),
                       tuple(data.get("depends_on", ())), data.get("subagent_hint"))


def _record(data: dict) -> StepRecord:
    return StepRecord(data["id"], data["task"], StepStatus(data["status"]), data.get("verdict"),
                      data.get("confidence"), data.get("note", ""), data.get("plan", 0))


class PlanView(Protocol):
    """The part of a plan of steps a checkpoint keeps: its steps and its number."""

    @property
    def steps(self) -> Sequence[PlannedStep]: ...

    @property
    def number(self) -> int: ...


class GoalState(Protocol):
    """What a checkpoint reads from and puts back into a goal's loop (``runner._Loop``):
    its counters and results, every step's record, and the last plan of steps."""

    facts: dict[str, Any]
    completed: dict[str, dict]
    records: dict[str, StepRecord]
    replans: int
    steps_run: int
    plans: list[list[dict]]
    pending: list[dict]

    @property
    def last(self) -> PlanView | None: ...


def dump_state(loop: GoalState) -> dict:
    last = loop.last
    return {"facts": loop.facts, "completed": loop.completed, "replans": loop.replans, "steps_run": loop.steps_run,
            "plans": loop.plans,
            "records": [{**r.to_json(), "plan": r.plan} for r in loop.records.values()],
            "last_steps": [s.to_json() for s in last.steps] if last is not None else [],
            "last_number": last.number if last is not None else 0,
            "pending": loop.pending}


def load_state(loop: GoalState, data: dict) -> list[PlannedStep]:
    """Put ``data`` back into ``loop``; returns the steps of the plan that was waiting."""
    loop.facts = dict(data["facts"])
    loop.completed = dict(data["completed"])
    loop.replans = data["replans"]
    loop.steps_run = data["steps_run"]
    loop.plans = list(data["plans"])
    loop.records = {r["id"]: _record(r) for r in data["records"]}
    loop.pending = list(data["pending"])
    return [_step(s) for s in data["last_steps"]]


class GoalHold:
    """While a recorded goal runs, its row holds a lease, renewed (``runs list`` and the
    dashboard show it running, not interrupted), and a cancel request stored for it
    (``sophon-dsl cancel RUN_ID``) calls ``on_cancel``; :meth:`release` ends both."""

    lease_s = 60.0

    def __init__(self, store: RunStore, run_id: str, on_cancel: Callable[[], object]) -> None:
        import asyncio

        from ..durable.session import owner_id, watch_cancel

        self.store, self.run_id, self.owner = store, run_id, owner_id()
        self.requested = False

        def cancelled() -> None:
            self.requested = True
            on_cancel()

        self._tasks = [asyncio.ensure_future(self._renew()),
                       asyncio.ensure_future(watch_cancel(store, run_id, cancelled))]

    async def _renew(self) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        while True:
            await loop.run_in_executor(None, self.store.acquire_lease, self.run_id, self.owner, self.lease_s)
            await asyncio.sleep(self.lease_s / 3)

    def release(self) -> None:
        for task in self._tasks:
            task.cancel()
        self.store.release_lease(self.run_id, self.owner).result()
