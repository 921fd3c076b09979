"""Imported ExecutionPlan / step-list steps run as sub-agents with tools (issue 26 items 1-2)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path


import sophon_dsl
from sophon_dsl import tool
from sophon_dsl.cli import main
from sophon_dsl.goals.plan_steps import StepAgents
from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider
from sophon_dsl.runtime.approval import ApprovalDecision

ROOT = Path(__file__).resolve().parents[1]
SEED000 = ROOT / "examples" / "seed000"


def _plan() -> sophon_dsl.Plan:
    return sophon_dsl.loads((SEED000 / "plan.json").read_text(encoding="utf-8"), format="json")


class Tools:
    """The seed-000 tools, recording what ran; the three searches wait for each other, so the
    run only ends if they are in flight together (a sequential run would time out)."""

    def __init__(self, barrier: int = 3) -> None:
        self.ran: list[tuple[str, dict]] = []
        self.waiting = 0
        self.all_in = asyncio.Event()
        self.barrier = barrier
        self.peak = 0

        @tool(name="web.search", risk="low")
        async def web_search(query: str) -> dict:
            """Look a company up."""
            self.ran.append(("web.search", {"query": query}))
            self.waiting += 1
            self.peak = max(self.peak, self.waiting)
            if self.waiting >= self.barrier:
                self.all_in.set()
            await asyncio.wait_for(self.all_in.wait(), 30)
            return {"name": query}

        @tool(name="document.create")
        def document_create(title: str, rows: list) -> dict:
            """Create a spreadsheet."""
            self.ran.append(("document.create", {"title": title, "rows": rows}))
            return {"title": title, "markdown": " | ".join(r["name"] for r in rows)}

        @tool(name="gmail.send", risk="medium")
        def gmail_send(to: list[str], subject: str, body: str) -> dict:
            """Send an email."""
            self.ran.append(("gmail.send", {"to": to, "body": body}))
            return {"message_id": "m1"}

        @tool(name="file.delete", risk="high")
        def file_delete(path: str) -> dict:
            """Delete a file."""
            self.ran.append(("file.delete", {"path": path}))
            return {"deleted": path}

        self.specs = [web_search, document_create, gmail_send, file_delete]


def _provider(**over: str) -> ScriptedProvider:
    replies = {
        "Research Acme Corp": '$state.c = web.search(query="Acme Corp")\nreturn $state.c',
        "Research Globex": '$state.c = web.search(query="Globex")\nreturn $state.c',
        "Research Initech": '$state.c = web.search(query="Initech")\nreturn $state.c',
        "Build comparison spreadsheet": ('$state.s = document.create(title="cmp", rows=[$input.inputs.s1, '
                                         '$input.inputs.s2, $input.inputs.s3])\nreturn $state.s'),
        "Email the team": ('$state.r = gmail.send(to=["team@example.com"], subject="cmp", '
                           'body=$input.inputs.s4.markdown)\nreturn $state.r'),
    }
    replies.update(over)
    return ScriptedProvider(keyed=[KeyedReply(f"Request: {k}", v) for k, v in replies.items()])


def test_steps_run_their_tools_in_parallel_and_pass_results_on():
    tools = Tools()
    provider = _provider()
    asked: list = []

    def approve(req):
        asked.append((req.kind, req.max_risk.label, [c["id"] for c in req.calls]))
        return True

    steps = StepAgents(provider, tools.specs, approve=approve)
    result = sophon_dsl.run(_plan(), tools.specs, executor=steps, approve=approve)
    assert result.status == "succeeded", result.to_json()
    names = [n for n, _ in tools.ran]
    assert sorted(names[:3]) == ["web.search"] * 3 and names[3:] == ["document.create", "gmail.send"]
    assert tools.peak == 3                                    # the three research steps ran together
    assert tools.ran[3][1]["rows"] == [{"name": "Acme Corp"}, {"name": "Globex"}, {"name": "Initech"}]
    assert tools.ran[4][1]["body"] == "Acme Corp | Globex | Initech"
    assert result.state["state"]["steps"]["s5"] == {"message_id": "m1"}
    # plan-level approval only (seed 000): the medium step s5 was approved with the plan, and its
    # gmail.send (medium, within what was approved for s5) did not ask again
    assert asked == [("plan", "medium", ["s5"])]
    assert [c["tool"] for c in steps.log["s1"]] == ["web.search"]
    assert [c["tool"] for c in steps.log["s5"]] == ["gmail.send"]


def test_hints_come_first_and_strict_hints_offer_only_them():
    tools = Tools(barrier=1)
    provider = _provider()
    steps = StepAgents(provider, tools.specs, approve=True)
    sophon_dsl.run(_plan(), tools.specs, executor=steps, approve=True)

    def tools_shown(step: str) -> list[str]:
        """The tools of the step's prompt, in the order listed (the lines after "Tools:")."""
        msgs = next(c["messages"] for c in provider.calls if f"Request: {step}" in c["messages"][-1].content)
        listed = msgs[0].content.split("\nTools:\n", 1)[1]
        names = ("web.search", "document.create", "gmail.send", "file.delete")
        return sorted((n for n in names if n in listed), key=listed.find)

    assert tools_shown("Email the team")[0] == "gmail.send" and len(tools_shown("Email the team")) == 4
    assert tools_shown("Build comparison spreadsheet")[0] == "document.create"
    provider = _provider()
    steps = StepAgents(provider, tools.specs, approve=True, strict_tool_hints=True)
    result = sophon_dsl.run(_plan(), tools.specs, executor=steps, approve=True)
    assert result.status == "succeeded"
    assert tools_shown("Email the team") == ["gmail.send"]
    assert tools_shown("Research Acme Corp") == ["web.search"]   # (browser.navigate is no tool here)


def test_a_call_riskier_than_its_step_asks_the_approver():
    tools = Tools(barrier=1)
    provider = _provider(**{"Build comparison spreadsheet": '$state.x = file.delete(path="/tmp/x")\nreturn 1'})
    asked: list = []

    def approve(req):
        asked.append((req.kind, req.call_id if req.kind == "call" else None))
        return ApprovalDecision.approve() if req.kind == "plan" else ApprovalDecision.reject("no deleting")

    steps = StepAgents(provider, tools.specs, approve=approve)
    result = sophon_dsl.run(_plan(), tools.specs, executor=steps, approve=approve)
    assert ("plan", None) in asked and any(k == "call" for k, _ in asked)
    s4 = result.call("s4")
    assert s4.status == "failed" and s4.error.error == "Approval.Rejected"
    # the cascade of seed 000: the email step after it is skipped, the research steps are kept
    assert result.call("s5").status == "skipped"
    assert all(result.call(s).status == "succeeded" for s in ("s1", "s2", "s3"))
    assert "file.delete" not in [n for n, _ in tools.ran]


def test_the_run_shares_its_taint_set_with_the_sub_agents():
    from sophon_dsl.runtime.api import make_run

    tools = Tools(barrier=1)
    steps = StepAgents(_provider(), tools.specs, approve=True)
    _handle, opts, *_ = make_run(_plan(), tools.specs, {"executor": steps, "approve": True})
    assert opts.taint is steps.taint
    assert steps.runner.subagent(None).taint is steps.taint


def test_a_step_model_hint_no_model_qualifies_for_fails_the_step():
    tools = Tools(barrier=1)
    provider = _provider()
    provider.capabilities = ("tools",)   # declares no reasoning
    plan = sophon_dsl.loads(json.dumps({"steps": [
        {"id": "a", "description": "Research Acme Corp", "modelHint": {"requiresReasoning": True}}]}),
        format="json")
    result = sophon_dsl.run(plan, tools.specs, executor=StepAgents(provider, tools.specs, approve=True))
    assert result.call("a").error.error == "Routing.NoQualifiedModel"
    assert provider.calls == []


def test_smart_retry_suggests_another_step(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"steps": [{"id": "a", "description": "Research Acme", "toolHints": ["web.search"]}]}),
                    encoding="utf-8")
    replies = tmp_path / "replies.yaml"
    replies.write_text(json.dumps({"keyed": [
        {"match": "Failed call:", "reply": 'agent.step(description="Research Acme Corp by name")'},
        {"match": "Request: Research Acme Corp by name",
         "reply": '$state.c = web.search(query="Acme Corp")\nreturn $state.c'},
        {"match": "Request: Research Acme", "reply": '$state.c = web.search(query="Acme")\nreturn $state.c'},
    ]}), encoding="utf-8")
    args = ["run", str(plan), "--tools", str(ROOT / "examples" / "competitors_tools.py"), "--provider",
            f"scripted:{replies}", "--approve", "yes", "--json", "--no-store", "--max-turns", "1"]
    assert main(args) == 1                                    # no alternative without --smart-retry
    assert json.loads(capsys.readouterr().out)["calls"][0]["error"]["error"] == "Step.Failed"
    assert main([*args, "--smart-retry"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["state"]["state"]["steps"]["a"]["name"] == "Acme Corp"


def test_seed000_example_runs_offline_with_one_command(capsys):
    code = main(["run", str(SEED000 / "plan.json"), "--tools", str(SEED000 / "tools.py"),
                 "--provider", f"scripted:{SEED000 / 'replies.yaml'}", "--approve", "yes", "--no-store"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    lines = captured.err.splitlines()
    for step, name in (("s1", "web.search"), ("s2", "web.search"), ("s3", "web.search"),
                       ("s4", "document.create"), ("s5", "gmail.send")):
        assert f"[{step}] > {name}: succeeded" in lines
    # s1-s3 are all running before any of them ends
    first_end = min(lines.index(f"[{s}] > web.search: succeeded") for s in ("s1", "s2", "s3"))
    assert all(lines.index(f"[{s}] agent.step: running") < first_end for s in ("s1", "s2", "s3"))
    state = json.loads(captured.out[captured.out.index("{"):])
    assert state["state"]["steps"]["s5"]["recipients"] == ["team@example.com"]


def test_seed000_example_refuses_without_approval(capsys):
    code = main(["run", str(SEED000 / "plan.json"), "--tools", str(SEED000 / "tools.py"),
                 "--provider", f"scripted:{SEED000 / 'replies.yaml'}", "--approve", "no", "--no-store"])
    assert code == 1
    assert "s5 (agent.step)" in capsys.readouterr().err


def test_sub_agents_are_recorded_and_a_resume_does_not_ask_again(tmp_path):
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    ticks = {"n": 0}
    box: dict = {"block": True}

    @tool(name="tick")
    def tick() -> dict:
        """Count."""
        ticks["n"] += 1
        return {"n": ticks["n"]}

    async def sleep(_delay: float) -> None:
        # the second turn's reply "streams slowly": the first run is stopped while it waits,
        # as a crash would stop it, after the first turn was recorded
        if box["block"]:
            box["handle"].cancel()
            await asyncio.Event().wait()

    provider = ScriptedProvider(sleep=sleep, keyed=[KeyedReply("Request: Count", [
        "$state.a = tick()\n", {"reply": "return $state.a\n", "tokens_per_second": 1000}])])
    plan = sophon_dsl.loads(json.dumps({"steps": [{"id": "a", "description": "Count"}]}), format="json")

    async def first() -> None:
        steps = StepAgents(provider, [tick], approve=True, store=store)
        box["handle"] = sophon_dsl.start(plan, [tick], executor=steps, approve=True, store=store, run_id="r1")
        await box["handle"].result()

    asyncio.run(first())
    assert ticks["n"] == 1 and provider.keyed[0].used == 2
    box["block"] = False
    steps = StepAgents(provider, [tick], approve=True, store=store)
    result = sophon_dsl.resume("r1", store, [tick], executor=steps, approve=True, unknown="rerun")
    assert result.status == "succeeded", result.to_json()
    assert result.state["state"]["steps"]["a"] == {"n": 1}   # turn 1 replayed: tick did not run again
    assert ticks["n"] == 1 and provider.keyed[0].used == 3   # only the unanswered turn was asked again


def test_steps_recorded_through_a_store_url_leave_no_store_open(tmp_path):
    """Each step's sub-agent opens the store from its URL: it is closed when the step ends (a
    PostgreSQL URL would otherwise keep one connection per step for the process's life)."""
    import os

    db = tmp_path / "runs.db"
    store = f"sqlite:///{db}"
    tools = Tools()

    def open_files() -> int:
        fds = os.listdir("/proc/self/fd")
        return sum(1 for fd in fds if os.path.realpath(f"/proc/self/fd/{fd}").startswith(str(db)))

    steps = StepAgents(_provider(), tools.specs, approve=True, store=store)
    result = sophon_dsl.run(_plan(), tools.specs, executor=steps, approve=True, store=store, run_id="r1")
    assert result.status == "succeeded", result.to_json()
    assert open_files() == 0
