"""Renderings of a compiled plan's dependency graph: Mermaid, Graphviz DOT and JSON.

Every rendering has one node per call (``n0``, ``n1``... by position).  The data
(:func:`edges`, JSON) has one edge per dependency: ``data`` edges (labelled with the
reference the reader reads; one edge per distinct reference) and ``control`` edges
(from ``after``).  The drawings (Mermaid, DOT) draw one edge per pair of calls, labelled
with every reference it carries.  Edges point from the call that runs first to the call
that waits.  Risky calls (their own ``@risk`` or their tool's, medium or more: what
needs approval by default) are marked.
"""

from __future__ import annotations

import json
from typing import Any

from .compiler import CompiledPlan
from .dataflow import DataFlow
from .maps import body_ids
from .model import Reference, Risk

__all__ = ["edges", "pair_edges", "risks", "to_data", "to_dot", "to_json", "to_mermaid"]

#: the level from which a call is drawn as risky (the runtime's default approval level)
RISKY = Risk.MEDIUM


def edges(compiled: CompiledPlan) -> list[dict[str, Any]]:
    """``[{"from": i, "to": j, "kind": "data"|"control", "path": "†state.x"|None}]`` by indexes."""
    out: list[dict[str, Any]] = []
    for j, per_ref in enumerate(compiled.data_deps):
        seen: set[tuple[int, str]] = set()
        for ref, writers in per_ref:
            text = ref.text()
            for i in writers:
                if (i, text) in seen:
                    continue
                seen.add((i, text))
                out.append({"from": i, "to": j, "kind": "data", "path": text})
    for j, ctrl in enumerate(compiled.control_deps):
        for i in sorted(ctrl):
            out.append({"from": i, "to": j, "kind": "control", "path": None})
    out.sort(key=lambda e: (e["to"], e["from"], e["kind"], e["path"] or ""))
    return out


def pair_edges(compiled: CompiledPlan) -> list[dict[str, Any]]:
    """One edge per pair of calls: ``{"from", "to", "paths": [...], "after": bool}`` (by
    indexes); ``paths`` the references it carries, ``after`` whether an ``@after`` orders it."""
    pairs: dict[tuple[int, int], dict[str, Any]] = {}
    for e in edges(compiled):
        pair = pairs.setdefault((e["from"], e["to"]), {"from": e["from"], "to": e["to"], "paths": [],
                                                        "after": False})
        if e["kind"] == "data":
            pair["paths"].append(e["path"])
        else:
            pair["after"] = True
    return list(pairs.values())


def risks(compiled: CompiledPlan) -> list[Risk]:
    """Each call's effective risk: its own ``@risk`` or its tool's, whichever is higher."""
    return [call_risk(compiled.tools, call) for call in compiled.plan.calls]


def call_risk(tools: Any, call: Any) -> Risk:
    """One call's effective risk (a map body's calls too)."""
    spec = tools.get(call.tool) if tools is not None else None
    r = call.risk if call.risk is not None else Risk.NONE
    tool_risk = spec.risk if spec is not None else None
    return tool_risk if tool_risk is not None and tool_risk > r else r


def _edge_label(pair: dict[str, Any]) -> str:
    return ", ".join([*pair["paths"], *(["after"] if pair["after"] else [])])


def _outputs(call) -> list[str]:
    out = call.output
    return [r.text() for r in out.paths] if out is not None else []


def _output_text(call) -> str:
    out = call.output
    if out is None:
        return ""
    return out.text()


def to_data(compiled: CompiledPlan) -> dict[str, Any]:
    """The graph as JSON-ready data: ``{"nodes": [...], "edges": [...], "order": [...], "ok": bool}``.

    A node is ``{"id", "index", "tool", "line", "outputs", "output_op", "output_method", "reads"}``;
    an edge is ``{"from", "to", "kind", "path"}`` with call ids.
    """
    ids = compiled.ids
    nodes = []
    for i, call in enumerate(compiled.plan.calls):
        span = call.span or call.tool_span
        nodes.append({
            "id": ids[i],
            "index": i,
            "tool": call.tool,
            "line": span.line if span else None,
            "outputs": _outputs(call),
            "output_op": call.output.op if call.output is not None else None,
            "output_method": call.output.method.value if call.output is not None else None,
            "reads": [ref.text() for ref, _ in compiled.data_deps[i]],
        })
        if call.map is not None:
            nodes[-1]["map"] = _map_data(call, ids[i], compiled.tools)
    es = [{"from": ids[e["from"]], "to": ids[e["to"]], "kind": e["kind"], "path": e["path"]}
          for e in edges(compiled)]
    risky = [{"id": ids[i], "risk": r.label} for i, r in enumerate(risks(compiled)) if r >= RISKY]
    for node in nodes:  # map bodies' calls: one approval covers every item (runtime/gate.py)
        if "map" in node:
            risky.extend(_body_risky(node["map"], node["id"]))
    return {"nodes": nodes, "edges": es, "order": [ids[i] for i in compiled.order], "ok": compiled.ok,
            "risky": risky}


def _body_risky(data: dict, map_id: str) -> list[dict]:
    out = []
    for c in data["calls"]:
        if "risk" in c:
            out.append({"id": c["id"], "risk": c["risk"], "map": map_id})
        if "map" in c:
            out.extend(_body_risky(c["map"], c["id"]))
    return out


def _map_data(call, name: str, tools: Any = None) -> dict[str, Any]:
    """A map node's body for the JSON graph: its calls (ids ``<map>[*].<body id>``) and edges."""
    spec = call.map
    nodes, edges = _body(call, name)
    body = []
    for (_label, c), b in zip(nodes, body_ids(spec)):
        entry: dict[str, Any] = {"id": f"{name}[*].{b}", "tool": c.tool, "outputs": _outputs(c)}
        r = call_risk(tools, c)
        if r >= RISKY:  # approval: the plan's, covering every item
            entry["risk"] = r.label
        if c.map is not None:
            entry["map"] = _map_data(c, f"{name}[*].{b}", tools)
        body.append(entry)
    return {"item": spec.item, "index": spec.index, "concurrency": spec.concurrency,
            "calls": body, "edges": [{"from": body[a]["id"], "to": body[b]["id"], "label": label}
                                     for a, b, label in edges]}


def to_json(compiled: CompiledPlan, indent: int | None = 2) -> str:
    """:func:`to_data` serialised as JSON text (UTF-8 daggers kept)."""
    return json.dumps(to_data(compiled), ensure_ascii=False, indent=indent)


# -- Mermaid -----------------------------------------------------------------

_MERMAID_ESCAPES = {c: f"#{ord(c)};" for c in '"#<>&|[]{}()`'}


def _mermaid_text(text: str) -> str:
    text = " ".join(str(text).split())  # newlines and runs of spaces -> one space
    return "".join(_MERMAID_ESCAPES.get(c, c) for c in text)


def _node_label(compiled: CompiledPlan, i: int, sep: str, risk: Risk = Risk.NONE, risk_sep: str = " ") -> str:
    """``<id>: <tool>``, then ``sep`` and the output path when the call has one, then
    ``risk_sep`` and ``⚠ risk <level>`` when the call is risky."""
    call = compiled.plan.calls[i]
    out = _output_text(call)
    label = f"{compiled.ids[i]}: {call.tool}"
    if out:
        label = f"{label}{sep}{out}"
    return f"{label}{risk_sep}⚠ risk {risk.label}" if risk >= RISKY else label


# -- map bodies (drawn once, as a subgraph: what every item runs) -------------------------


def _body(call, name: str, tools: Any = None) -> tuple[list[tuple[str, Any]], list[tuple[int, int, str]]]:
    """A map call's body: ``[(label, body call)]`` (ids ``<map>[*].<body id>``) and the edges
    among them ``(from, to, label)``: the ``†local`` paths they pass on, or ``after``.  With
    ``tools``, a risky call's label says its risk and that it needs approval for each item."""
    spec = call.map
    ids = body_ids(spec)
    flow = DataFlow.build(spec.body, ids)
    nodes = []
    for b, c in zip(ids, spec.body):
        out = _output_text(c)
        label = f"{name}[*].{b}: {c.tool}" + (f" → {out}" if out else "")
        r = call_risk(tools, c) if tools is not None else Risk.NONE
        if r >= RISKY:
            label += f" ⚠ risk {r.label}, approval for each item"
        nodes.append((label, c))
    edges: dict[tuple[int, int], list[str]] = {}
    for j in range(len(spec.body)):
        for ref, writers in flow.reads(j):
            for w in writers:
                labels = edges.setdefault((w, j), [])
                if ref.text() not in labels:
                    labels.append(ref.text())
        for w in flow.control[j]:
            edges.setdefault((w, j), []).append("after")
    return nodes, [(a, b, ", ".join(labels)) for (a, b), labels in sorted(edges.items())]


def _each(call) -> str:
    spec = call.map
    over = spec.over.text() if isinstance(spec.over, Reference) else "a list"
    return f"each item of {over} (†{spec.item}, †{spec.index})"


def _mermaid_body(lines: list[str], call, node: str, name: str, pad: str, tools: Any = None) -> None:
    nodes, edges = _body(call, name, tools)
    lines.append(f'{pad}subgraph {node}_body["{_mermaid_text(name + ": " + _each(call))}"]')
    for k, (label, c) in enumerate(nodes):
        style = ":::risky" if "⚠ risk" in label else ""
        lines.append(f'{pad}    {node}_{k}["{_mermaid_text(label)}"]{style}')
        if c.map is not None:
            _mermaid_body(lines, c, f"{node}_{k}", label.split(":")[0], pad + "    ", tools)
    for a, b, label in edges:
        arrow = f'-->|"{_mermaid_text(label)}"|' if label != "after" else '-.->|"after"|'
        lines.append(f"{pad}    {node}_{a} {arrow} {node}_{b}")
    lines.append(f"{pad}end")
    lines.append(f'{pad}{node} -.->|"each item"| {node}_body')


def _dot_body(lines: list[str], call, node: str, name: str, pad: str, tools: Any = None) -> None:
    nodes, edges = _body(call, name, tools)
    lines.append(f"{pad}subgraph cluster_{node} {{")
    lines.append(f"{pad}    label={_dot_string(name + ': ' + _each(call))}; style=dashed;")
    for k, (label, c) in enumerate(nodes):
        style = ", color=red, penwidth=2" if "⚠ risk" in label else ""
        lines.append(f"{pad}    {node}_{k} [label={_dot_string(label)}{style}];")
        if c.map is not None:
            _dot_body(lines, c, f"{node}_{k}", label.split(":")[0], pad + "    ", tools)
    for a, b, label in edges:
        style = "style=dashed, " if label == "after" else ""
        lines.append(f"{pad}    {node}_{a} -> {node}_{b} [{style}label={_dot_string(label)}];")
    lines.append(f"{pad}}}")
    waits = {b for _, b, _ in edges}
    for k in range(len(nodes)):
        if k not in waits:  # the body's first calls: where each item starts
            lines.append(f'{pad}{node} -> {node}_{k} [style=dotted, label="each item"];')


def to_mermaid(compiled: CompiledPlan, direction: str = "TD") -> str:
    """A Mermaid ``graph``: one edge per pair of calls, solid and labelled with the references
    it carries (dotted ``after`` when only ``@after`` orders the pair); risky calls in red."""
    lines = [f"graph {direction}"]
    levels = risks(compiled)
    for i, risk in enumerate(levels):
        style = ":::risky" if risk >= RISKY else ""
        lines.append(f'    n{i}["{_mermaid_text(_node_label(compiled, i, " → ", risk))}"]{style}')
        if compiled.plan.calls[i].map is not None:
            _mermaid_body(lines, compiled.plan.calls[i], f"n{i}", compiled.ids[i], "    ", compiled.tools)
    for e in pair_edges(compiled):
        if e["paths"]:
            lines.append(f'    n{e["from"]} -->|"{_mermaid_text(_edge_label(e))}"| n{e["to"]}')
        else:
            lines.append(f'    n{e["from"]} -.->|"after"| n{e["to"]}')
    if any(r >= RISKY for r in levels) or any(":::risky" in line for line in lines):
        lines.append("    classDef risky stroke:#d00,stroke-width:3px")
    return "\n".join(lines) + "\n"


# -- DOT ---------------------------------------------------------------------


def _dot_string(text: str) -> str:
    out = str(text).replace("\\", "\\\\").replace('"', '\\"')
    out = out.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return f'"{out}"'


def to_dot(compiled: CompiledPlan, name: str = "plan") -> str:
    """A Graphviz ``digraph``: one edge per pair of calls (solid and labelled with its
    references, dashed when only ``@after`` orders it); risky calls in red."""
    lines = [f"digraph {_dot_string(name)} {{", "    rankdir=TB;", "    node [shape=box];"]
    for i, risk in enumerate(risks(compiled)):
        style = ", color=red, penwidth=2" if risk >= RISKY else ""
        lines.append(f"    n{i} [label={_dot_string(_node_label(compiled, i, chr(10), risk, chr(10)))}{style}];")
        if compiled.plan.calls[i].map is not None:
            _dot_body(lines, compiled.plan.calls[i], f"n{i}", compiled.ids[i], "    ", compiled.tools)
    for e in pair_edges(compiled):
        if e["paths"]:
            lines.append(f'    n{e["from"]} -> n{e["to"]} [label={_dot_string(_edge_label(e))}];')
        else:
            lines.append(f'    n{e["from"]} -> n{e["to"]} [style=dashed, label="after"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
