"""A recorded run as the CLI shows it (``sophon-dsl runs show``): RunResult-shaped JSON
built from the store alone, with ``run_id`` and the calls found in doubt flagged."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..model import OutputMethod
from ..runtime.state import StateLog, iso_time
from .planload import load_stored_plan

if TYPE_CHECKING:  # (named in annotations only)
    from .base import RunStore

__all__ = ["run_summary", "shown_status", "stored_attempts", "stored_result", "waiting_lines", "waiting_view"]

_METHODS = {m.value: m for m in OutputMethod}


def _iso(t: Any) -> Any:
    return iso_time(t) if isinstance(t, (int, float)) else t


def stored_attempts(rec: dict, fmt: Any = _iso) -> list[dict] | None:
    """A committed call record's attempts, oldest first: ``{"attempt", "started_at",
    "ended_at", "status", "error"}`` each, times through ``fmt`` (ISO 8601 text by default).
    A call attempted once has its record's own times; a call that never started, none;
    None when the call was attempted more than once but its record (committed by an older
    version) kept only its first start and last end."""
    log = rec.get("attempt_log")
    if isinstance(log, list):
        return [{"attempt": a.get("attempt"), "started_at": fmt(a.get("started")), "ended_at": fmt(a.get("ended")),
                 "status": a.get("status"), "error": a.get("error")} for a in log if isinstance(a, dict)]
    n, started = rec.get("attempts"), rec.get("started")
    if n == 1 and started is not None:
        status = rec.get("status")
        return [{"attempt": 1, "started_at": fmt(started), "ended_at": fmt(rec.get("ended")), "status": status,
                 "error": rec.get("error") if status != "succeeded" else None}]
    return [] if not n or started is None else None


def shown_status(row: dict, now: float | None = None) -> str:
    """The status a person should see: a run recorded as ``running`` whose lease has
    expired, or whose lease names a process of this host that is gone, is ``interrupted``
    (its process crashed or was killed; ``resume`` continues it).  Else the stored status."""
    status = row.get("status")
    if status != "running":
        return status
    import time

    until = row.get("lease_until")
    if row.get("lease_owner") is None or until is None or until < (time.time() if now is None else now):
        return "interrupted"
    from .resume import _dead_owner

    return "interrupted" if _dead_owner(row.get("lease_owner")) else status


def run_summary(row: dict, recorded: int = 0) -> dict:
    """One line of ``runs list --json``: ``file`` the plan's file (None: not from a file, or
    recorded before it was kept), ``calls`` the calls recorded so far and the plan's total."""
    return {"run_id": row["run_id"], "status": shown_status(row), "plan_id": row.get("plan_id"),
            "goal": row.get("goal"), "created": _iso(row.get("created")), "updated": _iso(row.get("updated")),
            "file": row.get("plan_file"), "calls": {"recorded": recorded, "total": row.get("calls_total")}}


def stored_result(store: RunStore, row: dict, with_log: bool = False) -> dict:
    run_id = row["run_id"]
    plan = load_stored_plan(row["spec"]["plan"])
    committed = store.load_calls(run_id)
    intents = store.load_intents(run_id)
    live = store.load_attempts(run_id)  # the attempts so far of calls being retried
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
                          "started_at": _iso(rec.get("started")), "ended_at": _iso(rec.get("ended")),
                          "attempt_log": stored_attempts(rec)})
        else:
            doubt = cid in intents
            calls.append({"id": cid, "tool": call.tool, "status": "pending", "attempts": 0, "error": None,
                          "reason": "started; outcome unknown" if doubt else None, "started_at": None,
                          "ended_at": None, "in_doubt": doubt,
                          "attempt_log": stored_attempts({"attempt_log": live[cid]}) if cid in live else []})
    summary = row.get("summary") or {}
    return {"status": shown_status(row), "state": log.resolved(exclude=("input",)), "output": summary.get("output"),
            "calls": calls, "error": summary.get("error"), "log": log.to_json() if with_log else [],
            "run_id": run_id, "waiting": waiting_view(summary.get("waiting"), plan),
            "items": _item_calls(committed, intents)}


def _item_calls(committed: dict, intents: dict) -> list[dict]:
    """The calls of map items the store holds (``c1[2].translate``): each committed one
    with its status, and each started one whose outcome is unknown (``in_doubt``)."""
    out = []
    for cid in sorted({c for c in (*committed, *intents) if "[" in c}, key=_item_order):
        rec = committed.get(cid)
        if rec is not None:
            out.append({"id": cid, "status": rec["status"], "attempts": rec.get("attempts"),
                        "error": rec.get("error"), "in_doubt": False, "attempt_log": stored_attempts(rec)})
        else:
            out.append({"id": cid, "status": "pending", "attempts": 0, "error": None, "in_doubt": True,
                        "attempt_log": []})
    return out


def _item_order(cid: str) -> tuple:
    """``c1[10].f`` after ``c1[2].f``: the numbers in an item call id compared as numbers."""
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"\[(\d+)\]", cid))


def shown_text(value: Any, limit: int = 0) -> str:
    """Text from the row as the prompt shows text: control and bidi characters escaped, one
    line, bounded (a row is data anyone with the store can write: it must not drive the terminal)."""
    from ..runtime.approval import MAX_ARGS_CHARS, bounded_text

    # (stored arguments were cut to MAX_ARGS_CHARS already, with a note of the rest: kept whole)
    return bounded_text(value if isinstance(value, str) else str(value), limit or MAX_ARGS_CHARS + 40)


def shown_json(value: Any) -> str:
    """``value`` as indented JSON for a terminal: non-ASCII text kept readable, but control and
    bidirectional characters written as ``\\uXXXX`` escapes (still valid JSON), so a stored value
    cannot reorder or recolour what ``runs show`` prints."""
    from ..runtime.approval import escape_hidden

    return escape_hidden(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def waiting_view(waiting: Any, plan: Any = None) -> Any:
    """A run's stored ``waiting`` record with each call's ``args`` (as the approval prompt
    shows them; issue 24, item 2), the row's text escaped.  Records stored before ``args``
    existed get the plan gate's arguments from the stored ``plan`` (as written); a call
    gate's run-time values were not kept (``args`` null)."""
    if not isinstance(waiting, dict):  # (None, or a record only an edited row holds)
        return None
    calls = []
    stored = waiting.get("calls")
    for c in stored if isinstance(stored, list) else ():
        if not isinstance(c, dict):
            continue
        args = c.get("args")
        if not isinstance(args, str):
            args = _plan_args(waiting, c, plan)
        calls.append({**c, "args": None if args is None else shown_text(args)})
    return {**waiting, "calls": calls}


def _plan_args(waiting: dict, call: dict, plan: Any) -> str | None:
    if plan is None or waiting.get("kind") != "plan":
        return None
    from ..runtime.approval import ApprovalRequest, shown_arguments

    return shown_arguments(ApprovalRequest("plan", plan, (call,)), call) or None


def waiting_lines(waiting: Any) -> list[str]:
    """What a waiting run asks, as lines for the terminal: each call's id, tool, risk, why
    and arguments (``waiting`` as :func:`waiting_view` returns it)."""
    if not isinstance(waiting, dict):
        return []
    lines = []
    kind = waiting.get("kind")
    if kind == "unknown":
        lines.append(f"call {shown_text(waiting.get('call_id'))} started before the run was interrupted and its "
                     "outcome is unknown: approving runs it again")
    for c in waiting.get("calls") or ():
        lines.append(f"{shown_text(c.get('id'), 200)}: {shown_text(c.get('tool'), 200)} "
                     f"(risk {shown_text(c.get('risk'), 40)})")
        if c.get("why"):
            lines.append(f"    why: {shown_text(c['why'])}")
        if c.get("args"):
            lines.append(f"    {c['args']}")
        elif c.get("args") is None and kind != "plan":
            lines.append("    (its arguments were not recorded)")
    return lines
