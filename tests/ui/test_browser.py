"""The dashboard in a real headless Chromium (Debian's chromium, driven by Playwright),
against `sophon-dsl ui` serving a store the real CLI writes (issue 29 item 7).  Screenshots
of each page go to $SOPHON_TEST_ARTIFACTS/ui (default test-artifacts/ui in the checkout)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from .helpers import ROOT, cli, make_plan, start_ui, stop, wait_status

CHROMIUM = os.environ.get("SOPHON_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
SHOTS = Path(os.environ.get("SOPHON_TEST_ARTIFACTS") or ROOT / "test-artifacts") / "ui"


@pytest.fixture(scope="module")
def browser():
    assert os.path.exists(CHROMIUM), f"no Chromium at {CHROMIUM} (.ci/run installs Debian's chromium)"
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1200, "height": 900})
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    problems: list[str] = []
    pg.on("dialog", lambda d: (problems.append("dialog: " + d.message), d.dismiss()))
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    pg.on("request", lambda r: None if r.url.startswith("http://127.0.0.1:") else problems.append("external: " + r.url))
    pg.problems = problems  # type: ignore[attr-defined]
    yield pg
    ctx.close()
    assert problems == []  # no script ran from a value, nothing left the server


def _narrow(page, name: str) -> None:
    """The page at 375 px wide: nothing overflows the viewport sideways."""
    page.set_viewport_size({"width": 375, "height": 800})
    page.wait_for_timeout(100)
    assert page.evaluate("document.documentElement.scrollWidth") <= 376
    page.screenshot(path=str(SHOTS / f"{name}-375.png"), full_page=True)
    page.set_viewport_size({"width": 1200, "height": 900})


def test_runs_list_and_a_live_run(page, tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    hostile = make_plan(tmp_path, "h.plan",
                        'goal = "<img src=x onerror=alert(1)> goal"\n†state.h = hostile(x="\\u202eevil")\n')
    done = cli("run", str(hostile), "--tools", "tools.py", "--store", url, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    hostile_id = json.loads(done.stdout)["run_id"]
    release = tmp_path / "release"
    plan = make_plan(tmp_path, "live.plan", f'goal = "live"\n†state.a = wait_for(path="{release}")\n'
                                            f'†state.b = echo(x=†state.a)\n')
    server, base = start_ui(url, tmp_path)
    runner = cli("run", str(plan), "--tools", "tools.py", "--store", url, "--json", cwd=tmp_path, background=True)
    try:
        live = wait_status(url, None, {"running"})
        page.goto(base + "/")
        expect(page.locator("tr.run")).to_have_count(2)
        expect(page.locator("table.runs")).to_contain_text("<img src=x onerror=alert(1)> goal")
        page.screenshot(path=str(SHOTS / "runs.png"), full_page=True)
        _narrow(page, "runs")
        page.goto(f"{base}/runs/{hostile_id}")
        page.click('button.open[data-call="c1"]')
        expect(page.locator("#panel-body")).to_contain_text("javascript:alert(document.cookie)")
        expect(page.locator("#panel-body")).to_contain_text("\\u202egnp.exe")  # the bidi character shown, not obeyed
        assert page.locator("#panel-body a, #panel-body img, #panel-body script").count() == 0
        page.screenshot(path=str(SHOTS / "run-hostile.png"), full_page=True)
        # the running plan: c1 runs; once released, c1 and c2 succeed without a reload
        page.goto(f"{base}/runs/{live['run_id']}")
        expect(page.locator('[data-status-of="c1"]')).to_have_text("running")
        expect(page.locator('[data-node-status="c1"]')).to_have_text("running")
        page.evaluate("window.__notReloaded = true")
        page.screenshot(path=str(SHOTS / "run-running.png"), full_page=True)
        release.write_text("go")
        expect(page.locator('[data-status-of="c1"]')).to_have_text("succeeded")
        expect(page.locator('[data-status-of="c2"]')).to_have_text("succeeded")
        expect(page.locator("#run-status")).to_have_text("succeeded")
        assert page.evaluate("window.__notReloaded") is True
        # the timeline and the attempt counts follow the calls that ended, without a reload
        expect(page.locator('#timeline [data-bar="c2"]')).to_have_count(1)
        expect(page.locator("#timeline-note")).to_contain_text("critical path (red): c1 → c2")
        expect(page.locator('[data-attempts-of="c1"]')).to_have_text("1")
        page.click('g.node[data-node="c2"]')  # a node of the graph opens its call's panel
        expect(page.locator("#panel-id")).to_have_text("c2")
        expect(page.locator("#panel-body")).to_contain_text("echo(x=")
        page.screenshot(path=str(SHOTS / "run-succeeded.png"), full_page=True)
        _narrow(page, "run")
        assert runner.wait(timeout=60) == 0
    finally:
        release.write_text("go")
        stop(runner)
        stop(server)


def test_approve_a_waiting_run_from_its_page(page, tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    plan = make_plan(tmp_path, "risky.plan", '†state.s = send(to="bob")\n†state.t = echo(x=†state.s)\n')
    waiting = cli("run", str(plan), "--tools", "tools.py", "--store", url, "--approve", "wait", "--json", cwd=tmp_path)
    assert waiting.returncode == 3, waiting.stderr  # left waiting for a person
    run_id = json.loads(waiting.stdout)["run_id"]
    server, base = start_ui(url, tmp_path)
    try:
        page.goto(f"{base}/runs/{run_id}")
        expect(page.locator("#waiting")).to_contain_text("send")
        expect(page.locator("#waiting")).to_contain_text("risk high")
        expect(page.locator("#waiting")).to_contain_text('to="bob"')
        page.screenshot(path=str(SHOTS / "run-waiting.png"), full_page=True)
        _narrow(page, "run-waiting")
        page.fill("#reason", "looks fine")
        page.click("#approve")
        expect(page.locator("#decision-note")).to_contain_text("approved")
        expect(page.locator("#run-status")).to_have_text("succeeded", timeout=60_000)
        expect(page.locator('[data-status-of="c2"]')).to_have_text("succeeded")
        expect(page.locator("#waiting")).to_be_hidden()
        page.screenshot(path=str(SHOTS / "run-approved.png"), full_page=True)
    finally:
        stop(server)
    shown = json.loads(cli("runs", "show", run_id, "--store", url, "--json", cwd=tmp_path).stdout)
    assert shown["status"] == "succeeded" and shown["state"]["state"]["t"] == "sent to bob"


def test_a_retried_call_gets_a_bar_per_attempt_live(page, tmp_path):
    """A call retried under its policy (it fails twice, then waits for the test): its failed
    attempts appear on the timeline while it runs, without a reload; once it succeeds its row
    holds three bars (two hatched: failed) and its panel a row per attempt."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    release = tmp_path / "release"
    first = make_plan(tmp_path, "first.plan", '†state.a = echo(x="1")\n')  # (the store exists before the UI)
    assert cli("run", str(first), "--tools", "tools.py", "--store", url, cwd=tmp_path).returncode == 0
    # a backoff of a second: the page is usually open before the first failure is drawn
    plan = make_plan(tmp_path, "retry.plan", '@retry({"max_attempts": 3, "interval": 1, "backoff_rate": 1})\n'
                                             f'c1: †state.a = flaky(key="k", release="{release}")\n'
                                             'c2: †state.b = echo(x=†state.a)\n')
    server, base = start_ui(url, tmp_path)
    runner = cli("run", str(plan), "--tools", "tools.py", "--store", url, "--json", cwd=tmp_path, background=True)
    try:
        live = wait_status(url, None, {"running"})
        page.goto(f"{base}/runs/{live['run_id']}")
        page.evaluate("window.__notReloaded = true")
        # c1 failed twice and runs its third attempt: the two failures are drawn as they land
        failed = page.locator('#timeline [data-bar="c1"] .bar.attempt.st-failed')
        expect(failed).to_have_count(2)
        expect(page.locator('[data-status-of="c1"]')).to_have_text("running")
        expect(page.locator('[data-attempts-of="c1"]')).to_have_text("2")
        page.screenshot(path=str(SHOTS / "run-retrying.png"), full_page=True)
        release.write_text("go")
        expect(page.locator("#run-status")).to_have_text("succeeded")
        expect(page.locator('#timeline [data-bar="c1"] .bar')).to_have_count(3)
        expect(failed).to_have_count(2)
        expect(page.locator('#timeline [data-bar="c1"] .bar.attempt.st-succeeded')).to_have_count(1)
        expect(page.locator('#timeline [data-bar="c2"] .bar')).to_have_count(1)
        expect(page.locator('[data-attempts-of="c1"]')).to_have_text("3")
        expect(page.locator("#timeline-note")).to_contain_text("critical path (red): c1 → c2")
        assert page.evaluate("window.__notReloaded") is True
        page.click('button.open[data-call="c1"]')
        rows = page.locator("#panel-body table.attempts tbody tr")
        expect(rows).to_have_count(3)
        expect(rows.nth(0)).to_contain_text("Net.Down: <i>k</i> is down (try 1)")  # shown as text
        expect(rows.nth(2)).to_contain_text("succeeded")
        assert page.locator("#panel-body i").count() == 0
        page.screenshot(path=str(SHOTS / "run-attempts.png"), full_page=True)
        _narrow(page, "run-attempts")
        assert runner.wait(timeout=60) == 0
    finally:
        release.write_text("go")
        stop(runner)
        stop(server)


def test_agent_and_goal_pages(page, agent_and_goal_runs, tmp_path):
    """An agent run's turns and a goal run's steps and facts, at full width and at 375 px."""
    url, agent_id, goal_id = agent_and_goal_runs
    server, base = start_ui(url, tmp_path)
    try:
        page.goto(f"{base}/runs/{agent_id}")
        expect(page.locator("section.turn")).to_have_count(2)
        expect(page.locator('section.turn[data-turn="1"] pre.reply')).to_contain_text('echo(x="<i>one</i>")')
        expect(page.locator('section.turn[data-turn="2"] pre.plan')).to_contain_text("return {done: $state.a}")
        page.screenshot(path=str(SHOTS / "run-agent.png"), full_page=True)
        _narrow(page, "run-agent")
        page.goto(f"{base}/runs/{goal_id}")
        expect(page.locator("table.steps tbody tr")).to_have_count(3)
        expect(page.locator('tr[data-step="s2"] td.verdict')).to_have_text("partial")
        expect(page.locator("table.facts")).to_contain_text("beta_size")
        page.screenshot(path=str(SHOTS / "run-goal.png"), full_page=True)
        _narrow(page, "run-goal")
    finally:
        stop(server)


@contextlib.contextmanager
def _live_run(proc, url: str, tmp_path, release):
    """``(run_id, base)``: the dashboard over ``url`` once ``proc``'s run is running; at the
    end, whatever happened, the run is released and both processes stop."""
    server = None
    try:
        run_id = wait_status(url, None, {"running"})["run_id"]
        server, base = start_ui(url, tmp_path)
        yield run_id, base
    finally:
        release.write_text("go")
        stop(proc)
        if server is not None:
            stop(server)


def test_an_agent_runs_turns_appear_live(page, tmp_path):
    """An agent run blocked in turn 1 (its call waits for a file): its page shows turn 1 with
    the call running; once released, turn 1's call succeeds and turn 2 (a hostile value in
    its reply, shown as text) and the output appear, without a reload."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    release = tmp_path / "release"
    make_plan(tmp_path, "unused.plan", "")
    script = tmp_path / "agent.json"
    script.write_text(json.dumps({"turns": [
        f'†state.a = wait_for(path="{release}")\n',
        '†state.h = echo(x="<img src=x onerror=alert(1)>\\u202eevil")\nreturn {done: †state.a, h: †state.h}\n',
    ]}), encoding="utf-8")
    agent = cli("agent", "wait, then echo", "--tools", "tools.py", "--no-stdlib", "--store", url,
                "--provider", f"scripted:{script}", "--json", cwd=tmp_path, background=True)
    with _live_run(agent, url, tmp_path, release) as (run_id, base):
        page.goto(f"{base}/runs/{run_id}")
        turn1 = page.locator('section.turn[data-turn="1"]')
        expect(turn1.locator("pre.reply")).to_contain_text("wait_for(path=")
        expect(turn1.locator("table.calls tbody tr").first).to_contain_text("running")
        expect(page.locator("section.turn")).to_have_count(1)
        expect(page.locator("#turn-count")).to_have_text("1")
        page.evaluate("window.__notReloaded = true")
        page.screenshot(path=str(SHOTS / "run-agent-live-turn1.png"), full_page=True)
        release.write_text("go")
        expect(page.locator("section.turn")).to_have_count(2)
        turn2 = page.locator('section.turn[data-turn="2"]')
        expect(turn2.locator("pre.reply")).to_contain_text("<img src=x onerror=alert(1)>\\u202eevil")
        expect(turn2.locator("pre.plan")).to_contain_text("return {done: $state.a, h: $state.h}")
        expect(turn1.locator("table.calls tbody tr").first).to_contain_text("succeeded")
        expect(page.locator("#run-status")).to_have_text("succeeded")
        expect(page.locator("#ended pre.output")).to_contain_text('"done": "released"')
        expect(page.locator("#turn-count")).to_have_text("2")
        assert page.evaluate("window.__notReloaded") is True
        assert page.locator("#turns img, #turns script, #ended img").count() == 0
        page.screenshot(path=str(SHOTS / "run-agent-live-turn2.png"), full_page=True)
        _narrow(page, "run-agent-live")
        assert agent.wait(timeout=60) == 0, agent.stderr.read()


def test_a_goal_runs_steps_verdicts_and_facts_appear_live(page, tmp_path):
    """A goal whose first step's sub-agent waits for a file: its page shows s1 running, s2 and
    s3 pending; once released, each step's verdict and note and the facts appear, without a
    reload."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    release = tmp_path / "release"
    make_plan(tmp_path, "unused.plan", "")
    steps = [{"task": "Wait alpha", "success_criterion": "released"},
             {"task": "Echo beta", "success_criterion": "echoed", "depends_on": [1]},
             {"task": "Echo gamma", "success_criterion": "echoed", "depends_on": [2]}]
    (tmp_path / "planner.json").write_text(json.dumps({"keyed": [{"match": "Goal:", "reply": json.dumps(
        {"steps": steps})}]}), encoding="utf-8")
    (tmp_path / "agents.json").write_text(json.dumps({"keyed": [
        {"match": "Request: Wait alpha", "reply": f'†state.a = wait_for(path="{release}")\nreturn †state.a\n'},
        {"match": "Request: Echo", "reply": 'return "done"'}]}), encoding="utf-8")
    (tmp_path / "evaluator.json").write_text(json.dumps({"keyed": [
        {"match": "Task: Wait alpha", "reply": json.dumps({"verdict": "pass", "confidence": 0.9, "note": "released",
                                                           "facts": {"alpha": "<script>alert(1)</script>"}})},
        {"match": "Task: Echo beta", "reply": json.dumps({"verdict": "partial", "confidence": 0.5,
                                                          "note": "half <b>done</b>", "facts": {"beta_size": 2}})},
        {"match": "Task:", "reply": json.dumps({"verdict": "pass", "confidence": 1.0, "note": "ok", "facts": {}})}]}),
        encoding="utf-8")
    goal = cli("goal", "Wait, then echo", "--tools", "tools.py", "--no-stdlib", "--store", url,
               "--provider", f"scripted:{tmp_path / 'agents.json'}",
               "--planner-provider", f"scripted:{tmp_path / 'planner.json'}",
               "--evaluator-provider", f"scripted:{tmp_path / 'evaluator.json'}", "--json", cwd=tmp_path,
               background=True)
    with _live_run(goal, url, tmp_path, release) as (run_id, base):
        page.goto(f"{base}/runs/{run_id}")
        expect(page.locator('tr[data-step="s1"]')).to_contain_text("running")
        expect(page.locator('tr[data-step="s2"]')).to_contain_text("pending")
        expect(page.locator('tr[data-step="s3"]')).to_contain_text("pending")
        expect(page.locator("#step-count")).to_have_text("3")
        expect(page.locator("#fact-count")).to_have_text("0")
        page.evaluate("window.__notReloaded = true")
        page.screenshot(path=str(SHOTS / "run-goal-live-step1.png"), full_page=True)
        release.write_text("go")
        expect(page.locator('tr[data-step="s1"] td.verdict')).to_have_text("pass")
        expect(page.locator('tr[data-step="s2"] td.verdict')).to_have_text("partial")
        expect(page.locator('tr[data-step="s2"]')).to_contain_text("half <b>done</b>")
        expect(page.locator('tr[data-step="s3"] td.verdict')).to_have_text("pass")
        expect(page.locator("table.facts")).to_contain_text("<script>alert(1)</script>")
        expect(page.locator("table.facts")).to_contain_text("beta_size")
        expect(page.locator("#fact-count")).to_have_text("2")
        expect(page.locator("#run-status")).to_have_text("complete")
        expect(page.locator("#goal-extra")).to_contain_text("3 step(s) run")
        assert page.evaluate("window.__notReloaded") is True
        assert page.locator("table.steps b, table.facts script").count() == 0
        page.screenshot(path=str(SHOTS / "run-goal-live-done.png"), full_page=True)
        _narrow(page, "run-goal-live")
        assert goal.wait(timeout=60) == 0, goal.stderr.read()


def test_an_agent_run_that_comes_to_wait_shows_its_approval_panel_live(page, tmp_path):
    """An agent run open in the browser while turn 1 runs; turn 2 asks for a high-risk call
    and the run waits: the approval panel (tool, risk, arguments, buttons) appears without a
    reload."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    release = tmp_path / "release"
    make_plan(tmp_path, "unused.plan", "")
    script = tmp_path / "agent.json"
    script.write_text(json.dumps({"turns": [f'†state.a = wait_for(path="{release}")\n',
                                            '†state.s = send(to="<b>bob</b>")\n']}), encoding="utf-8")
    agent = cli("agent", "wait, then send", "--tools", "tools.py", "--no-stdlib", "--store", url, "--approve", "wait",
                "--provider", f"scripted:{script}", "--json", cwd=tmp_path, background=True)
    with _live_run(agent, url, tmp_path, release) as (run_id, base):
        page.goto(f"{base}/runs/{run_id}")
        expect(page.locator('section.turn[data-turn="1"]')).to_have_count(1)
        assert page.locator("#waiting").count() == 0
        page.evaluate("window.__notReloaded = true")
        release.write_text("go")
        expect(page.locator("#run-status")).to_have_text("waiting")
        expect(page.locator("#waiting")).to_contain_text("send")
        expect(page.locator("#waiting")).to_contain_text("risk high")
        expect(page.locator("#waiting pre")).to_contain_text("<b>bob</b>")
        expect(page.locator("#waiting #approve")).to_have_count(1)
        expect(page.locator("#waiting #reject")).to_have_count(1)
        assert page.locator("#waiting b b").count() == 0  # the argument shown as text
        assert page.evaluate("window.__notReloaded") is True
        page.screenshot(path=str(SHOTS / "run-agent-live-waiting.png"), full_page=True)
        assert agent.wait(timeout=60) == 3, agent.stderr.read()
