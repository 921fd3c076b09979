"""What every layer needs to know about ``map`` (``spec/language.md``, "Map over a list").

A map call is a :class:`~sophon_dsl.model.Call` whose ``map`` holds a
:class:`~sophon_dsl.model.MapSpec`; its ``tool`` is :data:`MAP_TOOL` and its only
parameter is ``over`` (the list).  Inside the body three names are the item's own
(the *scope*): the item variable, the index variable and :data:`LOCAL`.  Everything
else a body reads is an *outer* read: the map call reads it too (so the checks and
the scheduler see it as the map's input), and waits for its writers.

At run time item *k* of map ``c3`` (its *item key* ``c3[k]``) has its own kinds, one per
scoped name, ``<name>@c3[k]`` (``text@c3[2]``, ``index@c3[2]``, ``local@c3[2]``, read as
the instance kinds ``state@X`` are); :func:`instantiate` rewrites a body call's scoped
references into them.  Body call ids are the call's label,
else its tool name (``translate``, then ``translate_2`` for the second call of the
same tool); an instance's id is ``<kind>.<body id>`` (``c3[2].translate``).
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, Callable, Iterable, Iterator

from .model import Call, ListValue, MapSpec, OutputTarget, Param, Reference, Value
from .values import map_references, references

__all__ = [
    "LOCAL",
    "MAP_TOOL",
    "body_ids",
    "every_call",
    "ItemTemplate",
    "instantiate",
    "item_kind",
    "known_calls",
    "make_map_call",
    "outer_reads",
    "scope_names",
    "tolerance_exceeded",
]

MAP_TOOL = "map"
LOCAL = "local"


def scope_names(spec: MapSpec) -> frozenset[str]:
    """The kinds a map's body reads as the item's own: the item, the index, ``local``."""
    return frozenset((spec.item, spec.index, LOCAL))


def outer_reads(spec: MapSpec) -> tuple[Reference, ...]:
    """The references of the body (nested maps included) that read outside the item."""
    scope = scope_names(spec)
    out: list[Reference] = []
    for call in spec.body:
        if call.map is not None:
            out.extend(r for r in references(call.map.over) if r.kind not in scope)
            out.extend(r for r in outer_reads(call.map) if r.kind not in scope)
        else:
            for p in call.params:
                out.extend(r for r in references(p.value) if r.kind not in scope)
        out.extend(r for r in references(call.inline_output) if r.kind not in scope)
    out.extend(r for r in references(spec.result) if r.kind not in scope)
    return tuple(out)


def body_ids(spec: MapSpec) -> list[str]:
    """Each body call's id within its item (see the module docstring)."""
    seen: dict[str, int] = {}
    out = []
    for call in spec.body:
        if call.id is not None:
            out.append(call.id)
            continue
        n = seen[call.tool] = seen.get(call.tool, 0) + 1
        out.append(call.tool if n == 1 else f"{call.tool}_{n}")
    return out


def make_map_call(spec: MapSpec, **fields: Any) -> Call:
    """The map call of ``spec`` (``fields``: output, id, after, ... as for any call)."""
    return Call(MAP_TOOL, (Param("over", spec.over, spec.over.span),), map=spec, **fields)


def item_kind(map_id: str, k: int) -> str:
    return f"{map_id}[{k}]"


def known_calls(calls: Iterable[Call], input: Any = None) -> int:
    """A lower bound of the calls a plan runs, known before it runs: each call, plus each map's
    items times its body when its list is a literal or a list in ``input`` (a list another
    call writes, or a nested map's list of the item, counts no items: not known yet)."""
    from .values import NotLiteral, literal_json

    total = 0
    for call in calls:
        total += 1
        spec = call.map
        if spec is None:
            continue
        over = spec.over
        try:
            value = literal_json(over)
        except NotLiteral:
            value = None
            if isinstance(over, Reference) and over.kind == "input" and over.query is None:
                value = input
                for step in over.path:
                    if isinstance(value, dict) and isinstance(step, str) and step in value:
                        value = value[step]
                    elif isinstance(value, list) and isinstance(step, int) and -len(value) <= step < len(value):
                        value = value[step]
                    else:
                        value = None
                        break
        if isinstance(value, list) and value:
            total += len(value) * known_calls(spec.body)
    return total


def tolerance_exceeded(spec: MapSpec, failed: int, total: int) -> bool:
    """Whether ``failed`` of ``total`` items are more than the map tolerates."""
    if failed == 0:
        return False
    if spec.tolerate is None and spec.tolerate_percent is None:
        return True
    if spec.tolerate is not None and failed > spec.tolerate:
        return True
    return spec.tolerate_percent is not None and failed * 100.0 > spec.tolerate_percent * total


# ---------------------------------------------------------------------------- instances

Subst = Callable[[Reference], Reference]
#: Where an item's value already is: (the item's name, kind, path), e.g. ``("text", "input",
#: ("texts", 2))`` for item 2 of a map over ``†input.texts``; then ``†text.title`` reads
#: ``†input.texts[2].title`` instead of a copy of the item stored for it (runtime/maps.py).
Source = "tuple[str, str, tuple] | None"


def _subst(names: dict[str, str], kind: str, source: Source = None) -> Subst:
    """``†<name>.path`` -> ``†<name>@<item key>.path`` for each scoped name (the item's
    name to where the item is, given ``source``)."""
    def fn(r: Reference) -> Reference:
        if r.kind not in names:
            return r
        if source is not None and r.kind == source[0]:
            return Reference(source[1], source[2] + r.path, r.span, r.query)
        return Reference(f"{r.kind}@{kind}", r.path, r.span, r.query)
    return fn


def _value(v: Value | None, fn: Subst) -> Value | None:
    return None if v is None else map_references(v, fn)


def _rewrite(call: Call, names: dict[str, str], kind: str, after: dict[str, str] | None,
             source: Source = None) -> Call:
    fn = _subst(names, kind, source)
    changes: dict[str, Any] = {}
    if call.map is not None:
        inner = call.map
        # a nested map's own names (and its `local`) shadow the outer item's
        kept = {n: s for n, s in names.items() if n not in scope_names(inner)}
        body, result = inner.body, inner.result
        if kept:
            src = source if source is not None and source[0] in kept else None
            body = tuple(_rewrite(b, kept, kind, None, src) for b in inner.body)
            result = _value(inner.result, _subst(kept, kind, src))
        spec = replace(inner, over=map_references(inner.over, fn), body=body, result=result)
        changes["map"] = spec
        changes["params"] = (Param("over", spec.over, spec.over.span),)
    elif call.params:
        changes["params"] = tuple([Param(p.name, map_references(p.value, fn), p.span) for p in call.params])
    if call.output is not None:
        out = call.output
        changes["output"] = replace(out, paths=tuple([fn(r) for r in out.paths]))
    if call.inline_output is not None:
        changes["inline_output"] = map_references(call.inline_output, fn)
    if after is not None and call.after:
        changes["after"] = tuple([after.get(a, a) for a in call.after])
    return replace(call, **changes)


def instantiate(spec: MapSpec, kind: str, ids: list[str]) -> tuple[list[Call], list[str], Value | None]:
    """The body calls of the item stored under ``kind``, their instance ids, and the
    item's result value, with the item's names rewritten into ``kind``."""
    return ItemTemplate(spec, ids).make(kind)


def _builder(cls: type, given: tuple[str, ...]) -> Callable[..., Any]:
    """``build(base, *given)``: a new ``cls`` node (a frozen, slotted model class) whose
    fields ``given`` are the arguments and every other field is ``base``'s (a tuple of the
    field values in order), each set through its slot.

    Generated once per class and fields, as ``dataclasses`` generates ``__init__``: that
    ``__init__`` sets each field through ``object.__setattr__`` (the class is frozen), which
    for a call's 22 fields costs about four times this, and an item builds a call, its
    output target and references for each body call."""
    names = [f.name for f in fields(cls)]
    env: dict[str, Any] = {"new": object.__new__, "cls": cls}
    lines = [f"def build(base, {', '.join(given)}):", "    node = new(cls)"]
    for n, name in enumerate(names):
        env[f"set_{name}"] = cls.__dict__[name].__set__  # the slot (or the class's own descriptor)
        lines.append(f"    set_{name}(node, {name if name in given else f'base[{n}]'})")
    lines.append("    return node")
    exec("\n".join(lines), env)  # source built above from the field names only
    return env["build"]


def _fields_of(node: Any) -> tuple:
    return tuple(getattr(node, f.name) for f in fields(node))


_build_param = _builder(Param, ("value",))
_build_target = _builder(OutputTarget, ("paths",))
_build_ref = _builder(Reference, ("kind",))
_build_ref_at = _builder(Reference, ("kind", "path"))


_CALL_FIELDS = tuple(f.name for f in fields(Call))
_FIXED = tuple(n for n in _CALL_FIELDS if n not in ("params", "output"))
_set_params = Call.__dict__["params"].__set__  # (the slots: Call is a slotted dataclass)
_set_output = Call.__dict__["output"].__set__
_item_classes: dict[tuple, type] = {}


_COMPARED = tuple(f.name for f in fields(Call) if f.compare)


def _as_call(node: Call) -> tuple:
    """Pickled (and copied) as the plain :class:`Call` it equals."""
    return Call, tuple(getattr(node, n) for n in _CALL_FIELDS)


def _equals(node: Call, other: object) -> Any:
    """Equal to any Call with equal fields (a dataclass compares only its own class)."""
    if not isinstance(other, Call):
        return NotImplemented
    return all(getattr(node, n) == getattr(other, n) for n in _COMPARED)


def _as_plain_call(cls: type, *args: Any, **kwargs: Any) -> Call:
    """An item call class called as a class (``dataclasses.replace`` of an item call): the
    plain :class:`Call` of those fields.  Its own instances are made by ``object.__new__``
    (:func:`_new_item_call`, the generated makers); without a ``__dict__`` (``__slots__ =
    ()``, as Call) its class attributes could not be set by an ``__init__``."""
    return Call(*args, **kwargs)


def _item_call_class(call: Call) -> type:
    """The class of the item calls made from body call ``call``: a subclass of :class:`Call`
    whose fields but ``params`` and ``output`` are class attributes holding ``call``'s values,
    so an item's call is two slot writes (:func:`_new_item_call`).  Call is frozen: its
    ``__init__`` sets each of its 22 fields through ``object.__setattr__``, which was the
    largest part of an item's cost.  Such a call is a Call (``isinstance``, ``fields``,
    ``replace``, which gives the plain Call, equal to another of its class with equal values; pickled
    as a plain Call; no ``__dict__``).
    One class per distinct body call (kept for the process; a nested map's items share it)."""
    fixed = tuple(getattr(call, n) for n in _FIXED)
    try:
        cls = _item_classes.get(fixed)
    except TypeError:  # an unhashable value (a model hint object): not shared
        cls = None
        fixed = None  # type: ignore[assignment]
    if cls is None:
        cls = type("ItemCall", (Call,), {**dict(zip(_FIXED, fixed or [getattr(call, n) for n in _FIXED])),
                                         "__reduce__": _as_call, "__eq__": _equals,
                                         "__hash__": Call.__hash__, "__module__": __name__,
                                         "__new__": _as_plain_call, "__slots__": ()})
        if fixed is not None and len(_item_classes) < 4096:
            _item_classes[fixed] = cls
    return cls


def _new_item_call(cls: type, params: tuple, output: OutputTarget | None) -> Call:
    node = object.__new__(cls)
    _set_params(node, params)
    _set_output(node, output)
    return node


class ItemTemplate:
    """:func:`instantiate` for many items of one map: what to rewrite in each body call
    is worked out once, so an item costs the new references and calls, little more."""

    __slots__ = ("spec", "ids", "names", "plans", "tails", "plain", "reads_index", "made")

    def __init__(self, spec: MapSpec, ids: list[str]) -> None:
        self.spec = spec
        self.ids = ids
        self.names = names = dict.fromkeys(scope_names(spec), "")
        self.plans = [self._plan(c, names) for c in spec.body]
        self.tails = ["." + b for b in ids]
        self.plain = all(p is not None for p in self.plans)  # no call needs the full rewrite
        # whether the item's index needs storing (most bodies never read it)
        self.reads_index = any(r.kind == spec.index for v in outer_values_all(spec) for r in references(v))
        self.made: dict[Any, Callable[..., Any]] = {}  # makers: with a source (False), without (True), "batch"

    @staticmethod
    def _plan(call: Call, names: dict[str, str]) -> Any:
        """None: rewrite the call in full (_rewrite); else the class of its item calls, and per
        parameter either the Param kept as is, or ``(param fields, reference fields)`` for a
        whole-value scoped reference, and the output paths likewise (a Reference kept, or
        its fields): an item builds only what names its own kinds."""
        plain = call.map is None and call.inline_output is None and not call.after
        if not plain:
            return None
        params: list[Any] = []
        for p in call.params:
            v = p.value
            if type(v) is Reference and v.kind in names and v.query is None:
                params.append((_fields_of(p), _fields_of(v)))
            elif any(r.kind in names for r in references(v)):
                return None
            else:
                params.append(p)
        target = None
        if call.output is not None:
            outs = tuple(_fields_of(r) if r.kind in names else r for r in call.output.paths)
            target = (_fields_of(call.output), outs)
        return _item_call_class(call), tuple(params), target

    def maker(self, with_source: bool) -> Callable[[str, Source], tuple[list[Call], list[str], Value | None]]:
        """:meth:`make` for items that all have a source (``with_source``) or none: the
        generated function itself when the body is plain."""
        if not self.plain:
            return self.make
        maker = self.made.get(not with_source)
        if maker is None:
            maker = self.made[not with_source] = _compile_maker(self, with_source)
        return maker

    def batch_maker(self) -> Callable[..., tuple[list[Call], list[str]]]:
        """The items' maker for many items read where they are stored, made in one call
        (``_compile_maker``'s ``batch``); for plain templates only."""
        assert self.plain
        maker = self.made.get("batch")
        if maker is None:
            maker = self.made["batch"] = _compile_maker(self, True, batch=True)
        return maker

    def make(self, kind: str, source: Source = None) -> tuple[list[Call], list[str], Value | None]:
        """Item ``kind``'s calls, their ids and its result value (``source``: where the
        item's value is, else it is read from ``<item>@<kind>``)."""
        if self.plain:
            maker = self.made.get(source is None)
            if maker is None:
                maker = self.made[source is None] = _compile_maker(self, source is not None)
            return maker(kind, source)
        spec, names = self.spec, self.names
        ids = [kind + t for t in self.tails]
        prefixed = None if self.plain else dict(zip(self.ids, ids))
        at = "@" + kind
        item = source[0] if source is not None else None
        calls = []
        for call, plan in zip(spec.body, self.plans):
            if plan is None:
                calls.append(_rewrite(call, names, kind, prefixed, source))
                continue
            cls, params, target = plan
            ps = tuple([p if type(p) is Param else
                        _build_param(p[0], _build_ref(p[1], p[1][0] + at) if p[1][0] != item else
                                     _build_ref_at(p[1], source[1], source[2] + p[1][1]))  # type: ignore[index]
                        for p in params])
            out = None
            if target is not None:
                out = _build_target(target[0], tuple([r if type(r) is Reference else _build_ref(r, r[0] + at)
                                                      for r in target[1]]))
            calls.append(_new_item_call(cls, ps, out))
        result = None if spec.result is None else _value(spec.result, _subst(names, kind, source))
        return calls, ids, result


_REF_FIELDS = tuple(f.name for f in fields(Reference))
_PARAM_FIELDS = tuple(f.name for f in fields(Param))
_TARGET_FIELDS = tuple(f.name for f in fields(OutputTarget))


def _compile_maker(template: ItemTemplate, with_source: bool, batch: bool = False) -> Callable[..., Any]:
    """``make(kind, source)`` for a template whose calls all have a plan (``template.plain``):
    what :meth:`ItemTemplate.make` does, unrolled into one generated function per map (as
    :func:`_builder`, every node set slot by slot, the body's values as constants), so an
    item pays no loop, test or helper call per node, only the nodes it builds.

    ``batch`` (items read where they are stored, ``with_source``): ``make_items(map_id, ks,
    src_kind, item_name, list_path, hidden_add, results) -> (calls, ids)``, the items ``ks``
    made in one loop inside the generated function (no call, argument tuple or result
    lists per item): their calls and ids one item after the other, as :meth:`make` for each
    with ``kind = f"{map_id}[{k}]"`` and ``source = (item_name, src_kind, (*list_path, k))``
    makes them, each item's local kind (``local@<kind>``) given to ``hidden_add`` and its
    result value (its local kind, else its ``return`` value) stored as ``results[k]``."""
    env: dict[str, Any] = {"new": object.__new__, "set_params": _set_params, "set_output": _set_output}
    ind = "        " if batch else "    "
    if batch:
        lines = ["def make_items(map_id, ks, src_kind, item_name, list_path, hidden_add, results):",
                 "    calls = []", "    ids = []", "    add_call = calls.append", "    add_id = ids.append",
                 "    for k in ks:", f"{ind}kind = f'{{map_id}}[{{k}}]'", f"{ind}at = '@' + kind",
                 f"{ind}src_path = (*list_path, k)"]
    else:
        lines = ["def make(kind, source):", "    at = '@' + kind"]
        if with_source:
            lines.append("    src_kind, src_path = source[1], source[2]")

    def const(value: Any) -> str:
        name = f"k{len(env)}"
        env[name] = value
        return name

    def node(cls: type, names: tuple[str, ...], base: tuple, given: dict[str, str]) -> str:
        var = f"n{len(lines)}"
        twin = _twin(cls, names)
        if twin is not None:  # its slots stored as plain attributes, then it becomes a cls
            lines.append(f"{ind}{var} = new({const(twin)})")
            for n, name in enumerate(names):
                lines.append(f"{ind}{var}.{name} = {given.get(name) or const(base[n])}")
            lines.append(f"{ind}{var}.__class__ = {const(cls)}")
            return var
        lines.append(f"{ind}{var} = new({const(cls)})")
        for n, name in enumerate(names):
            setter = f"set_{cls.__name__}_{name}"
            env.setdefault(setter, cls.__dict__[name].__set__)  # the slot (or the span property)
            lines.append(f"{ind}{setter}({var}, {given.get(name) or const(base[n])})")
        return var

    def ref(fields_: tuple) -> str:
        if with_source and fields_[0] == template.spec.item:  # read where the item is
            return node(Reference, _REF_FIELDS, fields_,
                        {"kind": "src_kind", "path": f"src_path + {const(fields_[1])}"})
        return node(Reference, _REF_FIELDS, fields_, {"kind": f"{const(fields_[0])} + at"})

    made = []
    for plan in template.plans:
        cls, params, target = plan
        ps = [const(p) if type(p) is Param else node(Param, _PARAM_FIELDS, p[0], {"value": ref(p[1])})
              for p in params]
        out = "None"
        if target is not None:
            paths = [const(r) if type(r) is Reference else ref(r) for r in target[1]]
            out = node(OutputTarget, _TARGET_FIELDS, target[0], {"paths": _tuple_text(paths)})
        var = f"c{len(made)}"
        lines += [f"{ind}{var} = new({const(cls)})", f"{ind}set_params({var}, {_tuple_text(ps)})",
                  f"{ind}set_output({var}, {out})"]
        made.append(var)
    ids = [f"kind + {const(t)}" for t in template.tails]
    result = "None"
    if template.spec.result is not None:
        env.update(value=_value, subst=_subst, names=template.names)
        where = "(item_name, src_kind, src_path)" if batch else "source"
        result = f"value({const(template.spec.result)}, subst(names, kind, {where}))"
    if batch:
        lines += [f"{ind}add_call({var})" for var in made]
        lines += [f"{ind}add_id({i})" for i in ids]
        lines += [f"{ind}local = {const(LOCAL)} + at", f"{ind}hidden_add(local)",
                  f"{ind}results[k] = {'local' if template.spec.result is None else result}",
                  "    return calls, ids"]
    else:
        lines.append(f"    return [{', '.join(made)}], [{', '.join(ids)}], {result}")
    source = "\n".join(lines)
    code = _maker_code.get(source)
    if code is None:  # compiling is most of a maker's cost (~0.15 ms): once per shape of body
        code = compile(source, "<map item maker>", "exec")
        if len(_maker_code) < 256:
            _maker_code[source] = code
    exec(code, env)  # source built above from field names and constants' names
    return env["make_items" if batch else "make"]


#: A maker's compiled source by its text: the text names the body's values (the
#: constants ``k<N>`` in its environment), never holds them, so maps of the same shape
#: (every run of one plan, the items of a nested map) share it.
_maker_code: dict[str, Any] = {}


_twins: dict[type, type | None] = {}


def _twin(cls: type, names: tuple[str, ...]) -> type | None:
    """A plain class with ``cls``'s slots (same names, same order, same layout), whose
    instances take their fields as ordinary attribute stores and then become ``cls``
    instances (``__class__`` assignment, which CPython allows between classes of one layout):
    a frozen dataclass's fields are otherwise set through one descriptor call each. None
    when ``cls`` is not a slotted class straight under ``object`` whose slots are ``names``."""
    if cls not in _twins:
        twin = None
        slots = cls.__dict__.get("__slots__")
        if cls.__bases__ == (object,) and slots is not None and tuple(slots) == names:
            twin = type(f"_{cls.__name__}Twin", (), {"__slots__": tuple(slots)})
            try:  # the layouts agree: one instance made and turned into cls
                probe = object.__new__(twin)
                probe.__class__ = cls
            except TypeError:
                twin = None
        _twins[cls] = twin
    return _twins[cls]


def _tuple_text(names: list[str]) -> str:
    return "(" + "".join(n + ", " for n in names) + ")"


def uses_value(spec: MapSpec) -> ListValue:
    """The outer reads as one list value (what a map waits for besides its list)."""
    return ListValue(outer_reads(spec))


def every_call(calls: Iterable[Call]) -> Iterator[Call]:
    """``calls`` and, after each map call, the calls of its body (nested maps' too, depth
    first): every call a plan may run, as written.  A body call runs once per item as an
    instance with the same tool and attributes, so whatever is decided before a run from
    the tools it calls (the executor preflight, dry-run's tool list) must see these too."""
    for call in calls:
        yield call
        if call.map is not None:
            yield from every_call(call.map.body)


def called_tools(calls: Any) -> list[str]:
    """The tools ``calls`` call, map bodies included (nested ones too), in order of first call."""
    return list(dict.fromkeys(call.tool for call in every_call(calls)))


def expansion(cid: str, records: Any, latency: Callable[[str], float], concurrency: int | None) -> dict:
    """What a map call ``cid`` expanded to in a run (dry-run's report): per item, its calls'
    ids and statuses, and a predicted duration: each item's calls one after the other, the
    items on ``concurrency`` slots (all at once when None), each in the first free slot."""
    head = cid + "["
    items: dict[int, list] = {}
    for rec in records:
        if rec.id.startswith(head):
            k = int(rec.id[len(head):rec.id.index("]", len(head))])
            items.setdefault(k, []).append(rec)
    durs = [sum(latency(r.id) for r in items[k]) for k in sorted(items)]
    slots = [0.0] * (min(concurrency, len(durs)) if concurrency else len(durs))
    for d in durs:
        j = slots.index(min(slots))
        slots[j] += d
    return {
        "id": cid,
        "items": [{"item": k, "calls": [{"id": r.id, "status": r.status} for r in items[k]]} for k in sorted(items)],
        "failed_items": sum(1 for k in items if any(r.status == "failed" for r in items[k])),
        "predicted": max(slots, default=0.0),
    }


def outer_values(spec: MapSpec) -> list[Value]:
    """The values of the body (nested maps included) that read outside the item, for the
    checks that look at values (E301, E306): a value reading nothing of the item whole (so
    ``†state.a || †state.b`` keeps its fallback), else its outer references one by one."""
    scope = scope_names(spec)
    out: list[Value] = []

    def add(v: Value | None, inner: frozenset[str] = frozenset()) -> None:
        if v is None or v.node_kind == "literal":
            return
        refs = list(references(v))
        mine = [r for r in refs if r.kind not in scope and r.kind not in inner]
        if len(mine) == len(refs):
            out.append(v)
        else:
            out.extend(mine)

    def walk(body: tuple, inner: frozenset[str]) -> None:
        for call in body:
            if call.map is not None:
                add(call.map.over, inner)
                walk(call.map.body, inner | scope_names(call.map))
                add(call.map.result, inner | scope_names(call.map))
                continue
            for p in call.params:
                add(p.value, inner)
            add(call.inline_output, inner)

    walk(spec.body, frozenset())
    add(spec.result)
    return out


def outer_values_all(spec: MapSpec) -> list[Value]:
    """Every value of the body (nested maps included) and its result: what the body reads."""
    out: list[Value] = []
    for call in spec.body:
        out.extend(p.value for p in call.params)
        if call.inline_output is not None:
            out.append(call.inline_output)
        if call.map is not None:
            out.extend(outer_values_all(call.map))
    if spec.result is not None:
        out.append(spec.result)
    return out


def plain_outer_reads(spec: MapSpec) -> list[Reference]:
    """The outer reads of the body that every item needs (not an operand of `||`): when one
    of them is broken before the map starts, the map is skipped like any call."""
    out: list[Reference] = []

    def walk_value(v: Any, scope: frozenset[str]) -> None:
        kind = v.node_kind
        if kind == "reference":
            if v.kind not in scope:
                out.append(v)
        elif kind == "list":
            for x in v.items:
                walk_value(x, scope)
        elif kind == "object":
            for _, x in v.entries:
                walk_value(x, scope)
        elif kind == "expression" and v.op == "&&":
            out.extend(r for r in v.operands if r.kind not in scope)
        elif kind == "template":
            out.extend(p for p in v.parts if type(p) is not str and p.kind not in scope)

    def walk(body: tuple, scope: frozenset[str]) -> None:
        for call in body:
            if call.map is not None:
                walk_value(call.map.over, scope)
                walk(call.map.body, scope | scope_names(call.map))
            else:
                for p in call.params:
                    walk_value(p.value, scope)

    walk(spec.body, scope_names(spec))
    return out
