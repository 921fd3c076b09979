"""The sophon-dsl console script: check, fmt, graph (public contract of issue 2)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sophon_dsl.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TOOLS = str(EXAMPLES / "competitors_tools.py")


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_check_bundled_example_is_clean(capsys):
    assert main(["check", str(EXAMPLES / "competitors.plan"), "--tools", TOOLS]) == 0
    out = capsys.readouterr()
    assert "0 error(s)" in out.out


def test_check_reports_unknown_tool_with_suggestion_and_caret(tmp_path, capsys):
    plan = write(tmp_path, "bad.plan", '†state.a = web.serch(query="x")\n')
    assert main(["check", plan, "--tools", TOOLS]) == 1
    err = capsys.readouterr().out  # diagnostics on stdout, pipeable to grep (issue 11)
    assert f"{plan}:1:12: error[E201]" in err
    assert "web.search" in err  # did you mean
    assert "^" in err and '†state.a = web.serch(query="x")' in err


def test_check_json_output_shape(tmp_path, capsys):
    plan = write(tmp_path, "bad.plan", '†state.a = web.search(query=1)\n†state.b = nope()\n')
    assert main(["check", plan, "--tools", TOOLS, "--json"]) == 1
    diags = json.loads(capsys.readouterr().out)
    assert {d["code"] for d in diags} >= {"E204", "E201"}
    for d in diags:
        assert set(d) == {"code", "severity", "message", "file", "line", "column", "end_line",
                          "end_column", "path"}
        assert d["file"] == plan and d["line"] in (1, 2)


def test_check_several_plans_in_one_run(tmp_path, capsys):
    good = write(tmp_path, "good.plan", '†state.a = web.search(query="Globex")\n')
    bad = write(tmp_path, "bad.json", '[{"_tool": "web.search"}]')
    assert main(["check", good, bad, "--tools", TOOLS, "--json"]) == 1
    diags = json.loads(capsys.readouterr().out)
    assert [d["code"] for d in diags] == ["E202"]
    assert diags[0]["file"] == bad and diags[0]["line"] == 1


def test_check_yaml_positions(tmp_path, capsys):
    plan = write(tmp_path, "p.yaml", "- _tool: web.search\n  query: Acme Corp\n- _tool: web.serch\n")
    assert main(["check", plan, "--tools", TOOLS, "--json"]) == 1
    [d] = json.loads(capsys.readouterr().out)
    assert (d["code"], d["line"]) == ("E201", 3)
    assert d["path"] is not None


def test_check_syntax_error_never_tracebacks(tmp_path, capsys):
    plan = write(tmp_path, "broken.plan", "†state.a = f(x=\n")
    assert main(["check", plan]) == 1
    out = capsys.readouterr()
    assert "error[E001]" in out.out and "Traceback" not in out.err


def test_usage_errors_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["check"])
    assert exc.value.code == 2
    plan = write(tmp_path, "plan.txt", "f()\n")
    assert main(["check", plan]) == 2  # unknown extension, no --from
    assert main(["check", str(EXAMPLES / "competitors.plan"), "--tools", str(tmp_path / "nope.py")]) == 2
    err = capsys.readouterr().err
    assert "--from" in err and "nope.py" in err


def test_tools_file_that_raises_is_a_usage_error(tmp_path, capsys):
    tools = write(tmp_path, "t.py", "raise RuntimeError('boom')\n")
    assert main(["check", str(EXAMPLES / "competitors.plan"), "--tools", tools]) == 2
    assert "boom" in capsys.readouterr().err


def test_stdin_with_from(monkeypatch, capsys):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO('[{"_tool": "web.search", "query": "Acme Corp"}]'))
    assert main(["check", "-", "--from", "json", "--tools", TOOLS]) == 0


def test_fmt_converts_between_forms_and_back(tmp_path, capsys):
    src = str(EXAMPLES / "competitors.plan")
    assert main(["fmt", src, "--to", "json"]) == 0
    as_json = capsys.readouterr().out
    data = json.loads(as_json)
    calls = data["calls"] if isinstance(data, dict) else data
    assert calls[0]["_tool"] == "web.search"
    jpath = write(tmp_path, "p.json", as_json)
    assert main(["fmt", jpath, "--to", "yaml"]) == 0
    ypath = write(tmp_path, "p.yaml", capsys.readouterr().out)
    assert main(["fmt", ypath, "--to", "dsl"]) == 0
    back = capsys.readouterr().out
    assert main(["fmt", src]) == 0
    direct = capsys.readouterr().out  # JSON and YAML carry no comments; the DSL keeps them
    assert back == "".join(line for line in direct.splitlines(True) if not line.lstrip().startswith("#"))


def test_fmt_check_and_write(tmp_path, capsys):
    messy = write(tmp_path, "m.plan", '†state.a   =  web.search( query = "Acme Corp" )  # c\n')
    assert main(["fmt", messy, "--check"]) == 1
    assert main(["fmt", messy, "-w"]) == 0
    assert main(["fmt", messy, "--check"]) == 0
    assert main(["fmt", messy, "--to", "json", "-w"]) == 0
    assert (tmp_path / "m.json").exists()


def test_graph_formats(capsys):
    src = str(EXAMPLES / "competitors.plan")
    assert main(["graph", src, "--tools", TOOLS]) == 0
    mermaid = capsys.readouterr().out
    assert mermaid.lstrip().startswith(("graph", "flowchart"))
    assert main(["graph", src, "--tools", TOOLS, "--format", "dot"]) == 0
    assert "digraph" in capsys.readouterr().out
    assert main(["graph", src, "--tools", TOOLS, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["nodes"]) == 5 and len(data["edges"]) >= 4


def test_console_script_runs():
    exe = shutil.which("sophon-dsl", path=str(Path(sys.executable).parent))
    assert exe, "the sophon-dsl console script is installed with the package"
    proc = subprocess.run([exe, "check", str(EXAMPLES / "competitors.plan"), "--tools", TOOLS],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
