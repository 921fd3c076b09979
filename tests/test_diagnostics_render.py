"""Rendering diagnostics for terminals: long lines, line ends, many diagnostics."""

from __future__ import annotations

from sophon_dsl import check
from sophon_dsl.diagnostics import Diagnostic, Span, render_one, render_text
from sophon_dsl.loader import parse


def _caret_target(rendered: str) -> str:
    """The source text above the caret line's ^~~ underline."""
    src, marks = rendered.splitlines()[1:3]
    src = src.split(" | ", 1)[1]
    marks = marks.split(" | ", 1)[1]
    start = marks.index("^")
    return src[start:start + len(marks.strip())]


def test_long_lines_are_cut_around_the_span():
    text = "x" * 5000 + "BAD" + "y" * 5000
    out = render_one(Diagnostic("E001", "bad", Span(1, 5001, 1, 5004), "f.json"), text)
    shown = out.splitlines()[1]
    assert len(shown) < 200 and shown.count("…") == 2
    assert _caret_target(out) == "BAD"


def test_spans_near_either_end_of_a_long_line():
    text = "ab" + "BAD" + "z" * 3000 + "END"
    first = render_one(Diagnostic("E001", "bad", Span(1, 3, 1, 6), "f"), text)
    assert _caret_target(first) == "BAD" and not first.splitlines()[1].split(" | ", 1)[1].startswith("…")
    last = render_one(Diagnostic("E001", "bad", Span(1, len(text) - 2, 1, len(text) + 1), "f"), text)
    assert _caret_target(last) == "END" and not last.splitlines()[1].endswith("…")


def test_lines_are_counted_at_newlines_only():
    text = 'a = "x\fy"\r\nb\x0bc = 1\r\n'
    out = render_one(Diagnostic("E001", "bad", Span(2, 1, 2, 2), "f"), text)
    # no "\r"; \x0b and \f are not line ends (and are shown escaped: test below)
    assert out.split("\n")[1] == "  2 | b\\u000bc = 1"


def test_control_and_bidi_characters_are_shown_escaped_with_the_caret_on_the_span():
    # a plan from a model or a pull request must not drive the terminal `check` prints to
    # (an escape sequence retitling it or clearing the screen), nor show a line reordered by
    # a bidi override; the underline still marks the span, now wider
    text = '[{"text": "\u202e \u2066", "_tool": "ech\u202eo"}]'
    [d] = [d for d in check(parse(text, "json", file="p.json").plan) if d.code == "E201"]
    out = render_text([d], sources={"p.json": text})
    assert "\u202e" not in out and "\u2066" not in out
    assert "unknown tool 'ech\\u202eo'" in out.splitlines()[0]
    assert '\\u2066", "_tool": "ech\\u202eo"}]' in out.splitlines()[1]
    assert _caret_target(out) == '"ech\\u202eo"'
    dsl = '$state.a = echo(text="\x1b]0;pwned\x07 \x1b[2J")\n'
    [d] = parse(dsl, "dsl", file="p.plan").diagnostics  # E001: a raw control character in a string
    out = render_text([d], sources={"p.plan": dsl})
    assert "\x1b" not in out and "\x07" not in out
    assert _caret_target(out) == '"\\u001b]0;pwned\\u0007 \\u001b[2J"'


def test_render_text_with_many_diagnostics_on_one_source():
    text = "\n".join(f"$state.r{i} = nosuch{i % 3}(x={i})" for i in range(300))
    plan = parse(text).plan
    diags = check(plan, stdlib=False)
    assert len(diags) == 300
    out = render_text(diags, text)
    assert out.count("error[E201]") == 300
    assert "  300 | $state.r299 = nosuch2(x=299)" in out


def test_unknown_tool_hints_are_the_same_for_every_call():
    text = "\n".join(f"$state.r{i} = web.serch(q={i})" for i in range(5))
    from sophon_dsl.tools import tool

    @tool(name="web.search")
    def search(q: int) -> int:
        return q

    diags = check(parse(text).plan, tools=[search], stdlib=False)
    assert [d.message for d in diags] == [
        f"unknown tool 'web.serch' in call c{i + 1}; did you mean 'web.search'?" for i in range(5)]
