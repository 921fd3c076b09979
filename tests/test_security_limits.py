"""Issue 17, Medium 11: every form bounds the size and nesting of what it reads (E007,
E008), before parsing, and a long DSL string literal costs its length."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from sophon_dsl.cli import main
from sophon_dsl.loader import parse
from sophon_dsl.syntax.json_source import MAX_DEPTH, MAX_SOURCE_CHARS, MAX_SOURCE_LINES

FORMS = ("dsl", "json", "yaml")


@pytest.mark.parametrize("form", FORMS)
def test_text_over_the_character_limit_is_refused(form):
    text = "#" * (MAX_SOURCE_CHARS + 10) if form != "json" else " " * (MAX_SOURCE_CHARS + 10) + "[]"
    result = parse(text, form)
    assert [d.code for d in result.diagnostics] == ["E007"]
    assert f"{MAX_SOURCE_CHARS:,}" in result.diagnostics[0].message


@pytest.mark.parametrize("form", FORMS)
def test_text_over_the_line_limit_is_refused(form):
    result = parse("\n" * (MAX_SOURCE_LINES + 5), form)
    assert [d.code for d in result.diagnostics] == ["E007"]
    assert result.diagnostics[0].span.line == MAX_SOURCE_LINES + 1


def test_a_long_dsl_string_literal_costs_its_length():
    text = '†state.x = data.set(value={}, path="a", new="' + "a" * (1 << 20) + '")\n'
    parse('†state.x = f(a="warm")\n', "dsl")  # the parser itself is built outside the measure
    tracemalloc.start()
    try:
        result = parse(text, "dsl")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.ok and result.plan.calls[0].params[2].value.value == "a" * (1 << 20)
    assert peak < 48 << 20  # was about 380 MB: the string regex kept a stack per character


def test_escapes_still_read_with_the_unrolled_string_pattern():
    result = parse('†state.x = f(a="q\\"x\\\\", b=\'it\\\'s\', c="#[(")\n', "dsl")
    values = [p.value.value for p in result.plan.calls[0].params]
    assert result.ok and values == ['q"x\\', "it's", "#[("]


def _nested(depth: int) -> str:
    return '†state.x = data.set(value={}, path="a", new=' + "[" * depth + "]" * depth + ")\n"


@pytest.mark.parametrize("command", [["check"], ["fmt"], ["run", "--json"]])
def test_deep_dsl_nesting_is_a_diagnostic_in_every_command(tmp_path, capsys, command):
    plan = tmp_path / "deep.plan"
    plan.write_text(_nested(5000), encoding="utf-8")
    capsys.readouterr()
    code = main([command[0], str(plan), *command[1:]])
    out = capsys.readouterr()
    assert code == 1 and "Traceback" not in out.err
    assert "E008" in out.out + out.err


def test_nesting_up_to_the_limit_checks_formats_and_runs(tmp_path, capsys):
    plan = tmp_path / "deep.plan"
    plan.write_text(_nested(MAX_DEPTH - 1), encoding="utf-8")
    assert main(["check", str(plan)]) == 0
    assert main(["fmt", str(plan)]) == 0
    capsys.readouterr()
    assert main(["run", str(plan), "--json"]) == 0
    value = json.loads(capsys.readouterr().out)["state"]["state"]["x"]["a"]
    depth = 0
    while isinstance(value, list) and value:
        value, depth = value[0], depth + 1
    assert depth == MAX_DEPTH - 2


def test_brackets_inside_strings_and_comments_do_not_count():
    text = '†state.x = f(a="' + "[" * 500 + '")  # ' + "(" * 500 + "\n"
    assert parse(text, "dsl").ok
