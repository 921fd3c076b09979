"""What the dashboard shows, read from the run store (no web framework here: the JSON API and
the pages both use these functions, and tests call them directly).

Every run the CLI records lives in the store (``runs``, ``calls``, ``intents``, ``log``);
the run itself may be in another process, so "live" means reading the store again: a call
with an intent and no committed record is running while its run is, in doubt after.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..durable.report import run_summary, stored_attempts, stored_result, waiting_view

if TYPE_CHECKING:  # (named in annotations only)
    from ..durable.base import RunStore

__all__ = ["list_runs", "run_json", "snapshot", "plan_view", "call_detail", "agent_view", "agent_changes", "goal_view",
           "goal_changes", "TERMINAL", "call_rows", "load_progress", "snapshot_changes", "status_counts", "log_by_call"]

TERMINAL = frozenset({"succeeded", "failed", "cancelled", "rejected"})
MAX_LAYER = 200  # nodes drawn per DAG layer; the rest of a wide fan-out is one "+N more" node


def kind_of(row: dict) -> str:
    return (row.get("spec") or {}).get("kind") or "plan"


def status_counts(committed: dict) -> dict[str, int]:
    """How many recorded calls ended with each status."""
    counts: dict[str, int] = {}
    for rec in committed.values():
        st = rec.get("status") or "unknown"
        counts[st] = counts.get(st, 0) + 1
    return counts


def list_runs(store: RunStore, status: str | None = None, text: str | None = None, offset: int = 0,
              limit: int = 50, counts_of: Any = None) -> tuple[list[dict], int]:
    """The runs newest first (``status`` and a case-insensitive ``text`` in the id, goal, plan
    id or plan file), one page of them with durations and call counts, and how many matched.
    ``counts_of(row)`` gives a run's counts when the caller keeps them (the app does, for runs
    that are not running)."""
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
        item["calls"] = counts_of(r) if counts_of is not None else status_counts(store.load_calls(r["run_id"]))
        item["calls_total"] = r.get("calls_total")  # the plan's calls (None: an agent or goal run, or an old row)
        out.append(item)
    return out, len(rows)


def run_json(store: RunStore, row: dict) -> dict:
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


def load_progress(store: RunStore, run_id: str) -> tuple[dict, dict, dict]:
    """The run's committed call records, its intents (calls started, outcome not known) and
    the attempts so far of calls being retried (``RunStore.put_attempts``; a call's committed
    record supersedes them)."""
    return store.load_calls(run_id), store.load_intents(run_id), store.load_attempts(run_id)


def _live_log(attempts: list) -> list[dict]:
    """A retried call's attempts so far as :func:`stored_attempts` gives a record's (POSIX times)."""
    return stored_attempts({"attempt_log": attempts}, _same) or []


def snapshot(store: RunStore, row: dict, plan: Any = None, progress: tuple[dict, dict] | None = None) -> dict:
    """The run's status and each call's (pending, running, succeeded, failed, skipped,
    cancelled, waiting, in doubt), with the map items' progress: what the live page polls.
    ``progress`` is :func:`load_progress`'s answer when the caller has it already."""
    run_id, status = row["run_id"], row["status"]
    committed, intents, live = progress if progress is not None else load_progress(store, run_id)
    calls: dict[str, str] = {}
    maps: dict[str, dict[str, int]] = {}
    waiting = (row.get("summary") or {}).get("waiting") if status == "waiting" else None
    asked = {c.get("id") for c in (waiting or {}).get("calls") or () if isinstance(c, dict)}
    ids = plan.call_ids() if plan is not None else sorted(set(committed) | set(intents))
    # calls being retried (not ended): their attempts so far, so the page redraws as they fail
    tries = {cid: len(log) for cid, log in live.items() if cid not in committed and isinstance(log, list)}
    for cid in ids:
        calls[cid] = _status(cid, committed, intents, status, asked, tries)
    for cid in set(committed) | set(intents):
        k = cid.rfind("[")
        if k > 0 and "]." in cid[k:]:
            m = maps.setdefault(cid[:k], {})
            st = _status(cid, committed, intents, status, asked, tries)
            m[st] = m.get(st, 0) + 1
    return {"run_id": run_id, "status": status, "calls": calls, "maps": maps, "updated": row.get("updated"),
            "attempts": tries}


def _status(cid: str, committed: dict, intents: dict, run_status: str, asked: set, tries: dict) -> str:
    rec = committed.get(cid)
    if rec is not None:
        return rec.get("status") or "unknown"
    if cid in asked:
        return "waiting"
    if cid in intents or cid in tries:  # (an idempotent call has no intent, but a retried one has attempts)
        return "running" if run_status == "running" else "in doubt"
    return "pending"


def plan_view(row: dict) -> dict:
    """The plan's DAG laid out in layers (each call one layer after its deepest dependency),
    at most MAX_LAYER calls drawn per layer (the rest one "+N more" node), with the edges,
    the calls' tools and each call's dependencies (for the timeline's critical path): what
    the run page draws.  It depends on the plan alone, so the app keeps it per run."""
    from ..dataflow import DataFlow

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
    group: dict[int, str] = {}   # a call not drawn -> the "+N more" node of its layer
    for d in sorted(layers):
        members = layers[d]
        for pos, i in enumerate(members[:MAX_LAYER]):
            shown.add(i)
            call = plan.calls[i]
            nodes.append({"id": ids[i], "tool": call.tool, "layer": d, "pos": pos,
                          "map": call.map is not None})
        if len(members) > MAX_LAYER:
            more_id = f"+{d}"
            hidden.append({"id": more_id, "layer": d, "pos": MAX_LAYER, "more": len(members) - MAX_LAYER})
            for i in members[MAX_LAYER:]:
                group[i] = more_id
    # edges between drawn nodes; a large fan-in from calls not drawn is one edge from their
    # "+N more" node (a call reading 10,000 others draws at most one line per layer)
    edges: set[tuple[str, str]] = set()
    for i in shown:
        for j in flow.deps[i]:
            if j in shown:
                edges.add((ids[j], ids[i]))
            else:
                edges.add((group[j], ids[i]))
    return {"plan": plan, "ids": ids, "deps": {ids[i]: [ids[j] for j in flow.deps[i]] for i in range(len(ids))},
            "nodes": nodes, "hidden": hidden, "edges": sorted(edges),
            "layers": len(layers), "width": min(max((len(v) for v in layers.values()), default=0), MAX_LAYER + 1)}


def _same(v: Any) -> Any:
    return v


def call_rows(plan: Any, ids: list[str], progress: tuple[dict, dict]) -> list[dict]:
    """Each call of the plan as ``runs show --json`` lists it (id, tool, status, attempts,
    error, reason, in doubt, each attempt; times as POSIX seconds, not formatted), without
    replaying the run's state log: the page's table and timeline need no state."""
    committed, intents, live = progress
    out = []
    for cid, call in zip(ids, plan.calls):
        rec = committed.get(cid)
        log = live.get(cid) if rec is None else None
        if isinstance(log, list) and log:  # being retried: its attempts so far
            tries = _live_log(log)
            out.append({"id": cid, "tool": call.tool, "status": "running", "attempts": len(tries),
                        "error": None, "reason": None, "started_at": tries[0]["started_at"], "ended_at": None,
                        "in_doubt": False, "attempt_log": tries})
        elif rec is not None:
            out.append({"id": cid, "tool": call.tool, "status": rec["status"], "attempts": rec["attempts"],
                        "error": rec.get("error"), "reason": rec.get("reason"),
                        "started_at": rec.get("started"), "ended_at": rec.get("ended"),
                        "attempt_log": stored_attempts(rec, _same)})
        else:
            doubt = cid in intents
            out.append({"id": cid, "tool": call.tool, "status": "pending", "attempts": 0, "error": None,
                        "reason": "started; outcome unknown" if doubt else None, "started_at": None,
                        "ended_at": None, "in_doubt": doubt, "attempt_log": []})
    return out


def timeline(result: dict, deps: dict[str, list[str]], max_bars: int = 300) -> dict:
    """Bars (start, end in seconds from the first start) for calls that ran (times as ISO
    text or POSIX seconds), each with its attempts' ``segments`` (start, end, status, error
    code: the gaps between them are the backoff), and the critical path: from the call that
    ended last, back through the dependency that ended last."""
    from datetime import datetime

    def ts(v: Any) -> float | None:
        if isinstance(v, (int, float)):
            return float(v)
        if not isinstance(v, str):
            return None
        try:
            return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None

    spans, attempts, status, tries = {}, {}, {}, {}
    for c in result.get("calls") or ():
        s, e = ts(c.get("started_at")), ts(c.get("ended_at"))
        if e is None and s is not None and c.get("attempt_log"):
            # a call being retried: drawn up to its last attempt that ended
            e = max((t for a in c["attempt_log"] if (t := ts(a.get("ended_at"))) is not None), default=None)
        if s is not None and e is not None:
            spans[c["id"]] = (s, e)
            attempts[c["id"]] = c.get("attempts") or 1
            status[c["id"]] = c.get("status")
            tries[c["id"]] = c.get("attempt_log")
    if not spans:
        return {"bars": [], "total": 0.0, "critical": [], "ran": 0}
    t0 = min(s for s, _ in spans.values())
    total = max(e for _, e in spans.values()) - t0
    critical, cur = [], max(spans, key=lambda k: spans[k][1])
    while cur is not None:
        critical.append(cur)
        before = [d for d in deps.get(cur, ()) if d in spans]
        cur = max(before, key=lambda k: spans[k][1]) if before else None
    # one bar per call, from its first attempt's start to its last attempt's end, with its
    # attempt count and a segment per attempt (none for a record of an older version, which
    # kept a call's first start and last end only);
    # past max_bars calls, the bars drawn are the critical path's and the longest others:
    # where the time went, without a row per call of a 10,000-call run
    on_path = set(critical)
    kept = spans
    if len(spans) > max_bars:
        rest = sorted((k for k in spans if k not in on_path), key=lambda k: spans[k][0] - spans[k][1])
        kept = {k: spans[k] for k in [*critical, *rest[: max(max_bars - len(critical), 0)]]}
    bars = [{"id": cid, "start": round(s - t0, 6), "end": round(e - t0, 6), "critical": cid in on_path,
             "attempts": attempts[cid], "status": status[cid], "segments": _segments(tries[cid], t0, ts)}
            for cid, (s, e) in sorted(kept.items(), key=lambda kv: kv[1][0])]
    return {"bars": bars, "total": round(total, 6), "critical": critical[::-1], "ran": len(spans)}


def _segments(log: Any, t0: float, ts: Any) -> list[dict]:
    """A call's attempts as timeline segments (seconds from ``t0``); an attempt without both
    times is left out."""
    out = []
    for a in log if isinstance(log, list) else ():
        s, e = ts(a.get("started_at")), ts(a.get("ended_at"))
        if s is None or e is None:
            continue
        err = a.get("error")
        out.append({"attempt": a.get("attempt"), "start": round(s - t0, 6), "end": round(e - t0, 6),
                    "status": a.get("status"), "error": err.get("error") if isinstance(err, dict) else None})
    return out


def log_by_call(entries: list[dict]) -> dict[str, list[dict]]:
    """The run's state log entries grouped by the call that wrote them."""
    out: dict[str, list[dict]] = {}
    for e in entries:
        out.setdefault(e.get("call"), []).append(e)
    return out


def call_detail(store: RunStore, row: dict, call_id: str, plan: Any = None, committed: dict | None = None,
                writes_of: dict[str, list[dict]] | None = None, live: dict | None = None) -> dict | None:
    """One call's panel: its arguments as written, result (what it wrote), error and cause,
    attempts (each one's times, outcome and error), timings, the state paths it wrote, and
    for a map its items.  ``plan``, ``committed`` (the call records), ``writes_of``
    (:func:`log_by_call`) and ``live`` (the attempts of calls being retried) when the caller
    has them; else they are read from ``row`` and the store."""
    run_id = row["run_id"]
    committed = committed if committed is not None else store.load_calls(run_id)
    plan = plan if plan is not None else _stored_plan(row)
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
    if live is None:
        live = store.load_attempts(run_id) if not rec else {}
    writes = [{"path": f"{e['kind']}." + ".".join(map(str, e["path"])) if e["path"] else e["kind"],
               "method": e["method"], "value": e["value"]}
              for e in (writes_of.get(call_id, ()) if writes_of is not None else store.load_log(run_id))
              if e.get("call") == call_id]
    prefix = call_id + "["
    items = sorted(({"id": cid, "status": r.get("status"), "error": r.get("error")}
                    for cid, r in committed.items() if cid.startswith(prefix)), key=lambda r: r["id"])
    return {"id": call_id, "call": text, "status": rec.get("status"), "attempts": rec.get("attempts"),
            "error": rec.get("error"), "reason": rec.get("reason"), "started": rec.get("started"),
            "ended": rec.get("ended"), "output": rec.get("output"), "writes": writes, "items": items,
            "attempt_log": stored_attempts(rec, _same) if rec else _live_log(live.get(call_id) or [])}


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


def _live(turns: list[dict], status: str) -> list[dict]:
    """A running run's calls with an intent and no record are running (``stored_agent``
    says in doubt: what they are once the run stopped), as a plan run's are."""
    if status == "running":
        for t in turns:
            for c in t["calls"]:
                if c.pop("in_doubt", False):
                    c["status"] = "running"
    return turns


def agent_view(store: RunStore, row: dict) -> dict:
    """An agent run as its page shows it: the request, how it ended, and per recorded turn the
    reply as it streamed, the plan it stands for (canonical DSL) and its calls."""
    from ..durable.agent_run import stored_agent

    data = stored_agent(store, row)
    turns = []
    for t in _live(data.get("recorded_turns") or [], row["status"]):
        reply = t.get("reply") or ""
        turns.append({**t, "plan": _turn_plan(reply) if reply else None})
    return {**data, "recorded_turns": turns, "waiting": waiting_view(data.get("waiting"))}


def agent_changes(sent: dict, store: RunStore, row: dict) -> dict | None:
    """What an agent run's live page needs since ``sent`` (``{"turns": {n: turn}, "head":
    ...}`` as last sent, updated here; ``{}`` at first): the run's status, output, error,
    waiting request and turn count, with the turns that are new or changed since (each with
    the plan it stands for: a reply is parsed again only when it grew), or None when nothing
    changed.  ``row`` may be the row without its spec (``get_run_head``)."""
    from ..durable.agent_run import stored_agent

    data = stored_agent(store, row)
    turns = _live(data.get("recorded_turns") or [], row["status"])
    known = sent.setdefault("turns", {})
    changed = []
    for t in turns:
        if known.get(t["turn"]) != t:
            known[t["turn"]] = t
            changed.append({**t, "plan": _turn_plan(t["reply"]) if t.get("reply") else None})
    head = {"kind": "agent", "status": row["status"], "count": len(turns), "output": data.get("output"),
            "error": data.get("error"), "waiting": waiting_view(data.get("waiting"))}
    if not changed and sent.get("head") == head:
        return None
    sent["head"] = head
    return {**head, "turns": changed}


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


def goal_changes(before: dict | None, row: dict) -> tuple[dict, dict | None]:
    """A goal run's view now (:func:`goal_view`, with ``"kind": "goal"``) and what its live
    page needs after ``before``: the whole view when it changed (a goal has tens of steps,
    not thousands), else None."""
    now = {"kind": "goal", **goal_view(row)}
    return now, (now if now != before else None)


def snapshot_changes(before: dict | None, now: dict) -> dict | None:
    """What the live page needs after ``before``: the whole snapshot first, then only the
    calls whose status changed (``"partial": true``; the map counts and the run's status
    whole), or None when nothing changed.  A 10,000-call run sends 10,000 statuses once."""
    if before is None:
        return now
    changed = {k: v for k, v in now["calls"].items() if before["calls"].get(k) != v}
    if (not changed and now["status"] == before["status"] and now["maps"] == before["maps"]
            and now.get("attempts") == before.get("attempts")):
        return None
    return {**now, "calls": changed, "partial": True}
