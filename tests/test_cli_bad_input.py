"""Bad input on the command line: a diagnostic saying where and what, never a traceback.

Each case feeds one malformed file, flag or value to ``sophon_dsl.cli.main`` and checks the
exit code (1: the plan has errors or failed, 2: usage error) and that the message names the
place (file:line:col with a caret, a JSON path, or the flag) and what was expected.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from sophon_dsl.cli import main

ECHO_TOOLS = """\
from sophon_dsl import tool

@tool
def echo(x: str) -> str:
    return x
"""


@pytest.fixture
def ws(tmp_path: Path, monkeypatch) -> Path:
    """A work directory with a plan that reads ``$input.x`` and a tools file defining ``echo``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "e.plan").write_text("$state.a = echo(x=$input.x)\n", encoding="utf-8")
    (tmp_path / "tools.py").write_text(ECHO_TOOLS, encoding="utf-8")
    (tmp_path / "bin.dat").write_bytes(b"\xff\xfe\x00bad")
    return tmp_path


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out, out.err


# -- plans from stdin --------------------------------------------------------------------


def test_stdin_that_is_not_utf8_is_e005(ws, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xff\xfe[]")))
    code, out, _ = run_cli(capsys, "check", "-", "--from", "json")
    assert code == 1
    assert "<stdin>:1:1: error[E005]" in out and "utf-8" in out  # check reports on stdout (issue 11)


@pytest.mark.parametrize("from_stdin", [False, True])
def test_a_plan_that_is_not_utf8_is_e005_at_the_bad_byte(ws, capsys, monkeypatch, from_stdin):
    # Latin-1 text in a plan: the position is the first bad byte's line and column (the
    # decoder's own offset counted from the start of a read chunk, and gave no line)
    data = '$state.a = echo(x="ok")\n$state.b = echo(x="café")\n'.encode("latin-1")
    if from_stdin:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        name = "<stdin>"
    else:
        (ws / "l1.plan").write_bytes(data)
        name = "l1.plan"
    code, out, _ = run_cli(capsys, "check", "-" if from_stdin else name, "--json")
    assert code == 1
    [d] = json.loads(out)
    assert (d["code"], d["file"], d["line"], d["column"]) == ("E005", name, 2, 23)
    assert "not UTF-8 text" in d["message"] and "0xe9" in d["message"]


# -- numeric flags -----------------------------------------------------------------------


@pytest.mark.parametrize("flag,value", [
    ("--timeout", "0"), ("--timeout", "-1"), ("--timeout", "nan"),
    ("--max-time", "-0.5"), ("--max-time", "nan"),
    ("--max-concurrency", "0"), ("--max-concurrency", "-1"), ("--max-concurrency", "two"),
])
def test_run_refuses_out_of_range_numbers(ws, capsys, flag, value):
    code, _, err = run_cli(capsys, "run", "e.plan", "--tools", "tools.py", "--input", '{"x": "a"}',
                           f"{flag}={value}")
    assert code == 2
    assert f"argument {flag}: expected" in err and repr(value) in err


@pytest.mark.parametrize("from_stdin", [False, True])
def test_input_files_with_a_byte_order_mark_are_read(ws, capsys, monkeypatch, from_stdin):
    # Windows editors start a UTF-8 file with a BOM; plan files with one are read, and so
    # are --input / --state files now (JSON's reader refused it: "Unexpected UTF-8 BOM")
    data = '\ufeff{"x": "a"}\r\n'
    (ws / "in.json").write_text(data, encoding="utf-8")
    (ws / "st.json").write_text('\ufeff{"seen": 1}', encoding="utf-8")
    if from_stdin:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data.encode("utf-8"))))
    code, out, _ = run_cli(capsys, "run", "e.plan", "--tools", "tools.py", "--no-stdlib", "--no-store", "--json",
                           "--input", "@-" if from_stdin else "@in.json", "--state", "@st.json")
    assert code == 0
    assert json.loads(out)["state"]["state"] == {"seen": 1, "a": "a"}


def test_run_accepts_infinite_time_limits(ws, capsys):
    code, _, _ = run_cli(capsys, "run", "e.plan", "--tools", "tools.py", "--input", '{"x": "a"}', "--json",
                         "--timeout", "inf", "--max-time", "inf", "--max-concurrency", "1")
    assert code == 0


def test_check_refuses_max_calls_below_one(ws, capsys):
    code, _, err = run_cli(capsys, "check", "e.plan", "--max-calls", "-1")
    assert code == 2 and "argument --max-calls: expected a whole number >= 1" in err


# -- --input / --state -------------------------------------------------------------------


def test_input_file_that_is_not_utf8(ws, capsys):
    code, _, err = run_cli(capsys, "run", "e.plan", "--tools", "tools.py", "--input", "@bin.dat")
    assert code == 2 and "--input: cannot read 'bin.dat': not UTF-8" in err


def test_input_invalid_json_shows_the_line_and_a_caret(ws, capsys):
    (ws / "in.json").write_text('{\n  "a": 1,\n  "b": oops\n}\n', encoding="utf-8")
    code, _, err = run_cli(capsys, "run", "e.plan", "--tools", "tools.py", "--input", "@in.json")
    assert code == 2
    assert "--input in.json: invalid JSON at line 3 column 8" in err
    assert '  3 |   "b": oops\n    |        ^' in err


@pytest.mark.parametrize("text", ["NaN", '{"x": Infinity}'])
def test_input_refuses_nan_and_infinity(ws, capsys, text):
    code, _, err = run_cli(capsys, "run", "e.plan", "--tools", "tools.py", "--input", text)
    assert code == 2 and "is not a JSON value" in err


def test_input_nested_deeper_than_the_limit(ws, capsys):
    (ws / "deep.json").write_text('{"x": ' + "[" * 300 + "]" * 300 + "}", encoding="utf-8")
    code, _, err = run_cli(capsys, "dry-run", "e.plan", "--tools", "tools.py", "--input", "@deep.json")
    assert code == 2 and "--input deep.json: nesting deeper than 200 levels" in err
    (ws / "deeper.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    code, _, err = run_cli(capsys, "run", "e.plan", "--tools", "tools.py", "--state", "@deeper.json")
    assert code == 2 and "--state deeper.json: invalid JSON: nested too deeply" in err


@pytest.mark.parametrize("command", ["run", "dry-run"])
@pytest.mark.parametrize("state,kind", [("[1]", "a list"), ("5", "int"), ("null", "null")])
def test_state_must_be_an_object(ws, capsys, command, state, kind):
    code, _, err = run_cli(capsys, command, "e.plan", "--tools", "tools.py", "--input", '{"x": "a"}',
                           "--state", state)
    assert code == 2 and "--state: expected a JSON object" in err and f"got {kind}" in err


# -- --mocks -------------------------------------------------------------------------------


def dry(capsys, mocks: str, *extra: str) -> tuple[int, str, str]:
    return run_cli(capsys, "dry-run", "e.plan", "--tools", "tools.py", "--input", '{"x": "a"}',
                   "--mocks", mocks, *extra)


@pytest.mark.parametrize("text,where,what", [
    ('{"echo": {"latency": "slow"}}', "m.json:1:22", "latency must be a number of seconds >= 0"),
    ('{"echo": {"result": 1, "latency": -5}}', "m.json:1:35", "latency must be a number of seconds >= 0"),
    ('{"echo": {"error": 5}}', "m.json:1:20", "error must be an error name"),
    ('{"echo": {"error": {"error": ["x"]}}}', "m.json:1:30", "error must be a string"),
    ('{"echo": {"branch": [1], "result": 1}}', "m.json:1:21", "branch must be an alternative's index"),
    ('{"echo": [{"result": 1}, {"result": 2, "latncy": 3}]}', "m.json:1:40", "unknown mock entry key 'latncy'"),
    ("[1, 2]", "m.json:1:1", "a mocks file maps tool names or call ids to mock entries; got a list"),
])
def test_malformed_mocks_name_the_place(ws, capsys, text, where, what):
    (ws / "m.json").write_text(text, encoding="utf-8")
    code, out, err = dry(capsys, "m.json")
    assert code == 2, out
    assert f"{where}: {what}" in err
    assert "^" in err and text in err  # the source line and a caret


def test_mocks_json_path_is_given(ws, capsys):
    (ws / "m.yaml").write_text("echo:\n  - {result: 1}\n  - {error: {error: X, why: 1}}\n", encoding="utf-8")
    code, _, err = dry(capsys, "m.yaml")
    assert code == 2
    assert "m.yaml:3:24: unknown error key 'why'; expected error, cause (at $.echo[1].error.why)" in err


@pytest.mark.parametrize("name,content,expect", [
    ("m.yaml", "echo: [unclosed", "m.yaml:1:16: error[E003]"),
    ("m.json", '{"echo": {"latency": NaN}}', "m.json:1:22: error[E002]"),
    ("m.yaml", "!!python/object:os.system {}\n", "m.yaml:1:1: error[E004]"),
])
def test_mocks_that_do_not_parse(ws, capsys, name, content, expect):
    (ws / name).write_text(content, encoding="utf-8")
    code, _, err = dry(capsys, name)
    assert code == 2 and expect in err and "^" in err


def test_mocks_directory_and_binary_file(ws, capsys):
    (ws / "mocks").mkdir()
    code, _, err = dry(capsys, "mocks")
    assert code == 2 and "'mocks' is a directory" in err
    code, _, err = dry(capsys, "bin.dat")
    assert code == 2 and "cannot read 'bin.dat': not UTF-8" in err


def test_dry_run_text_report_says_why_a_call_failed(ws, capsys):
    (ws / "m.json").write_text('{"echo": {"error": {"error": "Tool.Timeout", "cause": "slow"}}}', encoding="utf-8")
    code, out, _ = dry(capsys, "m.json")
    assert code == 1
    assert "failed c1 (echo): Tool.Timeout: slow" in out


def test_library_load_mocks_validates_too():
    from sophon_dsl.runtime import load_mocks

    with pytest.raises(ValueError, match=r"\$\.echo\.latency: latency must be"):
        load_mocks({"echo": {"result": 1, "latency": float("nan")}})
    assert load_mocks({"echo": {"result": {"latency": "not an entry key here"}}})  # results are free-form


# -- --tools ----------------------------------------------------------------------------------


def test_tools_file_with_a_syntax_error_points_at_it(ws, capsys):
    (ws / "bad.py").write_text("x = 1\ndef f(:\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "check", "e.plan", "--tools", "bad.py")
    assert code == 2
    assert "bad.py:2:7: error[E110]: cannot load tools from 'bad.py': SyntaxError: invalid syntax" in err
    assert "  2 | def f(:\n    |       ^" in err
    assert "frozen" not in err


def test_tools_file_that_raises_points_at_the_line(ws, capsys):
    (ws / "boom.py").write_text('import os\n\nx = 1 + int("nope")\n', encoding="utf-8")
    code, _, err = run_cli(capsys, "check", "e.plan", "--tools", "boom.py")
    assert code == 2
    assert "boom.py:3:9: error[E110]" in err and "ValueError: invalid literal" in err
    assert '  3 | x = 1 + int("nope")\n    |         ^~~~~~~~~~~' in err


def test_tools_error_in_an_imported_module_names_that_file(ws, capsys):
    (ws / "helper_mod_x.py").write_text("def f(:\n", encoding="utf-8")
    (ws / "imp.py").write_text("import helper_mod_x\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "check", "e.plan", "--tools", "imp.py")
    assert code == 2
    assert "SyntaxError: invalid syntax (" in err and "helper_mod_x.py:1:7)" in err


def test_unknown_tools_module_has_no_import_machinery_frame(ws, capsys):
    code, _, err = run_cli(capsys, "check", "e.plan", "--tools", "no_such_module_xyz")
    assert code == 2
    assert "ModuleNotFoundError: No module named 'no_such_module_xyz'" in err
    assert "importlib" not in err and "frozen" not in err


def test_tools_declaration_errors_show_the_source_line(ws, capsys):
    (ws / "decl.yaml").write_text("tools:\n  echo: 5\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "check", "e.plan", "--tools", "decl.yaml")
    assert code == 2
    assert "decl.yaml:2:9: error[E109]" in err and "  2 |   echo: 5\n    |         ^" in err


@pytest.mark.parametrize("source,expect", [
    ("", "--tools: error[E110]: empty --tools source"),
    ("toolsdir/", "tools file 'toolsdir/' is a directory"),
])
def test_empty_and_directory_tools_sources(ws, capsys, source, expect):
    (ws / "toolsdir").mkdir()
    code, _, err = run_cli(capsys, "check", "e.plan", "--tools", source)
    assert code == 2 and expect in err


# -- standard library flags ---------------------------------------------------------------


@pytest.mark.parametrize("argv,expect", [
    (["--no-stdlib", "--stdlib", "http"], "--no-stdlib cannot be combined with --stdlib"),
    (["--no-stdlib", "--sandbox", "."], "--no-stdlib cannot be combined with --sandbox"),
    (["--stdlib", ","], "--stdlib: expected comma-separated standard groups"),
    (["--allow-host", "10.0.0.0/99"], "--allow-host: '10.0.0.0/99' is not an IP address or CIDR network"),
    (["--allow-host", "not a host!"], "--allow-host: 'not a host!' is not a host name"),
])
def test_bad_stdlib_flags_are_usage_errors(ws, capsys, argv, expect):
    code, _, err = run_cli(capsys, "check", "e.plan", "--tools", "tools.py", *argv)
    assert code == 2 and expect in err


def test_good_allow_hosts_are_accepted(ws, capsys):
    code, _, _ = run_cli(capsys, "check", "e.plan", "--tools", "tools.py", "--allow-host", "*.corp.example",
                         "--allow-host", "10.1.0.0/16", "--allow-host", "[::1]", "--allow-host", "api.local")
    assert code == 0


@pytest.mark.parametrize("content,expect", [
    ('{"smtp_port": "abc"}', "smtp_port must be a whole number >= 0, got \"abc\""),
    ('{"enable_shell": "yes"}', "enable_shell must be true or false"),
    ('{"http_timeout": -1}', "http_timeout must be a number >= 0"),
    ("tools: [1, 2", "cfg.yaml:1:13: not valid YAML/JSON: expected ',' or ']'"),
])
def test_bad_stdlib_config_values(ws, capsys, content, expect):
    (ws / "cfg.yaml").write_text(content, encoding="utf-8")
    code, _, err = run_cli(capsys, "check", "e.plan", "--tools", "tools.py", "--stdlib-config", "cfg.yaml")
    assert code == 2 and expect in err


def test_stdlib_config_that_is_not_utf8(ws, capsys):
    code, _, err = run_cli(capsys, "check", "e.plan", "--stdlib-config", "bin.dat")
    assert code == 2 and "--stdlib-config: cannot read 'bin.dat': not UTF-8" in err


# -- fmt ---------------------------------------------------------------------------------------


def test_fmt_check_and_write_conflict(ws, capsys):
    code, _, err = run_cli(capsys, "fmt", "e.plan", "--check", "-w")
    assert code == 2 and "cannot be combined with -w" in err


def test_fmt_write_to_a_directory_is_a_usage_error(ws, capsys):
    (ws / "e.json").mkdir()
    code, _, err = run_cli(capsys, "fmt", "e.plan", "--to", "json", "-w")
    assert code == 2 and "-w: cannot write 'e.json': Is a directory" in err


# -- schema --output-schema -----------------------------------------------------------------


@pytest.mark.parametrize("content,expect", [
    ("[1, 2]", "expected a JSON Schema (an object"),
    ('{"type": 5}', "not a valid JSON Schema at $.type"),
    ('{"properties": {"a": {"type": "strin"}}}', "not a valid JSON Schema at $.properties.a.type"),
    ("{bad", "invalid JSON at line 1 column 2"),
    ("[" * 100_000, "invalid JSON: nested too deeply"),
])
def test_schema_refuses_bad_output_schemas(ws, capsys, content, expect):
    (ws / "out.json").write_text(content, encoding="utf-8")
    code, _, err = run_cli(capsys, "schema", "--tools", "tools.py", "--output-schema", "out.json")
    assert code == 2 and "--output-schema out.json: " in err and expect in err


def test_schema_output_schema_not_utf8(ws, capsys):
    code, _, err = run_cli(capsys, "schema", "--tools", "tools.py", "--output-schema", "bin.dat")
    assert code == 2 and "not UTF-8" in err


# -- agent and --provider -------------------------------------------------------------------


@pytest.mark.parametrize("name,content,expect", [
    ("s.yaml", b"- reply: [unclosed", "invalid YAML at line 1 column 19"),
    ("s.json", b"{bad", "invalid JSON at line 1 column 2"),
    ("s.yaml", b"\xff\xfe", "the file is not UTF-8"),
])
@pytest.mark.parametrize("command", ["agent", "run"])
def test_unreadable_scripted_provider_files(ws, capsys, name, content, expect, command):
    (ws / name).write_bytes(content)
    argv = ["agent", "hi"] if command == "agent" else ["run", "e.plan"]
    code, _, err = run_cli(capsys, *argv, "--tools", "tools.py", "--provider", f"scripted:{name}")
    assert code == 2 and f"--provider scripted:{name}: {expect}" in err


@pytest.mark.parametrize("argv,expect", [
    (["  "], "REQUEST is empty"),
    (["hi", "--delegate-dir", "nowhere"], "--delegate-dir: 'nowhere' is not a directory"),
    (["hi", "--state", "[1]"], "--state: expected a JSON object"),
])
def test_agent_usage_errors(ws, capsys, argv, expect):
    (ws / "s.json").write_text('["$state.a = echo(x=\\"a\\")"]', encoding="utf-8")
    code, _, err = run_cli(capsys, "agent", *argv, "--tools", "tools.py", "--provider", "scripted:s.json")
    assert code == 2 and expect in err


def test_agent_progress_shows_why_a_reply_was_refused(ws, capsys):
    (ws / "s.json").write_text(json.dumps(["garbage )))"]), encoding="utf-8")
    code, _, err = run_cli(capsys, "agent", "hi", "--tools", "tools.py", "--provider", "scripted:s.json",
                           "--max-turns", "1", "--no-stdlib")
    assert code == 1
    assert "turn 1: no calls; 1 error(s)" in err
    assert "  reply:1:9: error[E001]: unmatched ')'" in err
    assert "    1 | garbage )))\n      |         ^" in err


def test_dry_run_checks_a_given_input_against_the_input_schema(ws, capsys):
    (ws / "s.yaml").write_text("inputSchema: {type: object, properties: {x: {type: string}}}\n"
                               "calls:\n  - {_tool: echo, x: †input.x, _outputPath: †state.a}\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "dry-run", "s.yaml", "--tools", "tools.py", "--input", '{"x": 5}')
    assert code == 1
    assert "s.yaml: error[E107]: input does not match the plan's input schema: 5 is not of type 'string'" in err
    code, _, _ = run_cli(capsys, "dry-run", "s.yaml", "--tools", "tools.py")  # no input: sampled
    assert code == 0


@pytest.mark.parametrize("command", ["run", "dry-run"])
def test_an_input_file_that_does_not_match_the_schema_is_pointed_at_where_it_does_not(ws, capsys, command):
    (ws / "s.yaml").write_text("inputSchema: {type: object, properties: {team: {type: array, items: {type: string}}}}\n"
                               "calls:\n  - {_tool: echo, x: a, _outputPath: †state.a}\n", encoding="utf-8")
    (ws / "in.json").write_text('\ufeff{\n  "team": [\n    "a",\n    3\n  ]\n}\n', encoding="utf-8")
    code, out, err = run_cli(capsys, command, "s.yaml", "--tools", "tools.py", "--input", "@in.json", "--json",
                             *(["--no-store"] if command == "run" else []))
    assert code == 1
    assert "in.json:4:5: error[E107]: input does not match the plan's input schema: 3 is not of type 'string'" \
           " (at $.team[1])" in err
    assert "  4 |     3\n    |     ^" in err
    (d,) = json.loads(out)["diagnostics"]
    assert (d["file"], d["line"], d["column"], d["path"]) == ("in.json", 4, 5, "$.team[1]")
    # a required property missing: the input as a whole, where it starts
    (ws / "in.json").write_text('\n  {"other": 1}\n', encoding="utf-8")
    (ws / "s.yaml").write_text("inputSchema: {type: object, required: [team]}\n"
                               "calls:\n  - {_tool: echo, x: a, _outputPath: †state.a}\n", encoding="utf-8")
    code, _, err = run_cli(capsys, command, "s.yaml", "--tools", "tools.py", "--input", "@in.json",
                           *(["--no-store"] if command == "run" else []))
    assert code == 1 and "in.json:2:3: error[E107]" in err and "'team' is a required property" in err
    (ws / "s.yaml").write_text("inputSchema: {type: object, properties: {team: {type: array, items: {type: string}}}}\n"
                               "calls:\n  - {_tool: echo, x: a, _outputPath: †state.a}\n", encoding="utf-8")
    # given inline, the input has no file: the diagnostic names the plan and the JSON path
    code, _, err = run_cli(capsys, command, "s.yaml", "--tools", "tools.py", "--input", '{"team": [3]}',
                           *(["--no-store"] if command == "run" else []))
    assert code == 1 and "s.yaml: error[E107]" in err and "(at $.team[0])" in err
