"""Latent calls executed by a language model (Acts 002-003).

A latent call is a call of a tool without Python code.  In eager mode the
planner may resolve it inline (``-> value`` / ``_output``); otherwise
:class:`LLMLatentExecutor` runs it as its own small request whose structured
output is the tool's output schema (``json_schema``), and validates the result
against that schema before it is written (``Tool.OutputInvalid`` otherwise).

It implements the runtime's :class:`~sophon_dsl.runtime.protocols.LatentExecutor`
protocol, so ``sophon_dsl.run(plan, executor=LLMLatentExecutor(provider))`` works
for any plan, not only inside the agent loop.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..checks.schema import offline_validator
from ..errors import SophonError
from ..planning.routing import route_for
from ..runtime.errors import RunError, TOOL_OUTPUT_INVALID
from ..runtime.protocols import Branch, LatentRequest
from .provider import Message, Provider, ProviderError, collect

__all__ = ["LATENT_FAILED", "LLMLatentExecutor", "ReplyNotJson", "branch_schema", "parse_json_reply", "wrap_schema"]

LATENT_FAILED = "Latent.Failed"

_SYSTEM = ("You execute one tool call yourself, using your own knowledge and reasoning (there is no code "
           "behind this tool). Reply with the tool's result as JSON only, matching the output schema.")

_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n(.*?)\n\s*```\s*$", re.S)


def wrap_schema(schema: Any) -> tuple[dict | None, bool]:
    """Structured output needs an object at the root: wrap anything else as ``{"result": ...}``.

    Returns ``(schema_to_send, wrapped)``.
    """
    if not isinstance(schema, dict) or not schema:
        return None, False
    if schema.get("type") == "object":
        return schema, False
    return {"type": "object", "properties": {"result": schema}, "required": ["result"],
            "additionalProperties": False}, True


def alternatives(call: Any) -> tuple:
    """The alternatives of a branching output path (``†a || †b``) the model picks from; () for others."""
    out = call.output
    if out is None or not out.is_branching:
        return ()
    return out.paths


def branch_schema(schema: Any, paths: tuple) -> dict:
    """Structured output of a branching latent call: the alternative picked and the result."""
    return {"type": "object",
            "properties": {"branch": {"type": "string", "enum": [p.text() for p in paths]},
                           "result": schema if isinstance(schema, dict) and schema else {}},
            "required": ["branch", "result"], "additionalProperties": False}


def _picked(call: Any, paths: tuple, value: Any) -> tuple[int, Any]:
    """(alternative index, result) from a branching reply; Tool.OutputInvalid when it names none."""
    if not isinstance(value, dict) or "branch" not in value or "result" not in value:
        raise RunError(TOOL_OUTPUT_INVALID, f"latent {call.tool}: the reply must be {{\"branch\": <one of "
                                            f"{', '.join(p.text() for p in paths)}>, \"result\": ...}}")
    named = str(value["branch"]).strip().lstrip("†$")
    for k, p in enumerate(paths):
        if p.text("") == named:
            return k, value["result"]
    raise RunError(TOOL_OUTPUT_INVALID, f"latent {call.tool}: picked branch {value['branch']!r}, which is not "
                                        f"an alternative of its output path")


class ReplyNotJson(SophonError, ValueError):
    """A model's reply holds no JSON value (:func:`parse_json_reply`)."""

    code = "Latent.ReplyNotJson"


def parse_json_reply(text: str) -> Any:
    """The JSON value of a reply (code fences and surrounding prose tolerated)."""
    body = text.strip()
    m = _FENCE.match(body)
    if m:
        body = m.group(1).strip()
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        pass
    for opener, closer in (("{", "}"), ("[", "]")):
        a, b = body.find(opener), body.rfind(closer)
        if a != -1 and b > a:
            try:
                return json.loads(body[a:b + 1])
            except json.JSONDecodeError:
                continue
    raise ReplyNotJson("the reply is not JSON")


class LLMLatentExecutor:
    """Run latent calls with ``provider``: one request per call, structured output = the tool's output schema."""

    def __init__(self, provider: Provider, *, model: str | None = None, temperature: float | None = None,
                 max_tokens: int | None = None, validate: bool = True):
        self.provider = provider
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.validate = validate
        self.requests: list[list[Message]] = []   # what was asked, for tests and tracing

    def messages(self, request: LatentRequest, context: dict | None = None) -> list[Message]:
        spec = request.tool
        call = request.call
        lines = [f"Tool: {call.tool}"]
        if spec is not None and spec.description:
            lines.append(f"Description: {spec.description}")
        if spec is not None and spec.output_schema:
            lines.append("Output schema: " + json.dumps(spec.output_schema, ensure_ascii=False))
        lines.append("Arguments: " + json.dumps(request.args, ensure_ascii=False, default=str))
        if call.reasoning:
            lines.append(f"Why it was called: {call.reasoning}")
        if call.success_criterion:
            lines.append(f"Success criterion: {call.success_criterion}")
        paths = alternatives(call)
        if paths:  # lazy plans keep the branch: the choice is made here, at execution (seed 004)
            lines.append("Output paths (alternatives; pick the one your result belongs to): "
                         + " || ".join(p.text() for p in paths))
            lines.append('Reply {"branch": <the path picked>, "result": <the result>}.')
        if context and call.scopes:
            for scope in call.scopes:
                kind = f"{scope}@{call.instance}" if call.instance and f"{scope}@{call.instance}" in context else scope
                if kind in context:
                    lines.append(f"{scope.capitalize()}: " + json.dumps(context[kind], ensure_ascii=False, default=str))
        return [Message("system", _SYSTEM), Message("user", "\n".join(lines))]

    async def execute(self, request: LatentRequest) -> Any:
        return await self._run(request, None)

    async def execute_scoped(self, request: LatentRequest, context: dict) -> Any:
        """As :meth:`execute`, with the call's ``_scopes`` of ``context`` shown to the model."""
        return await self._run(request, context)

    async def _run(self, request: LatentRequest, context: dict | None) -> Any:
        spec = request.tool
        schema = spec.output_schema if spec is not None else None
        paths = alternatives(request.call)
        send, wrapped = (branch_schema(schema, paths), False) if paths else wrap_schema(schema)
        msgs = self.messages(request, context)
        self.requests.append(msgs)
        # a model hint picks a capable model, or fails the call (Routing.NoQualifiedModel)
        provider, model = route_for(self.provider, request.call.model_hint, self.model)
        try:
            text = await collect(provider, msgs, model=model, json_schema=send,
                                 temperature=self.temperature, max_tokens=self.max_tokens)
        except ProviderError as exc:
            raise RunError(LATENT_FAILED, f"the model call failed: {exc}") from exc
        try:
            value = parse_json_reply(text)
        except ValueError:
            if not paths and (not schema or schema.get("type") == "string"):
                value = text.strip()
                wrapped = False
            else:
                raise RunError(TOOL_OUTPUT_INVALID, f"latent {request.call.tool}: the model's reply is not JSON: "
                                                    f"{text[:200]!r}") from None
        if wrapped and isinstance(value, dict) and set(value) == {"result"}:
            value = value["result"]
        picked = None
        if paths:
            picked, value = _picked(request.call, paths, value)
        if self.validate and isinstance(schema, dict) and schema:
            err = next(iter(offline_validator(schema).iter_errors(value)), None)
            if err is not None:
                where = "/".join(str(p) for p in err.absolute_path)
                raise RunError(TOOL_OUTPUT_INVALID, f"latent {request.call.tool}: {err.message}"
                                                    + (f" (at /{where})" if where else ""))
        return value if picked is None else Branch(picked, value)
