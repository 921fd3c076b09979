"""The console script's entry points and what starting it imports (issue 9: fast start,
the core does not import its standard library plugin)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import sophon_dsl
from sophon_dsl.cli import main

ROOT = Path(__file__).resolve().parents[1]


def python(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, **kw)


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter has imported after running ``code``."""
    proc = python("-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))")
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.splitlines()[-1]))


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"sophon-dsl {sophon_dsl.__version__}"


def test_python_m_sophon_dsl_help_and_version():
    proc = python("-m", "sophon_dsl", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: sophon-dsl ")
    for command in ("check", "fmt", "graph", "run", "dry-run", "grammar", "schema", "agent"):
        assert f"\n    {command} " in proc.stdout
    proc = python("-m", "sophon_dsl", "--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"sophon-dsl {sophon_dsl.__version__}"


def test_python_m_sophon_dsl_runs_a_command(tmp_path):
    plan = tmp_path / "p.plan"
    plan.write_text('†state.a = web.search(query="x")\n', encoding="utf-8")
    proc = python("-m", "sophon_dsl", "check", str(plan), "--tools", str(ROOT / "examples" / "competitors_tools.py"))
    assert proc.returncode == 0, proc.stderr
    assert "0 error(s)" in proc.stdout
    proc = python("-m", "sophon_dsl", "check")  # usage errors keep exit code 2
    assert proc.returncode == 2 and "usage: sophon-dsl check" in proc.stderr


def test_import_sophon_dsl_leaves_the_standard_library_and_runtime_alone():
    loaded = loaded_after("import sophon_dsl")
    assert not any(m == "stdlib_tools" or m.startswith("stdlib_tools.") for m in loaded)
    assert not {"sophon_dsl.runtime", "sophon_dsl.compiler", "pydantic", "httpx", "rich"} & loaded


def test_help_imports_no_command_implementation():
    loaded = loaded_after("import contextlib, io\nfrom sophon_dsl.cli import main\n"
                          "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
                          "    main(['--help'])")
    commands = {f"sophon_dsl.cli.{m}" for m in ("check", "fmt", "graph", "run", "dry_run", "grammar",
                                                 "schema", "agent", "progress")}
    assert not commands & loaded
    assert not {"stdlib_tools", "sophon_dsl.compiler", "sophon_dsl.runtime", "pydantic", "jsonschema",
                "httpx", "rich"} & loaded


def test_check_with_own_tools_builds_no_standard_tool():
    # the registry learns which names the standard library has without building its tools
    tools = ROOT / "examples" / "competitors_tools.py"
    loaded = loaded_after("import contextlib, io\nfrom sophon_dsl.cli import main\n"
                          "with contextlib.redirect_stdout(io.StringIO()):\n"
                          f"    assert main(['check', 'examples/competitors.plan', '--tools', {str(tools)!r}]) == 0")
    assert "stdlib_tools" in loaded  # found through sophon_dsl.stdlib_hook
    assert not {"stdlib_tools.http", "stdlib_tools.data", "stdlib_tools.memory", "httpx"} & loaded


def test_old_import_paths_still_work():
    from sophon_dsl import cli, cli_run
    from sophon_dsl.llm import cli as agent_cli, constrained_cli

    assert callable(cli_run.parse_json_arg) and cli_run.ProgressView
    assert callable(agent_cli.register) and callable(constrained_cli.register)
    assert {"check", "fmt", "graph", "run", "dry-run", "grammar", "schema", "agent"} <= set(cli.COMMANDS)
