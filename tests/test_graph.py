"""Graph renderings: Mermaid, DOT, JSON."""

from __future__ import annotations

import json

from sophon_dsl.compiler import compile_plan
from sophon_dsl.diagnostics import Span
from sophon_dsl.graph import edges, to_data, to_dot, to_json, to_mermaid
from sophon_dsl.model import Call, OutputTarget, Param, Plan
from sophon_dsl.refs import json_to_value, parse_reference


def mk(tool, line, params=None, out=None, op=None, **kw):
    ps = tuple(Param(k, json_to_value(v)) for k, v in (params or {}).items())
    target = None
    if out is not None:
        paths = [out] if isinstance(out, str) else out
        target = OutputTarget(tuple(parse_reference(p) for p in paths), op if len(paths) > 1 else None)
    return Call(tool, ps, target, span=Span(line, 1, line, 10), **kw)


def plan():
    return Plan((
        mk("fetch", 1, {"user": "alice"}, "†state.p", id="get"),
        mk("summarize", 2, {"profile": "†state.p", "note": "about †state.p"}, ["†state.s", "†state.err"], op="||"),
        mk('say "hi" <b>|x|', 3, {"text": "†state.s"}, after=("get",)),
    ))


def test_edges_dedupe_and_kinds():
    c = compile_plan(plan())
    es = edges(c)
    assert {"from": 0, "to": 1, "kind": "data", "path": "†state.p"} in es
    assert sum(1 for e in es if e["to"] == 1) == 1  # two reads of †state.p -> one edge
    assert {"from": 0, "to": 2, "kind": "control", "path": None} in es
    assert {"from": 1, "to": 2, "kind": "data", "path": "†state.s"} in es


def test_to_json():
    c = compile_plan(plan())
    data = json.loads(to_json(c))
    assert data == to_data(c)
    n0, n1, n2 = data["nodes"]
    assert n0 == {"id": "get", "index": 0, "tool": "fetch", "line": 1, "outputs": ["†state.p"],
                  "output_op": None, "output_method": "set", "reads": []}
    assert n1["id"] == "c2" and n1["outputs"] == ["†state.s", "†state.err"] and n1["output_op"] == "||"
    assert n1["reads"] == ["†state.p", "†state.p"]
    assert n2["line"] == 3 and n2["outputs"] == [] and n2["output_method"] is None
    assert {"from": "get", "to": "c3", "kind": "control", "path": None} in data["edges"]
    assert {"from": "c2", "to": "c3", "kind": "data", "path": "†state.s"} in data["edges"]
    assert data["order"] == ["get", "c2", "c3"]
    assert "†" in to_json(c)  # daggers kept as UTF-8


def test_to_mermaid_escapes_and_edges():
    text = to_mermaid(compile_plan(plan()))
    lines = text.splitlines()
    assert lines[0] == "graph TD"
    assert 'n0["get: fetch → †state.p"]' in lines[1]
    assert "#124;#124;" in lines[2]  # the || of the branching output is escaped
    node3 = lines[3]
    assert '"hi"' not in node3 and "<b>" not in node3
    assert "#34;hi#34;" in node3 and "#60;b#62;" in node3 and "#124;x#124;" in node3
    assert '    n0 -->|"†state.p"| n1' in lines
    assert '    n0 -.->|"after"| n2' in lines
    # every label quote is balanced: exactly two '"' per node line
    assert all(line.count('"') == 2 for line in lines[1:4])


def test_to_dot_escapes_and_edges():
    text = to_dot(compile_plan(plan()))
    assert text.startswith('digraph "plan" {')
    assert text.rstrip().endswith("}")
    assert 'n0 [label="get: fetch\\n†state.p"];' in text
    assert 'label="c3: say \\"hi\\" <b>|x|"' in text
    assert 'n0 -> n1 [label="†state.p"];' in text
    assert 'n0 -> n2 [style=dashed, label="after"];' in text


def test_graph_of_cyclic_and_empty_plans():
    cyc = Plan((mk("a", 1, {"x": "†state.b"}, "†state.a"), mk("b", 2, {"x": "†state.a"}, "†state.b")))
    c = compile_plan(cyc)
    assert not c.ok
    data = to_data(c)
    assert data["ok"] is False and len(data["edges"]) == 2
    assert to_mermaid(c).count("-->") == 2 and to_dot(c).count("->") == 2
    empty = compile_plan(Plan())
    assert to_mermaid(empty) == "graph TD\n"
    assert to_data(empty)["nodes"] == [] and to_data(empty)["edges"] == []


def test_newlines_in_labels():
    c = compile_plan(Plan((Call("multi\nline", span=None),)))
    assert "multi line" in to_mermaid(c)
    assert "multi\\nline" in to_dot(c)
    assert to_data(c)["nodes"][0]["line"] is None
