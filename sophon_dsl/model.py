"""The plan model: frozen types every form (DSL, YAML, JSON) loads into.

A :class:`Plan` is a header (goal, mode, schemas, inline tool declarations)
plus a tuple of :class:`Call` values.  Parameter values are :data:`Value`
trees: literals, lists, objects, references, reference expressions and
string templates.  Every node carries a :class:`~sophon_dsl.diagnostics.Span`
pointing back into its source; spans are excluded from equality, so the same
plan written in two forms compares equal.  A loader may store a
:class:`DeferredSpans` in a node's span fields instead (the JSON reader does, for
calls): reading the field then asks it for the node's span, so a plan keeps no
``Span`` objects until a diagnostic wants one (see :class:`DeferredSpans`).  The
language server's re-parser does too (``lsp.incremental``, through :func:`defer_span`):
a statement's spans move with the lines above it without copying its nodes.

JSON Schemas and other free-form JSON (``model_hint``, schemas, tool
declarations) are stored as plain ``dict``/``list`` values and must be treated
as read-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Union

from .errors import OptionError
from .diagnostics import Span
from .values import query_text, references, to_source_json

__all__ = [
    "ARGUMENT_METHODS",
    "Call",
    "DeferredSpans",
    "Expression",
    "InitialData",
    "ListValue",
    "Literal",
    "MapSpec",
    "Mode",
    "ObjectValue",
    "OutputMethod",
    "OutputTarget",
    "Param",
    "Plan",
    "PathSegment",
    "Reference",
    "RetryPolicy",
    "Risk",
    "Template",
    "ToolDecl",
    "Value",
    "iter_references",
    "value_to_json",
]

PathSegment = Union[str, int]


def _span() -> Any:
    return field(default=None, compare=False, repr=False)


class DeferredSpans:
    """Spans a loader did not build: stored in the span fields of the nodes it made, and
    asked for the span of one node when that field is read.

    A plan of 100k calls would otherwise hold eight or nine ``Span`` objects per call
    (about 0.8 KB with their line numbers), while only the nodes a diagnostic names need
    one.  ``resolve(node, name)`` returns what the field ``name`` (``span``,
    ``tool_span`` or ``attr_spans``) of ``node`` would have held, or ``None``.
    """

    __slots__ = ()

    def resolve(self, node: Any, name: str) -> Any:
        raise NotImplementedError


def _span_field(slot: Any, name: str) -> property:
    """The span field ``name`` of a model class, in place of its slot ``slot``: a stored
    span is returned as it is, a stored :class:`DeferredSpans` answers for the node.
    (A property whose setter is the slot's own: constructors pay no Python call.)"""

    def get(node: Any) -> Any:
        value = slot.__get__(node)
        if isinstance(value, DeferredSpans):
            return value.resolve(node, name)
        return value

    return property(get, slot.__set__, slot.__delete__)


_SPAN_FIELDS: dict[type, tuple[str, ...]] = {}


def _span_fields(*names: str):
    """Class decorator (applied after ``dataclass``): ``names`` read through :func:`_span_field`."""
    def wrap(cls):
        for name in names:
            setattr(cls, name, _span_field(cls.__dict__[name], name))
        _SPAN_FIELDS[cls] = names
        return cls
    return wrap


def span_fields(cls: type) -> tuple[str, ...]:
    """The fields of the model class ``cls`` that may hold a :class:`DeferredSpans` (every
    field of the model that holds spans; ``()`` for a class with none)."""
    return _SPAN_FIELDS.get(cls, ())


def defer_span(node: Any, name: str, spans: DeferredSpans) -> None:
    """Store ``spans`` in the span field ``name`` of ``node``, a node its loader has just built
    and not yet handed out (the model is frozen for everyone else): reading the field then
    asks ``spans``.  ``name`` must be one of :func:`span_fields` of the node's class."""
    # (an internal invariant: the loaders name the fields span_fields gave them)
    assert name in _SPAN_FIELDS.get(type(node), ()), f"{type(node).__name__}.{name} is not a span field"
    object.__setattr__(node, name, spans)


def stored_span(node: Any, name: str = "span") -> Any:
    """What the span field ``name`` of ``node`` holds, without resolving it: a ``Span``,
    ``None`` or the loader's :class:`DeferredSpans` (to tell whether spans were built)."""
    slot = type(node).__dict__[name].fset.__self__  # the setter is the slot's own __set__
    return slot.__get__(node)


class Mode(str, Enum):
    EAGER = "eager"
    LAZY = "lazy"


class OutputMethod(str, Enum):
    """How a written value combines with older writes to the same path (Acts 008)."""

    SET = "set"
    MERGE = "merge"      # deep merge of objects
    ASSIGN = "assign"    # shallow merge of objects
    PUSH = "push"        # append one item to a list
    CONCAT = "concat"    # append all items of a list to a list


ARGUMENT_METHODS = tuple(m.value for m in OutputMethod)


class Risk(int, Enum):
    """Risk levels of seed 000. Ordered, so ``risk >= Risk.MEDIUM`` works."""

    NONE = 0
    LOW = 1
    MEDIUM = 2
    HIGH = 3
    CRITICAL = 4

    @classmethod
    def parse(cls, text: str) -> "Risk":
        """Case-insensitive: ``"medium"``, ``"Medium"`` and ``"MEDIUM"`` all work."""
        try:
            return cls[str(text).strip().upper()]
        except KeyError:
            names = ", ".join(r.name.lower() for r in cls)
            raise OptionError(f"unknown risk level {text!r}; expected one of {names}",
                              code="Risk.Unknown") from None

    @property
    def label(self) -> str:
        return self.name.lower()


# ---------------------------------------------------------------------------
# Values


@_span_fields("span")
@dataclass(frozen=True, slots=True)
class Literal:
    """A JSON scalar: str, int, float, bool or None."""

    node_kind = "literal"  # how sophon_dsl.values dispatches (not a field)

    value: str | int | float | bool | None
    span: Span | None = _span()


@_span_fields("span")
@dataclass(frozen=True, slots=True)
class ListValue:
    node_kind = "list"  # how sophon_dsl.values dispatches (not a field)

    items: tuple["Value", ...]
    span: Span | None = _span()


@_span_fields("span")
@dataclass(frozen=True, slots=True)
class ObjectValue:
    """An object literal; ``entries`` keep their source order."""

    node_kind = "object"  # how sophon_dsl.values dispatches (not a field)

    entries: tuple[tuple[str, "Value"], ...]
    span: Span | None = _span()

    def get(self, key: str) -> "Value | None":
        for k, v in self.entries:
            if k == key:
                return v
        return None


@_span_fields("span")
@dataclass(frozen=True, slots=True)
class Reference:
    """``†<kind>.<path>``: ``kind`` is ``input``, ``state``, ``data`` or a declared kind.

    ``path`` holds property names (str) and list indexes (int).  An empty path
    reads the whole kind (``†state``).  ``query`` is a JMESPath expression applied
    to the value at ``path`` (``†state.hits[*].url``: path ``("hits",)``, query
    ``"[*].url"``); the path alone wires the reference to its writers.
    """

    node_kind = "reference"  # how sophon_dsl.values dispatches (not a field)

    kind: str
    path: tuple[PathSegment, ...] = ()
    span: Span | None = _span()
    query: str | None = field(default=None, repr=False)  # shown by text(); old reprs unchanged

    def text(self, dagger: str = "†") -> str:
        out = [dagger, self.kind]
        for seg in self.path:
            out.append(f"[{seg}]" if isinstance(seg, int) else f".{seg}")
        if self.query is not None:
            return query_text(out, self.query)
        return "".join(out)

    @property
    def key(self) -> tuple[PathSegment, ...]:
        """``(kind, *path)``: the address compared when wiring readers to writers."""
        return (self.kind, *self.path)

    def __str__(self) -> str:
        return self.text()


@_span_fields("span")
@dataclass(frozen=True, slots=True)
class Expression:
    """``a || b || c`` (fallback: leftmost that gets a value) or ``a && b`` (gate: all; value of last)."""

    node_kind = "expression"  # how sophon_dsl.values dispatches (not a field)

    op: str  # "||" or "&&"
    operands: tuple[Reference, ...]
    span: Span | None = _span()

    def text(self, dagger: str = "†") -> str:
        return f" {self.op} ".join(r.text(dagger) for r in self.operands)


@_span_fields("span")
@dataclass(frozen=True, slots=True)
class Template:
    """A string with embedded references, interpolated as text at run time.

    ``parts`` alternates literal text (str) and :class:`Reference` values.
    """

    node_kind = "template"  # how sophon_dsl.values dispatches (not a field)

    parts: tuple[Union[str, Reference], ...]
    span: Span | None = _span()


Value = Union[Literal, ListValue, ObjectValue, Reference, Expression, Template]


# ---------------------------------------------------------------------------
# Calls


@_span_fields("span")
@dataclass(frozen=True, slots=True)
class Param:
    name: str
    value: Value
    span: Span | None = _span()


@_span_fields("span")
@dataclass(frozen=True, slots=True)
class OutputTarget:
    """Where a call's result goes.

    ``op`` is ``None`` for a single path, ``"||"`` for branch alternatives (the
    activity picks one; on failure an error object goes to the last), ``"&&"``
    for fan-out to every path.
    """

    paths: tuple[Reference, ...]
    op: str | None = None
    method: OutputMethod = OutputMethod.SET
    span: Span | None = _span()

    @classmethod
    def of(cls, paths: tuple[Reference, ...], op: str | None = None, method: OutputMethod | None = None,
           span: Span | None = None) -> OutputTarget:
        """The one way readers build a target: one path has no operator, no method is ``=``."""
        return cls(paths, op if len(paths) > 1 else None, OutputMethod.SET if method is None else method, span)

    @staticmethod
    def split(text: str) -> tuple[str | None, list[str]] | None:
        """An output path's text as its operator and stripped parts (``†a || †b`` ->
        ``("||", ["†a", "†b"])``); None when it mixes ``||`` and ``&&``."""
        body = text.strip()
        has_or, has_and = "||" in body, "&&" in body
        if has_or and has_and:
            return None
        op = "||" if has_or else "&&" if has_and else None
        return op, [p.strip() for p in body.split(op)] if op else [body]

    @property
    def is_branching(self) -> bool:
        """``†a || †b``: the result goes to one alternative, a failure to the last."""
        return self.op == "||" and len(self.paths) > 1

    @property
    def fans_out(self) -> bool:
        """``†a && †b``: the result goes to every path."""
        return self.op == "&&"

    @property
    def catch(self) -> Reference | None:
        """Where a failure's error object goes: a branching target's last alternative."""
        return self.paths[-1] if self.op == "||" and len(self.paths) > 1 else None

    def is_catch(self, index: int) -> bool:
        """Path ``index`` is the catch (it may hold an error object, not a result)."""
        return self.op == "||" and len(self.paths) > 1 and index == len(self.paths) - 1

    def targets(self, branch: int | None = None) -> tuple[Reference, ...]:
        """The paths a success writes: every path of a fan-out, else alternative ``branch``
        (the first by default).  A one-path target returns ``paths`` itself (no new tuple)."""
        paths = self.paths
        if self.op == "&&" or (len(paths) == 1 and not branch):
            return paths
        return (paths[branch or 0],)

    def pick(self, target: Any) -> int | None:
        """The alternative a tool's ``Branch`` names, by index or path text (``†`` / ``$``
        optional); None when it names none (a bool is no index; only ``||`` has others)."""
        paths = self.paths
        if isinstance(target, int) and not isinstance(target, bool):
            k = target if 0 <= target < len(paths) else None
        else:
            text = str(target).lstrip("†$")
            k = next((n for n, p in enumerate(paths) if p.text("") == text), None)
        if k is None or (k > 0 and self.op != "||"):
            return None
        return k

    def holds(self, ref: Reference) -> bool:
        """``ref`` names one of the paths (same kind and path; its query aside)."""
        return any(p.kind == ref.kind and p.path == ref.path for p in self.paths)

    def text(self, dagger: str = "†") -> str:
        """The output path as written: the paths joined by their operator."""
        paths = self.paths
        if len(paths) == 1:  # (the common target: no generator)
            return paths[0].text(dagger)
        sep = f" {self.op} " if self.op else " || "
        return sep.join(p.text(dagger) for p in paths)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """ASL-style retrier. ``errors`` empty means every retryable error."""

    max_attempts: int = 3
    interval: float = 1.0
    backoff_rate: float = 2.0
    max_delay: float | None = None
    jitter: bool = False
    errors: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out: dict[str, Any] = {"max_attempts": self.max_attempts}
        defaults = RetryPolicy()
        for name in ("interval", "backoff_rate", "max_delay", "jitter"):
            val = getattr(self, name)
            if val != getattr(defaults, name):
                out[name] = val
        if self.errors:
            out["errors"] = list(self.errors)
        return out


@_span_fields("span", "tool_span", "attr_spans")
@dataclass(frozen=True, slots=True)
class Call:
    """One tool call: a node of the plan's data-flow graph.

    Seed meta-properties map as: ``_tool`` -> ``tool``, ``_outputPath`` /
    ``_outputMethod`` -> ``output``, ``_output`` -> ``inline_output``,
    ``_activity``, ``_instance``, ``_delegate``, ``_scopes``,
    ``_reasoningForCall`` -> ``reasoning``.  The remaining fields are this
    project's attributes (JSON spelling in brackets): ``id`` (``_id``),
    ``risk`` (``_risk``), ``retry`` (``_retry``), ``timeout`` seconds
    (``_timeout``), ``after`` (``_after``), ``model_hint`` (``_modelHint``),
    ``success_criterion`` (``_successCriterion``).
    """

    tool: str
    params: tuple[Param, ...] = ()
    output: OutputTarget | None = None
    inline_output: Value | None = None
    id: str | None = None
    activity: str | None = None
    instance: str | None = None
    delegate: str | None = None
    scopes: tuple[str, ...] | None = None
    reasoning: str | None = None
    risk: Risk | None = None
    retry: RetryPolicy | None = None
    timeout: float | None = None
    after: tuple[str, ...] = ()
    model_hint: Any = None
    success_criterion: str | None = None
    # a map over a list (``tool`` is then "map" and ``params`` hold only ``over``): see MapSpec
    map: "MapSpec | None" = None
    span: Span | None = _span()
    tool_span: Span | None = _span()
    # Span of each attribute / meta-property by its JSON name (e.g. "_after").
    attr_spans: tuple[tuple[str, Span], ...] = field(default=(), compare=False, repr=False)
    # DSL comments (trivia: excluded from equality; the JSON/YAML forms drop them).  Each
    # entry is one comment line as written, starting with '#'.  ``comments`` are the
    # full-line comments above the call (and any comment inside it, e.g. between its
    # decorators or arguments); ``trailing_comment`` ends the call's last line.
    comments: tuple[str, ...] = field(default=(), compare=False, repr=False)
    trailing_comment: str | None = field(default=None, compare=False, repr=False)

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    def attr_span(self, name: str) -> Span | None:
        for k, s in self.attr_spans:
            if k == name:
                return s
        return self.span


@_span_fields("span")
@dataclass(frozen=True, slots=True)
class MapSpec:
    """``map``: the calls of ``body`` run once per item of the list ``over``.

    In the body, ``†<item>`` reads the item, ``†<index>`` its position and ``†local`` the
    item's own data, which the body's calls write.  Each item's result is ``result``
    evaluated against its data (absent: the item's ``†local`` object); the results, in item
    order, are the map call's result.  ``concurrency`` bounds the items in flight;
    ``tolerate`` / ``tolerate_percent`` how many items may fail before the map fails
    (absent: none).  ``spec/language.md``, "Map over a list".
    """

    over: Value
    body: tuple[Call, ...] = ()
    item: str = "item"
    index: str = "index"
    result: Value | None = None
    concurrency: int | None = None
    tolerate: int | None = None
    tolerate_percent: float | None = None
    span: Span | None = _span()


@_span_fields("span")
@dataclass(frozen=True, slots=True)
class ToolDecl:
    """A tool declared inside a plan document or a schema-only declaration file.

    ``latent`` tools have no code: an LLM executes them.
    """

    name: str
    description: str = ""
    input_schema: Any = None
    output_schema: Any = None
    risk: Risk = Risk.NONE
    latent: bool = True
    span: Span | None = _span()

    def to_json(self) -> dict:
        out: dict[str, Any] = {}
        if self.description:
            out["description"] = self.description
        if self.input_schema is not None:
            out["input"] = self.input_schema
        if self.output_schema is not None:
            out["output"] = self.output_schema
        if self.risk is not Risk.NONE:
            out["risk"] = self.risk.label
        if not self.latent:
            out["latent"] = False
        return out


@dataclass(frozen=True, slots=True)
class InitialData:
    """The data a context list carries besides its plan: its ``input`` messages' data and
    its ``state`` messages' data (``None`` when no such message had any).  A run seeds
    ``†input`` / ``†state`` with it unless the caller gives its own (plain JSON, read-only)."""

    input: dict[str, Any] | None = None
    state: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """A whole plan: header plus calls.

    ``output`` is the final output of a solution (``{"calls": [...], "output": ...}``);
    ``None`` means the loop should continue.
    """

    calls: tuple[Call, ...] = ()
    goal: str | None = None
    mode: Mode = Mode.EAGER
    id: str | None = None
    input_schema: Any = None
    state_schema: Any = None
    output_schema: Any = None
    tools: tuple[ToolDecl, ...] = ()
    output: Value | None = None
    file: str | None = field(default=None, compare=False, repr=False)
    source: str | None = field(default=None, compare=False, repr=False)
    form: str | None = field(default=None, compare=False, repr=False)
    # JSON path of each node by its span, filled by the YAML/JSON loaders so that
    # diagnostics about a node can name it (``$[1].query``); ``None`` for DSL plans.
    span_paths: Any = field(default=None, compare=False, repr=False)
    # DSL comments (trivia, like Call.comments): ``comments`` open the file (the block
    # before the first statement that a blank line separates from it);
    # ``field_comments`` are ``(key, leading, trailing)`` for header fields (key
    # ``"goal"``, ``"input"``, ...), tool declarations (``"tool <name>"``) and the
    # ``return`` statement (``"return"``); ``trailing_comments`` follow the last statement.
    comments: tuple[str, ...] = field(default=(), compare=False, repr=False)
    field_comments: tuple[tuple[str, tuple[str, ...], str | None], ...] = field(
        default=(), compare=False, repr=False)
    trailing_comments: tuple[str, ...] = field(default=(), compare=False, repr=False)
    # the input / state data of a context list's messages: what the run starts from when
    # the caller gives none; like trivia, not part of what the plan says (equality)
    initial: InitialData | None = field(default=None, compare=False, repr=False)

    @property
    def has_header(self) -> bool:
        return bool(
            self.goal is not None or self.mode is not Mode.EAGER or self.id is not None
            or self.input_schema is not None or self.state_schema is not None
            or self.output_schema is not None or self.tools
        )

    def call_ids(self) -> list[str]:
        """Each call's id: its explicit id, else ``c<N>`` with N its 1-based position."""
        return [c.id if c.id is not None else f"c{i}" for i, c in enumerate(self.calls, 1)]


# ---------------------------------------------------------------------------
# Helpers


def iter_references(value: Value | None):
    """Yield every :class:`Reference` inside a value tree, in source order."""
    return references(value)


def value_to_json(value: Value, dagger: str = "†") -> Any:
    """Render a value tree in the seed's JSON form (references as ``"†kind.path"`` strings)."""
    return to_source_json(value, dagger)
