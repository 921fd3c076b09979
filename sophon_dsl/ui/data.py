"""What the dashboard shows, read from the run store (no web framework here: the JSON API and
the pages both use these functions, and tests call them directly).

Every run the CLI records lives in the store (``runs``, ``calls``, ``intents``, ``log``);
the run itself may be in another process, so "live" means reading the store again: a call
with an intent and no committed record is running while its run is, in doubt after.
"""

from __future__ import annotations

from typing import Any

from ..durable.report import run_summary, stored_result, waiting_view

__all__ = ["list_runs", "run_json", "snapshot", "plan_view", "call_detail", "agent_view", "goal_view", "TERMINAL"]

TERMINAL = frozenset({"succeeded", "failed", "cancelled", "rejected"})
MAX_LAYER = 200  # nodes drawn per DAG layer; the rest of a wide fan-out is one "+N more" node


def kind_of(row: dict) -> str:
    return (row.get("spec") or {}).get("kind") or "plan"


def list_runs(store: Any, status: str | None = None, text: str | None = None, offset: int = 0,
              limit: int = 50) -> tuple[list[dict], int]:
    """The runs newest first (``status`` and a case-insensitive ``text`` in the id, goal or plan
    id), one page of them with durations and call counts, and how many matched."""
    rows = store.list_runs(status=status or None)
    if text:
        t = text.lower()
        rows = [r for r in rows if any(t in str(r.get(k) or "").lower()
                                 for k in ("run_id", "goal", "plan_id", "plan_file"))]
    page = rows[offset: offset + limit]
    out = []
    for r in page:
        item = run_summary(r)
        created, updated = r.get("created"), r.get("updated")
        item["duration_s"] = (round(updated - created, 3) if r["status"] in TERMINAL | {"waiting"}
                              and isinstance(created, (int, float)) and isinstance(updated, (int, float)) else None)
        counts: dict[str, int] = {}
        for rec in store.load_calls(r["run_id"]).values():
            st = rec.get("status") or "unknown"
            counts[st] = counts.get(st, 0) + 1
        item["calls"] = counts
        item["calls_total"] = r.get("calls_total")  # the plan's calls (None: an agent or goal run, or an old row)
        out.append(item)
    return out, len(rows)


def run_json(store: Any, row: dict) -> dict:
    """The run as ``sophon-dsl runs show RUN_ID --json`` prints it (plan, agent or goal run)."""
    kind = kind_of(row)
    if kind == "goal":
        summary = row.get("summary") or {}
        return {**(summary.get("goal") or {}), "run_id": row["run_id"], "status": row["status"],
                "waiting": summary.get("waiting")}
    if kind == "agent":
        from ..durable.agent_run import stored_agent

        data = stored_agent(store, row)
        data["waiting"] = waiting_view(data.get("waiting"))
        return data
    return stored_result(store, row)


def _stored_plan(row: dict) -> Any:
    from ..durable.planload import load_stored_plan

    return load_stored_plan(row["spec"]["plan"])


def snapshot(store: Any, row: dict, plan: Any = None) -> dict:
    """The run's status and each call's (pending, running, succeeded, failed, skipped,
    cancelled, waiting, in doubt), with the map items' progress: what the live page polls."""
    run_id, status = row["run_id"], row["status"]
    committed = store.load_calls(run_id)
    intents = store.load_intents(run_id)
    calls: dict[str, str] = {}
    maps: dict[str, dict[str, int]] = {}
    waiting = (row.get("summary") or {}).get("waiting") if status == "waiting" else None
    asked = {c.get("id") for c in (waiting or {}).get("calls") or () if isinstance(c, dict)}
    ids = plan.call_ids() if plan is not None else sorted(set(committed) | set(intents))
    for cid in ids:
        calls[cid] = _status(cid, committed, intents, status, asked)
    for cid in set(committed) | set(intents):
        k = cid.rfind("[")
        if k > 0 and "]." in cid[k:]:
            m = maps.setdefault(cid[:k], {})
            st = _status(cid, committed, intents, status, asked)
            m[st] = m.get(st, 0) + 1
    return {"run_id": run_id, "status": status, "calls": calls, "maps": maps, "updated": row.get("updated")}


def _status(cid: str, committed: dict, intents: dict, run_status: str, asked: set) -> str:
    rec = committed.get(cid)
    if rec is not None:
        return rec.get("status") or "unknown"
    if cid in asked:
        return "waiting"
    if cid in intents:
        return "running" if run_status == "running" else "in doubt"
    return "pending"


def plan_view(row: dict) -> dict:
    """The plan's DAG laid out in layers (each call one layer after its deepest dependency),
    with the edges, the calls' tools and arguments as written, and the critical path of the
    timeline: what the run page draws."""
    from ..dataflow import DataFlow
    from ..syntax.dsl_printer import format_call

    plan = _stored_plan(row)
    ids = plan.call_ids()
    flow = DataFlow.build(plan.calls, ids)
    depth = [0] * len(ids)
    for i in flow.topo_order()[0]:
        d = flow.deps[i]
        depth[i] = 1 + max((depth[j] for j in d), default=-1)
    layers: dict[int, list[int]] = {}
    for i, d in enumerate(depth):
        layers.setdefault(d, []).append(i)
    shown: set[int] = set()
    nodes, hidden = [], []
    for d in sorted(layers):
        members = layers[d]
        for pos, i in enumerate(members[:MAX_LAYER]):
            shown.add(i)
            call = plan.calls[i]
            nodes.append({"id": ids[i], "tool": call.tool, "layer": d, "pos": pos,
                          "map": call.map is not None})
        if len(members) > MAX_LAYER:
            hidden.append({"layer": d, "pos": MAX_LAYER, "more": len(members) - MAX_LAYER})
    edges = [(ids[j], ids[i]) for i in shown for j in flow.deps[i] if j in shown]
    texts = {}
    for cid, call in zip(ids, plan.calls):
        try:
            texts[cid] = format_call(call, comments=False)
        except Exception:  # noqa: BLE001 - a call the printer cannot print is shown by its tool
            texts[cid] = call.tool
    return {"plan": plan, "ids": ids, "deps": {ids[i]: [ids[j] for j in flow.deps[i]] for i in range(len(ids))},
            "nodes": nodes, "hidden": hidden, "edges": edges, "texts": texts,
            "layers": len(layers), "width": min(max((len(v) for v in layers.values()), default=0), MAX_LAYER + 1)}


def timeline(result: dict, deps: dict[str, list[str]]) -> dict:
    """Bars (start, end in seconds from the first start) for calls that ran, and the critical
    path: from the call that ended last, back through the dependency that ended last."""
    from datetime import datetime

    def ts(v: Any) -> float | None:
        if not isinstance(v, str):
            return None
        try:
            return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None

    spans, attempts, status = {}, {}, {}
    for c in result.get("calls") or ():
        s, e = ts(c.get("started_at")), ts(c.get("ended_at"))
        if s is not None and e is not None:
            spans[c["id"]] = (s, e)
            attempts[c["id"]] = c.get("attempts") or 1
            status[c["id"]] = c.get("status")
    if not spans:
        return {"bars": [], "total": 0.0, "critical": []}
    t0 = min(s for s, _ in spans.values())
    total = max(e for _, e in spans.values()) - t0
    critical, cur = [], max(spans, key=lambda k: spans[k][1])
    while cur is not None:
        critical.append(cur)
        before = [d for d in deps.get(cur, ()) if d in spans]
        cur = max(before, key=lambda k: spans[k][1]) if before else None
    # one bar per call, from its first attempt's start to its last attempt's end (the store
    # keeps a call's first start and last end, not each attempt's), with its attempt count
    bars = [{"id": cid, "start": round(s - t0, 6), "end": round(e - t0, 6), "critical": cid in critical,
             "attempts": attempts[cid], "status": status[cid]}
            for cid, (s, e) in sorted(spans.items(), key=lambda kv: kv[1][0])]
    return {"bars": bars, "total": round(total, 6), "critical": critical[::-1]}


def call_detail(store: Any, row: dict, call_id: str) -> dict | None:
    """One call's panel: its arguments as written, result (what it wrote), error and cause,
    attempts, timings, the state paths it wrote, and for a map its items."""
    run_id = row["run_id"]
    committed = store.load_calls(run_id)
    plan = _stored_plan(row)
    ids = plan.call_ids()
    text = None
    if call_id in ids:
        from ..syntax.dsl_printer import format_call

        try:
            text = format_call(plan.calls[ids.index(call_id)], comments=False)
        except Exception:  # noqa: BLE001
            text = None
    elif call_id not in committed:
        return None
    rec = committed.get(call_id) or {}
    writes = [{"path": f"{e['kind']}." + ".".join(map(str, e["path"])) if e["path"] else e["kind"],
               "method": e["method"], "value": e["value"]}
              for e in store.load_log(run_id) if e.get("call") == call_id]
    prefix = call_id + "["
    items = sorted(({"id": cid, "status": r.get("status"), "error": r.get("error")}
                    for cid, r in committed.items() if cid.startswith(prefix)), key=lambda r: r["id"])
    return {"id": call_id, "call": text, "status": rec.get("status"), "attempts": rec.get("attempts"),
            "error": rec.get("error"), "reason": rec.get("reason"), "started": rec.get("started"),
            "ended": rec.get("ended"), "output": rec.get("output"), "writes": writes, "items": items}


def _turn_plan(reply: str) -> str | None:
    """A turn's reply as the plan it stands for, in canonical DSL (None when no form reads it:
    an incomplete or broken reply is shown as it came)."""
    from .. import loader
    from ..syntax.dsl_printer import print_dsl

    text = reply.lstrip()
    form = "json" if text.startswith(("{", "[")) else "dsl"
    try:
        loaded = loader.parse(reply, form)
        if not loaded.plan.calls and loaded.plan.output is None:
            return None
        return print_dsl(loaded.plan)
    except Exception:  # noqa: BLE001 - a reply the printer cannot print is shown as sent
        return None


def agent_view(store: Any, row: dict) -> dict:
    """An agent run as its page shows it: the request, how it ended, and per recorded turn the
    reply as it streamed, the plan it stands for (canonical DSL) and its calls."""
    from ..durable.agent_run import stored_agent

    data = stored_agent(store, row)
    turns = []
    for t in data.get("recorded_turns") or ():
        reply = t.get("reply") or ""
        turns.append({**t, "plan": _turn_plan(reply) if reply else None})
    return {**data, "recorded_turns": turns, "waiting": waiting_view(data.get("waiting"))}


def goal_view(row: dict) -> dict:
    """A goal run as its page shows it: the goal, its steps (task, status, verdict, confidence,
    the evaluator's note), the facts found, the output and error, from the record the goal
    keeps in the store (written when it ends or waits)."""
    summary = row.get("summary") or {}
    goal = summary.get("goal") or {}
    execution = goal.get("goal_execution") or {}
    return {"run_id": row["run_id"], "status": row["status"], "goal": row.get("goal"),
            "steps": [s for s in execution.get("steps") or () if isinstance(s, dict)],
            "facts": goal.get("facts") if isinstance(goal.get("facts"), dict) else {},
            "output": goal.get("output"), "error": goal.get("error"), "replans": execution.get("replans"),
            "steps_run": execution.get("steps_run"), "elapsed_s": execution.get("elapsed_s"),
            "waiting": summary.get("waiting")}
