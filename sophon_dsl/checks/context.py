"""What every rule of one check run shares: the plan, the tools, the data flow, the caches,
and the diagnostics found so far.

Per tool, the context computes once what the checks of its calls need (a
:class:`ToolTable`), and per list of parameter names one :class:`Signature`
(missing required names, and for each parameter its declared schema entry or
:data:`UNKNOWN_PARAM`).  ``sigs[i]`` is call ``i``'s signature; calls with the
same tool and parameter names share one, so a rule that finds nothing to say
about a signature says nothing for any of those calls.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..dataflow import BUILTIN_KINDS, DataFlow, base_kind
from ..diagnostics import Diagnostic, Span
from ..model import Call, Plan, Reference
from ..tools import ToolRegistry
from ..outputpath import parameter_schema
from .schema import is_closed, pattern_allows, schema_has_path

__all__ = [
    "SRC_ALWAYS",
    "SRC_INPUT_SCHEMA",
    "SRC_UNKNOWN",
    "SRC_WRITER",
    "SRC_WRITER_OR_SCHEMA",
    "UNKNOWN_PARAM",
    "CheckContext",
    "ParamEntry",
    "Signature",
    "ToolTable",
]

# How a read of a reference kind finds its source (E301 / W303), decided once per kind.
SRC_WRITER = 0            # another call writes it (data, declared kinds, state without schema)
SRC_WRITER_OR_SCHEMA = 1  # state with a state schema: a writer, else the schema has the path
SRC_ALWAYS = 2            # input without an input schema: anything may be passed
SRC_INPUT_SCHEMA = 3      # input with an input schema: the schema has the path
SRC_UNKNOWN = 4           # not a known kind (E306)

UNKNOWN_PARAM: Any = object()  # a parameter name the closed input schema does not allow (E203)


class ParamEntry:
    """A declared parameter: its schema, the fast literal check, the JSON types it
    accepts and the Python types of the scalar literals it accepts whatever their value
    (``schema.literal_types``; each computed on first use, False until then)."""

    __slots__ = ("name", "pschema", "fast", "types", "literal_types")

    def __init__(self, name: str, pschema: Any) -> None:
        self.name = name
        self.pschema = pschema
        self.fast: Any = False
        self.types: Any = False
        self.literal_types: Any = False


class ToolTable:
    """One tool as the checks see it: its spec (None: unknown tool), its input schema
    (None when not a dict: no parameter checks), properties, required names, whether
    unknown names are errors, and the entries and signatures made so far."""

    __slots__ = ("spec", "schema", "props", "required", "strict", "typed", "latent", "entries", "sigs",
                 "bare")

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self.props: dict = {}
        self.required: tuple[str, ...] = ()
        self.strict = False
        self.typed = False
        self.latent = True if spec is None else spec.latent
        self.entries: dict[str, Any] = {}
        self.sigs: dict[tuple[str, ...], Signature] = {}
        # ``_outputPath`` there describes the call's output path, not a parameter (Acts 008)
        schema = parameter_schema(spec.input_schema) if spec is not None else None
        self.schema = schema if isinstance(schema, dict) else None
        if self.schema is not None:
            props = schema.get("properties")
            self.typed = isinstance(props, dict)
            self.props = props if self.typed else {}
            req = schema.get("required")
            self.required = tuple(req) if isinstance(req, (list, tuple)) else ()
            self.strict = is_closed(schema)
        self.bare = Signature(self, (), None)  # the signature of every call when schema is None

    def signature(self, names: tuple[str, ...]) -> "Signature":
        sig = self.sigs.get(names)
        if sig is None:
            given = set(names)
            missing = tuple(name for name in self.required if name not in given)
            sig = self.sigs[names] = Signature(self, missing, tuple(self.entry(n) for n in names))
        return sig

    def entry(self, name: str) -> Any:
        """A :class:`ParamEntry`, ``UNKNOWN_PARAM`` (E203) or None (allowed, undeclared)."""
        cache = self.entries
        e = cache.get(name, cache)
        if e is cache:
            pschema = self.props.get(name)
            if pschema is not None:
                e = ParamEntry(name, pschema)
            elif self.strict and not pattern_allows(self.schema, name):  # type: ignore[arg-type]
                e = UNKNOWN_PARAM
            else:
                # an undeclared name is checked against additionalProperties when that is a
                # schema (a tool's `**kwargs: int`) and no patternProperties could claim it
                extra = self.schema.get("additionalProperties") if self.schema is not None else None
                e = (ParamEntry(name, extra) if isinstance(extra, dict) and extra
                     and "patternProperties" not in self.schema else None)
            cache[name] = e
        return e


class Signature:
    """One tool called with one list of parameter names: ``missing`` required names;
    ``entries`` one per parameter (None: no schema to check against); ``declared``
    the ``(position, ParamEntry)`` pairs whose values have a schema; ``clean`` when
    the tool is known and no name is missing or unknown."""

    __slots__ = ("tab", "missing", "entries", "declared", "clean")

    def __init__(self, tab: ToolTable, missing: tuple[str, ...], entries: tuple | None) -> None:
        self.tab = tab
        self.missing = missing
        self.entries = entries
        es = entries or ()
        self.declared = tuple((k, e) for k, e in enumerate(es) if e is not None and e is not UNKNOWN_PARAM)
        self.clean = tab.spec is not None and not missing and UNKNOWN_PARAM not in es


class CheckContext:
    """The shared state of one check run (see the module docstring).

    ``calls`` and ``ids`` are the flow's lists (they grow as calls arrive);
    ``output`` is the plan's output value once known; ``diags`` the diagnostics
    found, and ``diag_calls`` the call index each belongs to (None: the plan).
    ``incremental`` is true once calls arrive one at a time.
    """

    def __init__(self, plan: Plan, tools: ToolRegistry, flow: DataFlow, *, max_calls: int | None = None,
                 require_executor: bool = False, require_implementations: bool = False) -> None:
        self.plan = plan
        self.tools = tools
        self.flow = flow
        self.calls: list[Call] = flow.calls
        self.ids: list[str] = flow.ids
        self.max_calls = max_calls
        self.require_executor = require_executor
        self.require_implementations = require_implementations
        self.incremental = False
        self.output: Any = None
        self.diags: list[Diagnostic] = []
        self.diag_calls: list[int | None] = []
        self.sigs: list[Signature] = []
        self._topo: tuple[tuple[int, ...], bool] | None = None
        self.set_header(plan, tools)

    def set_header(self, plan: Plan, tools: ToolRegistry) -> None:
        """Use a new header (schemas, mode, declared tools): every cache is dropped."""
        self.plan = plan
        self.tools = tools
        self.tables: dict[str, ToolTable] = {}
        self.modes: dict[str, int] = {}
        self.path_ok: dict[tuple, bool] = {}
        self.cache: dict[Any, Any] = {}  # rules' own caches, keyed by (rule name, ...)

    # -- diagnostics -------------------------------------------------------------

    def diag(self, code: str, message: str, span: Span | None, related: Iterable[str] = (), *,
             call: int | None = None, data: dict | None = None) -> None:
        paths = self.plan.span_paths
        path = paths.get(span) if paths and span is not None else None
        self.diags.append(Diagnostic(code, message, span, self.plan.file, path, None, tuple(related), data))
        self.diag_calls.append(call)

    def loc(self, i: int) -> str:
        c = self.calls[i]
        span = c.span or c.tool_span
        if span is None:
            return f"call #{i + 1}"
        return f"{self.plan.file or '<plan>'}:{span.line}:{span.column}"

    def call_span(self, i: int) -> Span | None:
        c = self.calls[i]
        return c.tool_span or c.span

    # -- tools -------------------------------------------------------------------

    def table(self, name: str) -> ToolTable:
        tab = self.tables.get(name)
        if tab is None:
            tab = self.tables[name] = ToolTable(self.tools.get(name))
        return tab

    def note_calls(self, start: int) -> None:
        """Compute the signatures of calls ``start`` and later."""
        tables, sigs = self.tables, self.sigs
        for call in self.calls[start:]:
            tab = tables.get(call.tool)
            if tab is None:
                tab = self.table(call.tool)
            if tab.schema is None:
                sigs.append(tab.bare)
            else:
                ps = call.params
                n = len(ps)  # (a tuple of up to two names built directly: most calls have one or two)
                names = (ps[0].name, ps[1].name) if n == 2 else (ps[0].name,) if n == 1 else \
                    tuple([p.name for p in ps])
                sig = tab.sigs.get(names)
                sigs.append(sig if sig is not None else tab.signature(names))

    # -- reads -------------------------------------------------------------------

    def known_kind(self, kind: str) -> bool:
        return base_kind(kind) in BUILTIN_KINDS or kind in self.flow.writers.kinds

    def kind_mode(self, kind: str) -> int:
        """How a read of ``kind`` finds its source: see the ``SRC_*`` constants."""
        mode = self.modes.get(kind)
        if mode is not None:
            return mode
        base = base_kind(kind)
        if base not in BUILTIN_KINDS and kind not in self.flow.writers.kinds:
            return SRC_UNKNOWN  # not cached: a later call may write the kind
        if base == "input":
            mode = SRC_ALWAYS if self.plan.input_schema is None else SRC_INPUT_SCHEMA
        elif base == "state" and self.plan.state_schema is not None:
            mode = SRC_WRITER_OR_SCHEMA
        else:
            mode = SRC_WRITER
        self.modes[kind] = mode
        return mode

    def sourced(self, ref: Reference, ws: tuple[int, ...]) -> bool:
        """Whether a read of ``ref`` whose other writers are ``ws`` has a source:
        ``known_kind(ref.kind) and has_source(ref, reader)``, from the flow's wiring."""
        if ws:
            return True  # a writer is a source for every kind that can have one
        mode = self.kind_mode(ref.kind)
        if mode == SRC_WRITER or mode == SRC_UNKNOWN:
            return False
        if mode == SRC_ALWAYS:
            return True
        schema = self.plan.state_schema if mode == SRC_WRITER_OR_SCHEMA else self.plan.input_schema
        ck = (mode, ref.path)
        ok = self.path_ok.get(ck)
        if ok is None:
            ok = self.path_ok[ck] = schema_has_path(schema, schema, ref.path)
        return ok

    def has_source(self, ref: Reference, reader: int | None) -> bool:
        """Whether something other than call ``reader`` provides ``ref`` (a writer, or the
        plan's input / state schema), from the writer index."""
        kind = base_kind(ref.kind)
        if kind == "input":
            schema = self.plan.input_schema
            return schema is None or schema_has_path(schema, schema, ref.path)
        key = ref.key
        wi = self.flow.writers
        w = wi.exact
        for k in range(1, len(key) + 1):
            for j, _ in w.get(key[:k], ()):
                if j != reader:
                    return True
        for j, _ in wi.below.get(key, ()):
            if j != reader:
                return True
        if kind == "state" and self.plan.state_schema is not None:
            schema = self.plan.state_schema
            return schema_has_path(schema, schema, ref.path)
        return False

    # -- order -------------------------------------------------------------------

    def topo(self) -> tuple[tuple[int, ...], bool]:
        """The flow's topological order and whether it has a cycle (computed once)."""
        if self._topo is None:
            self._topo = self.flow.topo_order()
        return self._topo
