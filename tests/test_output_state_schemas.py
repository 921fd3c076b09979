"""Issue 10, items 5 and 6: the plan's output and state schemas are enforced, statically
(E208, E308, E309) and at run time (Output.Invalid, State.Invalid), and a final output
reading a path with no value fails the run (Ref.Unresolved), through the CLI and the API."""

from __future__ import annotations

import json

import pytest

import sophon_dsl
from sophon_dsl import tool
from sophon_dsl.cli import main
from sophon_dsl.runtime.reference import reference_run

TOOLS = '''
from sophon_dsl import tool

@tool
def word(text: str = "") -> str:
    return "seven"

@tool
def anything(text: str = ""):
    return {"a": 1}
'''


@pytest.fixture()
def tools_file(tmp_path):
    path = tmp_path / "tools.py"
    path.write_text(TOOLS, encoding="utf-8")
    return str(path)


def _plan(tmp_path, text: str) -> str:
    path = tmp_path / "p.plan"
    path.write_text(text, encoding="utf-8")
    return str(path)


@tool
def anything(text: str = ""):
    return "seven"


@tool
def obj(text: str = ""):
    return {"a": 1}


# -- item 5: the output schema --------------------------------------------------------


def test_check_reports_an_output_reference_of_the_wrong_type(tmp_path, tools_file, capsys):
    plan = _plan(tmp_path, 'output = {"type": "object", "properties": {"n": {"type": "integer"}}}\n'
                           '†state.s = word()\nreturn {"n": †state.s}\n')
    assert main(["check", plan, "--tools", tools_file]) == 1
    err = "".join(capsys.readouterr())
    assert "E208" in err and "expects integer but †state.s is written by c1" in err


def test_run_fails_when_the_output_does_not_match_its_schema(tmp_path, tools_file, capsys):
    plan = _plan(tmp_path, 'output = {"type": "object", "properties": {"n": {"type": "integer"}}}\n'
                           '†state.s = anything()\nreturn {"n": †state.s}\n')
    assert main(["run", plan, "--tools", tools_file, "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "failed"
    assert result["error"]["error"] == "Output.Invalid"
    assert result["output"] == {"n": {"a": 1}}


def test_api_output_schema_error_and_success():
    plan = 'output = {"type": "object", "properties": {"n": {"type": "integer"}}}\n†state.s = anything()\n' \
           'return {"n": †state.s}\n'
    r = sophon_dsl.run(plan, [anything])
    assert r.status == "failed" and r.error.error == "Output.Invalid"
    assert reference_run(sophon_dsl.loads(plan), [anything]).error.error == "Output.Invalid"
    ok = sophon_dsl.run(plan.replace('"integer"', '"string"'), [anything])
    assert ok.status == "succeeded" and ok.error is None and ok.output == {"n": "seven"}


def test_output_validation_can_be_turned_off():
    plan = 'output = {"type": "integer"}\n†state.s = anything()\nreturn †state.s\n'
    assert sophon_dsl.run(plan, [anything], validate_output=False).status == "succeeded"


# -- item 5: the state schema -----------------------------------------------------------


def test_check_reports_writes_the_state_schema_refuses(tmp_path, tools_file, capsys):
    plan = _plan(tmp_path, 'state = {"type": "object", "properties": {"flag": {"type": "boolean"}, '
                           '"s": {"type": "string"}}, "additionalProperties": false}\n'
                           '†state.s = word()\n†state.flag = word()\n†state.other = word()\n')
    assert main(["check", plan, "--tools", tools_file]) == 1
    out = "".join(capsys.readouterr())
    assert "E309" in out and "†state.flag as string" in out
    assert "E308" in out and "†state.other, which the plan's state schema does not allow" in out


def test_run_refuses_a_write_the_state_schema_rejects(tmp_path, tools_file, capsys):
    plan = _plan(tmp_path, 'state = {"type": "object", "properties": {"flag": {"type": "boolean"}}}\n'
                           '†state.flag = anything()\nword(text=†state.flag)\n')
    assert main(["run", plan, "--tools", tools_file, "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    calls = {c["id"]: c for c in result["calls"]}
    assert calls["c1"]["status"] == "failed" and calls["c1"]["error"]["error"] == "State.Invalid"
    assert calls["c2"]["status"] == "skipped"
    assert result["state"] == {}


@pytest.mark.parametrize("plan, ok", [
    ('†state.xs <<= obj()', False),                    # an item the list's items refuse
    ('†state.xs += obj()', False),
    ('†state.p |= obj()', False),                      # p.a must be a string
    ('†state.p &= obj()', False),
    ('†state.q = obj()', True),                        # undeclared name of an open schema
    ('†state.p = anything()', True),                   # untyped tool: checked at run time only
])
def test_every_output_method_is_checked_against_the_state_schema(plan, ok):
    header = ('state = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "string"}}, '
              '"p": {"type": ["object", "string"], "properties": {"a": {"type": "string"}}}}}\n')
    text = header + plan + "\n"
    r = sophon_dsl.run(text, [obj, anything])
    ref = reference_run(sophon_dsl.loads(text), [obj, anything])
    assert (r.status == "succeeded") is ok, r.calls[0].error
    assert r.status == ref.status
    assert [c.error.error if c.error else None for c in r.calls] == \
        [c.error.error if c.error else None for c in ref.calls]
    assert r.state == ref.state


# -- item 6: a final output reading a path with no value --------------------------------


def test_run_fails_when_the_output_reads_a_path_with_no_value(tmp_path, tools_file, capsys):
    plan = _plan(tmp_path, '†state.a || †state.b = word()\nreturn {"answer": †state.b}\n')
    assert main(["run", plan, "--tools", tools_file, "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "failed"
    assert result["error"] == {"error": "Ref.Unresolved", "cause": "the plan's output has no value at †state.b"}


def test_output_fallbacks_behave_as_in_a_call():
    r = sophon_dsl.run('†state.a || †state.b = anything()\nreturn {"x": †state.b || †state.a}\n', [anything])
    assert r.status == "succeeded" and r.output == {"x": "seven"}
    plan = '†state.a || †state.b = anything()\nreturn {"x": †state.b || †state.c, "t": "v=†state.b"}\n'
    r = sophon_dsl.run(plan, [anything])
    assert r.status == "failed" and r.error.error == "Ref.Unresolved"
    assert "†state.b || †state.c" in r.error.cause
    ref = reference_run(sophon_dsl.loads(plan), [anything])
    assert (ref.status, ref.error.error, ref.error.cause, ref.output) == \
        (r.status, r.error.error, r.error.cause, r.output)


# -- item 7: a read nothing writes and the initial state lacks -------------------------

_RAN: list = []


@tool
def fetch(n: int = 0) -> dict:
    _RAN.append(n)
    return {"x": 1}


@tool
def use(p: dict | None = None) -> str:
    return "ok"


_TYPO = '†state.userProfileData = fetch()\nuse(p=†state.userProfile)\n'


def test_check_names_the_closest_written_path():
    (w303,) = [d for d in sophon_dsl.check(sophon_dsl.loads(_TYPO), [fetch, use]) if d.code == "W303"]
    assert w303.message.endswith("did you mean †state.userProfileData, written by c1?")
    closed = 'state = {"type": "object", "properties": {"a": {"type": "string"}}}\n' + _TYPO
    (e301,) = [d for d in sophon_dsl.check(sophon_dsl.loads(closed), [fetch, use]) if d.code == "E301"]
    assert e301.message.endswith("did you mean †state.userProfileData, written by c1?")


def test_a_read_that_can_never_resolve_stops_the_run_before_anything_runs():
    _RAN.clear()
    with pytest.raises(sophon_dsl.SophonError) as exc:
        sophon_dsl.run(_TYPO, [fetch, use])
    (d,) = exc.value.diagnostics
    assert d.code == "E301" and d.is_error and "†state.userProfile" in d.message
    assert _RAN == []  # c1's side effect did not happen
    r = sophon_dsl.run(_TYPO, [fetch, use], state={"userProfile": {"a": 1}})
    assert r.status == "succeeded" and _RAN == [0]
    with pytest.raises(sophon_dsl.SophonError):
        sophon_dsl.run(_TYPO, [fetch, use], state={"other": 1})


def test_fallback_reads_are_refused_only_when_no_alternative_can_resolve():
    plan = 'use(p=†state.a || †state.b)\n'
    with pytest.raises(sophon_dsl.SophonError):
        sophon_dsl.run(plan, [use], state={})
    assert sophon_dsl.run(plan, [use], state={"b": {}}).status == "succeeded"
    out = 'return {"v": †state.answer}\n'
    with pytest.raises(sophon_dsl.SophonError):
        sophon_dsl.run(out, [use])
    assert sophon_dsl.run(out, [use], state={"answer": 1}).output == {"v": 1}


def test_cli_run_refuses_the_plan_and_runs_nothing(tmp_path, capsys):
    marker = tmp_path / "ran"
    tools = tmp_path / "tools.py"
    tools.write_text("from pathlib import Path\nfrom sophon_dsl import tool\n\n@tool\ndef fetch() -> dict:\n"
                     f"    Path({str(marker)!r}).write_text('x')\n    return {{}}\n\n"
                     "@tool\ndef use(p: dict) -> str:\n    return 'ok'\n", encoding="utf-8")
    plan = _plan(tmp_path, _TYPO)
    assert main(["run", plan, "--tools", str(tools), "--json"]) == 1
    err = "".join(capsys.readouterr())
    assert "E301" in err and "did you mean †state.userProfileData, written by c1?" in err
    assert not marker.exists()
    state = tmp_path / "state.json"
    state.write_text('{"userProfile": {}}', encoding="utf-8")
    assert main(["run", plan, "--tools", str(tools), "--state", "@" + str(state), "--json"]) == 0
    assert marker.exists()


# -- the agent loop sees the new run errors and repairs on the next turn -----------------


class _Replies:
    """A provider answering each turn with the next reply, in one chunk."""

    name = "replies"

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []

    async def stream(self, messages, *, model=None, json_schema=None, temperature=None, max_tokens=None):
        self.requests.append(list(messages))
        yield self.replies.pop(0)


def _agent_run(replies, tools=()):
    from sophon_dsl.llm.agent import Agent

    provider = _Replies(replies)
    return Agent(provider, tools=list(tools)).run("q"), provider


def test_agent_feeds_back_an_output_reading_a_path_with_no_value():
    result, provider = _agent_run(['return {"answer": $state.never_written}\n', 'return {"answer": 42}\n'])
    assert result.ok and result.output == {"answer": 42} and len(result.turns) == 2
    assert result.turns[0].errors == [{"call": "return", "error": {
        "error": "Ref.Unresolved", "cause": "the plan's output has no value at †state.never_written"}}]
    assert "Ref.Unresolved" in provider.requests[1][-1].content


def test_agent_feeds_back_output_and_state_schema_failures():
    result, _ = _agent_run([
        'output = {"type": "object", "properties": {"n": {"type": "integer"}}}\n$state.s = anything()\n'
        'return {"n": $state.s}\n',
        'return {"n": 3}\n'], [anything])
    assert result.ok and result.output == {"n": 3}
    assert result.turns[0].errors[0]["error"]["error"] == "Output.Invalid"
    result, _ = _agent_run([
        'state = {"type": "object", "properties": {"flag": {"type": "boolean"}}}\n$state.flag = anything()\n'
        'return $state.flag\n',
        'return true\n'], [anything])
    assert result.ok and result.output is True
    assert result.turns[0].errors[0]["error"]["error"] == "State.Invalid"
