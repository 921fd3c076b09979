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
