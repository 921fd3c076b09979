"""LLM-suggested alternatives on failure: accepted, refused (NO_ALTERNATIVE, a different output
path, an output that does not fit the readers, risk without approval), never for reference
errors; the record and the plan_step_retry event carry the alternative; --smart-retry."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from sophon_dsl import loads, run
from sophon_dsl.cli import main
from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider
from sophon_dsl.planning.advisor import LLMAdvisor, parse_suggestion
from sophon_dsl.runtime.errors import ErrorInfo, RunError
from sophon_dsl.runtime.retry import alternative_for
from sophon_dsl.tools import tool

PAGE = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
PLAN = ('$state.page = web.fetch(url="http://down.example")\n'
        '$state.title = pick(page=$state.page)\n'
        'return $state.title\n')


@tool(name="web.fetch", risk="low", output_schema=PAGE)
async def fetch(url: str) -> dict:
    raise RunError("Tool.Failed", f"{url} is down")


@tool(name="mirror.fetch", risk="low", output_schema=PAGE)
async def mirror(url: str) -> dict:
    return {"title": f"mirror of {url}"}


@tool(name="paid.fetch", risk="high", output_schema=PAGE)
async def paid(url: str) -> dict:
    return {"title": "paid"}


@tool(name="text.fetch", risk="low", output_schema={"type": "string"})
async def text_fetch(url: str) -> str:
    return "text"


@tool(name="pick")
async def pick(page: dict) -> str:
    return page["title"]


TOOLS = [fetch, mirror, paid, text_fetch, pick]


def advisor(answer: str) -> LLMAdvisor:
    return LLMAdvisor(ScriptedProvider(keyed=[KeyedReply("Failed call: ", answer)]))


def run_with(answer: str, approve="no"):
    events = []
    adv = advisor(answer)
    result = run(loads(PLAN), TOOLS, advisor=adv, approve=approve, on_event=events.append)
    return result, events, adv


def test_an_accepted_alternative_runs_in_place_and_is_recorded():
    result, events, adv = run_with('$state.page = mirror.fetch(url="http://mirror.example")')
    assert result.status == "succeeded" and result.output == "mirror of http://mirror.example"
    rec = result.calls[0].to_json()
    assert rec["status"] == "succeeded" and rec["tool"] == "mirror.fetch"
    assert rec["alternative"]["call"] == '$state.page = mirror.fetch(url="http://mirror.example")'
    assert rec["alternative"]["after"]["error"] == "Tool.Failed"
    retry = [e for e in events if e.type == "plan_step_retry"]
    assert len(retry) == 1 and retry[0].data["alternative"]["tool"] == "mirror.fetch"
    # the original's failed attempt and the alternative's own, each on the timeline (issue 29)
    assert [(a["attempt"], a["status"], (a["error"] or {}).get("error")) for a in rec["attempt_log"]] == [
        (1, "failed", "Tool.Failed"), (2, "succeeded", None)]
    sent = adv.provider.calls[0]
    assert sent["temperature"] == 0.5 and sent["max_tokens"] == 256
    prompt = sent["messages"][1].content
    assert "web.fetch(url=" in prompt and "mirror.fetch(" in prompt and "text.fetch(" not in prompt


def test_a_bare_call_keeps_the_output_path():
    result, _, _ = run_with('mirror.fetch(url="http://m")')
    assert result.status == "succeeded" and result.output == "mirror of http://m"


@pytest.mark.parametrize("answer, refused", [
    ("NO_ALTERNATIVE", "NO_ALTERNATIVE"),
    ('$state.other = mirror.fetch(url="x")', "different output path"),
    ('$state.page = text.fetch(url="x")', "does not fit the readers"),
    ('$state.page = nope.fetch(url="x")', "unknown tool"),
    ('$state.page = paid.fetch(url="x")', "riskier (high) and was not approved"),
])
def test_refused_alternatives_leave_the_call_failed(answer, refused):
    result, events, _ = run_with(answer)
    rec = result.calls[0].to_json()
    assert result.status == "failed" and rec["status"] == "failed" and rec["tool"] == "web.fetch"
    assert refused in rec["alternative"]["refused"]
    assert not [e for e in events if e.type == "plan_step_retry"]
    assert result.calls[1].status == "skipped"


def test_a_riskier_alternative_goes_through_approval_whatever_the_settings():
    asked = []

    def approver(req):
        asked.append((req.kind, req.call.tool, req.max_risk.label))
        return True

    result, events, _ = run_with('$state.page = paid.fetch(url="x")', approve=approver)
    assert result.status == "succeeded" and result.output == "paid"
    assert asked == [("call", "paid.fetch", "high")]


def test_never_for_reference_approval_or_plan_errors():
    adv = advisor('$state.page = mirror.fetch(url="x")')
    fake = SimpleNamespace(opts=SimpleNamespace(advisor=adv))
    call = loads(PLAN).calls[0]
    for code in ("Ref.Unresolved", "Approval.Rejected", "Approval.Timeout", "Plan.Cancelled", "Plan.Timeout"):
        assert asyncio.run(alternative_for(fake, 0, call, ErrorInfo(code, "x"))) is None
    assert adv.asked == 0


def test_the_advisor_through_the_openai_sdk_and_local_sse_server(monkeypatch):
    pytest.importorskip("openai")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "llm"))
    from sse_server import ScriptedLLMServer

    from sophon_dsl.llm.providers import OpenAIProvider

    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with ScriptedLLMServer(replies=['$state.page = mirror.fetch(url="http://m")'], chunk_chars=4) as srv:
        adv = LLMAdvisor(OpenAIProvider("gpt-test", base_url=srv.openai_base_url, api_key="sk-test"))
        result = run(loads(PLAN), TOOLS, advisor=adv)
        sent = srv.requests[0].json
    assert result.status == "succeeded" and result.output == "mirror of http://m"
    assert sent["temperature"] == 0.5 and sent["max_tokens"] == 256
    assert "Failed call: $state.page = web.fetch(" in sent["messages"][-1]["content"]


def test_parse_suggestion():
    assert parse_suggestion("NO_ALTERNATIVE.") is None
    assert parse_suggestion("f()\ng()") is None
    assert parse_suggestion("not dsl (") is None
    assert parse_suggestion("`mirror.fetch(url=\"x\")`").tool == "mirror.fetch"


def test_cli_smart_retry_on_run_and_agent(tmp_path, capsys):
    tools = tmp_path / "tools.py"
    tools.write_text(
        "from sophon_dsl.tools import tool\nfrom sophon_dsl.runtime.errors import RunError\n"
        "@tool(name='web.fetch')\nasync def fetch(url: str) -> str:\n    raise RunError('Tool.Failed', 'down')\n"
        "@tool(name='mirror.fetch')\nasync def mirror(url: str) -> str:\n    return 'mirrored ' + url\n")
    plan = tmp_path / "p.plan"
    plan.write_text('$state.page = web.fetch(url="a")\nreturn $state.page\n')
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"keyed": [
        {"match": "Failed call: ", "reply": '$state.page = mirror.fetch(url="b")'},
        {"match": "Request: ", "reply": '$state.page = web.fetch(url="a")\nreturn $state.page\n'}]}))
    args = ["--tools", str(tools), "--no-stdlib", "--json"]
    assert main(["run", str(plan), *args, "--provider", f"scripted:{script}", "--smart-retry"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["output"] == "mirrored b"
    assert out["calls"][0]["alternative"]["call"] == '$state.page = mirror.fetch(url="b")'
    assert main(["run", str(plan), *args, "--provider", f"scripted:{script}"]) == 1   # off by default
    capsys.readouterr()
    assert main(["run", str(plan), *args, "--smart-retry"]) == 2
    assert "--smart-retry needs --provider" in capsys.readouterr().err
    assert main(["agent", "fetch a", *args, "--provider", f"scripted:{script}", "--smart-retry"]) == 0
    assert json.loads(capsys.readouterr().out)["output"] == "mirrored b"
