"""Issue 11 item 2: the CLI conventions of actionlint, terraform and black.

``check`` reports on stdout in four forms and fails on warnings under ``--strict``;
``fmt``, ``check`` and ``graph`` take several files; no flag is matched by a prefix;
a misspelt command gets a did-you-mean; ``-`` needs no ``--from``; ``--input @-``;
``run --json`` on an invalid plan answers in JSON; a missing file is a usage error.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from sophon_dsl import __version__
from sophon_dsl.diagnostics import CODES

from test_cli_bad_input import ECHO_TOOLS, run_cli as cli  # the same echo tool and no-traceback runner

# the parts of the SARIF 2.1.0 schema (sarif-schema-2.1.0.json) a code-scanning upload
# relies on: required members, their types, levels and 1-based regions
SARIF_SHAPE = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "$schema": {"type": "string", "format": "uri"},
        "runs": {"type": "array", "items": {"$ref": "#/definitions/run"}},
    },
    "definitions": {
        "message": {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}],
                    "properties": {"text": {"type": "string"}}},
        "run": {
            "type": "object", "required": ["tool"],
            "properties": {
                "tool": {"type": "object", "required": ["driver"], "properties": {
                    "driver": {"type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string"}, "version": {"type": "string"},
                        "rules": {"type": "array", "items": {"$ref": "#/definitions/rule"}}}}}},
                "results": {"type": "array", "items": {"$ref": "#/definitions/result"}},
                "columnKind": {"enum": ["utf16CodeUnits", "unicodeCodePoints"]},
            },
        },
        "rule": {"type": "object", "required": ["id"], "properties": {
            "id": {"type": "string"}, "name": {"type": "string"},
            "shortDescription": {"$ref": "#/definitions/message"},
            "defaultConfiguration": {"type": "object", "properties": {
                "level": {"enum": ["none", "note", "warning", "error"]}}}}},
        "result": {"type": "object", "required": ["message"], "properties": {
            "ruleId": {"type": "string"}, "ruleIndex": {"type": "integer", "minimum": -1},
            "level": {"enum": ["none", "note", "warning", "error"]},
            "message": {"$ref": "#/definitions/message"},
            "locations": {"type": "array", "items": {"type": "object", "properties": {
                "physicalLocation": {"type": "object", "required": ["artifactLocation"], "properties": {
                    "artifactLocation": {"type": "object", "required": ["uri"],
                                         "properties": {"uri": {"type": "string", "format": "uri-reference"}}},
                    "region": {"type": "object", "required": ["startLine"], "properties": {
                        "startLine": {"type": "integer", "minimum": 1},
                        "startColumn": {"type": "integer", "minimum": 1},
                        "endLine": {"type": "integer", "minimum": 1},
                        "endColumn": {"type": "integer", "minimum": 1}}}}}}}}}},
    },
}


@pytest.fixture
def ws(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tools.py").write_text(ECHO_TOOLS, encoding="utf-8")
    # (its input schema keeps it free of W305: input reads without one are a warning)
    (tmp_path / "good.plan").write_text('input = {"type": "object", "properties": {"x": {}}}\n'
                                        "$state.a = echo(x=$input.x)\n", encoding="utf-8")
    (tmp_path / "bad.plan").write_text('$state.a = echo(x="a")\n$state.b = ecoh(x="b")\n', encoding="utf-8")
    # W303: a read of a state path nothing writes (a warning, not an error)
    (tmp_path / "warn.plan").write_text("$state.a = echo(x=$state.never)\n", encoding="utf-8")
    return tmp_path


# -- check: stdout, --strict, --format --------------------------------------------------------


def test_check_prints_diagnostics_on_stdout(ws, capsys):
    code, out, err = cli(capsys, "check", "bad.plan", "--tools", "tools.py", "--no-stdlib")
    assert code == 1
    assert "bad.plan:2:12: error[E201]: unknown tool 'ecoh'" in out and "did you mean 'echo'" in out
    assert "E201" not in err
    # the summary stays where it was: after diagnostics on stderr (grep sees only diagnostics)
    assert "1 plan(s) checked: 1 error(s), 0 warning(s)" in err and "checked" not in out
    code, out, err = cli(capsys, "check", "good.plan", "--tools", "tools.py", "--no-stdlib")
    assert code == 0 and out == "1 plan(s) checked: 0 error(s), 0 warning(s)\n" and err == ""


def test_strict_makes_warnings_fail(ws, capsys):
    code, out, _ = cli(capsys, "check", "warn.plan", "--tools", "tools.py", "--no-stdlib")
    assert code == 0 and "warning[W303]" in out
    code, out, err = cli(capsys, "check", "warn.plan", "--tools", "tools.py", "--no-stdlib", "--strict")
    assert code == 1 and "warning[W303]" in out and "--strict: warnings fail" in err
    assert cli(capsys, "check", "good.plan", "--tools", "tools.py", "--no-stdlib", "--strict")[0] == 0


def test_format_json_is_the_json_flag(ws, capsys):
    code, out, _ = cli(capsys, "check", "bad.plan", "--tools", "tools.py", "--no-stdlib", "--format", "json")
    assert code == 1
    _, same, _ = cli(capsys, "check", "bad.plan", "--tools", "tools.py", "--no-stdlib", "--json")
    assert json.loads(out) == json.loads(same) and json.loads(out)[0]["code"] == "E201"
    code, _, err = cli(capsys, "check", "bad.plan", "--json", "--format", "sarif")
    assert code == 2 and "--format json" in err


def test_format_sarif_is_valid_sarif_2_1_0(ws, capsys):
    code, out, _ = cli(capsys, "check", "bad.plan", "warn.plan", "--tools", "tools.py", "--no-stdlib",
                       "--format", "sarif")
    assert code == 1
    log = json.loads(out)
    jsonschema.Draft7Validator(SARIF_SHAPE, format_checker=jsonschema.FormatChecker()).validate(log)
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "sophon-dsl" and driver["version"] == __version__
    assert [r["id"] for r in driver["rules"]] == list(CODES)
    by_rule = {r["ruleId"]: r for r in run["results"]}
    e201, w303 = by_rule["E201"], by_rule["W303"]
    assert driver["rules"][e201["ruleIndex"]]["id"] == "E201"
    assert e201["level"] == "error" and w303["level"] == "warning"
    location = e201["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "bad.plan"
    assert location["region"] == {"startLine": 2, "startColumn": 12, "endLine": 2, "endColumn": 16}


def test_format_sarif_with_no_problem_is_an_empty_run(ws, capsys):
    code, out, _ = cli(capsys, "check", "good.plan", "--tools", "tools.py", "--no-stdlib", "--format", "sarif")
    assert code == 0 and json.loads(out)["runs"][0]["results"] == []


def test_format_github_annotation_lines(ws, capsys):
    code, out, _ = cli(capsys, "check", "bad.plan", "warn.plan", "--tools", "tools.py", "--no-stdlib",
                       "--format", "github")
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("::error file=bad.plan,line=2,col=12,endColumn=16,title=E201 unknown tool::"
                               "[E201] unknown tool 'ecoh'")
    assert lines[1].startswith("::warning file=warn.plan,line=1,col=")


def test_github_escapes_what_would_end_a_command():
    from sophon_dsl.diagnostics import Diagnostic, Span
    from sophon_dsl.reports import render_github

    line = render_github([Diagnostic("E201", "a:b, 100%\nnext", Span(1, 2, 1, 3), file="x,y:z.plan")])
    assert line == "::error file=x%2Cy%3Az.plan,line=1,col=2,endColumn=3,title=E201 unknown tool::" \
                   "[E201] a:b, 100%25%0Anext"


def test_github_annotations_show_control_characters_escaped():
    """The Actions log is a terminal: an escape sequence or bidi override from a plan's names
    is written \\uXXXX in the annotation (the message and the file), never sent raw."""
    from sophon_dsl.diagnostics import Diagnostic, Span
    from sophon_dsl.reports import render_github

    line = render_github([Diagnostic("E201", "unknown tool 'x\x1b]0;pwned\x07\u202e'", Span(1, 1, 1, 2),
                                     file="p\x1b[2J.plan")])
    assert "\x1b" not in line and "\x07" not in line and "\u202e" not in line
    assert "file=p\\u001b[2J.plan" in line and "x\\u001b]0;pwned\\u0007\\u202e" in line


# -- several files -----------------------------------------------------------------------------


def test_fmt_takes_several_files(ws, capsys):
    (ws / "a.plan").write_text('$state.a   =  echo( x = "1" )\n', encoding="utf-8")
    (ws / "b.plan").write_text('$state.b = echo(x="2")\n', encoding="utf-8")
    code, out, _ = cli(capsys, "fmt", "a.plan", "b.plan")
    assert code == 0 and out == '$state.a = echo(x="1")\n$state.b = echo(x="2")\n'
    code, _, err = cli(capsys, "fmt", "--check", "a.plan", "b.plan")
    assert code == 1 and "a.plan: not formatted" in err and "b.plan" not in err
    assert cli(capsys, "fmt", "-w", "a.plan", "b.plan")[0] == 0
    assert cli(capsys, "fmt", "--check", "a.plan", "b.plan")[0] == 0


def test_graph_takes_several_files(ws, capsys):
    (ws / "two.plan").write_text("$state.a = echo(x=\"1\")\n$state.b = echo(x=$state.a)\n", encoding="utf-8")
    code, out, _ = cli(capsys, "graph", "good.plan", "two.plan", "--tools", "tools.py", "--no-stdlib")
    assert code == 0 and out.count("graph TD") == 2
    code, out, _ = cli(capsys, "graph", "good.plan", "two.plan", "--tools", "tools.py", "--no-stdlib",
                       "--format", "json")
    graphs = json.loads(out)
    assert [g["file"] for g in graphs] == ["good.plan", "two.plan"] and len(graphs[1]["edges"]) == 1
    _, out, _ = cli(capsys, "graph", "two.plan", "--tools", "tools.py", "--no-stdlib", "--format", "json")
    assert "file" not in json.loads(out)  # one plan: the graph itself, as before


# -- the command line itself -----------------------------------------------------------------------


def test_version_and_python_dash_m(ws):
    done = subprocess.run([sys.executable, "-m", "sophon_dsl", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"sophon-dsl {__version__}"
    done = subprocess.run([sys.executable, "-m", "sophon_dsl", "check", "bad.plan", "--tools", "tools.py",
                           "--no-stdlib", "--format", "github"], capture_output=True, text=True, timeout=60, cwd=ws)
    assert done.returncode == 1 and done.stdout.startswith("::error file=bad.plan,line=2")


def test_misspelt_command_gets_did_you_mean(ws, capsys):
    code, _, err = cli(capsys, "chek", "good.plan")
    assert code == 2 and "invalid choice: 'chek'" in err and "did you mean 'check'?" in err
    code, _, err = cli(capsys, "dryrun", "good.plan")
    assert code == 2 and "did you mean 'dry-run'?" in err
    code, _, err = cli(capsys, "zzzz")
    assert code == 2 and "did you mean" not in err


def test_unknown_stdlib_config_key_gets_did_you_mean(ws, capsys):
    (ws / "cfg.yaml").write_text("sandbox_rot: .\n", encoding="utf-8")
    code, _, err = cli(capsys, "check", "good.plan", "--tools", "tools.py", "--stdlib-config", "cfg.yaml")
    assert code == 2 and "unknown setting(s) sandbox_rot" in err and "did you mean 'sandbox_root'" in err


@pytest.mark.parametrize("argv", [
    ["check", "good.plan", "--js"],                       # would have been --json
    ["check", "good.plan", "--tool", "tools.py"],         # would have been --tools
    ["run", "good.plan", "--appr", "yes"],                # would have been --approve
    ["fmt", "good.plan", "--wr"],                          # would have been --write
])
def test_no_prefix_matching(ws, capsys, argv):
    code, _, err = cli(capsys, *argv)
    assert code == 2 and "unrecognized arguments" in err


def test_every_parser_refuses_abbreviations():
    from sophon_dsl.cli.parser import build_parser

    parser = build_parser()
    commands = [a for a in parser._actions if isinstance(a, type(parser._subparsers._group_actions[0]))]
    assert parser.allow_abbrev is False
    for sub in commands[0].choices.values():
        assert sub.allow_abbrev is False, sub.prog


# -- stdin ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    '[{"_tool": "echo", "x": "a", "_outputPath": "†state.a"}]',
    '// a comment\n{"calls": [{"_tool": "echo", "x": "a"}]}',
    "# a plan\n- _tool: echo\n  x: a\n",
    "goal: g\ncalls:\n  - _tool: echo\n    x: a\n",
    "# a plan\n$state.a = echo(x=\"a\")\n",
    's1: echo(x="a")\n',
    'goal = "g"\necho(x="a")\n',
])
def test_stdin_form_is_detected_without_from(ws, capsys, monkeypatch, text):
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    code, out, _ = cli(capsys, "check", "-", "--tools", "tools.py", "--no-stdlib")
    assert code == 0, out


def test_from_still_wins_over_detection(ws, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO('[{"_tool": "echo", "x": "a"}]'))
    code, out, _ = cli(capsys, "check", "-", "--from", "yaml", "--tools", "tools.py", "--no-stdlib")
    assert code == 0, out  # JSON is YAML too


def test_input_from_stdin(ws, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"x": "from stdin"}'))
    code, out, err = cli(capsys, "run", "good.plan", "--tools", "tools.py", "--no-stdlib", "--input", "@-",
                         "--json")
    assert code == 0, err
    assert json.loads(out)["state"]["state"] == {"a": "from stdin"}


def test_plan_and_input_cannot_both_come_from_stdin(ws, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("$state.a = echo(x=$input.x)\n"))
    code, _, err = cli(capsys, "run", "-", "--tools", "tools.py", "--no-stdlib", "--input", "@-", "--json")
    assert code == 2 and "--input" in err and "stdin was already read" in err


# -- run --json on an invalid plan, missing files ------------------------------------------------------


def test_run_json_on_an_invalid_plan_prints_json_diagnostics(ws, capsys):
    code, out, err = cli(capsys, "run", "bad.plan", "--tools", "tools.py", "--no-stdlib", "--json")
    assert code == 1
    result = json.loads(out)
    assert result["status"] == "invalid"
    assert [(d["code"], d["file"], d["line"]) for d in result["diagnostics"]] == [("E201", "bad.plan", 2)]
    assert "error[E201]" in err  # people still read it
    (ws / "broken.plan").write_text("$state.a = echo(x=\n", encoding="utf-8")
    code, out, _ = cli(capsys, "run", "broken.plan", "--tools", "tools.py", "--no-stdlib", "--json")
    assert code == 1 and json.loads(out)["diagnostics"][0]["code"] == "E001"
    code, out, _ = cli(capsys, "dry-run", "bad.plan", "--tools", "tools.py", "--no-stdlib", "--json")
    assert code == 1 and json.loads(out)["status"] == "invalid"


@pytest.mark.parametrize("argv", [
    ["check", "nope.plan"], ["check", "good.plan", "nope.plan"], ["fmt", "nope.plan"], ["fmt", "-w", "nope.plan"],
    ["graph", "nope.plan"], ["run", "nope.plan", "--json"], ["dry-run", "nope.plan"],
    ["run", "good.plan", "--tools", "tools.py", "--input", "@nope.json"],
    # run and dry-run take one plan file; check, fmt and graph walk a directory
    # (tests/followups/test_cli_directories.py)
    ["run", "."], ["dry-run", "."], ["check", ".", "nope.plan"],
])
def test_missing_files_exit_2(ws, capsys, argv):
    code, out, err = cli(capsys, *argv)
    assert code == 2, (out, err)
    assert "nope" in err or "directory" in err
