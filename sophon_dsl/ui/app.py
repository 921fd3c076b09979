"""The dashboard's web app (Starlette): pages and the JSON API over one run store.

Safety (issue 29 item 6): every value from plans, tools and models reaches the page through
:func:`esc` (HTML escaping, bidi and control characters shown as escapes) or the DOM's
``textContent``; no link is built from a value (run ids are URL-quoted into our own
paths); the Content-Security-Policy allows nothing but this server (no inline script, no
CDN); approve / reject are POST requests carrying the CSRF token of the page; with a token
(required off the loopback interface) every request must present it, as a cookie set by
``/?token=...``, an ``Authorization: Bearer`` header or the ``token`` query parameter.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
import secrets
import subprocess
import sys
import threading
import time
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from ..durable.report import waiting_view
from . import data

if TYPE_CHECKING:  # (named in annotations only)
    from ..durable.base import RunStore

__all__ = ["make_app", "esc"]

_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
# bidi controls, other invisible format characters and C0/C1 controls (newline and tab kept)
_HIDDEN = re.compile("[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_PLANS_KEPT = 8  # plan views kept (one of a 10,000-call plan holds its Plan: tens of MB)
# what the store records (a goal run ends complete or blocked)
STATUSES = ("running", "waiting", "succeeded", "failed", "cancelled", "rejected", "complete", "blocked")


def esc(value: Any, limit: int = 20000) -> str:
    """``value`` as HTML text: escaped, invisible and direction-changing characters shown as
    ``\\u202e`` escapes (so a tool's output cannot reorder what the page shows), bounded."""
    import html

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > limit:
        text = text[:limit] + f"… ({len(text) - limit} more characters)"
    text = _HIDDEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return html.escape(text, quote=True)


def _pretty(value: Any) -> str:
    return esc(json.dumps(value, ensure_ascii=False, indent=2, default=str))


class UI:
    """One dashboard: its store, token, CSRF secret and the approvals it started."""

    def __init__(self, store: RunStore, store_url: str | None, token: str | None, poll: float = 0.5) -> None:
        self.store = store
        self.store_url = store_url
        self.token = token
        self.csrf = secrets.token_urlsafe(32)
        self.poll = poll
        self.approvals: dict[str, subprocess.Popen] = {}
        self.plans: dict[tuple, dict] = {}   # (run id, plan hash) -> UI.info's answer, oldest first
        self.done: dict[str, dict] = {}      # run id -> what was read of it (UI._kept), not running
        self.lock = threading.Lock()

    # -------------------------------------------------------------- access

    def allowed(self, request: Request) -> bool:
        if not self.token:
            return True
        given = (request.cookies.get("sophon_ui_token") or request.query_params.get("token")
                 or request.headers.get("authorization", "").removeprefix("Bearer ").strip())
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())

    def csrf_ok(self, request: Request) -> bool:
        given = request.headers.get("x-csrf-token", "")
        if not given or not hmac.compare_digest(given.encode(), self.csrf.encode()):
            return False
        origin = request.headers.get("origin")
        # a browser sends Origin on a cross-site POST: it must be this server
        return origin is None or origin == f"{request.url.scheme}://{request.url.netloc}"

    # -------------------------------------------------------------- helpers

    def row(self, run_id: str) -> dict | None:
        try:
            return self.store.get_run(run_id)
        except Exception:  # noqa: BLE001 - a store error is a 404 here, never a traceback
            return None

    def head(self, run_id: str) -> dict | None:
        """The run's row without its spec (what polling reads)."""
        try:
            return self.store.get_run_head(run_id)
        except Exception:  # noqa: BLE001 - as row()
            return None

    def _kept(self, head: dict) -> dict | None:
        """What was read of a run that is not running, while its row has not changed (such a
        run changes only with its row: status, updated, last_seq): the pages, event streams
        and call panels of a finished 10,000-call run read its calls once."""
        if head["status"] == "running":
            return None
        mark = (head.get("plan_hash"), head["status"], head.get("updated"), head.get("last_seq"))
        with self.lock:
            kept = self.done.get(head["run_id"])
            if kept is None or kept["mark"] != mark:
                while len(self.done) >= _PLANS_KEPT:
                    self.done.pop(next(iter(self.done)))
                kept = self.done[head["run_id"]] = {"mark": mark}
            return kept

    def progress(self, head: dict, pv: dict) -> tuple[list[dict], dict, dict]:
        """The run's calls (data.call_rows), snapshot and timeline."""
        kept = self._kept(head)
        if kept is not None and "page" in kept:
            return kept["page"]
        progress = self.committed(head, kept)
        calls = data.call_rows(pv["plan"], pv["ids"], progress)
        out = (calls, data.snapshot(self.store, head, pv["plan"], progress),
               data.timeline({"calls": calls}, pv["deps"]))
        if kept is not None:
            kept["page"] = out
        return out

    def committed(self, head: dict, kept: dict | None = None) -> tuple[dict, dict]:
        """data.load_progress, kept for a run that is not running."""
        kept = kept if kept is not None else self._kept(head)
        if kept is not None and "progress" in kept:
            return kept["progress"]
        progress = data.load_progress(self.store, head["run_id"])
        if kept is not None:
            kept["progress"] = progress
        return progress

    def counts(self, row: dict) -> dict[str, int]:
        """The run's call counts per status (the runs list)."""
        kept = self._kept(row)
        if kept is not None and "counts" in kept:
            return kept["counts"]
        counts = data.status_counts(self.committed(row, kept)[0] if kept is not None
                                    else self.store.load_calls(row["run_id"]))
        if kept is not None:
            kept["counts"] = counts
        return counts

    def detail(self, head: dict, info: dict, call_id: str) -> dict | None:
        kept = self._kept(head)
        writes = None
        if kept is not None:
            if "writes" not in kept:
                kept["writes"] = data.log_by_call(self.store.load_log(head["run_id"]))
            writes = kept["writes"]
        progress = self.committed(head, kept)
        return data.call_detail(self.store, head, call_id, info["view"]["plan"], progress[0], writes, progress[2])

    def info(self, run_id: str) -> tuple[dict, dict] | None:
        """The run's head row and what depends on its plan alone: ``{"kind", "view"}`` (the
        plan view of a plan run), kept per run and plan hash: reading and laying out a
        10,000-call plan costs seconds, a page or an event stream of it must not pay that
        on every request."""
        head = self.head(run_id)
        if head is None:
            return None
        key = (run_id, head.get("plan_hash"))
        info = self.plans.get(key)
        if info is None:
            row = self.row(run_id)
            if row is None:
                return None
            kind = data.kind_of(row)
            try:
                info = {"kind": kind, "view": data.plan_view(row) if kind == "plan" else None}
            except Exception:  # noqa: BLE001 - a spec this version cannot read: shown as not found
                return None
            with self.lock:
                while len(self.plans) >= _PLANS_KEPT:
                    self.plans.pop(next(iter(self.plans)))
                self.plans[key] = info
        return head, info

    async def call(self, fn: Any, *args: Any) -> Any:
        """Store reads off the event loop (the store's writer thread may be busy)."""
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def _page(title: str, body: str, ui: UI, extra_head: str = "") -> HTMLResponse:
    html = (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="csrf-token" content="{esc(ui.csrf)}">'
            f'<title>{esc(title)} · sophon-dsl</title><link rel="stylesheet" href="/static/app.css">{extra_head}'
            f'</head><body><header><a href="/" class="brand">sophon-dsl runs</a></header><main>{body}</main>'
            f'<script src="/static/app.js"></script></body></html>')
    return HTMLResponse(html)


def _runs_page(ui: UI, request: Request) -> HTMLResponse:
    q = request.query_params
    status = q.get("status") or ""
    status = status if status in STATUSES else ""
    text = (q.get("q") or "")[:200]
    try:
        offset = max(int(q.get("offset") or 0), 0)
    except ValueError:
        offset = 0
    rows, total = data.list_runs(ui.store, status, text, offset, 50, ui.counts)
    opts = "".join(f'<option value="{s}"{" selected" if s == status else ""}>{s}</option>' for s in ("",) + STATUSES)
    head = (f'<h1>Runs</h1><form class="filters" method="get" action="/">'
            f'<label>status <select name="status">{opts}</select></label>'
            f'<label>text <input name="q" value="{esc(text)}" placeholder="id, goal or plan"></label>'
            f'<button type="submit">Filter</button></form>')
    trs = []
    for r in rows:
        counts = ", ".join(f"{esc(k)} {v}" for k, v in sorted(r["calls"].items())) or "none"
        if r.get("calls_total") is not None:
            counts += f' <span class="total">of {esc(r["calls_total"])}</span>'
        dur = f'{r["duration_s"]:.2f} s' if r.get("duration_s") is not None else ""
        trs.append(f'<tr class="run" data-status="{esc(r["status"])}">'
                   f'<td><a href="/runs/{quote(r["run_id"], safe="")}">{esc(r["run_id"])}</a></td>'
                   f'<td><span class="st st-{esc(r["status"])}">{esc(r["status"])}</span></td>'
                   f'<td class="goal">{esc(r.get("goal") or "")}</td>'
                   f'<td class="file">{esc(r.get("file") or "")}</td><td>{esc(r.get("plan_id") or "")}</td>'
                   f'<td>{esc(r.get("created") or "")}</td><td>{dur}</td><td>{counts}</td></tr>')
    table = ('<div class="scroll"><table class="runs"><thead><tr><th>run</th><th>status</th><th>goal</th>'
             '<th>plan file</th><th>plan</th><th>started</th><th>duration</th><th>calls</th></tr></thead><tbody>'
             + ("".join(trs) or '<tr><td colspan="8">no runs</td></tr>') + "</tbody></table></div>")
    nav = []
    base = {"status": status, "q": text}
    if offset > 0:
        nav.append(f'<a href="/?{esc(urlencode({**base, "offset": max(offset - 50, 0)}))}">newer</a>')
    if offset + 50 < total:
        nav.append(f'<a href="/?{esc(urlencode({**base, "offset": offset + 50}))}">older</a>')
    pager = f'<p class="pager">{total} run(s) {" ".join(nav)}</p>'
    return _page("Runs", head + table + pager, ui)


CALLS_PAGE = 500  # rows of the call table per page (a 10,000-call run has 20 pages)


def _run_page(ui: UI, head: dict, info: dict, offset: int = 0) -> HTMLResponse:
    run_id = head["run_id"]
    kind = info["kind"]
    title = (f'<h1>Run <span class="rid">{esc(run_id)}</span></h1>'
             f'<p>status <span id="run-status" class="st st-{esc(head["status"])}">{esc(head["status"])}</span>'
             f' · {esc(kind)} run · goal <span class="goal">{esc(head.get("goal") or "")}</span>'
             + (f' · plan file <span class="file">{esc(head["plan_file"])}</span>' if head.get("plan_file") else "")
             + '</p>')
    attrs = f'data-run="{esc(run_id)}" data-kind="{esc(kind)}" data-status="{esc(head["status"])}"'
    if kind != "plan":  # agent runs: each turn's reply, plan and calls; goal runs: steps, verdicts, facts
        row = ui.row(run_id) or head
        result = data.run_json(ui.store, row)
        body = [title, _waiting_panel(result.get("waiting"), run_id),
                _agent_body(data.agent_view(ui.store, row)) if kind == "agent" else _goal_body(data.goal_view(row))]
        return _page(f"Run {run_id}", f'<div id="run" {attrs}>' + "".join(body) + "</div>", ui)
    pv = info["view"]
    calls, snap, tl = ui.progress(head, pv)
    waiting = waiting_view((head.get("summary") or {}).get("waiting"), pv["plan"])
    body = [title, _waiting_panel(waiting, run_id), _dag(pv, snap), _timeline(tl)]
    total = len(calls)
    offset = min(max(offset, 0), max(total - 1, 0)) // CALLS_PAGE * CALLS_PAGE
    shown = calls[offset: offset + CALLS_PAGE]
    body.append(f'<h2>Calls ({total})</h2>')
    if total > CALLS_PAGE:
        body.append(_calls_pager(run_id, offset, total))
    body.append('<div class="scroll"><table class="calls"><thead><tr><th>call</th><th>tool</th>'
                '<th>status</th><th>attempts</th><th>error</th></tr></thead><tbody>')
    for c in shown:
        st = snap["calls"].get(c["id"], c["status"])
        err = f'{c["error"].get("error")}: {c["error"].get("cause")}' if isinstance(c.get("error"), dict) else ""
        body.append(f'<tr data-call="{esc(c["id"])}"><td><button class="open" data-call="{esc(c["id"])}">'
                    f'{esc(c["id"])}</button></td><td>{esc(c["tool"])}</td>'
                    f'<td><span class="st st-{esc(st.replace(" ", "-"))}" data-status-of="{esc(c["id"])}">'
                    f'{esc(st)}</span></td>'
                    f'<td data-attempts-of="{esc(c["id"])}">{esc(c.get("attempts"))}</td>'
                    f'<td class="err">{esc(err)}</td></tr>')
    body.append('</tbody></table></div><section id="panel" hidden><h2>Call <span id="panel-id"></span></h2>'
                '<div id="panel-body"></div></section>')
    return _page(f"Run {run_id}", f'<div id="run" {attrs}>' + "".join(body) + "</div>", ui)


def _calls_pager(run_id: str, offset: int, total: int) -> str:
    """Pages of the call table, and a field that opens any call's panel by its id (the graph
    and the timeline name calls the current page may not list)."""
    base = f"/runs/{quote(run_id, safe='')}"
    links = []
    if offset > 0:
        links.append(f'<a href="{base}?calls={max(offset - CALLS_PAGE, 0)}">previous</a>')
    if offset + CALLS_PAGE < total:
        links.append(f'<a href="{base}?calls={offset + CALLS_PAGE}">next</a>')
    return (f'<p class="pager">calls {offset + 1}-{min(offset + CALLS_PAGE, total)} of {total} {" ".join(links)} '
            '<label>open call <input id="find-call" size="12" placeholder="c42"></label></p>')


def _ended(out: dict) -> str:
    parts = []
    if out.get("output") is not None:
        parts.append(f'<h2>Output</h2><pre class="output">{_pretty(out["output"])}</pre>')
    if out.get("error"):
        parts.append(f'<h2>Error</h2><pre class="err">{esc(out["error"])}</pre>')
    return f'<div id="ended">{"".join(parts)}</div>'  # (the page's script fills it when a live run ends)


def _agent_body(view: dict) -> str:
    """Each recorded turn: the model's reply as it streamed, the plan it stands for, and what
    became of its calls."""
    parts = [f'<p>request <span class="request">{esc(view.get("request") or "")}</span></p>', _ended(view)]
    turns = view.get("recorded_turns") or []
    parts.append(f'<h2>Turns (<span id="turn-count">{len(turns)}</span>)</h2><div id="turns">')
    for t in turns:
        n = esc(t.get("turn"))
        note = "" if t.get("complete") else " · reply incomplete"
        rows = "".join(
            f'<tr><td>{esc(c.get("id"))}</td>'
            f'<td><span class="st st-{esc(_st(c).replace(" ", "-"))}">{esc(_st(c))}</span></td>'
            f'<td>{esc(c.get("attempts"))}</td><td class="err">{esc(_err(c.get("error")))}</td></tr>'
            for c in t.get("calls") or ())
        calls = ('<div class="scroll"><table class="calls"><thead><tr><th>call</th><th>status</th><th>attempts</th>'
                 f'<th>error</th></tr></thead><tbody>{rows or "<tr><td colspan=4>no calls</td></tr>"}'
                 '</tbody></table></div>')
        plan = (f'<h4>Plan</h4><pre class="plan">{esc(t["plan"])}</pre>' if t.get("plan") else "")
        parts.append(f'<section class="turn" data-turn="{n}"><h3>Turn {n}{note}</h3>'
                     f'<h4>Reply</h4><pre class="reply">{esc(t.get("reply") or "")}</pre>{plan}'
                     f'<h4>Calls</h4>{calls}</section>')
    parts.append("</div>")  # (the page's script adds and redraws turns here while the run goes on)
    if view.get("state"):
        parts.append(f'<h2>State</h2><pre>{_pretty(view["state"])}</pre>')
    return "".join(parts)


def _goal_body(view: dict) -> str:
    """The goal's steps with their verdicts, and the facts it established."""
    parts = [_ended(view)]
    steps = view.get("steps") or []
    rows = "".join(
        f'<tr data-step="{esc(st.get("id"))}"><td>{esc(st.get("id"))}</td><td>{esc(st.get("task") or "")}</td>'
        f'<td><span class="st st-{esc(st.get("status"))}">{esc(st.get("status"))}</span></td>'
        f'<td class="verdict">{esc(st.get("verdict") or "")}</td>'
        f'<td>{esc("" if st.get("confidence") is None else st.get("confidence"))}</td>'
        f'<td>{esc(st.get("note") or "")}</td></tr>' for st in steps)
    extra = []
    if view.get("replans") is not None:
        extra.append(f'{esc(view["replans"])} replan(s)')
    if view.get("steps_run") is not None:
        extra.append(f'{esc(view["steps_run"])} step(s) run')
    if view.get("elapsed_s") is not None:
        extra.append(f'{esc(view["elapsed_s"])} s')
    # (ids: the page's script redraws these from the run's `view` events while it goes on)
    parts.append(f'<h2>Steps (<span id="step-count">{len(steps)}</span>)</h2><p id="goal-extra">{" · ".join(extra)}</p>'
                 '<div class="scroll"><table class="steps"><thead><tr><th>step</th><th>task</th><th>status</th>'
                 '<th>verdict</th><th>confidence</th><th>note</th></tr></thead><tbody id="steps">'
                 f'{rows or "<tr><td colspan=6>no steps recorded yet</td></tr>"}</tbody></table></div>')
    facts = view.get("facts") or {}
    frows = "".join(f'<tr><td>{esc(k)}</td><td><pre>{_pretty(v)}</pre></td></tr>' for k, v in facts.items())
    parts.append(f'<h2>Facts (<span id="fact-count">{len(facts)}</span>)</h2><div class="scroll"><table class="facts">'
                 f'<thead><tr><th>fact</th><th>value</th></tr></thead><tbody id="facts">'
                 f'{frows or "<tr><td colspan=2>none</td></tr>"}</tbody></table></div>')
    return "".join(parts)


def _st(c: dict) -> str:
    return "in doubt" if c.get("in_doubt") else str(c.get("status") or "")


def _err(error: Any) -> str:
    if isinstance(error, dict):
        return f'{error.get("error")}: {error.get("cause")}'
    return "" if error is None else str(error)


def _waiting_panel(waiting: Any, run_id: str) -> str:
    if not isinstance(waiting, dict):
        return ""
    items = []
    for c in waiting.get("calls") or ():
        items.append(f'<li><b>{esc(c.get("id"))}</b> {esc(c.get("tool"))} · risk {esc(c.get("risk"))}'
                     f'<pre>{esc(c.get("args") or "")}</pre></li>')
    return (f'<section id="waiting" class="waiting"><h2>Waiting for approval</h2>'
            f'<p>{esc(waiting.get("kind") or "")} decision <code>{esc(waiting.get("decision"))}</code></p>'
            f'<ul>{"".join(items)}</ul><label>reason <input id="reason" maxlength="500"></label> '
            f'<button id="approve" class="approve">Approve</button> <button id="reject" class="reject">Reject</button>'
            f'<p id="decision-note" role="status"></p></section>')


def _dag(pv: dict, snap: dict) -> str:
    """The plan's DAG as SVG: a column per layer, a node per call (a map is one node with its
    items' progress, updated live), edges as lines; wide layers end in a "+N more" node, and
    edges from the calls it stands for are one edge from it (data.plan_view)."""
    has_maps = any(n["map"] for n in pv["nodes"])
    w, h, gx, gy = 150, 48 if has_maps else 34, 60, 14
    pos = {n["id"]: (n["layer"] * (w + gx), n["pos"] * (h + gy)) for n in pv["nodes"]}
    for more in pv["hidden"]:
        pos[more["id"]] = (more["layer"] * (w + gx), more["pos"] * (h + gy))
    width = max(pv["layers"], 1) * (w + gx)
    height = max(pv["width"], 1) * (h + gy)
    parts = [f'<svg class="dag" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
             f'aria-label="plan graph">']
    for a, b in pv["edges"]:
        (x1, y1), (x2, y2) = pos[a], pos[b]
        parts.append(f'<line x1="{x1 + w}" y1="{y1 + h / 2}" x2="{x2}" y2="{y2 + h / 2}" class="edge"/>')
    for n in pv["nodes"]:
        x, y = pos[n["id"]]
        st = snap["calls"].get(n["id"], "pending")
        items = ""
        if n["map"]:
            counts = snap["maps"].get(n["id"]) or {}
            shown = ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "none yet"
            items = f'<text x="6" y="42" class="items" data-map-of="{esc(n["id"])}">items: {esc(shown)}</text>'
        parts.append(f'<g class="node st-{esc(st.replace(" ", "-"))}" data-node="{esc(n["id"])}" '
                     f'transform="translate({x},{y})"><title>{esc(n["id"])} {esc(n["tool"])}</title>'
                     f'<rect width="{w}" height="{h}" rx="6"/>'
                     f'<text x="6" y="14">{esc(_cut(n["id"] + " " + n["tool"], 22))}</text>'
                     f'<text x="6" y="28" class="nst" data-node-status="{esc(n["id"])}">{esc(st)}</text>{items}</g>')
    for more in pv["hidden"]:
        x, y = pos[more["id"]]
        parts.append(f'<g class="node more" transform="translate({x},{y})"><rect width="{w}" height="{h}" rx="6"/>'
                     f'<text x="6" y="20">+{more["more"]} more</text></g>')
    parts.append("</svg>")
    return '<h2>Plan</h2><div class="scroll dagbox">' + "".join(parts) + "</div>"


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def timeline_note(tl: dict) -> str:
    """The line above the timeline (plain text: the page escapes it, the script sets it as text)."""
    if not tl["bars"]:
        return "no call has ended yet"
    shown = (f'; the {len(tl["bars"])} drawn of {tl["ran"]} calls that ran: the critical path and the longest'
             if len(tl["bars"]) < tl["ran"] else "")
    retried = "; a bar per attempt, failed ones hatched" if any(len(b.get("segments") or ()) > 1
                                                                for b in tl["bars"]) else ""
    return f'{tl["total"]:.3f} s{shown}; critical path (red): {" → ".join(tl["critical"])}{retried}'


def _timeline(tl: dict) -> str:
    """The Gantt view: a row per call that ended, a bar per attempt in it (failed attempts
    hatched, the gaps between them the backoff; one bar for the whole call when its record
    kept no attempts); the page's script draws it again from /api/runs/{id}/timeline as
    calls end (app.js, drawTimeline: the same markup)."""
    total = tl["total"] or 1e-9
    rows = []
    for b in tl["bars"]:
        crit = " critical" if b["critical"] else ""
        tries = f' ×{b["attempts"]}' if b["attempts"] > 1 else ""
        segs = b.get("segments") or ()
        if len(segs) > 1:
            bars = "".join(_bar(total, sg["start"], sg["end"], f'bar attempt{crit} st-{esc(sg["status"] or "")}',
                                f'{esc(b["id"])} attempt {esc(sg["attempt"])}: {sg["end"] - sg["start"]:.3f} s, '
                                f'{esc(sg["status"] or "")}' + (f' ({esc(sg["error"])})' if sg.get("error") else ""))
                           for sg in segs)
        else:
            bars = _bar(total, b["start"], b["end"], f'bar{crit} st-{esc(b["status"] or "")}',
                        f'{esc(b["id"])}: {b["end"] - b["start"]:.3f} s, {b["attempts"]} attempt(s), '
                        f'{esc(b["status"] or "")}')
        rows.append(f'<div class="bar-row" data-bar="{esc(b["id"])}"><span class="bar-id">{esc(b["id"])}{tries}'
                    f'</span><span class="track">{bars}</span></div>')
    return (f'<section id="timeline-section"><h2>Timeline</h2><p id="timeline-note">{esc(timeline_note(tl))}</p>'
            f'<div class="timeline" id="timeline">{"".join(rows)}</div></section>')


def _bar(total: float, start: float, end: float, cls: str, title: str) -> str:
    """One bar of the timeline (``cls`` and ``title`` escaped by the caller)."""
    left, width = 100 * start / total, max(100 * (end - start) / total, 0.3)
    return f'<span class="{cls}" data-left="{left:.3f}" data-width="{width:.3f}" title="{title}"></span>'


def make_app(store: RunStore, store_url: str | None = None, token: str | None = None, poll: float = 0.5) -> Starlette:
    ui = UI(store, store_url, token, poll)

    async def index(request: Request) -> Response:
        if ui.token and request.query_params.get("token"):  # the token moves into a cookie, out of the URL
            resp = RedirectResponse("/", status_code=303)
            resp.set_cookie("sophon_ui_token", request.query_params["token"], httponly=True, samesite="strict")
            return resp
        return await ui.call(_runs_page, ui, request)

    async def run_page(request: Request) -> Response:
        found = await ui.call(ui.info, request.path_params["run_id"])
        if found is None:
            return _page("Not found", f'<h1>No run {esc(request.path_params["run_id"])}</h1>', ui)
        try:
            offset = int(request.query_params.get("calls") or 0)
        except ValueError:
            offset = 0
        return await ui.call(_run_page, ui, *found, offset)

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        types = {"app.js": "text/javascript", "app.css": "text/css"}
        if name not in types:
            return Response("not found", status_code=404)
        body = resources.files(__package__).joinpath("static", name).read_bytes()
        return Response(body, media_type=types[name], headers={"Cache-Control": "no-cache"})

    async def api_runs(request: Request) -> Response:
        q = request.query_params
        try:
            offset, limit = max(int(q.get("offset") or 0), 0), min(max(int(q.get("limit") or 50), 1), 500)
        except ValueError:
            return JSONResponse({"error": "offset and limit are integers"}, status_code=400)
        rows, total = await ui.call(data.list_runs, ui.store, q.get("status"), q.get("q"), offset, limit, ui.counts)
        return JSONResponse({"runs": rows, "total": total, "offset": offset, "limit": limit})

    async def api_run(request: Request) -> Response:
        row = await ui.call(ui.row, request.path_params["run_id"])
        if row is None:
            return JSONResponse({"error": "Store.RunNotFound"}, status_code=404)
        out = await ui.call(data.run_json, ui.store, row)
        return Response(json.dumps(out, ensure_ascii=False, default=str), media_type="application/json")

    async def api_call(request: Request) -> Response:
        found = await ui.call(ui.info, request.path_params["run_id"])
        if found is None or found[1]["kind"] != "plan":
            return JSONResponse({"error": "Store.RunNotFound"}, status_code=404)
        head, info = found
        out = await ui.call(ui.detail, head, info, request.path_params["call_id"])
        if out is None:
            return JSONResponse({"error": "no such call"}, status_code=404)
        return Response(json.dumps(out, ensure_ascii=False, default=str), media_type="application/json")

    async def api_timeline(request: Request) -> Response:
        """The timeline's bars and note now (what the page's script draws as calls end)."""
        found = await ui.call(ui.info, request.path_params["run_id"])
        if found is None or found[1]["kind"] != "plan":
            return JSONResponse({"error": "Store.RunNotFound"}, status_code=404)
        tl = (await ui.call(ui.progress, found[0], found[1]["view"]))[2]
        return JSONResponse({**tl, "note": timeline_note(tl)})

    async def api_events(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        found = await ui.call(ui.info, run_id)
        if found is None:
            return JSONResponse({"error": "Store.RunNotFound"}, status_code=404)
        kind = found[1]["kind"]
        plan = found[1]["view"]["plan"] if kind == "plan" else None

        async def stream():
            sent, seen = None, None
            # agent and goal runs: their turns / steps as a `view` event (data.agent_changes,
            # data.goal_changes), read each time the calls' snapshot is
            view_sent: dict = {}
            goal_sent: dict | None = None
            while True:
                head = await ui.call(ui.head, run_id)
                if head is None:
                    return
                wait = ui.poll
                mark = (head["status"], head.get("updated"), head.get("last_seq"))
                # a run that is not running changes only through its row (a resume, a
                # decision): its calls are read again only when the row changed
                if head["status"] == "running" or mark != seen:
                    started = time.monotonic()
                    if plan is not None and head["status"] != "running":
                        snap = (await ui.call(ui.progress, head, found[1]["view"]))[1]
                    else:
                        snap = await ui.call(data.snapshot, ui.store, head, plan)
                    frame = data.snapshot_changes(sent, snap)
                    sent, seen = snap, mark
                    view = None
                    if kind == "agent":
                        view = await ui.call(data.agent_changes, view_sent, ui.store, head)
                    elif kind == "goal":
                        goal_sent, view = data.goal_changes(goal_sent, head)
                    # reading a large run's calls costs time: poll it less often, so that
                    # watching a 10,000-call run never keeps the server busy
                    wait = max(ui.poll, 4 * (time.monotonic() - started))
                else:
                    frame = view = None
                if view is not None:
                    yield f"event: view\ndata: {json.dumps(view, ensure_ascii=False, default=str)}\n\n"
                if frame is not None:
                    yield f"event: snapshot\ndata: {json.dumps(frame, ensure_ascii=False, default=str)}\n\n"
                elif view is None:
                    yield ": keep-alive\n\n"
                if await request.is_disconnected():
                    return
                await asyncio.sleep(wait)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    def decide(action: str):
        async def endpoint(request: Request) -> Response:
            if not ui.csrf_ok(request):
                return JSONResponse({"error": "CSRF token missing or wrong"}, status_code=403)
            run_id = request.path_params["run_id"]
            row = await ui.call(ui.row, run_id)
            if row is None:
                return JSONResponse({"error": "Store.RunNotFound"}, status_code=404)
            if row["status"] != "waiting":
                return JSONResponse({"error": f"run {run_id} is not waiting (status {row['status']})"},
                                    status_code=409)
            try:
                body = await request.json() if (await request.body()) else {}
            except ValueError:
                return JSONResponse({"error": "the body is not JSON"}, status_code=400)
            reason = body.get("reason") if isinstance(body, dict) else None
            proc = ui.approvals.get(run_id)
            if proc is not None and proc.poll() is None:
                return JSONResponse({"error": "a decision for this run is being carried out"}, status_code=409)
            # exactly what `sophon-dsl approve` does: that command, in a process of its own (the
            # run continues there, with the run's sealed tool configuration)
            cmd = [sys.executable, "-m", "sophon_dsl", "approve", run_id]
            if action == "reject":
                cmd.append("--reject")
            if isinstance(reason, str) and reason.strip():
                cmd += ["--reason", reason[:500]]
            if ui.store_url:
                cmd += ["--store", ui.store_url]
            ui.approvals[run_id] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                    stderr=subprocess.DEVNULL, start_new_session=True)
            return JSONResponse({"run_id": run_id, "action": action, "started": True}, status_code=202)
        return endpoint

    async def csrf(request: Request) -> Response:
        return JSONResponse({"csrf": ui.csrf})

    routes = [
        Route("/", index), Route("/runs/{run_id:path}", run_page), Route("/static/{name}", static),
        Route("/api/csrf", csrf), Route("/api/runs", api_runs),
        Route("/api/runs/{run_id}/calls/{call_id:path}", api_call),
        Route("/api/runs/{run_id}/events", api_events), Route("/api/runs/{run_id}/timeline", api_timeline),
        Route("/api/runs/{run_id}/approve", decide("approve"), methods=["POST"]),
        Route("/api/runs/{run_id}/reject", decide("reject"), methods=["POST"]),
        Route("/api/runs/{run_id}", api_run),
    ]
    from starlette.middleware import Middleware

    app = Starlette(routes=routes, middleware=[Middleware(_Guard, ui=ui)])
    app.state.ui = ui
    return app


class _Guard:
    """Token check on every request and the security headers on every response."""

    def __init__(self, app: Any, ui: UI) -> None:
        self.app = app
        self.ui = ui

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_secured(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*(message.get("headers") or []), *_SECURITY]}
            await send(message)

        if not self.ui.allowed(Request(scope)):
            resp = Response("a token is required: open /?token=...", status_code=401, media_type="text/plain")
            return await resp(scope, receive, send_secured)
        await self.app(scope, receive, send_secured)


_SECURITY = [(b"content-security-policy", _CSP.encode()), (b"x-content-type-options", b"nosniff"),
             (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY")]
