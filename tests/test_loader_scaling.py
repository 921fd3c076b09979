"""Loaders at scale: big YAML plans, alias bombs, the cached DSL parser, GC state.

No timings are asserted here; benchmarks/ compares costs side by side.
"""

from __future__ import annotations

import gc
import json
import logging

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sophon_dsl.compiler import compile_plan
from sophon_dsl.loader import parse
from sophon_dsl.syntax import dsl_parser, json_source, yaml_source
from sophon_dsl.syntax.json_source import parse_json
from sophon_dsl.syntax.located import LazySpanPaths
from sophon_dsl.syntax.yaml_source import MAX_NODES, parse_yaml
from sophon_dsl.tools import ToolSpec


def _yaml_plan(n: int) -> str:
    lines = ["goal: generated", "calls:"]
    for i in range(n):
        lines.append(f"- _tool: web.search\n  query: topic {i}\n  _outputPath: †state.r{i}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ YAML


def test_yaml_plan_of_30k_calls_loads():
    # 30k calls (~300k nodes) keeps the test quick; benchmarks load 100k
    result = parse(_yaml_plan(30_000), "yaml")
    assert result.ok, result.diagnostics[:3]
    assert len(result.plan.calls) == 30_000
    last = result.plan.calls[-1]
    assert last.output.paths[0].path == ("r29999",)
    assert last.span.line == 2 + 3 * 29_999 + 1


def test_composing_path_has_no_cap_on_written_nodes():
    # more written nodes than the alias budget, with an anchor so the composing path
    # (the one with the budget) reads it
    text = "a: &x [1]\nb: [" + ", ".join(["7"] * (MAX_NODES + 20_000)) + "]\n"
    node, diags = parse_yaml(text)
    assert diags == [] and len(node.get("b")) == MAX_NODES + 20_000


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
    grammar = dsl_parser.grammar_text()
    dsl_parser.build_lark(dsl_parser._Builder(), tmp_path)
    monkeypatch.setattr(dsl_parser, "grammar_text", lambda: grammar + "\n// changed\n")
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


# ------------------------------------------------------------------ JSON


def _parser_tree(text: str):
    parser = json_source._Parser(text, None)
    return parser.parse_document(), parser.diags


def _assert_same_tree(fast, slow) -> None:
    stack = [(fast, slow)]
    while stack:
        a, b = stack.pop()
        assert (a.kind, a.span, a.path, a.quoted) == (b.kind, b.span, b.path, b.quoted)
        assert dict(a.key_spans) == dict(b.key_spans)
        if a.is_object:
            assert [k for k, _ in a.value] == [k for k, _ in b.value]
            stack.extend(zip([v for _, v in a.value], [v for _, v in b.value]))
        elif a.is_array:
            assert len(a.value) == len(b.value)
            stack.extend(zip(list(a.value), list(b.value)))
        else:
            assert type(a.value) is type(b.value) and a.value == b.value


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=40) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=60)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_JSON_VALUES, st.sampled_from([None, 0, 2, "\t"]), st.booleans())
def test_plain_json_path_builds_the_parsers_tree(value, indent, ascii_only):
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    fast = json_source._read_plain(text)
    slow, diags = _parser_tree(text)
    assert diags == [] and slow is not None
    if fast is not None:  # surrogate escapes (ensure_ascii) go to the parser
        _assert_same_tree(fast, slow)


def test_long_arrays_are_located_as_read():
    text = json.dumps({"calls": [{"_tool": "f", "x": [i, str(i)]} for i in range(100)]}, indent=1)
    fast = json_source._read_plain(text)
    calls = fast.get("calls")
    assert not isinstance(calls.value, list) and len(calls) == 100
    assert calls.value[57].get("x").value[1].path == "$.calls[57].x[1]"
    assert calls.value[-1].path == "$.calls[99]"
    _assert_same_tree(fast, _parser_tree(text)[0])


@pytest.mark.parametrize("text,codes", [
    ('{"a": 1, // note\n "b": 2}', []),
    ('{"a": 1, "a": 2}', ["E108"]),
    ('[NaN]', ["E002"]),
    ('[Infinity]', ["E002"]),
    ('[1e999]', ["E002"]),
    ('[' + "9" * 4001 + ']', ["E002"]),
    ('[' * 201 + ']' * 201, ["E002"]),
    ('\ufeff{"a": 1}', []),
    ('["\\ud800"]', ["E006"]),  # a lone surrogate: refused (issue 10)
    ('{"a": 1,}', ["E002"]),
    ('', ["E002"]),
])
def test_unusual_json_is_read_by_the_parser(text, codes):
    assert json_source._read_plain(text) is None
    node, diags = parse_json(text)
    assert [d.code for d in diags] == codes
    if not codes:
        _assert_same_tree(node, _parser_tree(text)[0])


def test_json_diagnostic_keeps_its_position_and_path():
    calls = [{"_tool": "web.search", "query": f"q{i}", "_outputPath": f"†state.r{i}"} for i in range(60)]
    calls[41]["_tool"] = "web.serch"
    text = json.dumps({"goal": "g", "calls": calls}, indent=2, ensure_ascii=False)
    result = parse(text, "json", file="plan.json")
    assert result.ok
    paths = result.plan.span_paths
    assert isinstance(paths, LazySpanPaths) and not paths.computed
    tools = [ToolSpec("web.search", input_schema={"type": "object", "properties": {"query": {}}})]
    diags = [d for d in compile_plan(result.plan, tools=tools).diagnostics if d.code == "E201"]
    assert len(diags) == 1 and paths.computed
    line = text.split("\n").index('      "_tool": "web.serch",') + 1
    span = diags[0].span
    assert (span.line, span.column, span.end_line, span.end_column) == (line, 16, line, 27)
    assert diags[0].path == "$.calls[41]._tool"
    assert diags[0].file == "plan.json"
    # the same map the parser's own tree gives
    assert dict(paths) == _parser_tree(text)[0].span_paths()


def test_lazy_span_paths_compute_once():
    calls: list[int] = []
    paths = LazySpanPaths(lambda: calls.append(1) or {"k": "$"})
    assert paths and not paths.computed and calls == []
    assert paths.get("k") == "$" and paths["k"] == "$" and len(paths) == 1 and "k" in paths
    assert calls == [1]


def _composed(text: str):
    original = yaml_source._read_plain
    yaml_source._read_plain = lambda _text: None
    try:
        return parse_yaml(text)
    finally:
        yaml_source._read_plain = original


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_JSON_VALUES, st.sampled_from(["block", "flow", "json"]))
def test_plain_yaml_events_build_the_composed_tree(value, style):
    if style == "json":
        text = json.dumps(value, indent=2, ensure_ascii=False)
    else:
        text = yaml.safe_dump(value, allow_unicode=True, default_flow_style=style == "flow")
    composed, diags = _composed(text)
    fast = yaml_source._read_plain(text)
    if fast is not None:
        assert diags == []
        _assert_same_tree(fast, composed)


@pytest.mark.parametrize("text", [
    "a: 1\na: 2\n", "- &x 1\n- *x\n", "!!str 3", "? [a]\n: 1\n", "a: 1\n---\nb: 2\n", "",
    "[" * 70 + "]" * 70, "x: !!binary aGk=", "{1: a}", "a: 'x",
])
def test_unusual_yaml_takes_the_composing_path(text):
    assert yaml_source._read_plain(text) is None
    (node, diags), (composed, composed_diags) = parse_yaml(text), _composed(text)
    assert diags == composed_diags
    if composed is not None:
        _assert_same_tree(node, composed)


def test_lazy_span_paths_pickle_and_copy_as_a_plain_map():
    import copy
    import pickle

    plan = parse('{"calls": [{"_tool": "f", "x": 1}]}', "json").plan
    for clone in (pickle.loads(pickle.dumps(plan)), copy.deepcopy(plan)):
        assert dict(clone.span_paths) == dict(plan.span_paths)
        assert "$.calls[0].x" in clone.span_paths.values()


def test_source_bounds_admit_100k_call_plans_in_every_form():
    """Issue 9: plans of 100,000 calls load; issue 17's E007 bounds must not refuse them.
    The calls below read two parents through an object parameter, the longest shape the
    benchmarks print (the load itself is measured by bench_parse.py's YAML probe)."""
    import json

    from sophon_dsl.syntax.json_source import size_problem

    calls = [{"_tool": "work", "key": i, "deps": {"a": f"†state.n{max(i - 1, 0)}", "b": f"†state.n{i // 2}"},
              "_outputPath": f"†state.n{i}"} for i in range(100_000)]
    for text in (json.dumps(calls, indent=2, ensure_ascii=False),
                 "\n".join(f"- _tool: work\n  key: {c['key']}\n  deps:\n    a: {c['deps']['a']}\n"
                           f"    b: {c['deps']['b']}\n  _outputPath: {c['_outputPath']}" for c in calls)):
        assert size_problem(text) is None, size_problem(text).message
