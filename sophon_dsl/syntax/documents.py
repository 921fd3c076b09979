"""Located JSON/YAML documents -> :class:`~sophon_dsl.model.Plan`.

:func:`document_to_plan` accepts every document shape of ``docs/design.md``
and reports every problem of a document in one pass: a bad call is reported
and skipped, the other calls still load.  Shapes (detected in this order):

* an **array**

  - of calls (some item has ``_tool``), e.g. ``[{"_tool": "f", "x": 1}]``
    (an empty array is an empty plan);
  - a **context list** (every item is an object with a string ``type`` and
    none has ``_tool``): ``plan`` messages give the calls (the last plan
    message wins; its ``mode``/``goal``/... header fields apply too),
    ``state`` messages give ``schema`` as the state schema and their other
    keys as the run's initial state (``Plan.initial``), ``input`` messages
    give their data as the run's initial input and its keys as an input
    schema with inferred types (unless the plan message has ``inputSchema``;
    ``null`` there says none), ``tool`` messages give a tool declaration when ``tool`` is an object
    (a string names a code tool and is ignored); other types are ignored;
  - of JarvisCore PlannedSteps (some item has ``task``) or of Sophon
    PlanSteps (some item has ``description`` plus ``dependsOn``,
    ``toolHints`` or ``id``);
  - otherwise a list of calls (each non-call item gives ``E102``);

* an **object**

  - with ``_tool``: a single call;
  - with ``context``: a request ``{"schema", "context", "config"?, "type"?}``
    where ``schema`` is the output schema (when it is a solution schema
    whose ``properties`` hold ``calls`` and ``output``, its
    ``properties.output`` is taken);
  - with ``type: "plan"`` or any of the plan-document keys: a plan document
    ``{"type"?: "plan", "goal", "mode", "id", "inputSchema", "stateSchema",
    "outputSchema", "tools", "calls" | "plan" | "steps", "output"}``.  This
    covers the solution ``{"calls", "output"}``, the plan message
    ``{"type": "plan", "plan": [...]}`` and the Sophon ExecutionPlan
    ``{"id", "goal", "steps"}``.  ``"output": null`` means no final output.

Steps (Sophon or PlannedStep) become calls to the latent tool ``agent.step``:
id = the step's ``id`` else ``step<N>`` (1-based); ``dependsOn`` /
``depends_on`` -> ``after`` (integers are 1-based step numbers);
``estimatedRisk`` / ``risk`` -> ``risk``; ``modelHint`` -> ``model_hint``;
``success_criterion`` / ``successCriterion`` -> ``success_criterion``; every
other field (``description``, ``toolHints``, ``task``, ``expected_findings``,
``subagent_hint``, ...) becomes a parameter of the same name.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Callable

from ..diagnostics import Diagnostic, Span
from ..model import (Call, InitialData, ListValue, Literal, Mode, ObjectValue, OutputTarget,
                     Param, Plan, Reference, Risk, ToolDecl, Value)
from ..refs import ReferenceSyntaxError, parse_reference, parse_string_value
from .attributes import OUTPUT_METHOD_WITHOUT_PATH, convert_attribute, param_key, param_name
from .map_syntax import MAP_KEY, map_from_node
from ..maps import MAP_TOOL
from .declarations import DECL_FIELDS, refine, schema_problems
from .located import LazySpanPaths, LocatedNode
from .source_spans import SourceSpans

__all__ = ["document_to_plan", "inferred_input_schema", "tool_decls_from_node", "META_PROPERTIES", "HEADER_KEYS",
           "STEP_TOOL"]

STEP_TOOL = "agent.step"
_STEP_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

META_PROPERTIES = (
    "_tool", "_outputPath", "_outputMethod", "_output", "_id", "_activity", "_instance",
    "_delegate", "_scopes", "_reasoningForCall", "_risk", "_retry", "_timeout", "_after",
    "_modelHint", "_successCriterion",
)
_META_SET = frozenset(META_PROPERTIES)
HEADER_KEYS = ("type", "goal", "mode", "id", "inputSchema", "stateSchema", "outputSchema",
               "tools", "calls", "plan", "steps", "output")
_DOC_MARKERS = set(HEADER_KEYS) - {"type", "id"}
REQUEST_KEYS = ("type", "schema", "context", "config")
TOOL_DECL_KEYS = ("name", "description", "input", "output", "risk", "latent")
# the "type" an OpenAI ("function") or Anthropic ("custom") tool gives; it, "strict" and
# "cache_control" say nothing a declaration keeps
_WRAPPER_TYPES = ("function", "custom")
_TOOL_ALIASES = {"inputSchema": "input", "input_schema": "input", "parameters": "input",
                 "outputSchema": "output", "output_schema": "output"}


def _suggest(word: str, options) -> str:
    m = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean {m[0]!r}?" if m else ""


def _sub_node(node: LocatedNode, path: tuple[str | int, ...]) -> LocatedNode:
    """The node at ``path`` inside ``node`` (as far as it exists), to point at exactly."""
    for seg in path:
        if isinstance(seg, int):
            child = node.value[seg] if node.is_array and 0 <= seg < len(node.value) else None
        else:
            child = node.get(seg)
        if child is None:
            break
        node = child
    return node


def _risk_problem(v: LocatedNode) -> str | None:
    """Why ``v`` is no risk level (the text E103 / E109 give), or None."""
    if not v.is_string:
        return f"must be a string, got {v.describe()}"
    try:
        Risk.parse(v.value)
    except ValueError as exc:
        return str(exc)
    return None


def _is_schema(node: LocatedNode) -> bool:
    return node.is_object or (node.is_scalar and isinstance(node.value, bool))


class _Reader:
    def __init__(self, file: str | None):
        self.file = file
        self.diags: list[Diagnostic] = []
        self.names: dict[str, str] = {}
        # id(declaration) -> (declaration, the ToolDecl fields it gives), for refine(); the
        # declaration is held so that its id is not reused while the reader lives
        self.given: dict[int, tuple[ToolDecl, frozenset[str]]] = {}
        # Deferred spans (source_spans): ``built`` lists the calls read by ``call`` outside
        # maps, in order, when the loader asked for deferred spans (``spans`` set: their
        # nodes get it instead of a Span) or is building them (``spans`` None: the twins).
        # ``lazy`` is what the call being read gives its nodes (None: their own spans).
        self.spans: SourceSpans | None = None
        self.built: list[Call] | None = None
        self.lazy: SourceSpans | None = None
        # path -> itself: a plan names each output path in its writer and again in every
        # reader, and they all share one path tuple (and its names)
        self.paths: dict[tuple, tuple] = {}

    def err(self, code: str, message: str, where: LocatedNode | Span | None,
            path: str | None = None) -> None:
        if isinstance(where, LocatedNode):
            span, path = where.span, path or where.path
        else:
            span = where
        self.diags.append(Diagnostic(code, message, span, self.file, path))

    # ------------------------------------------------------------------ values
    def value(self, node: LocatedNode) -> Value | None:
        """A located node -> value tree; a malformed reference (E105, reported) stays its text,
        as in the DSL, so the call keeps its id and its other checks (fullcheck)."""
        if node.is_object:
            entries, ok = [], True
            for k, v in node.value:
                cv = self.value(v)
                if cv is None:
                    ok = False
                else:
                    entries.append((k, cv))
            return ObjectValue(tuple(entries), self.lazy or node.span) if ok else None
        if node.is_array:
            items, ok = [], True
            for v in node.value:
                cv = self.value(v)
                if cv is None:
                    ok = False
                else:
                    items.append(cv)
            return ListValue(tuple(items), self.lazy or node.span) if ok else None
        if isinstance(node.value, str):
            try:
                return self.string_value(node.value, self.lazy or node.span)
            except ReferenceSyntaxError as exc:
                self.err("E105", str(exc), self.inner_span(node, exc.offset), node.path)
                return Literal(node.value, self.lazy or node.span)
        return Literal(node.value, self.lazy or node.span)

    def string_value(self, text: str, span: Any) -> Value:
        """:func:`parse_string_value`, sharing the path of a reference read before."""
        value = parse_string_value(text, span)
        if type(value) is Reference:
            self.share_path(value)
        return value

    def reference(self, text: str, span: Any) -> Reference:
        """:func:`parse_reference`, sharing the path of a reference read before."""
        return self.share_path(parse_reference(text, span))

    def share_path(self, ref: Reference) -> Reference:
        path = ref.path
        if path:
            shared = self.paths.setdefault(path, path)
            if shared is not path:
                # the reference was made here a moment ago and nothing else holds it yet
                object.__setattr__(ref, "path", shared)
        return ref

    @staticmethod
    def inner_span(node: LocatedNode, offset: int) -> Span:
        """Span of character ``offset`` of a string scalar when it maps 1:1 to the source."""
        s, text = node.span, node.value
        if not isinstance(text, str) or s.line != s.end_line or not (0 <= offset < len(text)):
            return s
        quote = 1 if node.quoted else 0
        if s.end_column - s.column != len(text) + 2 * quote:
            return s
        col = s.column + quote + offset
        return Span(s.line, col, s.line, col + 1)

    def string(self, node: LocatedNode, code: str, what: str, allow_empty: bool = False) -> str | None:
        if node.is_string and (allow_empty or node.value.strip()):
            return node.value
        got = "a blank string" if node.is_string else node.describe()
        self.err(code, f"{what} must be a {'' if allow_empty else 'non-blank '}string, got {got}", node)
        return None

    # ------------------------------------------------------------------- calls
    def calls(self, node: LocatedNode) -> list[Call]:
        if not node.is_array:
            self.err("E107", f"the calls must be an array, got {node.describe()}", node)
            return []
        out = []
        for pos, item in enumerate(node.value, 1):
            call = self.call(item)
            if call is not None:
                if call.id is None and pos != len(out) + 1:
                    # a malformed call before it was left out: the id stays its position in
                    # the file (c3 stays c3 once the first call is fixed), as in the DSL
                    # (set in place: the call was made a moment ago and nothing else holds it
                    # yet; a copy would read its deferred spans before they can be built)
                    object.__setattr__(call, "id", f"c{pos}")
                out.append(call)
        return out

    def output_path(self, node: LocatedNode) -> tuple[tuple[Reference, ...], str | None] | None:
        if not node.is_string:
            self.err("E103", f"_outputPath must be a string such as \"†state.result\", "
                             f"got {node.describe()}", node)
            return None
        split = OutputTarget.split(node.value)
        if split is None:
            self.err("E106", "cannot mix '||' and '&&' in one output path", node)
            return None
        op, parts = split
        paths = []
        for part in parts:
            # an output path is always a path, never text, so a leading `$` can only mean
            # the ASCII alias of `†` (as outside quotes in the DSL); values keep W101
            ref_text = "†" + part[1:] if part.startswith("$") and not part.startswith("$$") else part
            try:
                paths.append(self.reference(ref_text, self.lazy or node.span))
            except ReferenceSyntaxError:
                self.err("E106", f"malformed output path {part!r}: expected †kind.name[.name|[index]]... "
                                 f"(or $kind.name...)", node)
                return None
            if paths[-1].query is not None:
                self.err("E106", f"output path {part!r} has a JMESPath expression: a call writes at a "
                                 "plain path, †kind.name[.name|[index]]...", node)
                return None
        return tuple(paths), op

    def call(self, node: LocatedNode) -> Call | None:
        if self.built is None:
            return self._call(node)
        if node.is_object and node.get(MAP_KEY) is not None:
            built, self.built = self.built, None  # a map and its body keep their spans (rare)
            try:
                return self._call(node)
            finally:
                self.built = built
        outer, self.lazy = self.lazy, self.spans
        try:
            call = self._call(node)
        finally:
            self.lazy = outer
        if call is not None:
            self.built.append(call)
        return call

    def _call(self, node: LocatedNode) -> Call | None:
        lazy = self.lazy
        if not node.is_object:
            self.err("E102", f"a call must be an object with a \"_tool\" property, got {node.describe()}", node)
            return None
        ok = True
        tool_node = node.get("_tool")
        tool = None
        map_node = node.get(MAP_KEY)
        if map_node is not None:  # a map: `_map` stands for `_tool` (map_syntax)
            if tool_node is not None:
                self.err("E501", "a call has either \"_tool\" or \"_map\", not both", map_node)
                return None
            tool = MAP_TOOL
        elif tool_node is None:
            keys = ", ".join(node.keys()[:5])
            self.err("E102", f"call lacks \"_tool\" (keys: {keys or 'none'})", node)
            ok = False
        elif not (tool_node.is_string and tool_node.value.strip()):
            self.err("E102", f"_tool must be a non-empty string naming the tool, got {tool_node.describe()}",
                     tool_node)
            ok = False
        else:
            # one string per tool name, not one per call (JSON/YAML give each call its own)
            tool = self.names.setdefault(tool_node.value, tool_node.value)
        kw: dict[str, Any] = {}
        params: list[Param] = []
        attr_spans: list[tuple[str, Span]] = []
        path_node = method_node = method = None
        parsed_path: Any = None
        key_spans = node.key_spans
        for key, vnode in node.value:
            if key[:1] != "_" or key[:2] == "__":
                val = self.value(vnode)
                if val is None:
                    ok = False
                else:
                    if lazy is not None:
                        params.append(Param(param_name(key), val, lazy))
                        continue
                    # node.entry_span(key) without finding the entry again
                    ks, vs = key_spans.get(key), vnode.span
                    span = vs if ks is None else Span(ks.line, ks.column, vs.end_line, vs.end_column)
                    params.append(Param(param_name(key), val, span))
                continue
            if key == MAP_KEY:
                continue
            if key not in _META_SET:
                hint = _suggest(key, META_PROPERTIES) or (
                    f"; write {param_key(key)!r} for a parameter named {key!r}")
                self.err("E104", f"unknown meta-property {key!r}{hint}",
                         node.key_span(key), vnode.path)
                continue  # left out, as in the DSL: the call stays for the other checks
            if lazy is None:
                attr_spans.append((key, vnode.span))
            res: Any = None
            if key == "_tool":
                continue
            elif key == "_outputPath":
                path_node = vnode
                res = parsed_path = self.output_path(vnode)
            elif key == "_output":
                res = self.value(vnode)
                kw["inline_output"] = res
            else:
                if key == "_outputMethod":
                    method_node = vnode
                field_name, res, errors = convert_attribute(
                    key, vnode.value if vnode.is_scalar else vnode.to_data())
                for e in errors:
                    self.err("E103", e.message, _sub_node(vnode, e.path))
                if key == "_outputMethod":
                    method = res
                else:
                    kw[field_name] = res
            if res is None:
                ok = False
        if method_node is not None and path_node is None:
            self.err("E103", OUTPUT_METHOD_WITHOUT_PATH, method_node)
            ok = False
        spec = None
        if map_node is not None:
            if params:
                self.err("E501", f"a map takes no parameters (got {params[0].name!r}); its options go in "
                                 "\"_map\"", params[0].span)
                return None
            spec = map_from_node(self, map_node)
            ok = ok and spec is not None
        if not ok or tool is None:
            return None
        if spec is not None:
            params = [Param("over", spec.over, spec.over.span)]
            kw["map"] = spec
        output = None
        if path_node is not None:
            paths, op = parsed_path
            output = OutputTarget.of(paths, op, method, lazy or path_node.span)
        if lazy is not None:
            return Call(tool=tool, params=tuple(params), output=output, span=lazy, tool_span=lazy,
                        attr_spans=lazy, **kw)  # type: ignore[arg-type]
        return Call(tool=tool, params=tuple(params), output=output, span=node.span,
                    tool_span=tool_node.span if tool_node is not None else None,
                    attr_spans=tuple(attr_spans), **kw)

    # ------------------------------------------------------------------- steps
    def steps(self, node: LocatedNode) -> list[Call]:
        """Sophon PlanSteps and JarvisCore PlannedSteps -> ``agent.step`` calls."""
        if not node.is_array:
            self.err("E107", f"steps must be an array, got {node.describe()}", node)
            return []
        ids: list[str] = []
        for i, item in enumerate(node.value, 1):
            idn = item.get("id") if item.is_object else None
            if idn is not None and idn.is_scalar and (
                    idn.is_string and idn.value.strip()
                    or isinstance(idn.value, int) and not isinstance(idn.value, bool)):
                ids.append(str(idn.value))
            else:
                ids.append(f"step{i}")
        jarvis = any(item.is_object and item.get("task") is not None for item in node.value)
        if jarvis:
            self.planner_rules(node)
        out = []
        for i, item in enumerate(node.value):
            call = self.step(item, ids[i], ids, jarvis)
            if call is not None:
                out.append(call)
        return out

    def planner_rules(self, node: LocatedNode) -> None:
        """A JarvisCore step list passes the checks the ``goal`` planner's reply passes
        (goals/steps.py, seed 003): 3-10 steps, a non-empty task and success criterion that
        is not the task again, snake_case expected findings; E111 at the node at fault.
        (Dependencies: E103 / E304 / E302 as for any step list; hints are mapped in step().)"""
        from ..goals.steps import MAX_STEPS, MIN_STEPS, SNAKE_KEY, same_text

        n = len(node.value)
        if not MIN_STEPS <= n <= MAX_STEPS:
            self.err("E111", f"a step list has {MIN_STEPS} to {MAX_STEPS} steps; this one has {n}", node)
        for i, item in enumerate(node.value, 1):
            if not item.is_object:
                continue
            texts = {}
            for key in ("task", "success_criterion"):
                v = item.get(key)
                if v is None and key == "success_criterion":
                    v = item.get("successCriterion")
                if v is None:
                    self.err("E111", f"step {i} has no {key!r}: every step says what to do and how to tell "
                                     "it is done", item)
                elif not (v.is_string and v.value.strip()):
                    got = "an empty one" if v.is_string else v.describe()
                    self.err("E111", f"step {i}: {key!r} must be a non-empty string, got {got}", v)
                else:
                    texts[key] = v
            if len(texts) == 2 and same_text(texts["task"].value, texts["success_criterion"].value):
                self.err("E111", f"step {i}: the success_criterion repeats the task; say how to tell that the "
                                 "task is done", texts["success_criterion"])
            findings = item.get("expected_findings")
            if findings is not None:
                if not findings.is_array:
                    self.err("E111", f"step {i}: expected_findings must be a list of snake_case keys, got "
                                     f"{findings.describe()}", findings)
                else:
                    for k in findings.value:
                        if not (k.is_string and SNAKE_KEY.match(k.value)):
                            self.err("E111", f"step {i}: expected finding {k.value!r} is not a snake_case key "
                                             "(e.g. api_base_url)" if k.is_string else
                                             f"step {i}: an expected finding must be a snake_case key, got "
                                             f"{k.describe()}", k)

    def _dep(self, n: LocatedNode, ids: list[str]) -> str | None:
        v = n.value
        if n.is_string and v.strip():
            return v
        if n.is_scalar and isinstance(v, int) and not isinstance(v, bool):
            if 1 <= v <= len(ids):
                return ids[v - 1]
            self.err("E103", f"step number {v} is out of range 1..{len(ids)}", n)
            return None
        self.err("E103", f"a dependency must be a step id or a 1-based step number, got {n.describe()}", n)
        return None

    def step(self, node: LocatedNode, step_id: str, ids: list[str], jarvis: bool = False) -> Call | None:
        if not node.is_object:
            self.err("E102", f"a step must be an object, got {node.describe()}", node)
            return None
        ok = True
        params: list[Param] = []
        kw: dict[str, Any] = {}
        attr_spans: list[tuple[str, Span]] = []
        for key, v in node.value:
            if key == "id":
                attr_spans.append(("_id", v.span))
                if not (v.is_scalar and (v.is_string and v.value.strip() or
                                         isinstance(v.value, int) and not isinstance(v.value, bool))):
                    self.err("E103", f"step id must be a non-empty string, got {v.describe()}", v)
                    ok = False
            elif key in ("dependsOn", "depends_on"):
                attr_spans.append(("_after", v.span))
                items = v.value if v.is_array else [v] if v.is_scalar and v.value is not None else []
                deps = [self._dep(n, ids) for n in items]
                if v.is_object or any(d is None for d in deps):
                    if v.is_object:
                        self.err("E103", f"{key} must be a list of step ids", v)
                    ok = False
                else:
                    kw["after"] = tuple(deps)
            elif key in ("estimatedRisk", "risk"):
                attr_spans.append(("_risk", v.span))
                if (problem := _risk_problem(v)) is not None:
                    self.err("E103", f"{key}: {problem}", v)
                    ok = False
                else:
                    kw["risk"] = Risk.parse(v.value)
            elif key == "modelHint":
                attr_spans.append(("_modelHint", v.span))
                if v.is_object:
                    kw["model_hint"] = v.to_data()
                elif not (v.is_scalar and v.value is None):
                    self.err("E103", f"modelHint must be an object, got {v.describe()}", v)
                    ok = False
            elif key in ("success_criterion", "successCriterion"):
                attr_spans.append(("_successCriterion", v.span))
                s = self.string(v, "E103", key, allow_empty=True)
                if s is None:
                    ok = False
                kw["success_criterion"] = s
            elif jarvis and key == "subagent_hint" and v.is_string:
                # mapped as the goal planner maps it (aliases, close misspellings), else dropped:
                # a routing hint is never a reason to refuse a plan (seed 003)
                from ..goals.steps import normalize_hint

                hint = normalize_hint(v.value)
                if hint is not None:
                    params.append(Param(key, Literal(hint, v.span), node.entry_span(key)))
            else:
                val = self.value(v)
                if val is None:
                    ok = False
                else:
                    params.append(Param(key, val, node.entry_span(key)))
        if not ok:
            return None
        # Wire the steps as data flow too: each step's result goes to †state.steps.<id>, and a
        # step receives its dependencies' results as `inputs`, so whoever executes it (an LLM)
        # sees what the steps before it found.  Only ids that are plain names can be paths.
        wired = {d for d in ids if ids.count(d) == 1 and _STEP_KEY.fullmatch(d)}  # unique plain ids
        if step_id in wired and not any(p.name == "inputs" for p in params):
            deps = [d for d in kw.get("after", ()) if d in wired]
            if deps:
                params.append(Param("inputs", ObjectValue(tuple(
                    (d, Reference("state", ("steps", d), node.span)) for d in deps), node.span), node.span))
            kw["output"] = OutputTarget.of((Reference("state", ("steps", step_id), node.span),), span=node.span)
        return Call(tool=STEP_TOOL, params=tuple(params), id=step_id, span=node.span,
                    tool_span=node.span, attr_spans=tuple(attr_spans), **kw)

    # ------------------------------------------------------------------- tools
    def tool_decls(self, node: LocatedNode) -> list[ToolDecl]:
        decls: list[ToolDecl] = []
        if node.is_object and not _acts_name(node):
            for name, v in node.value:
                d = self.tool_decl(v, name, node.key_span(name))
                if d is not None:
                    decls.append(d)
        elif node.is_array or node.is_object:
            items = node.value if node.is_array else [node]
            for item in items:
                d = self.tool_decl(item)
                if d is not None:
                    decls.append(d)
        else:
            self.err("E109", f"tools must be an object {{name: declaration}} or a list, "
                             f"got {node.describe()}", node)
            return []
        return self.merged(decls)

    def declared(self, decl: ToolDecl, given) -> ToolDecl:
        self.given[id(decl)] = (decl, frozenset(given))
        return decl

    def merged(self, decls: list[ToolDecl]) -> list[ToolDecl]:
        """One declaration per tool, in the order first declared; a later declaration of a
        tool refines the earlier (Acts 002: the fields it gives win, the others are kept)."""
        out: dict[str, ToolDecl] = {}
        for d in decls:
            first = out.get(d.name)
            given = self.given.get(id(d), (d, frozenset(DECL_FIELDS)))[1]
            if first is None:
                out[d.name] = d
                continue
            before = self.given.get(id(first), (first, frozenset(DECL_FIELDS)))[1]
            out[d.name] = self.declared(refine(first, d, given), before | given)
        return list(out.values())

    def tool_decl(self, node: LocatedNode, name: str | None = None,
                  name_span: Span | None = None) -> ToolDecl | None:
        if not node.is_object:
            self.err("E109", f"a tool declaration must be an object, got {node.describe()}", node)
            return None
        acts = _acts_name(node)
        if acts is not None:
            return self.acts_decl(node, acts)
        inner = node.get("function")
        if inner is not None and inner.is_object:  # OpenAI: {"type": "function", "function": {...}}
            for key, v in node.value:
                if key == "type" and not (v.is_string and v.value == "function"):
                    self.err("E109", f"\"type\" of an OpenAI tool must be \"function\", got {v.describe()}", v)
                elif key not in ("type", "function"):
                    self.err("E109", f"unknown field {key!r} beside \"function\" in an OpenAI tool; "
                                     "expected \"type\" and \"function\"", node.key_span(key), v.path)
            return self.tool_decl(inner, name, name_span)
        kw: dict[str, Any] = {}
        schemas: list[tuple[str, LocatedNode]] = []
        ok = True
        for key, v in node.value:
            field_name = _TOOL_ALIASES.get(key, key)
            if key in ("type", "strict", "cache_control"):
                # the OpenAI (type, strict) and Anthropic (type, cache_control) tool formats
                if key == "type" and not (v.is_string and v.value in _WRAPPER_TYPES):
                    self.err("E109", f"\"type\" of a tool declaration must be \"function\" or \"custom\", "
                                     f"got {v.describe()}", v)
                    ok = False
            elif field_name == "name":
                if name is None and v.is_string and v.value.strip():
                    name = v.value
                elif name is None:
                    self.err("E109", "tool name must be a non-empty string", v)
                    ok = False
            elif field_name == "description":
                if v.is_string:
                    kw["description"] = v.value
                else:
                    self.err("E109", f"tool description must be a string, got {v.describe()}", v)
                    ok = False
            elif field_name in ("input", "output"):
                if _is_schema(v):
                    kw[f"{field_name}_schema"] = v.to_data()
                    schemas.append((field_name, v))
                elif not (v.is_scalar and v.value is None):
                    self.err("E109", f"tool {field_name} must be a JSON Schema object, got {v.describe()}", v)
                    ok = False
            elif field_name == "risk":
                if (problem := _risk_problem(v)) is not None:
                    self.err("E109", f"tool risk: {problem}", v)
                    ok = False
                else:
                    kw["risk"] = Risk.parse(v.value)
            elif field_name == "latent":
                if v.is_scalar and isinstance(v.value, bool):
                    kw["latent"] = v.value
                else:
                    self.err("E109", f"tool latent must be true or false, got {v.describe()}", v)
                    ok = False
            else:
                self.err("E109", f"unknown tool declaration field {key!r}{_suggest(key, TOOL_DECL_KEYS)}; "
                                 f"expected {', '.join(TOOL_DECL_KEYS)}", node.key_span(key), v.path)
                ok = False
        if name is None:
            self.err("E109", "tool declaration lacks a \"name\"", node)
            return None
        if not ok:
            return None
        for field_name, v in schemas:
            # not a JSON Schema: no check could use it; say so where it goes wrong
            for message, path in schema_problems(kw[f"{field_name}_schema"]):
                self.err("E109", f"tool {name!r}: {field_name} schema: {message}", _sub_node(v, path))
        return self.declared(ToolDecl(name=name, span=name_span or node.span, **kw), kw)

    def acts_decl(self, node: LocatedNode, name: str) -> ToolDecl | None:
        """``{"type": "object", "properties": {"_tool": {"const": name}, p: schema, "_output": schema}}``."""
        data = node.to_data()
        for message, path in schema_problems(data):
            self.err("E109", f"tool {name!r}: {message}", _sub_node(node, path))
        props = data.get("properties") or {}
        # as in a call, `__from` is the parameter `_from`; other `_` keys are meta-properties
        in_props = {param_name(k): v for k, v in props.items() if k[:1] != "_" or k[:2] == "__"}
        input_schema: dict[str, Any] = {"type": "object", "properties": in_props}
        req = [param_name(r) for r in data.get("required") or []
               if isinstance(r, str) and (r[:1] != "_" or r[:2] == "__")]
        if req:
            input_schema["required"] = req
        if data.get("additionalProperties") is False:
            input_schema["additionalProperties"] = False
        desc = data.get("description")
        if desc is None:
            desc = (props.get("_tool") or {}).get("description", "")
        risk = Risk.NONE
        raw_risk = data.get("x-risk", data.get("risk"))
        if raw_risk is not None:
            try:
                risk = Risk.parse(raw_risk)
            except ValueError as exc:
                self.err("E109", f"tool risk: {exc}", node)
                return None
        given = {"description", "input_schema", "latent"}
        if "_output" in props:
            given.add("output_schema")
        if raw_risk is not None:
            given.add("risk")
        return self.declared(ToolDecl(name=name, description=desc if isinstance(desc, str) else "",
                                      input_schema=input_schema, output_schema=props.get("_output"),
                                      risk=risk, latent=True, span=node.span), given)

    # --------------------------------------------------------------- documents
    def document(self, node: LocatedNode) -> dict[str, Any]:
        if node.is_array:
            return self.array_document(node)
        if node.is_object:
            if "_tool" in node:
                call = self.call(node)
                return {"calls": [call] if call else []}
            if "context" in node:
                return self.request(node)
            t = node.get("type")
            if (t is not None and t.is_string and t.value == "plan") or _DOC_MARKERS & set(node.keys()):
                return self.plan_document(node)
        self.err("E101", "document shape not recognised: expected a list of calls, a solution "
                         "{\"calls\": [...], \"output\": ...}, a plan document {\"goal\", \"tools\", "
                         "\"calls\", ...}, a {\"type\": \"plan\", \"plan\": [...]} message, a context list, "
                         "a request {\"schema\", \"context\"}, a Sophon ExecutionPlan {\"steps\": [...]} or "
                         f"a list of PlannedSteps; got {_shape_name(node)}", node)
        return {}

    def array_document(self, node: LocatedNode) -> dict[str, Any]:
        # generators, not lists: a JSON reader's long arrays locate their items as
        # they are read and keep none, so nothing here holds every item at once
        items = node.value
        if any(n.is_object and "_tool" in n for n in items):
            return {"calls": self.calls(node)}
        if len(items) and all(n.is_object and (t := n.get("type")) is not None and t.is_string
                              for n in items):
            return self.context(node)
        if any(n.is_object and ("task" in n or "description" in n and
                                {"dependsOn", "toolHints", "id"} & set(n.keys())) for n in items):
            return {"calls": self.steps(node)}
        return {"calls": self.calls(node)}

    def header_schema(self, node: LocatedNode, key: str) -> Any:
        if _is_schema(node):
            return node.to_data()
        if node.is_scalar and node.value is None:
            return None
        self.err("E107", f"{key} must be a JSON Schema (an object), got {node.describe()}", node)
        return None

    def plan_document(self, node: LocatedNode) -> dict[str, Any]:
        out: dict[str, Any] = {}
        calls_key = None
        for key, v in node.value:
            if key == "type":
                if not (v.is_string and v.value == "plan"):
                    self.err("E107", "\"type\" of a plan document must be \"plan\"", v)
            elif key in ("goal", "id"):
                if v.is_string:
                    out[key] = v.value
                elif not (v.is_scalar and v.value is None):
                    self.err("E107", f"{key} must be a string, got {v.describe()}", v)
            elif key == "mode":
                if v.is_string and v.value.lower() in ("eager", "lazy"):
                    out["mode"] = Mode(v.value.lower())
                else:
                    self.err("E107", "mode must be \"eager\" or \"lazy\"", v)
            elif key in ("inputSchema", "stateSchema", "outputSchema"):
                out[{"inputSchema": "input_schema", "stateSchema": "state_schema",
                     "outputSchema": "output_schema"}[key]] = self.header_schema(v, key)
            elif key == "tools":
                out["tools"] = self.tool_decls(v)
            elif key in ("calls", "plan", "steps"):
                if calls_key is not None:
                    self.err("E108", f"both {calls_key!r} and {key!r} given; a plan has one list of calls",
                             node.key_span(key), v.path)
                    continue
                calls_key = key
                out["calls"] = self.steps(v) if key == "steps" else self.calls(v)
            elif key == "output":
                if not (v.is_scalar and v.value is None):
                    val = self.value(v)
                    if val is not None:
                        out["output"] = val
            else:
                self.err("E107", f"unknown plan document field {key!r}{_suggest(key, HEADER_KEYS)}",
                         node.key_span(key), v.path)
        return out

    def context(self, node: LocatedNode) -> dict[str, Any]:
        out: dict[str, Any] = {}
        input_props: dict[str, Any] = {}
        # the messages' data (a later message's key wins): what the run starts from
        input_data: dict[str, Any] | None = None
        state_data: dict[str, Any] | None = None
        tools: list[ToolDecl] = []
        for msg in node.value:
            t = msg.get("type")
            assert t is not None
            kind = t.value
            if kind == "plan":
                fields = self.plan_document(msg)
                fields.setdefault("calls", [])
                tools.extend(fields.pop("tools", []))
                out.update(fields)
            elif kind == "state":
                if "schema" not in msg and state_data is None:  # a data message, maybe empty
                    state_data = {}
                for key, v in msg.value:
                    if key == "schema":
                        out["state_schema"] = self.header_schema(v, "state schema")
                    elif key != "type":
                        state_data = state_data if state_data is not None else {}
                        state_data[key] = v.to_data()
            elif kind == "input":
                input_data = input_data if input_data is not None else {}
                for key, v in msg.value:
                    if key != "type":
                        input_data[key] = v.to_data()
                        input_props[key] = {"type": _json_type(input_data[key])}
            elif kind == "tool":
                tool = msg.get("tool")
                if tool is not None and tool.is_object and _names_schemas(tool):
                    # Acts 002: {"type": "tool", "tool": {name: JSON Schema of its input}}
                    for tool_name, schema in tool.value:
                        d = self.acts_decl(schema, tool_name)
                        if d is not None:
                            tools.append(d)
                elif tool is not None and tool.is_object:
                    d = self.tool_decl(tool)
                    if d is not None:
                        tools.append(d)
                elif tool is None and "name" in msg:
                    fields = [(k, v) for k, v in msg.value if k != "type"]
                    d = self.tool_decl(LocatedNode("object", fields, msg.span, msg.path,
                                                   msg.key_spans))
                    if d is not None:
                        tools.append(d)
        if input_props and "input_schema" not in out:  # a plan message's inputSchema wins
            out["input_schema"] = {"type": "object", "properties": input_props}
        if input_data is not None or state_data is not None:
            out["initial"] = InitialData(input_data, state_data)
        if tools:
            out["tools"] = self.merged(tools)  # in message order: a later message refines
        return out

    def request(self, node: LocatedNode) -> dict[str, Any]:
        out: dict[str, Any] = {}
        schema_node = None
        for key, v in node.value:
            if key == "context":
                if v.is_array and all(m.is_object and (t := m.get("type")) is not None and t.is_string
                                      for m in v.value):
                    out.update(self.context(v))
                else:
                    self.err("E107", "context must be a list of messages, each an object with a "
                                     "string \"type\"", v)
            elif key == "schema":
                schema_node = v
            elif key == "type":
                if not (v.is_string and v.value == "request"):
                    self.err("E107", "\"type\" of a request must be \"request\"", v)
            elif key != "config":
                self.err("E107", f"unknown request field {key!r}{_suggest(key, REQUEST_KEYS)}",
                         node.key_span(key), v.path)
        if schema_node is not None:
            schema = self.header_schema(schema_node, "schema")
            if isinstance(schema, dict):
                props = schema.get("properties")
                if isinstance(props, dict) and "calls" in props and "output" in props:
                    schema = props["output"]
            if schema is not None:
                out["output_schema"] = schema
        return out


def _acts_name(node: LocatedNode) -> str | None:
    props = node.get("properties")
    tool = props.get("_tool") if props is not None else None
    const = tool.get("const") if tool is not None else None
    if const is not None and const.is_string and const.value:
        return const.value
    return None


_DECL_WORDS = frozenset({*TOOL_DECL_KEYS, *_TOOL_ALIASES, "function", "type", "strict", "cache_control",
                         "properties"})


def _names_schemas(node: LocatedNode) -> bool:
    """Whether a tool message's ``tool`` maps tool names to schemas (Acts 002) rather than
    being one declaration: no key of a declaration, and every value an object."""
    return bool(node.value) and all(v.is_object and k not in _DECL_WORDS for k, v in node.value)


def inferred_input_schema(data: dict[str, Any]) -> dict[str, Any]:
    """The input schema a context list's ``input`` data declares: each key with the JSON
    type of its value (nothing required)."""
    return {"type": "object", "properties": {k: {"type": _json_type(v)} for k, v in data.items()}}


def _json_type(v: Any) -> str:
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        return "array"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    return "string"


def _shape_name(node: LocatedNode) -> str:
    if node.is_object:
        keys = node.keys()
        shown = ", ".join(repr(k) for k in keys[:6])
        return f"an object with keys {shown}" if keys else "an empty object"
    if node.is_array:
        return "an array"
    return f"a {node.describe()}"


def document_to_plan(node: LocatedNode | None, file: str | None = None, source: str | None = None,
                     form: str = "json", *, deferred_spans: bool = False) -> tuple[Plan, list[Diagnostic]]:
    """Build a :class:`Plan` from a located document. Never raises.

    A call with any problem is reported and left out; the rest still load.
    ``deferred_spans``: the calls' nodes get their spans when first asked, by reading
    ``source`` again (:mod:`.source_spans`); ``node`` must be ``source`` read in ``form``.
    """
    reader = _Reader(file)
    spans = None
    if deferred_spans and node is not None and source is not None and form in _READERS:
        spans = reader.spans = SourceSpans(_calls_again(source, form, file))
        reader.built = []
    fields: dict[str, Any] = {}
    if node is not None:
        try:
            fields = reader.document(node)
        except RecursionError:
            reader.err("E101", "document nested too deeply", node)
            fields = {}
    fields["calls"] = tuple(fields.get("calls", ()))
    fields["tools"] = tuple(fields.get("tools", ()))
    paths: Any = None
    if node is not None:
        # Read the source again for the paths when a diagnostic first asks for one: a
        # map of every node costs as much memory as the plan itself and is rarely read.
        paths = _lazy_paths(source, form) if source is not None and form in _READERS \
            else node.span_paths()
    plan = Plan(**fields, file=file, source=source, form=form, span_paths=paths)
    if spans is not None:
        spans.bind(tuple(reader.built or ()))
    return plan, reader.diags


def _calls_again(source: str, form: str, file: str | None) -> Callable[[], list[Call]]:
    """What :class:`SourceSpans` rebuilds: the calls ``document_to_plan`` deferred, with spans."""
    read = _READERS[form]

    def rebuild() -> list[Call]:
        node = read(source)
        reader = _Reader(file)
        reader.built = []
        if node is not None:
            try:
                reader.document(node)
            except RecursionError:  # pragma: no cover - the first reading got past it
                return []
        return reader.built

    return rebuild


def _json_node(source: str) -> LocatedNode | None:
    from .json_source import parse_json

    return parse_json(source)[0]


def _yaml_node(source: str) -> LocatedNode | None:
    from .yaml_source import parse_yaml

    return parse_yaml(source)[0]


_READERS = {"json": _json_node, "yaml": _yaml_node}


def _lazy_paths(source: str, form: str) -> LazySpanPaths:
    read = _READERS[form]

    def compute() -> dict[Span, str]:
        node = read(source)
        return node.span_paths() if node is not None else {}

    return LazySpanPaths(compute)


def tool_decls_from_node(node: LocatedNode | None,
                         file: str | None = None) -> tuple[list[ToolDecl], list[Diagnostic]]:
    """Tool declarations from a schema-only file.

    Accepted: ``{"tools": {name: decl}}``, ``{"tools": [decl, ...]}``, a list of
    declarations, a single declaration, a single Acts-style tool schema, or
    ``{"anyOf"|"oneOf": [schemas]}``.  A declaration is ``{name?, description, input,
    output, risk, latent}``, an OpenAI tool ``{"type": "function", "function": {"name",
    "description", "parameters"}}`` (or its flat form, ``parameters`` beside ``name``), an
    Anthropic tool ``{"name", "description", "input_schema"}`` or an Acts-style schema
    ``{"type": "object", "properties": {"_tool": {"const": name}, ...}}``.  A tool declared
    twice is declared once, the later declaration refining the earlier (Acts 002).
    """
    reader = _Reader(file)
    if node is None:
        return [], []
    decls: list[ToolDecl] = []
    if node.is_object and "tools" in node:
        for key, v in node.value:
            if key == "tools":
                decls = reader.tool_decls(v)
            elif key not in ("$schema", "version", "description"):
                reader.err("E109", f"unknown field {key!r} in a tool declaration file; expected \"tools\"",
                           node.key_span(key), v.path)
    elif node.is_array:
        decls = reader.tool_decls(node)
    elif node.is_object and _acts_name(node) is not None:
        decls = reader.tool_decls(LocatedNode("array", [node], node.span, node.path))
    elif node.is_object and ("function" in node or "name" in node):  # one OpenAI / Anthropic tool
        decls = reader.tool_decls(LocatedNode("array", [node], node.span, node.path))
    elif node.is_object and any(k in node for k in ("anyOf", "oneOf")):
        alts = node.get("anyOf") or node.get("oneOf")
        decls = reader.tool_decls(alts) if alts is not None and alts.is_array else []
    else:
        reader.err("E101", "not a tool declaration file: expected {\"tools\": {...}}, a list of "
                           f"declarations or an Acts-style tool schema; got {_shape_name(node)}", node)
    return decls, reader.diags
