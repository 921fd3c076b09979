"""A recorded run as the CLI shows it (``sophon-dsl runs show``): RunResult-shaped JSON
built from the store alone, with ``run_id`` and the calls found in doubt flagged."""

from __future__ import annotations

from typing import Any

from ..model import OutputMethod
from ..runtime.state import StateLog, iso_time
from .planload import load_stored_plan

__all__ = ["run_summary", "stored_result"]

_METHODS = {m.value: m for m in OutputMethod}


def _iso(t: Any) -> Any:
    return iso_time(t) if isinstance(t, (int, float)) else t


def run_summary(row: dict) -> dict:
    """One line of ``runs list --json``."""
    return {"run_id": row["run_id"], "status": row["status"], "plan_id": row.get("plan_id"),
            "goal": row.get("goal"), "created": _iso(row.get("created")), "updated": _iso(row.get("updated"))}


def stored_result(store: Any, row: dict, with_log: bool = False) -> dict:
    run_id = row["run_id"]
    plan = load_stored_plan(row["spec"]["plan"])
    committed = store.load_calls(run_id)
    intents = store.load_intents(run_id)
    entries = store.load_log(run_id)
    log = StateLog()
    for e in entries:
        log.write(e["kind"], tuple(e["path"]), e["value"], _METHODS[e["method"]], e["call"], e["date"])
    calls = []
    for cid, call in zip(plan.call_ids(), plan.calls):
        rec = committed.get(cid)
        if rec is not None:
            calls.append({"id": cid, "tool": call.tool, "status": rec["status"], "attempts": rec["attempts"],
                          "error": rec.get("error"), "reason": rec.get("reason"),
                          "started_at": _iso(rec.get("started")), "ended_at": _iso(rec.get("ended"))})
        else:
            doubt = cid in intents
            calls.append({"id": cid, "tool": call.tool, "status": "pending", "attempts": 0, "error": None,
                          "reason": "started; outcome unknown" if doubt else None, "started_at": None,
                          "ended_at": None, "in_doubt": doubt})
    summary = row.get("summary") or {}
    return {"status": row["status"], "state": log.resolved(exclude=("input",)), "output": summary.get("output"),
            "calls": calls, "error": summary.get("error"), "log": log.to_json() if with_log else [],
            "run_id": run_id, "waiting": summary.get("waiting")}
