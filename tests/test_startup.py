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


def test_help_imports_none_of_the_core():
    # issue 30: `--help` costs the interpreter, argparse and the flags' declarations, nothing more
    loaded = loaded_after("import contextlib, io\nfrom sophon_dsl.cli import main\n"
                          "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
                          "    main(['--help'])")
    core = {f"sophon_dsl.{m}" for m in ("model", "diagnostics", "loader", "tools", "values", "refs", "syntax")}
    assert not (core | {"lark", "dataclasses", "asyncio", "openai"}) & loaded


def test_import_sophon_dsl_loads_its_names_on_first_use():
    loaded = loaded_after("import sophon_dsl")
    assert not {"sophon_dsl.model", "sophon_dsl.loader", "lark"} & loaded
    loaded = loaded_after("from sophon_dsl import Plan, tool, loads\nassert callable(tool) and loads")
    assert {"sophon_dsl.model", "sophon_dsl.tools", "sophon_dsl.loader"} <= loaded
    assert set(sophon_dsl.__all__) <= set(dir(sophon_dsl))
    for name in sophon_dsl.__all__:
        assert getattr(sophon_dsl, name) is not None
    with pytest.raises(AttributeError):
        sophon_dsl.no_such_name  # noqa: B018


def test_checking_a_clean_plan_with_plain_tools_imports_neither_pydantic_nor_error_texts(tmp_path):
    # issue 30: the tools' schemas come from hint_schemas, syntax errors' explanations load
    # with the first syntax error, the grammar is read without importlib.resources
    (tmp_path / "t.py").write_text("from sophon_dsl import tool\n\n\n@tool\ndef fetch(name: str, n: int = 2) -> dict:\n"
                                   "    return {'name': name}\n", encoding="utf-8")
    (tmp_path / "p.plan").write_text('†state.a = fetch(name="ada")\n†state.b = fetch(name=†state.a.name)\n',
                                     encoding="utf-8")
    loaded = loaded_after("import contextlib, io\nfrom sophon_dsl.cli import main\n"
                          "with contextlib.redirect_stdout(io.StringIO()):\n"
                          f"    assert main(['check', {str(tmp_path / 'p.plan')!r}, '--tools', "
                          f"{str(tmp_path / 't.py')!r}]) == 0")
    assert not {"pydantic", "sophon_dsl.syntax.dsl_messages", "jmespath", "zipfile"} & loaded


def test_check_imports_neither_lark_nor_regex(tmp_path):
    # issue 30 item 11: the DSL parser is the module Lark's standalone tool generated
    # (sophon_dsl/syntax/_lalr_parser.py), with `re` in place of `regex`: a clean plan and a
    # syntax error alike
    (tmp_path / "t.py").write_text("from sophon_dsl import tool\n\n\n@tool\ndef fetch(name: str) -> dict:\n"
                                   "    return {'name': name}\n", encoding="utf-8")
    (tmp_path / "p.plan").write_text('goal = "x"\n†state.a = fetch(name="ada")  # note\n', encoding="utf-8")
    (tmp_path / "bad.plan").write_text('†state.a = fetch(name=)\n', encoding="utf-8")
    for plan, code in (("p.plan", 0), ("bad.plan", 1)):
        loaded = loaded_after("import contextlib, io\nfrom sophon_dsl.cli import main\n"
                              "with contextlib.redirect_stdout(io.StringIO()):\n"
                              f"    assert main(['check', {str(tmp_path / plan)!r}, '--tools', "
                              f"{str(tmp_path / 't.py')!r}]) == {code}")
        assert "sophon_dsl.syntax._lalr_parser" in loaded
        assert not {"lark", "regex"} & loaded, plan
        # (nor, for a DSL plan, the JSON reader: the limits every form checks are in source_limits)
        assert "sophon_dsl.syntax.json_source" not in loaded, plan


def test_the_parser_declares_only_the_command_given():
    from sophon_dsl.cli.parser import NotBuilt, build_parser, command_in

    assert command_in(["--help"]) == "" and command_in(["check", "x.plan"]) == "check"
    assert command_in(["--", "check"]) == ""
    whole, outlined = build_parser(), build_parser("check")
    assert whole.format_help() == outlined.format_help() == build_parser("").format_help()
    assert vars(whole.parse_args(["check", "x.plan", "--json"])) == \
        vars(outlined.parse_args(["check", "x.plan", "--json"]))
    with pytest.raises(NotBuilt):  # an outline never parses: main declares everything then
        outlined.parse_args(["run", "x.plan"])


def test_the_parser_lists_the_loaders_forms():
    from sophon_dsl.cli.parser import FORMATS as declared
    from sophon_dsl.loader import FORMATS

    assert declared == FORMATS


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


def _import_graph() -> dict[str, set[str]]:
    """module -> the modules of sophon_dsl / stdlib_tools it imports (any import statement,
    top level or inside a function; ``from pkg import sub`` counts as importing ``pkg.sub``)."""
    import ast

    files = {}
    for pkg in ("sophon_dsl", "stdlib_tools"):
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            files[name.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in files)
            elif isinstance(node, ast.ImportFrom):
                base = here
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                mod = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
                subs = {f"{mod}.{a.name}" for a in node.names} & files.keys()
                edges.update(subs)
                if len(subs) < len(node.names) and mod in files:
                    edges.add(mod)
        edges.discard(name)
    return graph


def test_cli_tools_and_stdlib_modules_are_in_no_import_loop():
    graph = _import_graph()
    mine = [m for m in graph if m.startswith(("sophon_dsl.cli", "stdlib_tools")) or m in (
        "sophon_dsl", "sophon_dsl.tools", "sophon_dsl.toolsource", "sophon_dsl.stdlib_hook",
        "sophon_dsl.llm.cli", "sophon_dsl.llm.constrained_cli", "sophon_dsl.__main__")]
    for start in mine:  # does any path lead from a module back to itself?
        seen, stack = set(), list(graph[start])
        while stack:
            m = stack.pop()
            assert m != start, f"{start} imports a module that imports it back"
            if m not in seen:
                seen.add(m)
                stack.extend(graph.get(m, ()))
    assert not any(m.startswith("stdlib_tools") for m in graph["sophon_dsl.tools"] | graph["sophon_dsl.stdlib_hook"])


def _fresh(code: str, cache: Path) -> set[str]:
    """``loaded_after`` with the per-user cache directory at ``cache``."""
    import os

    proc = python("-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))",
                  env={**os.environ, "SOPHON_DSL_CACHE_DIR": str(cache)})
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.splitlines()[-1]))


def test_a_one_call_run_imports_no_pydantic_jsonschema_or_yaml_once_the_schemas_are_cached(tmp_path):
    # issue 30 item 11: the standard tools' schemas come from the per-user cache after the
    # first process; literals and results of plain schemas are checked without jsonschema
    code = ("import sophon_dsl\n"
            "plan = sophon_dsl.loads('†state.t = math.eval(expression=\"a * 2\", variables={\"a\": 4})\\n')\n"
            "result = sophon_dsl.run(plan)\n"
            "assert result.status == 'succeeded' and result.state['state']['t'] == 8, result")
    first = _fresh(code, tmp_path)
    assert "pydantic" in first  # derived once...
    later = _fresh(code, tmp_path)
    assert not {"pydantic", "jsonschema", "yaml"} & later  # ...then read from the cache
    assert not {"lark", "regex"} & later  # (the generated parser: issue 30 item 11)
    assert "sophon_dsl.syntax.json_source" not in later  # (a DSL plan: syntax/source_limits.py)


def test_cached_standard_schemas_are_the_derived_ones(tmp_path):
    code = ("import json, stdlib_tools\n"
            "print(json.dumps({s.name: [s.input_schema, s.output_schema] for s in stdlib_tools.source()()}))")
    import os

    def schemas() -> dict:
        proc = python("-c", code, env={**os.environ, "SOPHON_DSL_CACHE_DIR": str(tmp_path)})
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    derived, cached = schemas(), schemas()
    assert list(tmp_path.glob("stdlib-schemas-*.json"))
    assert cached == derived and len(derived) > 20
    math_eval = derived["math.eval"][0]["properties"]
    assert math_eval["expression"]["description"].startswith("e.g.")  # Field(description=...) applied


def test_a_bad_cache_file_is_a_miss(tmp_path):
    code = ("import json, stdlib_tools\n"
            "print(json.dumps(stdlib_tools.source().get('math.eval').input_schema))")
    import os

    env = {**os.environ, "SOPHON_DSL_CACHE_DIR": str(tmp_path)}
    good = python("-c", code, env=env)
    (cache_file,) = tmp_path.glob("stdlib-schemas-*.json")
    cache_file.write_text("{not json", encoding="utf-8")
    again = python("-c", code, env=env)
    assert good.returncode == again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == json.loads(good.stdout)


def test_building_an_sdk_provider_does_not_import_its_sdk():
    # the SDK loads with the first client (the first request), not when the CLI builds the provider
    loaded = loaded_after("from sophon_dsl.llm.providers.openai import OpenAIProvider\n"
                          "OpenAIProvider(base_url='http://127.0.0.1:9/v1', api_key='x')")
    assert "openai" not in loaded


def test_run_ids_are_uuid4_hex():
    import uuid

    from sophon_dsl.ids import uuid4_hex

    ids = {uuid4_hex() for _ in range(200)}
    assert len(ids) == 200
    for text in ids:
        parsed = uuid.UUID(hex=text)
        assert parsed.hex == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_a_run_of_a_standard_tool_imports_no_query_engine_nor_uuid():
    # issue 30: the first run() of a process pays for what it uses only (jmespath loads with
    # the first JMESPath query, typing_extensions with pydantic, uuid never)
    code = ("import sophon_dsl\n"
            "plan = sophon_dsl.loads('†state.a = math.eval(expression=\"1 + 2\")')\n"
            "assert sophon_dsl.run(plan).status == 'succeeded'")
    loaded_after(code)  # the standard tools' schema cache warm (a cold one derives them with pydantic)
    loaded = loaded_after(code)
    assert not {"jmespath", "typing_extensions", "uuid", "platform", "pydantic"} & loaded


def test_a_new_cache_file_prunes_the_files_of_versions_long_unused(tmp_path):
    import os
    import time

    from sophon_dsl.cachedir import STALE_AFTER_S

    old = tmp_path / "stdlib-schemas-0123456789abcdef0123456789abcdef.json"
    recent = tmp_path / "stdlib-schemas-fedcba9876543210fedcba9876543210.json"
    other = tmp_path / "unrelated.json"
    tables = tmp_path / "lalr-0123456789abcdef.pickle"  # the parser's cache before it was generated code
    for f in (old, recent, other, tables):
        f.write_text("{}", encoding="utf-8")
    long_ago = time.time() - STALE_AFTER_S - 60
    os.utime(old, (long_ago, long_ago))
    os.utime(other, (long_ago, long_ago))
    code = ("import json, stdlib_tools\n"
            "print(json.dumps(stdlib_tools.source().get('math.eval').input_schema))")
    proc = python("-c", code, env={**os.environ, "SOPHON_DSL_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    names = {f.name for f in tmp_path.iterdir()}
    assert old.name not in names and tables.name not in names  # another version's, unused; never read
    assert {recent.name, other.name} <= names  # recent, or not a schema cache file
    assert len([n for n in names if n.startswith("stdlib-schemas-")]) == 2  # + this version's
