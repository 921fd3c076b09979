"""What the language server knows about one plan text, without any LSP type.

:func:`analyse` loads the text and checks it through :func:`sophon_dsl.fullcheck.check_loaded`,
the path ``sophon-dsl check`` takes, so the editor shows exactly the CLI's codes, messages and
spans.  It then indexes the plan's reference occurrences (who writes and who reads each
path), which completion, hover, definition, references and rename answer from.

Positions here are the model's: 1-based lines and columns counted in characters (code
points); :mod:`.server` converts them to and from the client's units.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from ..diagnostics import CODES, Diagnostic, Span
from ..loader import parse
from ..values import references
from .incremental import DslReparser

if TYPE_CHECKING:  # (named in annotations only)
    from ..tools import ToolSpec

__all__ = ["Analysis", "Occurrence", "analyse"]

# the call attributes of the DSL (`@name(...)`), for completion after `@`
ATTRIBUTES: dict[str, str] = {
    "risk": "@risk(low|medium|high): the call's risk (approval)",
    "retry": "@retry(N) or @retry({max_attempts, interval, backoff_rate, ...})",
    "timeout": "@timeout(SECONDS)",
    "after": "@after(ID, ...): run after these calls (control edges)",
    "model": "@model({...}): a hint for the model that runs a latent call",
    "success": "@success(\"criterion\")",
    "activity": "@activity(NAME): the registered activity that implements the call",
    "instance": "@instance(\"①\"): route the call to an instance",
    "delegate": "@delegate(\"Agent\"): hand the call to a sub-agent",
    "scopes": "@scopes(state, input): the kinds the call may read",
    "reason": "@reason(\"why\"): the reasoning for the call",
    "outputMethod": "@outputMethod(set|assign|merge|concat|push)",
}
KEYWORDS = ("map", "return", "as")
_DAGGERS = "†$"


@dataclass(frozen=True)
class Occurrence:
    """One reference in the text: an output path (``write``) or a read."""

    key: tuple          # (kind, *path)
    span: Span          # just the reference's text (a template's reference narrowed to it)
    call: int           # index into Analysis.calls
    write: bool
    dagger: str = "†"


@dataclass
class _Index:
    calls: list[Any] = field(default_factory=list)      # every call, map bodies included
    call_ids: list[str] = field(default_factory=list)
    parents: list[int | None] = field(default_factory=list)  # a map body call's map
    occurrences: list[Occurrence] = field(default_factory=list)


@dataclass
class Analysis:
    text: str
    form: str
    file: str | None
    plan: Any
    diagnostics: list[Diagnostic]
    tools: Any                      # the ToolRegistry the plan was checked against (with its decls)
    lines: list[str] = field(default_factory=list)
    loaded_ok: bool = True
    # the calls and reference occurrences, gathered when a request first asks: publishing a
    # change's diagnostics needs none of them (a third of a re-check of 500 calls)
    _found: _Index | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def index(self) -> _Index:
        if self._found is None:
            found = _Index()
            _index(found, self.lines, self.plan.calls, None)
            self._found = found
        return self._found

    @property
    def calls(self) -> list[Any]:
        return self.index.calls

    @property
    def call_ids(self) -> list[str]:
        return self.index.call_ids

    @property
    def parents(self) -> list[int | None]:
        return self.index.parents

    @property
    def occurrences(self) -> list[Occurrence]:
        return self.index.occurrences

    # -- lookups -------------------------------------------------------------------

    def occurrence_at(self, line: int, column: int) -> Occurrence | None:
        for occ in self.occurrences:
            if _contains(occ.span, line, column):
                return occ
        return None

    def call_with_tool_at(self, line: int, column: int) -> int | None:
        for i, call in enumerate(self.calls):
            span = call.tool_span
            if span is not None and _contains(span, line, column):
                return i
        return None

    def writers_of(self, key: tuple) -> list[Occurrence]:
        """The output paths a read of ``key`` gets its value from: the same path, a prefix
        of it (the read is below what was written) or an extension (written piecewise)."""
        return [o for o in self.occurrences if o.write and _related(o.key, key)]

    def readers_of(self, key: tuple) -> list[Occurrence]:
        return [o for o in self.occurrences if not o.write and _related(o.key, key)]

    def state_paths(self, kind: str = "state") -> list[str]:
        seen: dict[str, None] = {}
        for o in self.occurrences:
            if o.write and o.key[0] == kind:
                for k in range(2, len(o.key) + 1):
                    seen.setdefault(_dotted(o.key[1:k]), None)
        return list(seen)

    def tool(self, name: str) -> Any:
        try:
            return self.tools.get(name) if self.tools is not None else None
        except Exception:  # noqa: BLE001 - a broken tool source: no tool, never a crash
            return None


def analyse(text: str, form: str, file: str | None, tools: Any, extra: Iterable[Diagnostic] = (),
            reparser: DslReparser | None = None) -> Analysis:
    """Load and check ``text`` (the form ``dsl``, ``json`` or ``yaml``) against ``tools``.

    ``reparser`` (the document's own, kept across its changes) parses a DSL text re-using
    the statements an edit did not touch; the plan it gives is the one a whole parse gives."""
    from ..fullcheck import check_loaded

    if reparser is not None and form == "dsl":
        loaded = reparser.parse(text, file)
    else:
        loaded = parse(text, form, file=file)
    diagnostics = list(extra) + check_loaded(loaded, tools=tools)
    plan = loaded.plan
    registry = tools
    if registry is not None and plan is not None and plan.tools:
        try:
            registry = registry.with_plan_decls(plan.tools)
        except Exception:  # noqa: BLE001
            pass
    return Analysis(text, form, file, plan, diagnostics, registry, lines=text.split("\n"), loaded_ok=loaded.ok)


def _index(ix: _Index, lines: list[str], calls: Iterable[Any], parent: int | None) -> None:
    n = 0
    for call in calls:
        n += 1
        i = len(ix.calls)
        ix.calls.append(call)
        ix.parents.append(parent)
        ix.call_ids.append(call.id or (f"c{n}" if parent is None else f"{ix.call_ids[parent]}.c{n}"))
        out = call.output
        if out is not None:
            for ref in out.paths:
                _add(ix, lines, ref, i, True)
        for p in call.params:
            for ref in references(p.value):
                _add(ix, lines, ref, i, False)
        if call.map is not None:
            _index(ix, lines, call.map.body, i)


def _add(ix: _Index, lines: list[str], ref: Any, call: int, write: bool) -> None:
    span = ref.span
    if span is None:
        return
    text = _slice(lines, span)
    dagger = text[:1]
    if dagger not in _DAGGERS:  # a reference inside a string (a template): find its own text
        needle = ref.text("†")
        at = text.find(needle)
        if at < 0 or span.line != span.end_line:
            return
        span = Span(span.line, span.column + at, span.line, span.column + at + len(needle))
        dagger = "†"
    ix.occurrences.append(Occurrence(ref.key, span, call, write, dagger))


# -- completion ------------------------------------------------------------------------

@dataclass(frozen=True)
class Completion:
    label: str
    kind: str              # "tool", "param", "path", "attribute", "keyword"
    detail: str = ""
    documentation: str = ""
    sort: str = ""
    insert: str | None = None
    replace_from: int | None = None   # 1-based column where the text it replaces starts


def complete(a: Analysis, line: int, column: int) -> list[Completion]:
    """What may be typed at (line, column): the column is the cursor's, 1-based."""
    row = a.lines[line - 1] if 0 < line <= len(a.lines) else ""
    before = row[:column - 1]
    m = re.search(r"([†$])([A-Za-z_]\w*)\.((?:[\w-]+\.)*)([\w-]*)$", before)
    if m:
        kind, prefix, partial = m.group(2), m.group(3), m.group(4)
        start = column - len(prefix) - len(partial)
        return _complete_paths(a, kind, prefix + partial, start)
    m = re.search(r"@(\w*)$", before)
    if m:
        return [Completion(name, "attribute", doc, insert=None, replace_from=column - len(m.group(1)))
                for name, doc in ATTRIBUTES.items() if name.startswith(m.group(1))]
    offset = _offset(a.lines, line, column)
    inside = _open_call(a.text, offset)
    m = re.search(r"([A-Za-z_][\w-]*)$", before)
    word = m.group(1) if m else ""
    if inside is not None:
        tool_name, at_name = inside
        if at_name:
            return _complete_params(a, tool_name, word, column - len(word))
        return []
    m = re.search(r"([A-Za-z_][\w.-]*)$", before)
    word = m.group(1) if m else ""
    out = _complete_tools(a, word, column - len(word))
    out += [Completion(k, "keyword", sort="z" + k, replace_from=column - len(word))
            for k in KEYWORDS if k.startswith(word)]
    return out


def _complete_paths(a: Analysis, kind: str, typed: str, start: int) -> list[Completion]:
    if kind == "input":
        paths = list(_schema_paths(a.plan.input_schema))
        detail = "input (the plan's input schema)"
    else:
        paths = [(p, "") for p in a.state_paths(kind)]
        if kind == "state":
            paths += [p for p in _schema_paths(a.plan.state_schema) if p[0] not in dict(paths)]
        detail = f"{kind} path"
    out = []
    for path, type_ in paths:
        if path.startswith(typed):
            writers = [a.call_ids[o.call] for o in a.writers_of((kind, *path.split(".")))]
            doc = f"written by {', '.join(dict.fromkeys(writers))}" if writers else ""
            out.append(Completion(path, "path", f"{detail}{': ' + type_ if type_ else ''}", doc,
                                  replace_from=start))
    return out


def _schema_paths(schema: Any, prefix: str = "", depth: int = 0) -> Iterator[tuple[str, str]]:
    if not isinstance(schema, dict) or depth > 8:
        return
    props = schema.get("properties")
    if not isinstance(props, dict):
        return
    for name, sub in props.items():
        path = f"{prefix}{name}"
        yield path, _type_text(sub)
        yield from _schema_paths(sub, path + ".", depth + 1)


def _complete_tools(a: Analysis, typed: str, start: int) -> list[Completion]:
    out = []
    for spec in _all_tools(a):
        if spec.name.startswith(typed):
            out.append(Completion(spec.name, "tool", _signature(spec), _tool_doc(spec), replace_from=start))
    return out


def _all_tools(a: Analysis) -> list[Any]:
    tools = a.tools
    if tools is None:
        return []
    try:
        return [tools[name] for name in tools]
    except Exception:  # noqa: BLE001
        return []


def _complete_params(a: Analysis, tool_name: str, typed: str, start: int) -> list[Completion]:
    spec = a.tool(tool_name)
    if spec is None:
        return []
    schema = _input_schema(spec)
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    required = set(schema.get("required", ())) if isinstance(schema, dict) else set()
    out = []
    for n, (name, sub) in enumerate(props.items()):
        if not name.startswith(typed):
            continue
        req = name in required
        out.append(Completion(name, "param", f"{_type_text(sub)}{' (required)' if req else ''}",
                              str(sub.get("description", "")) if isinstance(sub, dict) else "",
                              sort=f"{0 if req else 1}{n:04d}", insert=f"{name}=", replace_from=start))
    return out


def _open_call(text: str, offset: int) -> tuple[str, bool] | None:
    """(tool name, at a parameter name) when ``offset`` is inside a call's parentheses
    (strings and nested brackets skipped); None outside any call."""
    depth: list[tuple[str, int]] = []
    i, n = 0, min(offset, len(text))
    quote = None
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif ch in "([{":
            depth.append((ch, i))
        elif ch in ")]}" and depth:
            depth.pop()
        i += 1
    if quote or not depth or depth[-1][0] != "(":
        return None
    opened = depth[-1][1]
    m = re.search(r"([A-Za-z_][\w.-]*)\s*$", text[:opened])
    if m is None:
        return None
    since = text[opened + 1:n]
    last = max(since.rfind(","), -1)
    tail = since[last + 1:]
    return m.group(1), re.fullmatch(r"\s*[\w-]*", tail) is not None


# -- hover -----------------------------------------------------------------------------

def hover(a: Analysis, line: int, column: int) -> tuple[str, Span] | None:
    """Markdown for what is at (line, column), and the span it is about."""
    found = _hover_subject(a, line, column)
    codes = [d.code for d in a.diagnostics if d.span is not None and _contains(d.span, line, column)]
    if found is None:
        code = _code_at(a, line, column)
        return (explain(code[0]), code[1]) if code is not None else None
    text, span = found
    # the explanation of each diagnostic here, under what the thing is
    extra = [explain(c) for c in dict.fromkeys(codes)]
    return "\n\n---\n\n".join([text, *extra]), span


def _hover_subject(a: Analysis, line: int, column: int) -> tuple[str, Span] | None:
    occ = a.occurrence_at(line, column)
    if occ is not None:
        return _hover_reference(a, occ), occ.span
    i = a.call_with_tool_at(line, column)
    if i is not None:
        spec = a.tool(a.calls[i].tool)
        if spec is None:
            return f"unknown tool `{a.calls[i].tool}`", a.calls[i].tool_span
        return _tool_markdown(spec), a.calls[i].tool_span
    return None


def _hover_reference(a: Analysis, occ: Occurrence) -> str:
    key = occ.key
    text = f"{occ.dagger}{key[0]}" + "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in key[1:])
    lines = [f"`{text}`"]
    if occ.write:
        readers = a.readers_of(key)
        lines.append(f"written by **{a.call_ids[occ.call]}** (`{a.calls[occ.call].tool}`); "
                     f"read by {_call_list(a, readers) or 'no call'}")
    else:
        writers = a.writers_of(key)
        if writers:
            lines.append(f"written by {_call_list(a, writers)}")
        elif key[0] == "input":
            lines.append("from the plan's input")
        else:
            lines.append("no call in the plan writes it")
    type_ = _reference_type(a, key)
    if type_:
        lines.append(f"type: `{type_}`")
    return "\n\n".join(lines)


def _call_list(a: Analysis, occs: list[Occurrence]) -> str:
    seen = dict.fromkeys((a.call_ids[o.call], a.calls[o.call].tool, o.span.line) for o in occs)
    return ", ".join(f"**{cid}** (`{tool}`, line {line})" for cid, tool, line in seen)


def _reference_type(a: Analysis, key: tuple) -> str:
    schema = None
    if key[0] == "input":
        schema = _descend(a.plan.input_schema, key[1:])
    else:
        for o in a.writers_of(key):
            if len(o.key) > len(key):
                continue
            spec = a.tool(a.calls[o.call].tool)
            out = spec.output_schema if spec is not None else None
            schema = _descend(out, key[len(o.key):])
            if schema is not None:
                break
        if schema is None and key[0] == "state":
            schema = _descend(a.plan.state_schema, key[1:])
    return _type_text(schema) if schema is not None else ""


def _descend(schema: Any, path: tuple) -> Any:
    for seg in path:
        if not isinstance(schema, dict):
            return None
        if isinstance(seg, int):
            schema = schema.get("items")
        else:
            props = schema.get("properties")
            schema = props.get(seg) if isinstance(props, dict) else None
    return schema


def _code_at(a: Analysis, line: int, column: int) -> tuple[str, Span] | None:
    row = a.lines[line - 1] if 0 < line <= len(a.lines) else ""
    for m in re.finditer(r"\b[EWN]\d{3}\b", row):
        if m.start() < column <= m.end() + 1 and m.group() in CODES:
            return m.group(), Span(line, m.start() + 1, line, m.end() + 1)
    for d in a.diagnostics:
        if d.span is not None and _contains(d.span, line, column):
            return d.code, d.span
    return None


def explain(code: str) -> str:
    """The code's section of spec/diagnostics.md, or its title when the spec is not at hand."""
    text = _spec_sections().get(code)
    if text:
        return text
    severity, title = CODES.get(code, (None, ""))
    return f"**{code}** {title}"


@lru_cache(maxsize=1)
def _spec_sections() -> dict[str, str]:
    path = Path(__file__).resolve().parents[2] / "spec" / "diagnostics.md"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {}
    sections: dict[str, str] = {}
    for m in re.finditer(r"^#### ([EWN]\d{3})\b.*?(?=^#{2,4} |\Z)", text, re.M | re.S):
        sections[m.group(1)] = m.group(0).strip().replace("#### ", "**", 1).replace("\n", "**\n", 1)
    return sections


# -- tools -----------------------------------------------------------------------------

def _input_schema(spec: Any) -> Any:
    try:
        return spec.input_schema or {}
    except Exception:  # noqa: BLE001 - a tool whose hints have no schema
        return {}


def _signature(spec: Any) -> str:
    schema = _input_schema(spec)
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    required = set(schema.get("required", ())) if isinstance(schema, dict) else set()
    params = [f"{n}{'' if n in required else '?'}: {_type_text(s)}" for n, s in props.items()]
    try:
        out = spec.output_schema
    except Exception:  # noqa: BLE001
        out = None
    return f"{spec.name}({', '.join(params)})" + (f" -> {_type_text(out)}" if out else "")


def _tool_doc(spec: Any) -> str:
    return spec.description or ""


def tool_origin(spec: ToolSpec) -> tuple[str | None, int | None, str]:
    """(file, line, text) of where the tool comes from: its Python ``def``, else its origin."""
    func = spec.func
    if func is not None:
        try:
            target = inspect.unwrap(func)
            file = inspect.getsourcefile(target)
            lines, line = inspect.getsourcelines(target)
            # the `def` line, not the decorator's that getsourcelines starts at
            for k, row in enumerate(lines):
                if row.lstrip().startswith(("def ", "async def ")):
                    line += k
                    break
            return file, line, f"{file}:{line}"
        except (OSError, TypeError):
            pass
    return None, None, spec.origin or ""


def _tool_markdown(spec: ToolSpec) -> str:
    risk = spec.risk
    _, _, origin = tool_origin(spec)
    parts = [f"```\n{_signature(spec)}\n```"]
    if spec.description:
        parts.append(spec.description)
    meta = []
    meta.append(f"risk: **{risk.name.lower()}**")
    if spec.latent:
        meta.append("latent (run by an LLM)")
    meta.append(f"from: {origin or spec.origin} ({spec.origin})")
    parts.append(" · ".join(meta))
    return "\n\n".join(parts)


def _type_text(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    t = schema.get("type")
    if isinstance(t, list):
        return " | ".join(map(str, t))
    if t == "array":
        return f"list[{_type_text(schema.get('items'))}]"
    if t:
        return str(t)
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(_type_text(s) for s in schema[key])
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    return "any"


# -- definition, references, rename -----------------------------------------------------

def definition(a: Analysis, line: int, column: int) -> list[tuple[str | None, Span]]:
    """Where what is at (line, column) is defined: (file or None for this text, span)."""
    occ = a.occurrence_at(line, column)
    if occ is not None:
        if occ.write:
            return [(None, occ.span)]
        return [(None, o.span) for o in a.writers_of(occ.key)]
    i = a.call_with_tool_at(line, column)
    if i is None:
        return []
    name = a.calls[i].tool
    for decl in a.plan.tools if a.plan is not None else ():
        if decl.name == name and decl.span is not None:
            return [(None, decl.span)]
    spec = a.tool(name)
    if spec is None:
        return []
    file, src_line, _ = tool_origin(spec)
    if file is None:
        return []
    return [(file, Span(src_line, 1, src_line, 1))]


def find_references(a: Analysis, line: int, column: int, include_declaration: bool) -> list[Span]:
    occ = a.occurrence_at(line, column)
    if occ is None:
        return []
    out = [o.span for o in a.readers_of(occ.key)]
    if include_declaration:
        out = [o.span for o in a.writers_of(occ.key)] + out
    return out


def rename(a: Analysis, line: int, column: int, new_path: str) -> list[tuple[Span, str]] | None:
    """Edits renaming the path at (line, column) (its last segment's whole path, e.g.
    ``state.a.b``) in every writer and reader; None when there is nothing to rename or
    ``new_path`` is not a dotted path."""
    occ = a.occurrence_at(line, column)
    if occ is None or len(occ.key) < 2:
        return None
    new_path = new_path.strip()
    kind = occ.key[0]
    if new_path.startswith(tuple(f"{d}{kind}." for d in _DAGGERS)):
        new_path = new_path[len(kind) + 2:]
    if not re.fullmatch(r"[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)*", new_path):
        return None
    old = occ.key
    edits = []
    old_text = _dotted(old[1:])
    for o in a.occurrences:
        if o.key[:len(old)] != old:
            continue
        text = _slice(a.lines, o.span)
        head = f"{o.dagger}{kind}.{old_text}"
        if not text.startswith(head):
            continue
        rest = text[len(head):]
        if rest and rest[0] not in ".[":
            continue
        edits.append((Span(o.span.line, o.span.column, o.span.line, o.span.column + len(head)),
                      f"{o.dagger}{kind}.{new_path}"))
    return edits


# -- symbols, formatting, code actions ---------------------------------------------------

@dataclass
class Symbol:
    name: str
    detail: str
    span: Span
    selection: Span
    children: list["Symbol"] = field(default_factory=list)


def symbols(a: Analysis) -> list[Symbol]:
    made: dict[int, Symbol] = {}
    top: list[Symbol] = []
    for i, call in enumerate(a.calls):
        span = call.span or call.tool_span
        if span is None:
            continue
        sel = call.tool_span or span
        out = call.output
        detail = call.tool + (f" -> {' / '.join(r.text() for r in out.paths)}" if out else "")
        sym = Symbol(a.call_ids[i], detail, span, sel)
        made[i] = sym
        parent = a.parents[i]
        (made[parent].children if parent is not None and parent in made else top).append(sym)
    return top


def formatted(a: Analysis) -> str | None:
    """The text in ``fmt``'s layout, or None when the plan does not load (fmt refuses it too)."""
    from ..loader import dumps

    if not a.loaded_ok:
        return None
    try:
        text = dumps(a.plan, a.form)
    except Exception:  # noqa: BLE001 - a plan the printer cannot render: no edit
        return None
    return text if text.endswith("\n") else text + "\n"


_DID_YOU_MEAN = re.compile(r"'([^']+)'.*?did you mean '([^']+)'\??", re.S)


def quick_fixes(a: Analysis, diagnostics: Iterable[Diagnostic]) -> list[tuple[Diagnostic, Span, str, str]]:
    """(diagnostic, span to replace, replacement, title) for each did-you-mean fix."""
    out = []
    for d in diagnostics:
        m = _DID_YOU_MEAN.search(d.message)
        if m is None or d.span is None:
            continue
        old, new = m.group(1), m.group(2)
        text = _slice(a.lines, d.span)
        at = text.find(old)
        if at < 0:  # a path given without its dagger in the message
            continue
        start = _advance(d.span.line, d.span.column, text[:at])
        end = _advance(start[0], start[1], old)
        out.append((d, Span(start[0], start[1], end[0], end[1]), new, f"Change to '{new}'"))
    return out


# -- helpers ---------------------------------------------------------------------------

def _contains(span: Span, line: int, column: int) -> bool:
    return (span.line, span.column) <= (line, column) <= (span.end_line, span.end_column)


def _related(a: tuple, b: tuple) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _dotted(path: Iterable[Any]) -> str:
    return ".".join(str(p) for p in path)


def _slice(lines: list[str], span: Span) -> str:
    if span.line == span.end_line:
        row = lines[span.line - 1] if 0 < span.line <= len(lines) else ""
        return row[span.column - 1:span.end_column - 1]
    rows = lines[span.line - 1:span.end_line]
    if not rows:
        return ""
    rows[0] = rows[0][span.column - 1:]
    rows[-1] = rows[-1][:span.end_column - 1] if len(rows) > 1 else rows[-1]
    return "\n".join(rows)


def _advance(line: int, column: int, text: str) -> tuple[int, int]:
    for ch in text:
        if ch == "\n":
            line, column = line + 1, 1
        else:
            column += 1
    return line, column


def _offset(lines: list[str], line: int, column: int) -> int:
    return sum(len(r) + 1 for r in lines[:line - 1]) + column - 1
