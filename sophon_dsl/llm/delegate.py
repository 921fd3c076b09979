"""Delegates (Act 014) and scopes (Act 015): a call run as an isolated sub-request.

A call with ``_delegate`` (``@delegate("...")``) does not run its tool: it runs a
new agent loop whose context is

1. the delegate's own request (a saved request file, JSON or YAML, as in
   seed 004: ``{"schema", "context", "config"?}``, found by path relative to the
   agent's ``delegate_dir`` or under a name in ``delegates={name: request}``),
   or nothing for ``"anonymous"``;
2. the parent's context *limited by the call's* ``_scopes``: only the named
   kinds (``state``, ``input``, ``data`` ...) are passed, each scoped to the
   call's ``_instance`` when it has one; nothing else leaks in;
3. the call's arguments as the sub-request's input (the LLM bridges any
   mismatch with the delegate's input schema: execution-time resolution).

The sub-request's final output is the call's output (validated by the runtime
against the tool's output schema).  Its state is its own: nothing it writes
reaches the parent except through that output.  Delegates nest up to
``max_depth`` levels; loops over lists are written as one delegate call per item
(with ``@instance`` when each item has its own data), as in Acts 012-013.

``_instance`` routing is done by this layer, not the runtime: before a call is
handed to the scheduler its ``†state`` reads and writes are rewritten to the
kind ``state@X`` and its ``†input.k`` reads to ``input@X`` when instance X's own
input carries ``k`` (see :mod:`sophon_dsl.instances`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..runtime.errors import RunError
from ..runtime.invoker import scoped_data
from ..runtime.protocols import LatentRequest
from ..syntax.attributes import param_key, param_name
from .protocols import DelegateParent

__all__ = ["DELEGATE_FAILED", "DELEGATE_OUTSIDE", "DelegateExecutor", "DelegateRun", "load_request",
           "scoped_context"]

DELEGATE_FAILED = "Delegate.Failed"
DELEGATE_OUTSIDE = "Delegate.OutsideDirectory"
MAX_REQUEST_BYTES = 1 << 20  # a saved request is a prompt: a larger file is refused, not read


def _confined(path: Path, base_dir: Path) -> Path:
    """``path`` (relative to ``base_dir``) once it is known to stay inside ``base_dir``
    after ``..`` and symlinks are resolved."""
    root = base_dir.resolve()
    if path.is_absolute():
        raise RunError(DELEGATE_OUTSIDE, f"delegate {str(path)!r}: a plan names a saved request by a path "
                       f"relative to the delegate directory {str(root)!r}, not an absolute one")
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise RunError(DELEGATE_OUTSIDE, f"delegate {str(path)!r} leads outside the delegate directory "
                       f"{str(root)!r}")
    return target


def load_request(source: Any, base_dir: str | os.PathLike | None = None, *, confined: bool = False) -> dict:
    """A saved request: a dict, or a JSON/YAML file ``{"schema", "context", "config"?}``.

    ``confined`` (a name a plan wrote, so the model chose it): the file must lie inside
    ``base_dir`` (the current directory when None) after ``..`` and symlinks are resolved,
    or ``Delegate.OutsideDirectory`` is raised and nothing is read."""
    if isinstance(source, dict):
        return source
    path = Path(source)
    if confined:
        root = Path(base_dir) if base_dir is not None else Path.cwd()
        names = [path] + [path.with_suffix(s) for s in (".json", ".yaml", ".yml") if not path.suffix]
        candidates = [_confined(p, root) for p in names]
    else:
        if base_dir is not None and not path.is_absolute():
            path = Path(base_dir) / path
        candidates = [path] + [path.with_suffix(s) for s in (".json", ".yaml", ".yml") if not path.suffix]
    for p in candidates:
        if p.is_file():
            if p.stat().st_size > MAX_REQUEST_BYTES:
                raise RunError(DELEGATE_FAILED, f"delegate request {p} is over {MAX_REQUEST_BYTES:,} bytes")
            try:
                text = p.read_text(encoding="utf-8")
                if p.suffix.lower() in (".yaml", ".yml"):
                    import yaml

                    data = yaml.safe_load(text)
                else:
                    data = json.loads(text)
            except Exception as exc:  # noqa: BLE001 - unreadable, not UTF-8, not JSON/YAML: the call fails, named
                raise RunError(DELEGATE_FAILED, f"delegate request {p} cannot be read: "
                               f"{type(exc).__name__}: {exc}") from None
            if not isinstance(data, dict):
                raise RunError(DELEGATE_FAILED, f"delegate request {p} is not an object")
            return data
    raise RunError(DELEGATE_FAILED, f"no saved request {str(source)!r} (looked for {', '.join(map(str, candidates))})")


def scoped_context(scopes: Any, context: dict, instance: str | None = None) -> dict[str, Any]:
    """The parent's data allowed by ``_scopes``: ``{kind: data}``, instance-aware (the
    runtime's rule, :func:`sophon_dsl.runtime.invoker.scoped_data`, Acts 015)."""
    return scoped_data(scopes, context, instance)


@dataclass
class DelegateRun:
    call_id: str
    delegate: str
    request: str
    input: Any
    scoped: dict
    result: Any = None
    status: str = ""
    turns: int = 0
    context_kinds: list = field(default_factory=list)


class DelegateExecutor:
    """Runs ``_delegate`` calls as sub-agents of ``parent`` (an :class:`~sophon_dsl.llm.agent.Agent`)."""

    def __init__(self, parent: DelegateParent, *, depth: int = 0):
        self.parent = parent
        self.depth = depth
        self.runs: list[DelegateRun] = []

    def _resolve(self, name: str, spec: Any) -> dict:
        if name == "anonymous":
            return {"context": [], "schema": spec.output_schema if spec is not None else None}
        named = (self.parent.delegates or {}).get(name)
        if named is not None:  # the user's own configuration: any path they gave
            return load_request(named, self.parent.delegate_dir)
        # a name the plan (the model) wrote: only files inside the delegate directory
        return load_request(name, self.parent.delegate_dir, confined=True)

    async def execute(self, request: LatentRequest, context: dict | None = None) -> Any:
        call = request.call
        name = str(call.delegate)
        if self.depth >= self.parent.max_delegate_depth:
            raise RunError(DELEGATE_FAILED, f"delegates nest at most {self.parent.max_delegate_depth} levels")
        spec = request.tool
        saved = self._resolve(name, spec)
        ctx_msgs = saved.get("context") or []
        if not isinstance(ctx_msgs, list):
            raise RunError(DELEGATE_FAILED, f"delegate {name!r}: 'context' must be a list of messages")
        texts: list[str] = []
        allowed: list[str] = []
        decls: list[Any] = []
        input_schema = None
        base_state: Any = None
        state_schema = None
        for m in ctx_msgs:
            if not isinstance(m, dict):
                continue
            typ = m.get("type") or m.get("role")
            if typ in ("system", "text", "user", "assistant"):
                body = m.get("message") or m.get("content") or m.get("text")
                if body:
                    texts.append(str(body))
            elif typ == "tool":
                t = m.get("tool")
                if isinstance(t, str):
                    allowed.append(t.removeprefix("Tool."))
                elif isinstance(t, dict):
                    decls.extend(_decls_from(t))
            elif typ == "input" and isinstance(m.get("schema"), dict):
                input_schema = m["schema"]
            elif typ == "state":
                if isinstance(m.get("schema"), dict):
                    state_schema = m["schema"]
                data = {k: v for k, v in m.items() if k not in ("type", "schema", "_instance")}
                if data:
                    base_state = data
        out_schema = saved.get("schema")
        if isinstance(out_schema, dict) and isinstance(out_schema.get("properties"), dict) \
                and {"calls", "output"} <= set(out_schema["properties"]):
            out_schema = out_schema["properties"]["output"]
        if out_schema is None and spec is not None:
            out_schema = spec.output_schema
        scoped = scoped_context(call.scopes, context or {}, call.instance)
        state = dict(base_state or {})
        if isinstance(scoped.get("state"), dict):
            state.update(scoped["state"])
        sub_input: dict[str, Any] = {"input": request.args}
        if input_schema is not None:
            sub_input["schema"] = input_schema
        if "input" in scoped:
            sub_input["parent_input"] = scoped["input"]
        for k, v in scoped.items():
            if k not in ("state", "input"):
                sub_input[k] = v
        what = (spec.description if spec is not None and spec.description else call.tool)
        request_text = "\n".join(texts) if texts else f"Do this task and give its result as the final output: {what}"
        request_text += f"\n(You are the delegate {name!r} for the call {request.call_id} = {call.tool}.)"
        config = saved.get("config") if isinstance(saved.get("config"), dict) else {}
        registry = self.parent.registry
        if allowed or decls:
            from ..tools import ToolRegistry

            specs = [registry[n] for n in allowed if n in registry]
            registry = ToolRegistry(specs).with_plan_decls(decls)
        else:
            from ..tools import ToolRegistry

            registry = ToolRegistry([])
        from ..planning.routing import route_for

        # a model hint on the delegate call picks the sub-agent's model, or fails the call
        # (Routing.NoQualifiedModel): it never runs on a model that lacks what it asks for
        provider, model = route_for(self.parent.provider, call.model_hint, config.get("model", self.parent.model))
        sub = self.parent.delegate_agent(provider, registry, config, model=model, output_schema=out_schema,
                                         state_schema=state_schema, depth=self.depth + 1)
        run = DelegateRun(request.call_id, name, request_text, sub_input, scoped,
                          context_kinds=sorted(scoped))
        self.runs.append(run)
        result = await sub.arun(request_text, input=sub_input, state=state or None)
        run.result, run.status, run.turns = result.output, result.status, len(result.turns)
        if result.status != "succeeded":
            raise RunError(DELEGATE_FAILED, f"delegate {name!r} {result.status}: {result.error or 'no output'}")
        return result.output


def _is_param(key: str) -> bool:
    """Whether a call key names a parameter (``folder``, ``__from``), not a meta-property."""
    return param_key(param_name(key)) == key


def _decls_from(tool: dict) -> list:
    """``{"name": {...schema}}`` or a single declaration with ``name`` -> ToolDecls."""
    from ..model import ToolDecl

    out = []
    items = [(tool["name"], tool)] if "name" in tool else list(tool.items())
    for tname, body in items:
        if not isinstance(body, dict):
            continue
        props = body.get("properties") or {}
        # as in a call, `__from` is the parameter `_from`; other `_` keys are meta-properties
        params = {param_name(k): v for k, v in props.items() if isinstance(k, str) and _is_param(k)}
        required = [param_name(r) for r in body.get("required", []) if isinstance(r, str) and _is_param(r)]
        input_schema = body.get("input") or {"type": "object", "properties": params, "required": required}
        output_schema = body.get("output") or props.get("_output")
        out.append(ToolDecl(str(tname), body.get("description", ""), input_schema, output_schema))
    return out
