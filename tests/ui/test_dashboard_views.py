"""What the run pages show of each kind of run (issue 29 item 5): the runs list's columns, an
agent run's turns (each reply and the plan it stands for), a goal run's steps, verdicts and
facts, and a plan run's timeline with attempts and the critical path.  Runs are made by the
real CLI with scripted providers; the pages are read through the app (no browser)."""

from __future__ import annotations

import json
import re

from .helpers import cli, make_plan
from .test_dashboard_api import client


def test_an_agent_runs_page_shows_each_turns_reply_plan_and_calls(agent_and_goal_runs):
    url, agent_id, _ = agent_and_goal_runs
    c, store = client(url)
    try:
        page = c.get(f"/runs/{agent_id}").text
        turns = re.findall(r'<section class="turn" data-turn="(\d+)">', page)
        assert turns == ["1", "2"]
        first = page.split('data-turn="1"', 1)[1].split('data-turn="2"', 1)[0]
        # the reply as it came, and the plan it stands for, escaped
        assert '<pre class="reply">†state.a = echo(x=&quot;&lt;i&gt;one&lt;/i&gt;&quot;)' in first
        assert '<pre class="plan">' in first and "<i>one</i>" not in page
        assert ">c1<" in first and "succeeded" in first
        second = page.split('data-turn="2"', 1)[1]
        assert '<pre class="reply">{&quot;calls&quot;: []' in second
        assert "<pre class=\"plan\">return {done: $state.a}" in second  # the JSON reply as a DSL plan
        assert '<pre class="output">' in page and "&lt;i&gt;one&lt;/i&gt;" in page.split('class="output"')[1]
        assert "request <span class=\"request\">say one</span>" in page
    finally:
        store.close()


def test_a_goal_runs_page_shows_steps_verdicts_and_facts(agent_and_goal_runs):
    url, _, goal_id = agent_and_goal_runs
    c, store = client(url)
    try:
        page = c.get(f"/runs/{goal_id}").text
        steps = re.findall(r'<tr data-step="(s\d)">.*?<td class="verdict">(\w*)</td>', page)
        assert steps == [("s1", "pass"), ("s2", "partial"), ("s3", "pass")]
        assert "half &lt;b&gt;done&lt;/b&gt;" in page and "<b>done</b>" not in page
        facts = page.split('<table class="facts">', 1)[1]
        assert "beta_size" in facts and "found" in facts
        assert "0 replan(s)" in page and "3 step(s) run" in page
        listed = {r["run_id"]: r for r in c.get("/api/runs").json()["runs"]}
        assert listed[goal_id]["status"] == "complete"
        assert c.get("/api/runs", params={"status": "complete"}).json()["total"] == 1
        assert 'value="complete" selected' in c.get("/?status=complete").text
    finally:
        store.close()


def test_the_runs_list_shows_plan_files_and_the_timeline_marks_attempts(tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    plan = make_plan(tmp_path, "flaky.plan", '†state.a = echo(x="1")\n†state.b = echo(x=†state.a)\n'
                                             '†state.c = echo(x="2")\n')
    done = cli("run", str(plan), "--tools", "tools.py", "--store", url, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    c, store = client(url)
    try:
        row = c.get("/api/runs").json()["runs"][0]
        assert row["file"].endswith("flaky.plan") and row["calls_total"] == 3
        page = c.get("/").text
        assert "<th>plan file</th>" in page and "flaky.plan</td>" in page and "of 3" in page
        assert c.get("/api/runs", params={"q": "FLAKY.plan"}).json()["total"] == 1
        run = c.get(f"/runs/{run_id}").text
        assert len(re.findall(r'<div class="bar-row" data-bar="c\d">', run)) == 3
        # the critical path ends at the call that ended last, through what it waited for
        path = re.search(r"critical path \(red\): ([^<]*)</p>", run).group(1)
        assert path.split(" → ")[-2:] == ["c1", "c2"] or path.split(" → ")[-1] == "c3"
        assert 'class="bar critical' in run
    finally:
        store.close()


def _first_events(c, run_id: str, want: int) -> list[tuple[str, dict]]:
    out, event = [], None
    with c.stream("GET", f"/api/runs/{run_id}/events") as r:
        for line in r.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                out.append((event, json.loads(line[6:])))
                if len(out) >= want:
                    break
    return out


def test_the_event_stream_sends_agent_turns_and_goal_steps_as_view_events(agent_and_goal_runs):
    """The live pages of agent and goal runs read `view` events: an agent's turns (each with
    its plan) once, then only what changed; a goal's steps, verdicts and facts."""
    from sophon_dsl.ui import data

    url, agent_id, goal_id = agent_and_goal_runs
    c, store = client(url)
    try:
        (kind, view), (kind2, snap) = _first_events(c, agent_id, 2)
        assert (kind, kind2) == ("view", "snapshot") and snap["status"] == "succeeded"
        assert view["kind"] == "agent" and view["status"] == "succeeded" and view["count"] == 2
        assert [t["turn"] for t in view["turns"]] == [1, 2]
        assert view["turns"][0]["calls"][0]["status"] == "succeeded"
        assert view["turns"][1]["plan"] == "return {done: $state.a}\n" and view["output"] == {"done": "<i>one</i>"}
        # a second read of an unchanged run sends nothing; a changed head is sent without the turns
        sent: dict = {}
        head = store.get_run_head(agent_id)
        assert len(data.agent_changes(sent, store, head)["turns"]) == 2
        assert data.agent_changes(sent, store, head) is None
        assert data.agent_changes(sent, store, {**head, "status": "cancelled"})["turns"] == []
        (kind, view), _ = _first_events(c, goal_id, 2)
        assert kind == "view" and view["kind"] == "goal" and view["status"] == "complete"
        assert [(s["id"], s["verdict"]) for s in view["steps"]] == [("s1", "pass"), ("s2", "partial"), ("s3", "pass")]
        assert view["facts"] == {"found": "yes", "beta_size": 2}
        now, frame = data.goal_changes(None, store.get_run_head(goal_id))
        assert frame == now and data.goal_changes(now, store.get_run_head(goal_id)) == (now, None)
    finally:
        store.close()


def test_a_retried_call_shows_each_attempt_in_the_api_timeline_and_panel(tmp_path):
    """A tool that fails twice and then succeeds under a retry policy: three attempts in
    /api/runs/{id} (as `runs show --json`), three bars in the page's timeline (the failed ones
    hatched), three rows in its call panel's data, each value escaped."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    plan = make_plan(tmp_path, "retry.plan", '@retry({"max_attempts": 3, "interval": 0.05, "backoff_rate": 1})\n'
                                             'c1: †state.a = flaky(key="k")\nc2: †state.b = echo(x=†state.a)\n')
    done = cli("run", str(plan), "--tools", "tools.py", "--store", url, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    c, store = client(url)
    try:
        api = c.get(f"/api/runs/{run_id}").json()
        assert api == json.loads(cli("runs", "show", run_id, "--store", url, "--json", cwd=tmp_path).stdout)
        calls = {x["id"]: x for x in api["calls"]}
        log = calls["c1"]["attempt_log"]
        assert calls["c1"]["attempts"] == 3 and len(log) == 3
        assert [(a["attempt"], a["status"], (a["error"] or {}).get("error")) for a in log] == [
            (1, "failed", "Net.Down"), (2, "failed", "Net.Down"), (3, "succeeded", None)]
        assert log[0]["error"]["cause"] == "<i>k</i> is down (try 1)"
        assert [a["status"] for a in calls["c2"]["attempt_log"]] == ["succeeded"]
        # the timeline: a bar per attempt in c1's row, the backoff a gap between them
        tl = c.get(f"/api/runs/{run_id}/timeline").json()
        segs = {b["id"]: b for b in tl["bars"]}["c1"]["segments"]
        assert [s["status"] for s in segs] == ["failed", "failed", "succeeded"]
        assert all(a["end"] <= b["start"] for a, b in zip(segs, segs[1:]))
        assert "a bar per attempt, failed ones hatched" in tl["note"]
        page = c.get(f"/runs/{run_id}").text
        row = re.search(r'<div class="bar-row" data-bar="c1">(.*?)</div>', page).group(1)
        bars = re.findall(r'<span class="(bar(?:\s[^"]*)?)"', row)
        assert len(bars) == 3 and bars[0].startswith("bar attempt") and "st-failed" in bars[0]
        assert "st-succeeded" in bars[2] and all("critical" in b for b in bars)  # c1 is on the path
        assert "(Net.Down)" in row and "<i>" not in page
        row2 = re.search(r'<div class="bar-row" data-bar="c2">(.*?)</div>', page).group(1)
        assert len(re.findall(r'<span class="bar[ "]', row2)) == 1  # attempted once: one bar, as before
        # the call panel's data: each attempt's times (POSIX seconds), outcome and error
        panel = c.get(f"/api/runs/{run_id}/calls/c1").json()
        assert [(a["attempt"], a["status"]) for a in panel["attempt_log"]] == [(1, "failed"), (2, "failed"),
                                                                             (3, "succeeded")]
        assert panel["attempt_log"][0]["started_at"] == panel["started"]
        assert panel["attempt_log"][-1]["ended_at"] == panel["ended"]
    finally:
        store.close()
