"""Instancing (Acts 013): one plan run over several data contexts.

A call with ``_instance`` X reads and writes X's own data: its ``†state``
references become the kind ``state@X``, and its ``†input.k`` reads go to
``input@X`` when X's own input carries ``k`` (a targeted input overrides the
global one), else to the global input.  Other kinds are shared by all
instances.  Both the runtime and the LLM front end route calls with
:func:`route_plan` / :func:`route_instance` before compiling them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .model import Call, Plan, Reference
from .values import map_references  # re-exported: the walk lives with the other value walks

__all__ = ["instance_kind", "instance_inputs", "map_references", "route_instance", "route_plan"]


def instance_kind(kind: str, instance: str) -> str:
    return f"{kind}@{instance}"


def route_instance(call: Call, instance_inputs: dict[str, Any] | None = None) -> Call:
    """Rewrite a call with ``_instance`` X so that it reads and writes X's data."""
    inst = call.instance
    if not inst:
        return call
    own_input = (instance_inputs or {}).get(inst)

    def fn(ref: Reference) -> Reference:
        if ref.kind == "state":
            return replace(ref, kind=instance_kind("state", inst))
        if ref.kind == "input" and isinstance(own_input, dict):
            if not ref.path or (isinstance(ref.path[0], str) and ref.path[0] in own_input):
                return replace(ref, kind=instance_kind("input", inst))
        return ref

    params = tuple(replace(p, value=map_references(p.value, fn)) for p in call.params)
    out = call.output
    if out is not None:
        out = replace(out, paths=tuple(fn(p) for p in out.paths))
    return replace(call, params=params, output=out, inline_output=map_references(call.inline_output, fn))


def instance_inputs(context: dict | None) -> dict[str, Any]:
    """``{X: data}`` for every ``input@X`` kind of a run's initial context."""
    out: dict[str, Any] = {}
    for kind, data in (context or {}).items():
        base, sep, inst = str(kind).partition("@")
        if sep and base == "input" and inst:
            out[inst] = data
    return out


def route_plan(plan: Plan, context: dict | None = None) -> Plan:
    """The plan with every instanced call routed; the same object when no call has ``_instance``."""
    for c in plan.calls:  # (a loop, not any() over a generator: one plain step per call)
        if c.instance:
            break
    else:
        return plan
    inputs = instance_inputs(context)
    return replace(plan, calls=tuple(route_instance(c, inputs) for c in plan.calls))
