"""Loaders at scale: big YAML plans, alias bombs, the cached DSL parser, GC state.

No timings are asserted here; benchmarks/ compares costs side by side.
"""

from __future__ import annotations

import gc
import logging

from sophon_dsl.loader import parse
from sophon_dsl.syntax import dsl_parser
from sophon_dsl.syntax.yaml_source import MAX_NODES, parse_yaml


def _yaml_plan(n: int) -> str:
    lines = ["goal: generated", "calls:"]
    for i in range(n):
        lines.append(f"- _tool: web.search\n  query: topic {i}\n  _outputPath: †state.r{i}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ YAML


def test_yaml_plan_of_30k_calls_loads():
    result = parse(_yaml_plan(30_000), "yaml")
    assert result.ok, result.diagnostics[:3]
    assert len(result.plan.calls) == 30_000
    last = result.plan.calls[-1]
    assert last.output.paths[0].path == ("r29999",)
    assert last.span.line == 2 + 3 * 29_999 + 1


def _laughs(levels: int, width: int) -> str:
    lines = ["a: &a [" + ", ".join(["lol"] * width) + "]"]
    prev = "a"
    for k in range(1, levels):
        name = f"l{k}"
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * width) + "]")
        prev = name
    return "\n".join(lines) + "\n"


def test_billion_laughs_is_still_refused():
    node, diags = parse_yaml(_laughs(9, 9))
    assert node is None
    assert [d.code for d in diags] == ["E004"]
    assert "alias bomb" in diags[0].message and diags[0].span is not None


def test_alias_budget_counts_only_what_aliases_add():
    # ~110k nodes of expansion: over the budget however few nodes are written
    node, diags = parse_yaml(_laughs(5, 11))
    assert node is None and diags[0].code == "E004"
    # under the budget: fine, and the written nodes do not count against it
    node, diags = parse_yaml(_laughs(3, 11))
    assert diags == [] and node is not None
    assert MAX_NODES == 100_000


def test_yaml_errors_keep_the_pure_python_wording():
    # libyaml reads the document first; its problems are reworded by the Python loader
    node, diags = parse_yaml("a: 'x")
    assert node is None and diags[0].code == "E003"
    assert "while scanning a quoted scalar" in diags[0].message


# ------------------------------------------------------------- DSL parser


def test_parser_tables_are_cached_and_reused(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="lark")
    dsl_parser.build_lark(dsl_parser._Builder(), tmp_path)
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].stat().st_size > 0
    assert not any("Loading grammar from cache" in r.getMessage() for r in caplog.records)
    caplog.clear()
    dsl_parser.build_lark(dsl_parser._Builder(), tmp_path)
    assert any("Loading grammar from cache" in r.getMessage() for r in caplog.records)


def test_changed_grammar_gets_its_own_cache_file(tmp_path, monkeypatch):
    grammar = dsl_parser._grammar_text()
    dsl_parser.build_lark(dsl_parser._Builder(), tmp_path)
    monkeypatch.setattr(dsl_parser, "_grammar_text", lambda: grammar + "\n// changed\n")
    dsl_parser.build_lark(dsl_parser._Builder(), tmp_path)
    assert len(list(tmp_path.iterdir())) == 2


def test_corrupt_cache_file_is_rebuilt(tmp_path):
    dsl_parser.build_lark(dsl_parser._Builder(), tmp_path)
    (cached,) = tmp_path.iterdir()
    cached.write_bytes(b"not a cache\n")
    dsl_parser.build_lark(dsl_parser._Builder(), tmp_path)
    assert cached.read_bytes() != b"not a cache\n"


def test_cache_dir_falls_back_to_none_when_unwritable(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("SOPHON_DSL_CACHE_DIR", str(blocker / "sub"))
    assert dsl_parser.cache_dir() is None
    monkeypatch.setenv("SOPHON_DSL_CACHE_DIR", str(tmp_path / "ok"))
    assert dsl_parser.cache_dir() == tmp_path / "ok"


def test_importing_the_package_builds_no_parser():
    import subprocess
    import sys

    code = ("import sophon_dsl, sophon_dsl.loader, sophon_dsl.syntax.dsl_parser as m; "
            "print(m._PARSER is None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_parsing_leaves_the_gc_alone(monkeypatch):
    def refuse() -> None:
        raise AssertionError("the parser must not switch the cyclic GC off")

    monkeypatch.setattr(gc, "disable", refuse)
    seen: list[bool] = []
    gc.callbacks.append(lambda phase, info: seen.append(gc.isenabled()))
    try:
        text = "".join(f"†state.r{i} = f(x={i}, y=\"s{i}\")\n" for i in range(3000))
        result = parse(text, "dsl")
    finally:
        gc.callbacks.pop()
    assert result.ok and len(result.plan.calls) == 3000
    assert gc.isenabled()
    assert all(seen)
