"""Issue 25, `sophon-dsl run` through the CLI: the checker's warnings are shown and
`--strict` refuses on them (item 3)."""

from __future__ import annotations

import json

from sophon_dsl.cli import main

TOOLS = '''
from pathlib import Path

from sophon_dsl import tool

SENT = Path(__file__).with_name("sent.txt")

@tool
def lookup(id: str) -> dict:
    return {"amount": 5}

@tool
def notify(text: str) -> str:
    with SENT.open("a", encoding="utf-8") as f:
        f.write(text + "\\n")
    return text
'''

WARNED = '$state.o = lookup(id="A1")\nnotify(text="amount is $state.o.amount")\n'


def _files(tmp_path, plan=WARNED):
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "p.plan").write_text(plan, encoding="utf-8")
    return [str(tmp_path / "p.plan"), "--tools", str(tmp_path / "tools.py"), "--no-store"]


def test_run_prints_the_checkers_warnings(tmp_path, capsys):
    argv = _files(tmp_path)
    assert main(["run", *argv]) == 0
    err = capsys.readouterr().err
    assert "p.plan:2:13: warning[W101]:" in err and "^~~" in err
    assert err.index("warning[W101]") < err.index("plan succeeded")
    assert (tmp_path / "sent.txt").read_text(encoding="utf-8") == "amount is $state.o.amount\n"


def test_run_json_lists_the_warnings(tmp_path, capsys):
    assert main(["run", *_files(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "succeeded"
    assert [(w["code"], w["line"], w["column"]) for w in out["warnings"]] == [("W101", 2, 13)]


def test_run_json_without_warnings_has_an_empty_list(tmp_path, capsys):
    assert main(["run", *_files(tmp_path, '$state.o = lookup(id="A1")\n'), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []


def test_run_strict_refuses_to_start_on_a_warning(tmp_path, capsys):
    argv = _files(tmp_path)
    assert main(["run", *argv, "--strict", "--json"]) == 1
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["status"] == "invalid" and data["diagnostics"][0]["code"] == "W101"
    assert "nothing was started" in err
    assert not (tmp_path / "sent.txt").exists()     # notify never ran


# item 2: an input read that cannot resolve is refused before any side effect
NEEDS_INPUT = '$state.sent = notify(text="hello")\n$state.o = lookup(id=$input.order)\n'


def test_check_warns_about_input_reads_without_a_schema(tmp_path, capsys):
    argv = _files(tmp_path, NEEDS_INPUT)
    assert main(["check", argv[0], "--tools", argv[2]]) == 0
    out = capsys.readouterr().out
    assert "p.plan:2:22: warning[W305]: the plan reads †input.order but declares no input schema" in out
    assert main(["check", argv[0], "--tools", argv[2], "--strict"]) == 1


def test_run_refuses_a_missing_input_before_any_side_effect(tmp_path, capsys):
    argv = _files(tmp_path, NEEDS_INPUT)
    assert main(["run", *argv]) == 1
    err = capsys.readouterr().err
    assert "p.plan:2:22: error[E310]: parameter 'id' of call c2 reads †input.order but no input was given" in err
    assert "nothing was started" in err
    assert not (tmp_path / "sent.txt").exists()
    assert main(["run", *argv, "--input", '{"other": 1}', "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "invalid" and out["diagnostics"][0]["code"] == "E310"
    assert "the run's input does not have it" in out["diagnostics"][0]["message"]
    assert not (tmp_path / "sent.txt").exists()


def test_run_with_the_input_runs_without_the_warning(tmp_path, capsys):
    argv = _files(tmp_path, NEEDS_INPUT)
    assert main(["run", *argv, "--input", '{"order": "A1"}', "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "succeeded" and out["warnings"] == []


def test_the_python_api_refuses_a_missing_input():
    import pytest
    from sophon_dsl import loads, run, tool
    from sophon_dsl.runtime import PlanInvalid

    sent = []

    @tool
    def notify(text: str) -> str:
        sent.append(text)
        return text

    @tool
    def lookup(id: str) -> dict:
        return {"id": id}

    plan = loads(NEEDS_INPUT, format="dsl")
    with pytest.raises(PlanInvalid) as exc:
        run(plan, tools=[notify, lookup])
    assert [d.code for d in exc.value.diagnostics] == ["E310"] and sent == []
    # a fallback of input reads is refused only when no alternative is given
    alt = loads('lookup(id=$input.a || $input.b)\n', format="dsl")
    assert run(alt, tools=[notify, lookup], input={"b": "x"}).status == "succeeded"


# item 4: the error-collecting pattern works on the happy path
COLLECT_TOOLS = '''
from sophon_dsl import tool

@tool
def charge(order: str) -> str:
    if order == "X":
        raise RuntimeError("declined")
    return "charged " + order

@tool
def report(errors: list) -> int:
    return len(errors)
'''


def test_the_error_collecting_pattern_reports_on_the_happy_path(tmp_path, capsys):
    (tmp_path / "tools.py").write_text(COLLECT_TOOLS, encoding="utf-8")
    for orders, errors in ((("A", "B"), 0), (("A", "X"), 1)):
        plan = "".join(f'$state.ok || $state.errors <<= charge(order="{o}")\n' for o in orders)
        (tmp_path / "p.plan").write_text(plan + "$state.sent = report(errors=$state.errors)\n", encoding="utf-8")
        assert main(["check", str(tmp_path / "p.plan"), "--tools", str(tmp_path / "tools.py")]) == 0
        assert "note[N301]: call c3 reads †state.errors" in capsys.readouterr().out
        assert main(["run", str(tmp_path / "p.plan"), "--tools", str(tmp_path / "tools.py"), "--no-store",
                     "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["status"] == "succeeded" and out["state"]["state"]["sent"] == errors
