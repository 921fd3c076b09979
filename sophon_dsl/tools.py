"""Tools: the ``@tool`` decorator, tool specs and the registry a plan is checked against.

A :class:`ToolSpec` is what the compiler and the runtime know about a tool:
its name, description, input and output JSON Schemas, risk level and, for an
explicit tool (an *activity*), the Python function that implements it.  A
latent tool has no function: an LLM executes it.

``@tool`` builds the schemas from the function's type hints with pydantic (plain JSON
hints are written out without it, to the same schemas: :mod:`sophon_dsl.hint_schemas`)::

    @tool(name="web.search", risk="low")
    async def search(query: str, limit: int = 5) -> list[str]:
        ...

A tool that needs more than its arguments (which call it runs for, the data its
call's ``_scopes`` allow) declares one parameter annotated :class:`CallContext`; the
runtime passes it by keyword, and it is in no schema (docs/runtime.md, "Activities and
scopes").
"""

from __future__ import annotations

import collections.abc
import functools
import inspect
import re
import types
import typing
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Protocol, get_type_hints, runtime_checkable

from .errors import OptionError, OptionTypeError, SophonError
from .model import Call, Risk, ToolDecl

__all__ = ["CallContext", "NotATool", "ToolRegistry", "ToolSource", "ToolSpec", "as_registry", "context_parameter",
           "schemas_from_function", "stdlib_fallback", "tool"]


class NotATool(SophonError, TypeError):
    """Something given as a tool that is none (also a ``TypeError``, as before)."""


@dataclass(frozen=True, slots=True)
class CallContext:
    """What a tool's code learns about the call it runs for, beyond the call's arguments:
    Acts 003's ``call``, ``tool`` and ``context`` of an activity.

    A Python tool receives it through a parameter annotated ``CallContext`` (any name;
    ``CallContext | None = None`` lets the function be called without one too).  The
    runtime passes it by keyword on every call of that function; the parameter is left out
    of the tool's input schema, so a plan can neither see nor set it.

    ``call`` is the call as planned (its meta-properties: ``activity``, ``instance``,
    ``scopes``...), ``tool`` the spec of the call's tool (the interface: its schemas),
    which is not the running function's own spec when the call names an ``_activity``.
    ``scoped`` is the run's data of each kind the call's ``_scopes`` names, as it is when
    the call starts (``{"state": {...}, "input": {...}}``; a call with ``_instance`` X gets
    X's own ``state@X`` / ``input@X`` for a kind X has; a kind without data is absent; empty
    without ``_scopes``).  It is the tool's own copy: changing it changes nothing in the run.
    """

    call_id: str
    call: Call
    tool: "ToolSpec | None"
    scoped: dict[str, Any]
    attempt: int = 1

    @property
    def activity(self) -> str | None:
        return self.call.activity

    @property
    def instance(self) -> str | None:
        return self.call.instance

    @property
    def scopes(self) -> tuple[str, ...]:
        return self.call.scopes or ()


# ``CallContext`` written as text (postponed annotations) when the hints cannot be resolved
_CONTEXT_TEXT = re.compile(r"\s*(?:(?:[\w.]+\.)?CallContext(?:\s*\|\s*None)?"
                           r"|(?:typing\.)?Optional\[\s*(?:[\w.]+\.)?CallContext\s*\])\s*")


def _is_context(ann: Any) -> bool:
    return ann is CallContext or CallContext in typing.get_args(ann)


def context_parameter(func: Callable[..., Any]) -> str | None:
    """The name of ``func``'s parameter annotated :class:`CallContext` (or an Optional or
    ``Annotated`` of it); None when it has none.  Reads the annotations only, so it is cheap
    enough to run when a tool is declared."""
    anns = getattr(func, "__annotations__", None)
    if not anns:
        return None
    texts = False
    for name, ann in anns.items():
        if name == "return":
            continue
        if type(ann) is str:
            texts = texts or "CallContext" in ann
        elif _is_context(ann):
            return name
    if not texts:
        return None
    try:
        hints = get_type_hints(func, include_extras=True)
    except Exception:  # noqa: BLE001 - another hint does not resolve: read the text
        return next((n for n, a in anns.items()
                     if n != "return" and type(a) is str and _CONTEXT_TEXT.fullmatch(a)), None)
    return next((n for n, a in hints.items() if n != "return" and _is_context(a)), None)


class _DeferredSchema:
    """A schema field of :class:`ToolSpec` that may be derived on first read.

    A non-data descriptor: a spec built with its schemas keeps them in its own
    ``__dict__``, which Python reads before this descriptor, so reading them costs
    nothing extra.  A spec made by :meth:`ToolSpec.deferred` leaves them out; the first
    read derives both (pydantic is slow to import and to run) and stores them.
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return None  # the field's default, as dataclasses read it from the class
        derive = obj.__dict__.get("_derive_schemas")
        if derive is None:
            return None
        input_schema, output_schema = derive()
        obj.__dict__["input_schema"] = input_schema
        obj.__dict__["output_schema"] = output_schema
        return obj.__dict__[self.name]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str = ""
    input_schema: dict | None = _DeferredSchema()  # type: ignore[assignment]
    output_schema: dict | None = _DeferredSchema()  # type: ignore[assignment]
    risk: Risk = Risk.NONE
    func: Callable[..., Any] | None = field(default=None, compare=False)
    is_async: bool = False
    origin: str = "user"  # "user", "plan", "stdlib", "mcp", ...
    # A declaration that says the tool is explicit (``latent: false``) even though no
    # implementation is registered here: check treats it as an activity.
    explicit: bool = False
    # The parameter of ``func`` that receives the :class:`CallContext` (not in the schemas).
    context_param: str | None = field(default=None, compare=False)
    # Safe to run again with the same arguments: a durable run re-runs it, with the same
    # idempotency key, when its outcome is unknown, and commits no intent before it starts.
    idempotent: bool = False
    # Scale-out (docs/scale-out.md): what a worker must offer to run it ({"GPU": 1}), and
    # "local" for a tool that must run in the coordinating process (never sent to a cluster).
    resources: Mapping[str, float] | None = field(default=None, compare=False)
    placement: str = field(default="any", compare=False)
    # What the tool does with data (runtime/risk.py, runtime/gate.py): "local-source" (its
    # result is data read from this machine), "network-sink" (it sends its arguments off
    # the machine) or None; the standard tools are known by name
    data_flow: str | None = field(default=None, compare=False)

    @classmethod
    def deferred(cls, name: str, schemas: Callable[[], tuple[dict | None, dict | None]], **fields: Any) -> "ToolSpec":
        """A spec whose ``(input_schema, output_schema)`` come from ``schemas()``, called on
        the first read of either (a registry of many tools pays only for those it uses)."""
        spec = cls(name, **fields)
        del spec.__dict__["input_schema"], spec.__dict__["output_schema"]
        spec.__dict__["_derive_schemas"] = schemas
        return spec

    @property
    def latent(self) -> bool:
        return self.func is None and not self.explicit

    @property
    def params(self) -> dict:
        return dict((self.input_schema or {}).get("properties", {}))

    @property
    def required(self) -> tuple[str, ...]:
        return tuple((self.input_schema or {}).get("required", ()))

    @classmethod
    def from_decl(cls, decl: ToolDecl, origin: str = "plan") -> "ToolSpec":
        return cls(decl.name, decl.description, decl.input_schema, decl.output_schema,
                   decl.risk, None, False, origin, explicit=not decl.latent)

    def to_decl(self) -> ToolDecl:
        return ToolDecl(self.name, self.description, self.input_schema, self.output_schema,
                        self.risk, self.latent)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.func is None:
            raise OptionTypeError(f"tool {self.name!r} is latent: it has no Python implementation")
        return self.func(*args, **kwargs)


def _hint_problem(func: Callable[..., Any], exc: Exception) -> str:
    """Why pydantic refused ``func``'s hints, at the user's own line when a hint names a
    ``typing.TypedDict`` (pydantic wants ``typing_extensions.TypedDict`` before Python 3.12)."""
    if getattr(exc, "code", None) != "typed-dict-version":
        return str(exc)
    try:
        hints = get_type_hints(func, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolved hints: nothing to look through
        hints = {}
    stack, seen = list(hints.values()), set()
    while stack:
        hint = stack.pop()
        if id(hint) in seen:
            continue
        seen.add(id(hint))
        if isinstance(hint, type) and typing.is_typeddict(hint) and type(hint).__module__ == "typing":
            try:
                where = f"{inspect.getsourcefile(hint)}:{inspect.getsourcelines(hint)[1]}: "
            except (OSError, TypeError):
                where = ""
            return (f"{where}class {hint.__name__} is a typing.TypedDict; before Python 3.12 pydantic needs "
                    "typing_extensions.TypedDict (write: from typing_extensions import TypedDict)")
        stack.extend(typing.get_args(hint))
        if isinstance(hint, type) and typing.is_typeddict(hint):
            stack.extend(getattr(hint, "__annotations__", {}).values())
    return str(exc).split("\n", 1)[0]


def schemas_from_function(func: Callable[..., Any]) -> tuple[dict, dict | None]:
    """The input and output JSON Schemas pydantic derives from ``func``'s type hints
    (written out without pydantic when every hint and default is plain JSON data:
    :mod:`sophon_dsl.hint_schemas`)."""
    sig = inspect.signature(func)
    try:
        hints = get_type_hints(func, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolved forward references: fall back to untyped
        hints = {}
    plain = plain_schemas(func, sig, hints)
    return plain if plain is not None else pydantic_schemas(func, sig, hints)


def _plan_parameters(func: Callable[..., Any], sig: inspect.Signature) -> list[tuple[int, str, Any]]:
    """(position, name, parameter) of the arguments a plan gives: not ``*args``, ``**kwargs``
    nor the :class:`CallContext` the runtime passes."""
    runtime_only = context_parameter(func)
    return [(i, pname, param) for i, (pname, param) in enumerate(sig.parameters.items())
            if param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD) and pname != runtime_only]


def plain_schemas(func: Callable[..., Any], sig: inspect.Signature,
                  hints: dict) -> tuple[dict, dict | None] | None:
    """:func:`pydantic_schemas`'s result without pydantic, or None when a hint or a default
    is not plain JSON data (:mod:`sophon_dsl.hint_schemas`)."""
    from .hint_schemas import hint_schema, plain_default

    properties: dict[str, Any] = {}
    required = []
    for _, pname, param in _plan_parameters(func, sig):
        schema = hint_schema(hints.get(pname, Any))
        if schema is None:
            return None
        if param.default is param.empty:
            required.append(pname)
        elif plain_default(param.default):
            schema = dict(sorted({**schema, "default": param.default}.items()))
        else:
            return None
        properties[pname] = schema
    extra: Any = False
    for pname, param in sig.parameters.items():
        if param.kind is param.VAR_KEYWORD:
            ann = hints.get(pname, Any)
            extra = True if ann is Any or ann is object else hint_schema(ann)
            if extra is None:
                return None
            extra = extra or True
    output_schema = None
    if "return" in hints and hints["return"] is not type(None):
        output_schema = hint_schema(hints["return"])
        if output_schema is None:
            return None
    input_schema: dict[str, Any] = {"properties": properties}
    if required:
        input_schema["required"] = required
    input_schema["type"] = "object"
    input_schema["additionalProperties"] = extra
    return input_schema, output_schema


def pydantic_schemas(func: Callable[..., Any], sig: inspect.Signature,
                     hints: dict) -> tuple[dict, dict | None]:
    """The input and output JSON Schemas pydantic derives from ``func``'s type hints."""
    import pydantic

    from .typed_dicts import pydantic_ready  # (with pydantic: typing_extensions is slow to import)

    fields: dict[str, Any] = {}
    for i, pname, param in _plan_parameters(func, sig):
        ann = pydantic_ready(hints.get(pname, Any))  # a typing.TypedDict works before 3.12 too
        default = ... if param.default is param.empty else param.default
        # Fields get neutral names and the parameter's name as alias: pydantic takes a field
        # named `_from` for a private attribute and drops it, and `schema` shadows BaseModel.
        fields[f"p{i}"] = (typing.Annotated[ann, pydantic.Field(alias=pname)], default)
    model = pydantic.create_model(f"{func.__name__}_input", **fields)  # type: ignore[call-overload]
    input_schema = model.model_json_schema()
    input_schema.pop("title", None)
    for prop in input_schema.get("properties", {}).values():
        prop.pop("title", None)
    input_schema.setdefault("properties", {})
    input_schema["additionalProperties"] = _extra_arguments(sig, hints)
    output_schema = None
    if "return" in hints and hints["return"] is not type(None):
        output_schema = pydantic.TypeAdapter(pydantic_ready(hints["return"])).json_schema()
        output_schema.pop("title", None)
    return input_schema, output_schema


def _extra_arguments(sig: inspect.Signature, hints: dict) -> Any:
    """``additionalProperties`` of a tool's input: False, unless the function takes
    ``**kwargs``, which accepts any other argument (of its annotation's type, when given)."""
    import pydantic

    from .typed_dicts import pydantic_ready

    for pname, param in sig.parameters.items():
        if param.kind is param.VAR_KEYWORD:
            ann = hints.get(pname, Any)
            if ann is Any or ann is object:
                return True
            try:
                extra = pydantic.TypeAdapter(pydantic_ready(ann)).json_schema()
            except Exception:  # noqa: BLE001 - a type pydantic cannot describe: any value
                return True
            extra.pop("title", None)
            return extra or True
    return False


# Annotations whose values arrive from JSON as they are: no conversion needed
_JSON_NATIVE = frozenset({Any, object, str, int, float, bool, type(None), None, list, dict,
                          collections.abc.Sequence, collections.abc.MutableSequence,
                          collections.abc.Mapping, collections.abc.MutableMapping})
_TRANSPARENT = frozenset({typing.Union, types.UnionType, typing.Annotated, list, dict,
                          collections.abc.Sequence, collections.abc.MutableSequence,
                          collections.abc.Mapping, collections.abc.MutableMapping})


def _json_native(ann: Any) -> bool:
    """Whether a value of JSON data already is of type ``ann`` (str, list[int], dict | None...)."""
    if ann in _JSON_NATIVE:
        return True
    origin = typing.get_origin(ann)
    if origin is typing.Literal:
        return True
    if origin is typing.Annotated:
        return _json_native(typing.get_args(ann)[0])
    return origin in _TRANSPARENT and all(_json_native(a) for a in typing.get_args(ann))


class ArgumentConverter:
    """Turns a tool's JSON arguments into the Python types its parameters declare.

    Only parameters whose type JSON data is not already (a pydantic model, a dataclass,
    an enum, a datetime, a tuple, a list of models...) get a pydantic ``TypeAdapter``,
    built once per tool on the first call; the others pass as they are.
    """

    def __init__(self, fn: Callable[..., Any], tool_name: str):
        self.fn = fn
        self.tool_name = tool_name
        self._adapters: dict[str, Any] | None = None
        self._positional: tuple[str, ...] = ()

    def _build(self) -> dict[str, Any]:
        try:
            hints = get_type_hints(self.fn, include_extras=True)
        except Exception:  # noqa: BLE001 - unresolved forward references: nothing can be converted
            hints = {}
        sig = inspect.signature(self.fn)
        self._positional = tuple(n for n, p in sig.parameters.items()
                                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        runtime_only = context_parameter(self.fn)  # a CallContext, passed as it is
        wanted = {n: hints[n] for n, p in sig.parameters.items()
                  if n in hints and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                  and n != runtime_only and not _json_native(hints[n])}
        adapters: dict[str, Any] = {}
        if wanted:
            import pydantic

            from .typed_dicts import pydantic_ready

            for pname, ann in wanted.items():
                try:
                    adapters[pname] = pydantic.TypeAdapter(pydantic_ready(ann))
                except Exception:  # noqa: BLE001 - a type pydantic cannot validate: passed as it is
                    continue
        return adapters

    def convert(self, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
        adapters = self._adapters
        if adapters is None:
            adapters = self._adapters = self._build()
        if not adapters:
            return args, kwargs
        if args:
            args = tuple(self._one(self._positional[i], v) if i < len(self._positional) else v
                         for i, v in enumerate(args))
        return args, {k: self._one(k, v) for k, v in kwargs.items()}

    def _one(self, pname: str, value: Any) -> Any:
        adapter = self._adapters.get(pname) if self._adapters else None
        if adapter is None:
            return value
        import pydantic

        try:
            return adapter.validate_python(value)
        except pydantic.ValidationError as exc:
            from .runtime.errors import TOOL_INPUT_INVALID, RunError

            problems = "; ".join(
                ".".join(str(x) for x in (pname, *e["loc"])) + ": " + e["msg"] for e in exc.errors())
            raise RunError(TOOL_INPUT_INVALID, f"{self.tool_name}: {problems}") from None

    def wrap(self) -> Callable[..., Any]:
        """The function with its arguments converted.  One plain wrapper for sync and async
        functions alike: conversion is synchronous, and an ``async def`` tool's coroutine is
        returned as it is, so awaiting a call costs no extra coroutine (the runtime knows a
        tool is async from ``ToolSpec.is_async``).  A tool whose parameters need no
        conversion (the common case) calls straight through after the first call."""
        fn = self.fn

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            adapters = self._adapters
            if adapters is None:
                adapters = self._adapters = self._build()
            if adapters:
                args, kwargs = self.convert(args, kwargs)
            return fn(*args, **kwargs)

        return call


def tool(func: Callable[..., Any] | None = None, *, name: str | None = None,
         risk: str | Risk = Risk.NONE, description: str | None = None, idempotent: bool = False,
         input_schema: dict | None = None, output_schema: dict | None = None,
         resources: Mapping[str, float] | None = None, placement: str = "any",
         data_flow: str | None = None) -> Any:
    """Declare a Python function as a tool; usable bare (``@tool``) or with keywords.

    ``risk`` is a :class:`~sophon_dsl.model.Risk` or its name, case-insensitive.
    Explicit ``input_schema`` / ``output_schema`` override the ones derived from
    the type hints.  The derivation runs on the first read of a schema, not here: a
    hint pydantic cannot describe raises TypeError then.

    The tool's ``func`` converts the JSON arguments to the declared parameter types
    before calling ``func`` (a parameter typed as a pydantic model or a dataclass, or a
    list / dict / Optional of them, receives instances); a value that does not convert
    raises ``RunError("Tool.InputInvalid", ...)``.  ``func.__wrapped__`` is the function.
    ``idempotent=True`` declares the tool safe to run again (durable runs, docs/runtime.md).

    ``resources`` (``{"GPU": 1}``) and ``placement`` (``"any"``, or ``"local"``: never on a
    cluster) matter only with a tool executor (docs/scale-out.md).

    ``data_flow``: ``"local-source"`` when the result is data read from this machine (a
    file, a secret store), ``"network-sink"`` when the tool sends its arguments off the
    machine; the call gate asks before local data reaches a network sink (docs/security.md).
    """
    level = risk if isinstance(risk, Risk) else Risk.parse(risk)
    if placement not in ("any", "local"):
        raise OptionError(f"placement must be 'any' or 'local', not {placement!r}")
    if data_flow not in (None, "local-source", "network-sink"):
        raise OptionError(f"data_flow must be 'local-source', 'network-sink' or None, not {data_flow!r}")

    def wrap(fn: Callable[..., Any]) -> ToolSpec:
        tool_name = name or fn.__name__

        def schemas() -> tuple[dict | None, dict | None]:
            if input_schema is not None and output_schema is not None:
                return input_schema, output_schema
            try:
                derived_in, derived_out = schemas_from_function(fn)
            except Exception as exc:  # pydantic cannot describe a hint: say which tool, where and why
                raise OptionTypeError(f"@tool {name or getattr(fn, '__name__', fn)!r}: cannot build a JSON Schema "
                                      f"from the type hints: {_hint_problem(fn, exc)}") from exc
            return (input_schema if input_schema is not None else derived_in,
                    output_schema if output_schema is not None else derived_out)

        doc = inspect.getdoc(fn) or ""
        return ToolSpec.deferred(
            tool_name, schemas,
            description=description if description is not None else doc,
            risk=level,
            func=ArgumentConverter(fn, tool_name).wrap(),
            is_async=inspect.iscoroutinefunction(fn),
            context_param=context_parameter(fn),
            idempotent=idempotent,
            resources=dict(resources) if resources else None,
            placement=placement,
            data_flow=data_flow,
        )

    if func is not None:
        return wrap(func)
    return wrap


@runtime_checkable
class ToolSource(Protocol):
    """A lazy source of tools, as ``ToolRegistry(fallback=...)`` takes it (``stdlib_tools.source``
    is one): called, every tool; ``get(name)`` one tool or None, building only what it needs;
    ``names()`` their names, building nothing; ``origin`` the origin of its tools (``"stdlib"``:
    a given tool of the same name replaces a standard one, N201).  A plain callable returning
    every tool is a fallback too, built whole the first time a name is missing."""

    origin: str

    def __call__(self) -> Iterable[ToolSpec]: ...

    def get(self, name: str) -> ToolSpec | None: ...

    def names(self) -> Iterable[str]: ...


class ToolRegistry(Mapping[str, ToolSpec]):
    """An immutable name -> :class:`ToolSpec` mapping. Later additions replace earlier ones.

    ``fallback`` lazily supplies tools that sit *under* the given ones (the
    standard library), so plans that only use their own tools never pay for
    building it.  It is either a callable returning every such tool (called at
    most once, the first time a name is missing or the whole mapping is listed),
    or a *tool source*: that callable plus ``get(name)`` (one tool or None) and
    ``names()``, which the registry uses to look one name up or to tell which
    given tools replace fallback ones without building anything else.  A given
    tool with the same name as a fallback tool replaces it; :attr:`replaced`
    records each such pair once the fallback is built.
    """

    def __init__(self, tools: Iterable[ToolSpec] = (),
                 fallback: Callable[[], Iterable[ToolSpec]] | None = None):
        self._tools: dict[str, ToolSpec] = {}
        self._fallback = fallback
        self._prepared = False  # prepare_schemas ran
        self.replaced: list[tuple[ToolSpec, ToolSpec]] = []  # (old, new) pairs, for notes
        for t in tools:
            old = self._tools.get(t.name)
            if old is not None:
                self.replaced.append((old, t))
            self._tools[t.name] = t

    def _materialize(self) -> None:
        fallback, self._fallback = self._fallback, None
        if fallback is None:
            return
        under: dict[str, ToolSpec] = {}
        for t in fallback():
            under[t.name] = t
        for name, mine in self._tools.items():
            if name in under:
                self.replaced.append((under[name], mine))
        under.update(self._tools)
        self._tools = under

    def __getitem__(self, name: str) -> ToolSpec:
        try:
            return self._tools[name]
        except KeyError:
            if self._fallback is None:
                raise
        if not isinstance(self._fallback, ToolSource):
            self._materialize()
            return self._tools[name]
        spec = self._fallback.get(name)
        if spec is None:
            raise KeyError(name)
        return spec

    def __iter__(self):
        self._materialize()
        return iter(self._tools)

    def __len__(self) -> int:
        self._materialize()
        return len(self._tools)

    def given(self, name: str) -> ToolSpec | None:
        """The tool called ``name`` among those given, without looking in (or building) the
        fallback source; None when it is not one of them."""
        return self._tools.get(name)

    def prepare_schemas(self) -> None:
        """Derive the JSON Schemas of the given tools now, once per registry, so that a
        streamed turn's first call does not pay for pydantic in its dispatch path.  The
        fallback is left unbuilt; a tool whose hints have no schema raises where it is
        used, as before."""
        if self._prepared:
            return
        self._prepared = True
        for spec in list(self._tools.values()):
            try:
                spec.input_schema  # noqa: B018 - the first read of a deferred spec derives both
            except Exception:  # noqa: BLE001
                continue

    def with_tools(self, tools: Iterable[ToolSpec]) -> "ToolRegistry":
        reg = ToolRegistry([*self._tools.values(), *tools], fallback=self._fallback)
        reg.replaced = [*self.replaced, *reg.replaced]
        return reg

    def with_plan_decls(self, decls: Iterable[ToolDecl]) -> "ToolRegistry":
        """Add a plan's inline declarations; an existing implementation keeps its function."""
        specs = []
        for d in decls:
            spec = ToolSpec.from_decl(d)
            existing = self.get(d.name)
            if existing is not None and existing.func is not None:
                spec = replace(existing, input_schema=d.input_schema or existing.input_schema,
                               output_schema=d.output_schema or existing.output_schema)
            specs.append(spec)
        return self.with_tools(specs)

    def notes(self) -> list:
        """N201 notes for user tools that replace standard tools of the same name."""
        from .diagnostics import Diagnostic

        source = self._fallback
        if not isinstance(source, ToolSource):
            self._materialize()
            replacing = [new for old, new in self.replaced if old.origin == "stdlib"]
        else:  # a tool source says which names it has: nothing needs building
            under = set(source.names())
            standard = source.origin == "stdlib"
            replacing = [new for old, new in self.replaced if old.origin == "stdlib"]
            replacing += [new for name, new in self._tools.items() if standard and name in under]
        return [Diagnostic("N201", f"tool {new.name!r} ({new.origin}) replaces the standard tool of "
                                   "the same name") for new in replacing]


def stdlib_fallback(stdlib: Any = True) -> Callable[[], Iterable[ToolSpec]] | None:
    """The lazy source of standard tools for ``stdlib``: ``True`` (all, default config),
    ``False``/``None`` (none), a ``StdlibConfig``, group / tool names to pick, or a tool
    source of your own (anything callable).

    The standard library is a plugin: it is found by name through
    :mod:`sophon_dsl.stdlib_hook` (None when it is not installed), and builds each tool
    once per process and configuration.
    """
    if stdlib is None or stdlib is False:
        return None
    if callable(stdlib):
        return stdlib
    from .stdlib_hook import tool_source

    return tool_source(stdlib)


def as_registry(tools: Any, *, stdlib: Any = True) -> ToolRegistry:
    """Accept a registry, a mapping, an iterable of ToolSpec / functions / ToolDecl, or None.

    A :class:`ToolRegistry` is taken as it is: it already says exactly which tools
    exist.  Anything else is layered over the standard tool library (``stdlib``,
    see :func:`stdlib_fallback`), so its tools replace standard ones of the same name.
    """
    if isinstance(tools, ToolRegistry):
        return tools
    fallback = stdlib_fallback(stdlib)
    if tools is None:
        return ToolRegistry(fallback=fallback)
    if isinstance(tools, Mapping):
        items: Iterable[Any] = [
            v if isinstance(v, ToolSpec) else tool(v, name=k) if callable(v) else v
            for k, v in tools.items()
        ]
    elif isinstance(tools, (ToolSpec, ToolDecl)) or callable(tools):
        items = [tools]
    elif isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
        # a path or module name reaches here only past the public API's resolve_tools
        raise NotATool(f"tools must be a list of @tool functions / ToolSpecs, a mapping, a registry, "
                       f"or (through sophon_dsl.check / run / Agent) a path, module or declarations "
                       f"file; got {type(tools).__name__} {tools!r:.80}")
    else:
        items = tools
    specs = []
    for t in items:
        if isinstance(t, ToolSpec):
            specs.append(t)
        elif isinstance(t, ToolDecl):
            specs.append(ToolSpec.from_decl(t, origin="decl"))
        elif callable(t):
            specs.append(tool(t))
        else:
            raise NotATool(f"not a tool: {t!r:.80} ({type(t).__name__}); expected an @tool function, a "
                           f"ToolSpec, a ToolDecl, or a path / module of tools")
    return ToolRegistry(specs, fallback=fallback)
