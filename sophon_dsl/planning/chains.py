"""Tool chains (seed 000, ``tool.create_chain``): a composite tool registered from existing
tools, its steps wired with ``{{input.x}}`` and ``{{previous_result.y}}`` templates.

A chain is expressed as a plan of our language, not run by a second template engine: step
*k* becomes the call ``$state.s<k> = TOOL(...)``, ``{{input.x}}`` the reference ``$input.x``,
``{{previous_result.y}}`` the reference ``$state.s<k-1>.y`` (a template inside longer text
becomes an interpolation ``†{input.x}``), and the chain returns ``$state.s<n>``.  The plan is
checked when the chain is created (every tool must exist, every argument must fit its
schema), so a bad chain is refused before it is registered; running the chain tool runs the
plan with the runtime.  The chain's risk is the highest of its tools'.

::

    book = enable_chains(agent, path="chains.json")    # adds tool.create_chain; reloads saved chains
    # the model writes: tool.create_chain(name="research_and_save", description="...", steps=[...])
    # later turns may call research_and_save(topic="...")
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Protocol

from ..model import Risk
from ..runtime.errors import RunError
from ..tools import ToolRegistry, ToolSpec

__all__ = ["CHAIN_FAILED", "CHAIN_INVALID", "ChainBook", "RegistryHolder", "chain_plan_text", "enable_chains"]

CHAIN_INVALID = "Chain.Invalid"
CHAIN_FAILED = "Chain.Failed"
META_TOOL = "tool.create_chain"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_PARAM = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TEMPLATE = re.compile(r"\{\{\s*(input|previous_result)((?:\.[A-Za-z_][A-Za-z0-9_]*|\[[0-9]+\])*)\s*\}\}")

_STEP_SCHEMA = {"type": "object", "properties": {
    "toolName": {"type": "string"}, "arguments": {"type": "object"}}, "required": ["toolName"]}
META_INPUT = {"type": "object", "properties": {
    "name": {"type": "string"}, "description": {"type": "string"},
    "steps": {"type": "array", "items": _STEP_SCHEMA, "minItems": 1}}, "required": ["name", "steps"]}


def _invalid(message: str) -> RunError:
    return RunError(CHAIN_INVALID, message)


class _Writer:
    """One step's arguments as DSL text; records the inputs the templates read."""

    def __init__(self, step: int, inputs: dict[str, Any], param_schema: Any):
        self.step = step
        self.inputs = inputs
        self.param_schema = param_schema

    def ref(self, kind: str, path: str) -> str:
        if kind == "input":
            name = re.match(r"\.([A-Za-z_][A-Za-z0-9_]*)", path)
            if name is None:
                raise _invalid(f"step {self.step}: '{{{{input{path}}}}}' must name an input ({{{{input.x}}}})")
            self.inputs.setdefault(name.group(1), {})
            return f"input{path}"
        if self.step == 1:
            raise _invalid("step 1: '{{previous_result}}' has no previous step to read")
        return f"state.s{self.step - 1}{path}"

    def value(self, v: Any, schema: Any = None) -> str:
        if isinstance(v, str):
            whole = _TEMPLATE.fullmatch(v.strip())
            if whole is not None:
                target = self.ref(whole.group(1), whole.group(2))
                if target.startswith("input.") and isinstance(schema, dict) and "." not in target[6:]:
                    self.inputs[target[6:]] = schema      # typed as the parameter it feeds
                return "$" + target
            return self.string(v)
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {self.value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        return json.dumps(v)

    def string(self, text: str) -> str:
        out, last = [], 0
        for m in _TEMPLATE.finditer(text):
            out.append(text[last:m.start()].replace("†", "††"))
            out.append("†{" + self.ref(m.group(1), m.group(2)) + "}")
            last = m.end()
        out.append(text[last:].replace("†", "††"))
        return json.dumps("".join(out), ensure_ascii=False)


def chain_plan_text(steps: list, registry: Any) -> tuple[str, dict[str, Any]]:
    """The chain as DSL text, and the inputs its templates read (name -> JSON Schema)."""
    if not isinstance(steps, list) or not steps:
        raise _invalid("a chain needs at least one step")
    inputs: dict[str, Any] = {}
    lines = []
    for k, step in enumerate(steps, 1):
        if not isinstance(step, dict) or not isinstance(step.get("toolName"), str):
            raise _invalid(f"step {k} needs a 'toolName'")
        name = step["toolName"]
        spec = registry.get(name)
        if spec is None:
            raise _invalid(f"step {k}: unknown tool {name!r}")
        args = step.get("arguments") or {}
        if not isinstance(args, dict):
            raise _invalid(f"step {k}: 'arguments' must be an object")
        props = (spec.input_schema or {}).get("properties") or {}
        writer = _Writer(k, inputs, None)
        parts = []
        for p, v in args.items():
            if not _PARAM.match(p):
                raise _invalid(f"step {k}: {p!r} is not a parameter name")
            parts.append(f"{p}={writer.value(v, props.get(p))}")
        lines.append(f"$state.s{k} = {name}({', '.join(parts)})")
    lines.append(f"return $state.s{len(steps)}")
    return "\n".join(lines) + "\n", inputs


class RegistryHolder(Protocol):
    """What chains are added to: an object whose ``registry`` they replace with one that has
    them (an :class:`~sophon_dsl.llm.agent.Agent`)."""

    registry: ToolRegistry


class ChainBook:
    """The chains of one agent (or registry holder): creates them, registers them in
    ``holder.registry``, and keeps their definitions in ``path`` (JSON) and in the durable
    run ``store`` (its ``chains`` table) when given."""

    def __init__(self, holder: RegistryHolder, path: str | Path | None = None, *, store: Any = None):
        self.holder = holder
        self.path = Path(path) if path is not None else None
        if store is not None:
            from ..durable import open_store

            store = open_store(store)
        self.store = store
        self.definitions: dict[str, dict] = {}

    def meta_tool(self) -> ToolSpec:
        async def create_chain(name: str, steps: list, description: str = "") -> dict:
            spec = self.create(name, steps, description)
            return {"name": spec.name, "risk": spec.risk.label, "steps": len(steps)}

        return ToolSpec(META_TOOL, "Register a new tool made of existing tools run in sequence: steps "
                        "[{toolName, arguments}], arguments may hold {{input.x}} and {{previous_result.y}}",
                        META_INPUT, {"type": "object"}, Risk.LOW, create_chain, True, origin="chain")

    def create(self, name: str, steps: list, description: str = "", *, save: bool = True) -> ToolSpec:
        """Check and register the chain ``name``; RunError ``Chain.Invalid`` when it cannot be."""
        registry = self.holder.registry
        if not isinstance(name, str) or not _NAME.match(name):
            raise _invalid(f"{name!r} is not a tool name")
        if name == META_TOOL or (registry.get(name) is not None and name not in self.definitions):
            raise _invalid(f"a tool named {name!r} already exists")
        text, inputs = chain_plan_text(steps, registry)
        plan = _checked(text, registry)
        tools = [registry[s["toolName"]] for s in steps]
        risk = max((t.risk for t in tools), default=Risk.NONE)
        input_schema = {"type": "object", "properties": inputs, "required": sorted(inputs)}
        spec = ToolSpec(name, description or f"chain of {', '.join(t.name for t in tools)}", input_schema,
                        tools[-1].output_schema, risk, _runner(name, plan, registry), True, origin="chain")
        self.holder.registry = registry.with_tools([spec])
        self.definitions[name] = {"name": name, "description": description, "steps": steps}
        if save and self.store is not None:
            self.store.put_chain(name, self.definitions[name]).result()
        if save and self.path is not None:
            from ..files import write_file  # atomic: a crash never leaves half a file of chains

            write_file(str(self.path), json.dumps(list(self.definitions.values()), indent=2, ensure_ascii=False))
        return spec

    def load(self) -> list[ToolSpec]:
        """Register every chain kept in the run store and saved in ``path`` (none when
        neither has any yet); a chain in both is taken from the store."""
        saved: dict[str, dict] = {}
        if self.path is not None and self.path.exists():
            saved.update((d["name"], d) for d in json.loads(self.path.read_text(encoding="utf-8")))
        if self.store is not None:
            saved.update((d["name"], d) for d in self.store.load_chains())
        return [self.create(d["name"], d["steps"], d.get("description", ""), save=False) for d in saved.values()]


def _checked(text: str, registry: Any) -> Any:
    from ..compiler import compile_plan
    from ..syntax.dsl_parser import parse_dsl

    plan, diags = parse_dsl(text)
    errors = [d for d in diags if d.is_error]
    if not errors:
        errors = [d for d in compile_plan(plan, registry).diagnostics if d.is_error]
    if errors:
        raise _invalid("; ".join(f"{d.code} {d.message}" for d in errors[:3]) + f"\n{text}")
    return plan


def _runner(name: str, plan: Any, registry: Any):
    async def run_chain(**inputs: Any) -> Any:
        from ..runtime.api import arun

        result = await arun(plan, registry, input=inputs, approve="yes")   # approved as the chain call
        if result.status != "succeeded":
            failed = next((c for c in result.calls if c.status == "failed"), None)
            why = f"{failed.id} {failed.tool}: {failed.error}" if failed is not None else result.status
            raise RunError(CHAIN_FAILED, f"chain {name}: {why}")
        return result.output

    return run_chain


def enable_chains(holder: RegistryHolder, path: str | Path | None = None, *, store: Any = None) -> ChainBook:
    """Give ``holder`` (an Agent, or anything with a ``registry``) the ``tool.create_chain``
    meta-tool, and register the chains saved in ``path`` and kept in the durable run
    ``store`` (a store or its URL: ``sqlite:///runs.db``, ``postgresql://...``), where new
    chains are kept too."""
    book = ChainBook(holder, path, store=store)
    holder.registry = holder.registry.with_tools([book.meta_tool()])
    book.load()
    return book
