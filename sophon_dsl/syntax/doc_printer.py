"""``Plan`` -> JSON/YAML data, the inverse of :mod:`sophon_dsl.syntax.documents`.

Shape chosen by :func:`plan_to_document`:

* a plain list of calls when the plan has no header and no output;
* a solution ``{"calls": [...], "output": ...}`` when it has an output but no header;
* otherwise a plan document ``{"goal", "mode", "id", "inputSchema", "stateSchema",
  "outputSchema", "tools", "calls", "output"}`` (absent / default fields left out);
* a context list when the plan carries initial data (``Plan.initial``, read from one):
  an ``input`` message with the input data, a ``state`` message with the state data,
  then a ``{"type": "plan", "plan": [...calls...], ...}`` message with the header.
  ``inputSchema`` is written only when it is not the one the input message implies
  (``null`` when the plan has none although the message has data).

Each call lists ``_tool`` first, then the parameters in order (a parameter whose
name starts with ``_`` gets one more: ``_from`` is written ``__from``), then
``_outputPath``, ``_outputMethod`` (only when not ``set``), ``_output``, ``_id``,
``_activity``, ``_instance``, ``_delegate``, ``_scopes``, ``_reasoningForCall``,
``_risk``, ``_retry``, ``_timeout``, ``_after``, ``_modelHint``,
``_successCriterion``.

Round trip: ``document_to_plan(parse(dump(plan))) == plan`` for plans whose
``output`` is not ``Literal(None)`` (``"output": null`` means "no output") and
whose output targets with one path have ``op=None``; for a plan with initial data,
also when its state data has no key ``schema`` (a state message's ``schema`` is the
state schema) and neither data has a key ``type``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Callable

from ..model import Call, InitialData, OutputMethod, Plan, value_to_json
from ..values import escape_text
from .attributes import param_key
from .map_syntax import MAP_KEY, map_document
from .documents import inferred_input_schema

__all__ = ["plan_to_document", "call_to_document", "call_json", "encode_plan", "dump_json", "dump_yaml"]


def call_to_document(call: Call) -> dict[str, Any]:
    if call.map is not None:
        out: dict[str, Any] = {MAP_KEY: map_document(call.map, call_to_document, value_to_json)}
    else:
        out = {"_tool": call.tool}
        for p in call.params:
            out[param_key(p.name)] = value_to_json(p.value)
    if call.output is not None:
        out["_outputPath"] = call.output.text()
    return _attributes(call, out)


def _attributes(call: Call, out: dict[str, Any]) -> dict[str, Any]:
    """``out`` with the call's attributes after ``_outputPath``, in their order."""
    if call.output is not None and call.output.method is not OutputMethod.SET:
        out["_outputMethod"] = call.output.method.value
    if call.inline_output is not None:
        out["_output"] = value_to_json(call.inline_output)
    if call.id is not None:
        out["_id"] = call.id
    if call.activity is not None:
        out["_activity"] = call.activity
    if call.instance is not None:
        out["_instance"] = call.instance
    if call.delegate is not None:
        out["_delegate"] = call.delegate
    if call.scopes is not None:
        out["_scopes"] = list(call.scopes)
    if call.reasoning is not None:
        out["_reasoningForCall"] = call.reasoning
    if call.risk is not None:
        out["_risk"] = call.risk.label
    if call.retry is not None:
        r = call.retry.to_json()
        out["_retry"] = r["max_attempts"] if list(r) == ["max_attempts"] else r
    if call.timeout is not None:
        out["_timeout"] = call.timeout
    if call.after:
        out["_after"] = list(call.after)
    if call.model_hint is not None:
        out["_modelHint"] = call.model_hint
    if call.success_criterion is not None:
        out["_successCriterion"] = call.success_criterion
    return out


def plan_to_document(plan: Plan, *, calls: Any = None) -> Any:
    """JSON-able data for ``plan`` (see the module docstring for the shape); ``calls``, when
    given, stands where the list of the calls' documents goes (:func:`encode_plan`)."""
    if plan.initial is not None:
        return _context_list(plan, plan.initial, calls)
    if calls is None:
        calls = [call_to_document(c) for c in plan.calls]
    if not plan.has_header:
        if plan.output is None:
            return calls
        return {"calls": calls, "output": value_to_json(plan.output)}
    doc: dict[str, Any] = {}
    if plan.goal is not None:
        doc["goal"] = plan.goal
    if plan.mode.value != "eager":
        doc["mode"] = plan.mode.value
    if plan.id is not None:
        doc["id"] = plan.id
    if plan.input_schema is not None:
        doc["inputSchema"] = plan.input_schema
    if plan.state_schema is not None:
        doc["stateSchema"] = plan.state_schema
    if plan.output_schema is not None:
        doc["outputSchema"] = plan.output_schema
    if plan.tools:
        names = [t.name for t in plan.tools]
        if len(set(names)) == len(names):
            doc["tools"] = {t.name: t.to_json() for t in plan.tools}
        else:
            doc["tools"] = [{"name": t.name, **t.to_json()} for t in plan.tools]
    doc["calls"] = calls
    if plan.output is not None:
        doc["output"] = value_to_json(plan.output)
    return doc


def _context_list(plan: Plan, initial: InitialData, calls: Any) -> list[dict[str, Any]]:
    """``input`` and ``state`` messages holding the plan's initial data, then a plan message
    with the rest: the context list the plan was read from."""
    messages: list[dict[str, Any]] = []
    if initial.input is not None:
        messages.append({"type": "input", **initial.input})
    if initial.state is not None:
        messages.append({"type": "state", **initial.state})
    doc = plan_to_document(replace(plan, initial=None), calls=calls)
    if not isinstance(doc, dict):
        doc = {"calls": doc}
    # the input message declares its keys' types; inputSchema says otherwise (null: none)
    inferred = inferred_input_schema(initial.input) if initial.input else None
    if plan.input_schema != inferred:
        doc["inputSchema"] = plan.input_schema
    else:
        doc.pop("inputSchema", None)
    message: dict[str, Any] = {"type": "plan"}
    for key in _PLAN_MESSAGE_KEYS:  # header order, whatever order the fields were set in
        if key in doc:
            message["plan" if key == "calls" else key] = doc[key]
    messages.append(message)
    return messages


_PLAN_MESSAGE_KEYS = ("goal", "mode", "id", "inputSchema", "stateSchema", "outputSchema", "tools",
                      "calls", "output")


# stands for the calls while the rest of a document is encoded (a NUL-framed string: a plan
# holding this very text anywhere else is encoded the plain way)
_CALLS_MARK = "\x00sophon-dsl:calls\x00"


_encode_str = json.encoder.encode_basestring  # (C; what json.dumps runs with ensure_ascii=False)
_float_text = float.__repr__  # what JSON writes for a finite float
_INF = float("inf")


def _value_text(value: Any, encode: Callable[[Any], str]) -> str:
    """``encode(value_to_json(value))``, written directly for a scalar literal and a list of
    them (the common parameter): a durable run encodes every call of its plan once."""
    kind = value.node_kind
    if kind == "literal":
        v = value.value
        t = type(v)
        if t is str:
            return _encode_str(escape_text(v))
        if t is int:
            return int.__repr__(v)
        if v is None:
            return "null"
        if t is bool:
            return "true" if v else "false"
        if t is float and -_INF < v < _INF:  # (NaN and infinities: encode decides)
            return _float_text(v)
    elif kind == "list":
        items = value.items
        return "[" + ",".join([_value_text(x, encode) for x in items]) + "]" if items else "[]"
    return encode(value_to_json(value))


# a parameter name -> its key as call_json writes it (',"name":'): a plan's calls share a few
_KEY_TEXTS: dict[str, str] = {}


def _key_text(name: str) -> str:
    if len(_KEY_TEXTS) >= 4096:  # (a long-lived process that met many names: start again)
        _KEY_TEXTS.clear()
    text = _KEY_TEXTS[name] = "," + _encode_str(param_key(name)) + ":"
    return text


def call_json(call: Call, encode: Callable[[Any], str]) -> str:
    """``encode(call_to_document(call))`` for an ``encode`` that writes compact JSON, non-ASCII
    as is (``json.dumps(..., ensure_ascii=False, separators=(",", ":"))``): the tool, the
    parameters and the output path written directly, the rest of the attributes (rare) by
    ``encode``; a map call wholly by ``encode``.  About half the time of building and encoding
    the document, once per call of a durable run's plan."""
    if call.map is not None:
        return encode(call_to_document(call))
    texts: dict[str, str] = {}  # (a name given twice keeps its first place and last value, as a dict)
    for p in call.params:
        texts[p.name] = _value_text(p.value, encode)
    parts = ['{"_tool":', _encode_str(call.tool)]
    keys = _KEY_TEXTS
    for name, text in texts.items():
        parts += (keys.get(name) or _key_text(name), text)
    if call.output is not None:
        parts += (',"_outputPath":', _encode_str(call.output.text()))
    rest = _attributes(call, {})
    if rest:
        parts += (",", encode(rest)[1:])  # (its opening brace dropped: its closing one ends ours)
    else:
        parts.append("}")
    return "".join(parts)


def encode_plan(plan: Plan, encode: Callable[[Any], str]) -> str:
    """``encode(plan_to_document(plan))`` for an ``encode`` that writes compact JSON (no
    spaces, non-ASCII as is: see :func:`call_json`), built one call at a time: each call's
    text is made without a document where it can be, and no long plan holds a tree of
    containers for the cyclic collector to walk and promote (a 10,000-call plan's tree used
    to bring a full collection into the run)."""
    calls = "[" + ",".join([call_json(c, encode) for c in plan.calls]) + "]"
    shell = encode(plan_to_document(plan, calls=_CALLS_MARK))
    mark = encode(_CALLS_MARK)
    if shell.count(mark) != 1:
        return encode(plan_to_document(plan))
    return shell.replace(mark, calls, 1)


def dump_json(plan: Plan) -> str:
    return json.dumps(plan_to_document(plan), indent=2, ensure_ascii=False) + "\n"


def _plan_dumper() -> type:
    """Safe YAML, except that strings holding Unicode line breaks (NEL, LS, PS) are
    double-quoted: PyYAML folds them to spaces in any other style.  Made on first use:
    PyYAML is imported only when YAML is written (a recorded run encodes its plan here)."""
    global _PLAN_DUMPER
    if _PLAN_DUMPER is None:
        import yaml

        def represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
            if any(ch in text for ch in "\x85\u2028\u2029"):
                return dumper.represent_scalar("tag:yaml.org,2002:str", text, style='"')
            return dumper.represent_str(text)

        class PlanDumper(yaml.SafeDumper):
            pass

        PlanDumper.add_representer(str, represent_str)
        _PLAN_DUMPER = PlanDumper
    return _PLAN_DUMPER


_PLAN_DUMPER: type | None = None


def dump_yaml(plan: Plan) -> str:
    import yaml

    return yaml.dump(plan_to_document(plan), Dumper=_plan_dumper(), sort_keys=False, allow_unicode=True)
