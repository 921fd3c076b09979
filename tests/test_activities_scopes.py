"""Issue 10, items 14 and 15: a call's ``_activity`` runs the code registered under that
name (Acts 003: the tool gives the interface, the activity the code), and the data its
``_scopes`` allow reaches that code through a ``CallContext`` parameter (Acts 015)."""

from __future__ import annotations

import asyncio

import pytest

import sophon_dsl
from sophon_dsl import CallContext, ToolRegistry, ToolSpec, tool
from sophon_dsl.runtime import PlanInvalid

SEND = ToolSpec("gmail.send", "Send a mail",
                {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"],
                 "additionalProperties": False},
                {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]})


def registry(*specs: ToolSpec) -> ToolRegistry:
    return ToolRegistry([SEND, *specs])


# -- item 14: _activity binds the call to the named code ---------------------------------------


def test_a_call_with_an_activity_runs_the_registered_function_with_its_arguments():
    got: list = []

    @tool
    def smtp_send(to: str) -> dict:
        got.append(to)
        return {"id": "m1"}

    plan = sophon_dsl.loads('@activity(smtp_send) $state.sent = gmail.send(to="a@b.c")\n')
    assert sophon_dsl.check(plan, tools=registry(smtp_send)) == []
    result = sophon_dsl.run(plan, tools=registry(smtp_send))  # no LLM executor: not latent
    assert result.status == "succeeded", result.calls[0].error
    assert got == ["a@b.c"] and result.state["state"]["sent"] == {"id": "m1"}


def test_the_activity_replaces_the_tools_own_code_and_the_json_form_binds_too():
    @tool(name="gmail.send")
    async def own(to: str) -> dict:
        return {"id": "own"}

    @tool
    async def other(to: str) -> dict:
        return {"id": "other"}

    plan = sophon_dsl.loads('[{"_tool": "gmail.send", "to": "x", "_activity": "other", "_outputPath": "†state.r"},'
                            ' {"_tool": "gmail.send", "to": "y", "_outputPath": "†state.s"}]', format="json")
    result = sophon_dsl.run(plan, tools=ToolRegistry([own, other]))
    assert result.state["state"] == {"r": {"id": "other"}, "s": {"id": "own"}}


def test_the_tool_gives_the_schemas_the_activity_the_code():
    @tool
    def loose(to: str) -> dict:
        return {"no_id": True}

    plan = sophon_dsl.loads('@activity(loose) $state.r = gmail.send(to="a")\n')
    result = sophon_dsl.run(plan, tools=registry(loose))
    # the result is checked against gmail.send's output schema, not the activity's
    assert result.calls[0].error.error == "Tool.OutputInvalid"
    # and the arguments against gmail.send's input schema (E203), before anything runs
    bad = sophon_dsl.loads('@activity(loose) $state.r = gmail.send(to="a", cc="b")\n')
    assert [d.code for d in sophon_dsl.check(bad, tools=registry(loose))] == ["E203"]


def test_an_activity_that_is_not_registered_is_e209_with_a_suggestion():
    @tool
    def smtp_send(to: str) -> dict:
        return {"id": "m1"}

    plan = sophon_dsl.loads('@activity(smtpSend) $state.r = gmail.send(to="a")\n')
    diags = sophon_dsl.check(plan, tools=registry(smtp_send))
    assert [d.code for d in diags] == ["E209"]
    assert "smtpSend" in diags[0].message and "did you mean 'smtp_send'" in diags[0].message
    assert (diags[0].line, diags[0].column) == (1, 1)
    with pytest.raises(PlanInvalid) as exc:
        sophon_dsl.run(plan, tools=registry(smtp_send))
    assert [d.code for d in exc.value.diagnostics] == ["E209"]


def test_an_activity_naming_a_latent_tool_is_e209():
    summarize = ToolSpec("summarize", input_schema={"type": "object"})
    plan = sophon_dsl.loads('[{"_tool": "gmail.send", "to": "a", "_activity": "summarize"}]', format="json")
    diags = sophon_dsl.check(plan, tools=registry(summarize))
    assert [d.code for d in diags] == ["E209"] and "latent" in diags[0].message
    assert diags[0].path == "$[0]._activity"


def test_an_activity_declared_without_code_passes_check_and_is_e207_at_run():
    declared = ToolSpec("smtp", input_schema={"type": "object"}, explicit=True)
    plan = sophon_dsl.loads('@activity(smtp) $state.r = gmail.send(to="a")\n')
    assert sophon_dsl.check(plan, tools=registry(declared)) == []
    with pytest.raises(PlanInvalid) as exc:
        sophon_dsl.run(plan, tools=registry(declared))
    assert [d.code for d in exc.value.diagnostics] == ["E207"]


def test_a_read_value_given_to_an_activity_is_checked_against_the_tools_schema():
    @tool
    def smtp(to: object) -> dict:
        return {"id": "m"}

    @tool
    def number():  # no output schema: only the run can tell the value is not a string
        return 3

    plan = sophon_dsl.loads('$state.n = number()\n@activity(smtp) $state.r = gmail.send(to=$state.n)\n')
    result = sophon_dsl.run(plan, tools=registry(smtp, number))
    assert result.calls[1].error.error == "Tool.InputInvalid"


# -- item 15: the scoped data reaches the code through a CallContext -------------------------


def test_scoped_state_and_input_reach_the_activity_and_not_its_arguments_or_schema():
    seen: list = []

    @tool
    async def log_event(eventName: str, ctx: CallContext) -> None:
        seen.append((eventName, ctx))

    assert set(log_event.input_schema["properties"]) == {"eventName"}
    assert log_event.input_schema["required"] == ["eventName"]
    plan = sophon_dsl.loads('@scopes(state) log_event(eventName="user_login")\n')
    assert sophon_dsl.check(plan, tools=ToolRegistry([log_event])) == []
    result = sophon_dsl.run(plan, tools=ToolRegistry([log_event]), state={"userId": "u1"}, input={"q": 1})
    assert result.status == "succeeded"
    [(name, ctx)] = seen
    assert name == "user_login" and ctx.scoped == {"state": {"userId": "u1"}}  # not the input
    assert ctx.call_id == "c1" and ctx.scopes == ("state",) and ctx.tool.name == "log_event"


def test_an_activity_receives_the_call_the_tool_and_its_scopes():
    seen: list = []

    @tool
    def smtp(to: str, context: CallContext) -> dict:  # a sync activity, run in a thread
        seen.append(context)
        context.scoped["state"]["user"] = "changed"  # its own copy
        return {"id": context.scoped["state"]["user"] + "@" + to}

    plan = sophon_dsl.loads('@activity(smtp) @scopes(state, input) $state.r = gmail.send(to="x")\n')
    result = sophon_dsl.run(plan, tools=registry(smtp), input={"lang": "en"}, state={"user": "ann"})
    assert result.status == "succeeded", [c.error for c in result.calls]
    ctx = seen[0]
    assert ctx.scoped == {"state": {"user": "changed"}, "input": {"lang": "en"}}
    assert ctx.activity == "smtp" and ctx.tool.name == "gmail.send" and ctx.call.tool == "gmail.send"
    assert result.state["state"] == {"user": "ann", "r": {"id": "changed@x"}}


def test_an_instanced_call_gets_its_own_instance_data():
    seen: dict = {}

    @tool
    async def translate(ctx: CallContext) -> str:
        seen[ctx.instance] = ctx.scoped
        return ctx.scoped["state"]["text"].upper()

    plan = sophon_dsl.loads('@instance("A") @scopes(state) $state.out = translate()\n'
                            '@instance("B") @scopes(state, input) $state.out = translate()\n')
    result = sophon_dsl.run(plan, tools=ToolRegistry([translate]), input={"k": 0},
                            context={"state@A": {"text": "hello"}, "state@B": {"text": "bonjour"},
                                     "input@B": {"k": 2}})
    assert result.status == "succeeded", [c.error for c in result.calls]
    assert seen == {"A": {"state": {"text": "hello"}}, "B": {"state": {"text": "bonjour"}, "input": {"k": 2}}}
    assert result.state["state@A"]["out"] == "HELLO" and result.state["state@B"]["out"] == "BONJOUR"


def test_a_context_parameter_is_passed_without_scopes_and_optional_or_postponed_annotations_work():
    namespace: dict = {}
    exec("from __future__ import annotations\n"
         "import sophon_dsl\n"
         "def probe(x: int, ctx: sophon_dsl.CallContext | None = None) -> dict:\n"
         "    return {'x': x, 'id': ctx.call_id, 'scoped': ctx.scoped}\n", namespace)
    probe = tool(namespace["probe"])
    assert probe.context_param == "ctx" and set(probe.input_schema["properties"]) == {"x"}
    result = sophon_dsl.run(sophon_dsl.loads("s1: $state.r = probe(x=1)\n"), tools=ToolRegistry([probe]))
    assert result.state["state"]["r"] == {"x": 1, "id": "s1", "scoped": {}}


def test_a_plan_cannot_set_the_context_parameter():
    @tool
    def probe(x: int, ctx: CallContext) -> int:
        return x

    plan = sophon_dsl.loads("probe(x=1, ctx={})\n")
    assert [d.code for d in sophon_dsl.check(plan, tools=ToolRegistry([probe]))] == ["E203"]


def test_the_stream_and_start_paths_share_the_invoker():
    seen: list = []

    @tool
    async def probe(ctx: CallContext) -> int:
        seen.append(ctx.scoped)
        return 1

    async def main():
        handle = sophon_dsl.start(sophon_dsl.loads("@scopes(input) $state.r = probe()\n"),
                                  tools=ToolRegistry([probe]), input={"a": 1})
        return await handle.result()

    result = asyncio.run(main())
    assert result.status == "succeeded" and seen == [{"input": {"a": 1}}]


def test_a_dry_run_mocks_an_activity_call_instead_of_running_its_code():
    ran: list = []

    @tool
    def smtp(to: str) -> dict:
        ran.append(to)
        return {"id": "real"}

    plan = sophon_dsl.loads('@activity(smtp) $state.r = gmail.send(to="a")\n')
    report = sophon_dsl.dry_run(plan, tools=registry(smtp), mocks={"gmail.send": {"result": {"id": "mock"}}})
    assert ran == [] and report.status == "succeeded", report
    assert report.result.state["state"]["r"] == {"id": "mock"}
