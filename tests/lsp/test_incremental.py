"""The language server's incremental re-parse (issue 28 item 2) gives what a whole parse
gives: the same plan, spans and comments included, and so the same diagnostics as
``sophon-dsl check`` (``fullcheck.check_loaded`` over ``loader.parse``).

Hypothesis types, deletes and pastes into plans while one :class:`DslReparser` follows
the document, as the server's does, and every version is compared with a fresh whole
parse; the conformance corpus's DSL plans are compared cold."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sophon_dsl.diagnostics import Span
from sophon_dsl.fullcheck import check_loaded
from sophon_dsl.loader import parse
from sophon_dsl.lsp import analysis as an
from sophon_dsl.lsp.incremental import DslReparser, segments
from sophon_dsl.tools import ToolRegistry
from sophon_dsl.toolsource import load_tool_sources

ROOT = Path(__file__).resolve().parents[2]
_TOOLS, _ = load_tool_sources([str(ROOT / "examples" / "competitors_tools.py")])
REGISTRY = ToolRegistry(_TOOLS)


def _corpus_plans() -> list[str]:
    out = []
    for path in sorted((ROOT / "spec" / "conformance").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for case in doc.get("cases", ()):
            if case.get("form") == "dsl" and isinstance(case.get("plan"), str):
                out.append(case["plan"])
    return out


CORPUS = _corpus_plans()
SEEDS = [(ROOT / "examples" / name).read_text(encoding="utf-8") for name in ("competitors.plan", "map.plan")] + [
    "\n".join(f'$state.n{i} = web.search(query="q {i}")  # call {i}' if i % 3 else f"# about {i}\n"
              f'@risk(low)\n$state.s{i} = sheet.create(title="t", rows=[$state.n{i - 1}])' for i in range(1, 12)),
]
# whole statements and lines (the incremental path) and fragments that break them (the fallback)
PASTES = ["\n", "\n\n", "# a comment\n", '$state.z = web.search(query="z")\n', "goal = \"g\"\n", "mode = lazy\n",
          'tool t.x = {"description": "d"}\n', "return {a: $state.acme}\n", "s9: web.search(query=\"q\")\n",
          "@risk(high)\n", "   # indented\n",
          '$state.p1 = web.search(query="p1")\n$state.p2 = web.search(query="p2")\n# three lines\n',
          "(", ")", "{", "}", '"', "$state.", "x", "é", ";", "=", ", "]


def shape(obj):
    """Every field of the model, those left out of equality (spans, comments) included."""
    if isinstance(obj, Span):
        return ("Span", obj.line, obj.column, obj.end_line, obj.end_column)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (type(obj).__name__,) + tuple((f.name, shape(getattr(obj, f.name)))
                                             for f in dataclasses.fields(obj))
    if isinstance(obj, (list, tuple)):
        return tuple(shape(x) for x in obj)
    if isinstance(obj, dict):
        return tuple((k, shape(v)) for k, v in obj.items())
    return obj


def same_as_whole(reparser: DslReparser, text: str) -> None:
    got = reparser.parse(text, "p.plan")
    want = parse(text, "dsl", file="p.plan")
    assert got.diagnostics == want.diagnostics
    assert shape(got.plan) == shape(want.plan)
    assert check_loaded(got, tools=REGISTRY) == check_loaded(want, tools=REGISTRY)


@st.composite
def edit_runs(draw) -> list[str]:
    text = draw(st.sampled_from(SEEDS))
    out = [text]
    for _ in range(draw(st.integers(1, 6))):
        lines = text.split("\n")
        kind = draw(st.sampled_from(["type", "paste", "paste", "delete", "delete line", "duplicate line",
                                     "delete lines", "undo"]))
        at = draw(st.integers(0, len(text)))
        if kind == "undo":  # an earlier version again: its segments come back from the cache, moved since
            text = out[draw(st.integers(0, len(out) - 1))]
        elif kind == "delete lines":
            k = draw(st.integers(0, len(lines) - 1))
            del lines[k:k + draw(st.integers(2, 4))]
            text = "\n".join(lines)
        elif kind == "type":
            text = text[:at] + draw(st.text(max_size=4)) + text[at:]
        elif kind == "paste":
            line = draw(st.integers(0, len(lines)))  # mostly at a line start, as editors paste lines
            start = len("\n".join(lines[:line])) + (1 if line else 0) if draw(st.booleans()) else at
            text = text[:start] + draw(st.sampled_from(PASTES)) + text[start:]
        elif kind == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 12)):]
        else:
            k = draw(st.integers(0, len(lines) - 1))
            lines[k:k + 1] = [] if kind == "delete line" else [lines[k], lines[k]]
            text = "\n".join(lines)
        out.append(text)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(versions=edit_runs())
def test_random_edits_give_the_whole_parse_and_check(versions):
    reparser = DslReparser()
    for text in versions:
        same_as_whole(reparser, text)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(versions=edit_runs())
def test_the_editor_analysis_has_the_check_diagnostics(versions):
    reparser = DslReparser()
    for text in versions:
        got = an.analyse(text, "dsl", "p.plan", REGISTRY, reparser=reparser)
        assert got.diagnostics == check_loaded(parse(text, "dsl", file="p.plan"), tools=REGISTRY)


@pytest.mark.parametrize("text", CORPUS, ids=[str(i) for i in range(len(CORPUS))])
def test_corpus_plans_parse_as_whole(text):
    same_as_whole(DslReparser(), text)


def test_an_edit_reparses_only_its_statement():
    text = SEEDS[2]
    reparser = DslReparser()
    reparser.parse(text)
    assert reparser.parsed == len(segments(text)) > 10
    edited = text.replace('query="q 5"', 'query="q 55"')
    same_as_whole(reparser, edited)
    assert (reparser.parsed, reparser.reused) == (1, len(segments(text)) - 1)
    before = reparser.parse(edited).plan.calls
    moved = "\n" + edited  # every statement one line down: moved, not parsed again
    same_as_whole(reparser, moved)
    assert reparser.parsed == 1  # the first segment (its text has the new line)
    after = reparser.parse(moved).plan.calls
    # nor copied: the same nodes, whose spans are read one line further down
    assert after[-1] is before[-1] and after[-1].params[0] is before[-1].params[0]
    assert after[-1].span.line == len(moved.rstrip("\n").split("\n"))
    back = "\n".join(moved.split("\n")[3:])  # two lines up (the first statement deleted)
    same_as_whole(reparser, back)
    assert reparser.parsed == 0


def test_a_broken_statement_reparses_only_itself():
    text = "\n".join(f'$state.n{i} = web.search(query="q {i}")' for i in range(20))
    reparser = DslReparser()
    reparser.parse(text)
    broken = text.replace('query="q 7")', 'query="q 7)')
    same_as_whole(reparser, broken)
    assert any(d.is_error for d in reparser.parse(broken).diagnostics)
    assert reparser.parsed == 0 and reparser.reused == 20  # (the line above parsed it)
    fixed = broken.replace('query="q 7)', 'query="q 77")')
    same_as_whole(reparser, fixed)
    assert reparser.parsed == 1


def test_segments_cut_before_statements_and_keep_comments_with_them():
    text = "# head\n\ngoal = \"g\"\n# about a\n@risk(low)\na(x=1)\nb(\n  y=[1,\n2])\n\n# tail\n"
    assert segments(text) == [(1, '# head\n\ngoal = "g"'), (4, "# about a\n@risk(low)\na(x=1)"),
                              (7, "b(\n  y=[1,\n2])\n\n# tail\n")]  # nothing after the tail to cut before
