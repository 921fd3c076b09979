"""Re-parsing only the statements an edit touched (issue 28 item 2: a change to a 500-call
plan re-checked within 100 ms).

Parsing is nine tenths of a re-check of a DSL plan, and an edit touches one statement of
hundreds.  :class:`DslReparser` cuts the text into *segments* at line starts where a new
top-level statement begins (bracket depth 0, the line before not a decorator or a label
waiting for its call), each segment carrying the comment and blank lines above its first
statement.  A segment is parsed alone (``parse_dsl(..., first_line=N)``) and its result is
kept by its text: the next check parses only the segments whose text changed, moves the
others to their new line if lines were added or removed above them, and joins the pieces
into the :class:`~sophon_dsl.model.Plan` a whole parse gives.

Moving a segment touches none of its nodes: when a clean segment first moves, every span
field of it is made to hold a :class:`_Shifted` (the model's ``DeferredSpans``): the span
it was parsed with, read through the segment's :class:`_Anchor`; a move is one addition to
the anchor.  Enter near the top of a 500-call plan so costs what typing a character does
(copying every node below with its spans moved cost about 30 ms).  The price: the plan of
the previous text shares those nodes, so its spans are the new text's once the next parse
has run; a plan is the text's until the reparser parses another (the server replaces a
document's analysis with each parse; a caller that keeps one longer copies it first).

Why the join is exact: the post-lexer turns a newline at bracket depth 0 into the one
statement separator and the grammar lets a statement go on over a line end only after a
decorator or a label (or inside brackets), so a cut before a line that starts a statement
at depth 0 separates the same statements the whole parse separates.  The cut is a guess
made from a cheap scan (strings and comments skipped); a wrong guess leaves a segment that
does not parse alone (an unclosed bracket, a decorator with no call).  A segment with a
syntax error is joined as parsed alone only when it parses with the next segment as the
two do apart (the whole parse resumes after an error at the next statement's line, so the
next segment then starts afresh in both); every case the join cannot reproduce is handed
to the whole parse instead:

* a broken segment that is the first, has comments, a map body, or does not end where
  its last statement ends; ten errors and more; a source over the size limits, a BOM;
* a header field, a tool declaration or ``return`` given in two segments (the whole
  parse reports the duplicate or refines the declaration);
* comments above the first statement of a later segment that belong to a header field
  (parsed alone they would open the file; for calls, tools and ``return`` they are moved
  to the statement, as the whole parse attaches them).

``tests/lsp/test_incremental.py`` holds the join to the whole parse on random edits
(hypothesis), diagnostics after the checks included.
"""

from __future__ import annotations

import dataclasses
import operator
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..diagnostics import Diagnostic, Span
from ..loader import LoadResult, parse
from ..model import DeferredSpans, Mode, Plan, defer_span, span_fields
from ..syntax.dsl_parser import HEADER_FIELDS, parse_dsl
from ..syntax.json_source import size_problem

__all__ = ["DslReparser", "segments"]

# what may open a top-level statement in column 1: a name (call, label, header field,
# tool declaration, return), a quoted tool name, a decorator, an output reference
_STARTS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_\"'@$†")
# strings and a comment, which may hold any bracket
_QUOTED = re.compile(r""""[^"\\\n]*(?:\\.[^"\\\n]*)*"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'|#.*""")
# a line of prefixes only: the statement goes on with the call on the next line
_PREFIXES_ONLY = re.compile(r"^(?:\s*(?:@[A-Za-z_]\w*(?:\s*\([^#]*\))?|[A-Za-z_][\w-]*\s*:))+\s*(?:#.*)?$")
# a header field statement (`goal = ...`) at a line start or after `;`: a false positive (a
# parameter on its own line) only costs a whole parse when the name shows in two segments
_HEADER = re.compile(r"(?:^|;)[ \t]*(" + "|".join(HEADER_FIELDS) + r")[ \t]*=(?!=)", re.MULTILINE)
_MAX_CACHED = 20_000  # segments kept (two versions of a 10k-statement plan)
_MAX_BROKEN = 10      # syntax errors joined at most (the whole parse stops after 50)
_MAP_BODY = re.compile(r"\)\s*\{")


def segments(text: str) -> list[tuple[int, str]]:
    """``(first line, text)`` of each segment, in order; joined by newlines they are ``text``."""
    lines = text.split("\n")
    # each line without its strings and comment, in one pass over the text (no match of
    # _QUOTED crosses a line end, so its lines are the text's, line for line)
    codes = _QUOTED.sub("", text).split("\n")
    cuts = [0]
    depth = 0
    last_code = -1          # index of the last line with code (not blank, not only a comment)
    waiting = False         # the last code line was prefixes only (`@risk(high)`, `s1:`)
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        if not stripped or stripped[0] == "#":
            continue
        if depth == 0 and not waiting and last_code >= 0 and line[0] in _STARTS:
            cuts.append(last_code + 1)  # the comments and blank lines above go with the statement
        # the depth counted on the code (C-speed counts; a stray closer miscounted only makes
        # a segment that does not parse alone)
        code = codes[i]
        depth += code.count("(") + code.count("[") + code.count("{") \
            - code.count(")") - code.count("]") - code.count("}")
        if depth < 0:
            depth = 0
        waiting = depth == 0 and (stripped[0] == "@" or ":" in code) and _PREFIXES_ONLY.match(line) is not None
        last_code = i
    cuts.append(len(lines))
    return [(cuts[k] + 1, "\n".join(lines[cuts[k]:cuts[k + 1]])) for k in range(len(cuts) - 1)
            if cuts[k] < cuts[k + 1]]


@dataclass
class _Piece:
    text: str                   # the segment's text
    line: int
    plan: Plan
    clean: bool                 # no diagnostics
    headers: frozenset[str]     # header field names the segment may set
    diags: tuple = ()           # a broken segment's diagnostics, at its place in the text
    joinable: bool = True       # False: a broken segment the join cannot place (see _broken_ok)
    anchor: "_Anchor | None" = None  # a clean segment's spans, read relative to its line (_moved)
    fixed: bool = False         # its spans could not be put behind an anchor
    calls_only: bool = field(init=False)  # clean, calls and nothing else: joined by extending the calls

    def __post_init__(self) -> None:
        p = self.plan
        self.calls_only = (self.clean and not self.headers and not p.tools and p.output is None
                           and p.mode is Mode.EAGER and p.goal is None and p.id is None and p.input_schema is None
                           and p.state_schema is None and p.output_schema is None and not p.comments
                           and not p.field_comments and not p.trailing_comments)


class _Anchor:
    """The lines a clean segment moved since it was parsed, shared by every span of it."""

    __slots__ = ("offset",)

    def __init__(self) -> None:
        self.offset = 0


class _Shifted(DeferredSpans):
    """A span field of a clean segment's node: the span it was parsed with, moved by the
    segment's anchor when read (the last answer kept: the checks read a span more than once)."""

    __slots__ = ("anchor", "span", "seen", "moved")

    def __init__(self, anchor: _Anchor, span: Any) -> None:
        self.anchor = anchor
        self.span = span    # a Span, or attr_spans' tuple of (name, Span)
        self.seen = 0
        self.moved = span

    def resolve(self, node: Any, name: str) -> Any:
        off = self.anchor.offset
        if off != self.seen:
            span = self.span
            if isinstance(span, Span):
                self.moved = Span(span.line + off, span.column, span.end_line + off, span.end_column)
            else:
                self.moved = tuple((k, Span(s.line + off, s.column, s.end_line + off, s.end_column))
                                   for k, s in span)
            self.seen = off
        return self.moved

    def __reduce__(self):
        # a node is copied or pickled with its spans read (dataclass slots state), never this
        return (type(None), ())


class DslReparser:
    """One open document's parser: :meth:`parse` is :func:`sophon_dsl.loader.parse` for a
    DSL text, re-using the segments of the previous texts that did not change.  The plan
    it returns holds the spans of that text until the next :meth:`parse` (segments that
    moved are moved in place: see the module docstring)."""

    def __init__(self) -> None:
        self._pieces: dict[str, _Piece] = {}
        self._pairs: dict[tuple, bool] = {}  # (broken segment, next one, line) -> joinable
        self.reused = 0     # segments taken from the cache by the last parse (benchmarks read it)
        self.parsed = 0     # segments parsed by the last parse; -1 when it parsed the whole text

    def parse(self, text: str, file: str | None = None) -> LoadResult:
        joined = self._join(text, file)
        if joined is None:
            self.parsed = -1
            return parse(text, "dsl", file=file)
        return joined

    def _piece(self, line: int, seg: str, file: str | None, fresh: dict[str, _Piece]) -> _Piece:
        twin = fresh.get(seg)   # the same text earlier in this text: its nodes are taken
        piece = twin or self._pieces.get(seg)
        if piece is not None and piece.line == line:
            self.reused += 1
            return piece
        if twin is None and piece is not None and piece.clean and _moved(piece, line):
            self.reused += 1
            return piece
        if piece is not None and piece.clean:
            self.reused += 1
            return _Piece(seg, line, _Mover(line - piece.line).move(piece.plan), True, piece.headers)
        self.parsed += 1
        headers = frozenset(m.group(1) for m in _HEADER.finditer(seg))
        if "#" not in seg:
            plan, diags = parse_dsl(seg, file, first_line=line)
            if not diags:
                return _Piece(seg, line, plan, True, headers)
            # broken: parsed again below blank lines, so that its messages are the whole
            # parse's (parse_dsl's first_line moves every "line N" in them, a JSON decoder's
            # "line 1 column 2" about a string literal too).  A broken statement with a map
            # body is left to the whole parse: it loses the plan's `return` when the body
            # does not close (the parser's state is not restored)
            plan, diags = _parse_at(seg, file, line)
            joinable = len(diags) < _MAX_BROKEN and not _MAP_BODY.search(seg)
            return _Piece(seg, line, plan, False, headers, tuple(diags), joinable)
        # parsed at line 1 and moved: parse_dsl(first_line=N) places the statements, not the
        # comments (its lexer's comment callback sees the lines of the text alone)
        plan, diags = parse_dsl(seg, file)
        if diags:  # comments around a broken statement move on to the next: the whole parse
            return _Piece(seg, line, plan, False, headers, tuple(diags), False)
        piece = _Piece(seg, 1, plan, True, headers)
        if not _moved(piece, line):
            return _Piece(seg, line, _Mover(line - 1).move(plan), True, headers)
        return piece

    def _join(self, text: str, file: str | None) -> LoadResult | None:
        self.reused = self.parsed = 0
        if not isinstance(text, str) or text.startswith("\ufeff") or size_problem(text) is not None:
            return None
        fresh: dict[str, _Piece] = {}
        pieces = []
        for line, seg in segments(text):
            piece = self._piece(line, seg, file, fresh)
            fresh[seg] = piece
            pieces.append(piece)
        # keep what this text used, and the older pieces while there is room (undo, paste back)
        if len(fresh) + len(self._pieces) > _MAX_CACHED:
            self._pieces = fresh
        else:
            self._pieces.update(fresh)
        if len(pieces) == 1:
            return LoadResult(replace(pieces[0].plan, source=text), list(pieces[0].diags))
        if not self._broken_ok(pieces, file):
            return None
        return _joined(pieces, text, file)

    def _broken_ok(self, pieces: list[_Piece], file: str | None) -> bool:
        """Whether the broken segments (syntax errors) may be joined as parsed alone.

        After a syntax error the whole parse resumes at the next line that starts a
        statement, with a fresh parser: a broken segment parsed alone gives what the whole
        parse gives for it when its last statement, broken or not, ends at the segment's
        end, so the next segment starts afresh in both.  That is checked by parsing the
        segment together with the next one: the pair must give what the two give alone.
        A first segment that is broken is left to the whole parse (the plan's opening
        comments are placed from its first statement), as are too many errors (the parser
        stops at 50) and the cases ``_piece`` marks."""
        broken = [k for k, p in enumerate(pieces) if not p.clean]
        if not broken:
            return True
        if broken[0] == 0 or sum(len(pieces[k].diags) for k in broken) >= _MAX_BROKEN:
            return False
        checked: dict[tuple, bool] = {}
        for k in broken:
            piece = pieces[k]
            if not piece.joinable:
                return False
            if k + 1 == len(pieces):
                continue  # the text's end is the segment's end
            after = pieces[k + 1]
            key = (piece.text, after.text, piece.line)
            ok = self._pairs.get(key)
            if ok is None:
                ok = _same_as_pair(piece, after, file)
            checked[key] = ok
            if not ok:
                self._pairs = checked
                return False
        self._pairs = checked
        return True


def _joined(pieces: list[_Piece], text: str, file: str | None) -> LoadResult | None:
    calls: list[Any] = []
    header: dict[str, Any] = {}
    named: set[str] = set()
    tools: list[Any] = []
    tool_names: set[str] = set()
    output = None
    head: tuple[str, ...] = ()
    fields: list[tuple[str, tuple[str, ...], str | None]] = []
    tail: tuple[str, ...] = ()
    last = len(pieces) - 1
    diags: list[Diagnostic] = []
    for k, piece in enumerate(pieces):
        plan = piece.plan
        if piece.calls_only:  # most segments of a plan: what the rest of the loop finds nothing in
            calls.extend(plan.calls)
            continue
        diags.extend(piece.diags)
        if named & piece.headers:
            return None
        named |= piece.headers
        for name, value in (("goal", plan.goal), ("id", plan.id), ("input_schema", plan.input_schema),
                            ("state_schema", plan.state_schema), ("output_schema", plan.output_schema)):
            if value is not None:
                header[name] = value
        if plan.mode is not Mode.EAGER:
            header["mode"] = plan.mode
        for decl in plan.tools:
            if decl.name in tool_names:
                return None
            tool_names.add(decl.name)
            tools.append(decl)
        if plan.output is not None:
            if output is not None:
                return None
            output = plan.output
        seg_calls = list(plan.calls)
        seg_fields = list(plan.field_comments)
        if k == 0:
            head = plan.comments
        elif plan.comments:  # parsed alone they opened the file: they lead its first statement
            if piece.headers or not _lead_first(plan, seg_calls, seg_fields):
                return None
        if plan.trailing_comments:
            if k != last:
                return None
            tail = plan.trailing_comments
        calls.extend(seg_calls)
        fields.extend(seg_fields)
    trivia: dict[str, Any] = {}
    if head:
        trivia["comments"] = head
    if fields:
        trivia["field_comments"] = tuple(fields)
    if tail:
        trivia["trailing_comments"] = tail
    plan = Plan(calls=tuple(calls), tools=tuple(tools), output=output, file=file, source=text, form="dsl",
                **header, **trivia)
    return LoadResult(plan, diags)


def _lead_first(plan: Plan, calls: list[Any], fields: list[tuple]) -> bool:
    """Move a later segment's opening comments to the statement they precede (in place on the
    lists), as the whole parse attaches them.  Only called for a segment without a header
    field (the plan does not say where one starts)."""
    starts = []
    if calls and calls[0].span is not None:
        starts.append((calls[0].span.line, calls[0].span.column, "call"))
    for decl in plan.tools:
        if decl.span is not None:
            starts.append((decl.span.line, decl.span.column, "tool " + decl.name))
    out = plan.output
    if out is not None and out.span is not None:  # the return statement's anchor is its value
        starts.append((out.span.line, out.span.column, "return"))
    if not starts:
        return False
    key = min(starts)[2]
    if key == "call":
        calls[0] = replace(calls[0], comments=plan.comments + calls[0].comments)
        return True
    for i, (name, leading, trailing) in enumerate(fields):
        if name == key:
            fields[i] = (name, plan.comments + leading, trailing)
            return True
    fields.insert(0, (key, plan.comments, None))
    return True


_SCALARS = (str, int, float, bool, type(None))
# the words of a field's annotation that hold no span: such a field is not visited
_NO_SPANS = frozenset({"str", "int", "float", "bool", "None", "tuple", "Risk", "Mode", "OutputMethod"})


@dataclass(frozen=True)
class _Layout:
    names: tuple[str, ...]          # the init fields
    read: Any                       # obj -> tuple of their values
    visit: tuple[int, ...]          # the fields that may hold a span (by their annotations)
    plain: bool                     # every field an init field, no __post_init__: copied slot by slot


_LAYOUTS: dict[type, _Layout | None] = {}


def _layout(cls: type) -> _Layout | None:
    """How to move an instance of ``cls`` (None: not a dataclass, e.g. raw JSON: no spans)."""
    if cls in _LAYOUTS:
        return _LAYOUTS[cls]
    found = None
    if dataclasses.is_dataclass(cls):
        fields = [f for f in dataclasses.fields(cls) if f.init]
        names = tuple(f.name for f in fields)
        visit = tuple(k for k, f in enumerate(fields)
                      if not (isinstance(f.type, str) and set(re.findall(r"\w+", f.type)) <= _NO_SPANS))
        read = operator.attrgetter(*names) if len(names) > 1 else (lambda obj, n=names[0]: (getattr(obj, n),))
        found = _Layout(names, read, visit, len(fields) == len(dataclasses.fields(cls))
                        and "__post_init__" not in dir(cls))
    _LAYOUTS[cls] = found
    return found


def _moved(piece: _Piece, line: int) -> bool:
    """Move a clean ``piece`` to ``line`` through its :class:`_Anchor`: no node is touched.
    On its first move its spans are put behind the anchor (in place: the plan of the last
    text, which shared its nodes, is not in use any more).  False when a span sits where
    the model cannot defer it: that segment is copied by :class:`_Mover` when it moves."""
    if piece.anchor is None:
        if piece.fixed:
            return False
        anchor = _Anchor()
        if not _defer(piece.plan, anchor, set()):
            piece.fixed = True
            return False
        piece.anchor = anchor
    piece.anchor.offset += line - piece.line
    piece.line = line
    return True


def _defer(obj: Any, anchor: _Anchor, seen: set[int]) -> bool:
    """Store a :class:`_Shifted` in each span field under ``obj`` (in place); False when a
    span is found outside a span field.  (A field already deferred reads as its span at the
    anchor's offset, still 0 here, so a partly deferred segment keeps its spans.)"""
    if isinstance(obj, tuple):
        for x in obj:
            if not isinstance(x, _SCALARS) and not _defer(x, anchor, seen):
                return False
        return True
    if isinstance(obj, Span):
        return False
    layout = _LAYOUTS.get(type(obj), False)
    if layout is False:
        layout = _layout(type(obj))
    if layout is None:  # raw JSON (schemas, hints): no spans in it
        return True
    key = id(obj)
    if key in seen:
        return True
    seen.add(key)
    deferred = span_fields(type(obj))
    got = layout.read(obj)
    for k in layout.visit:
        value = got[k]
        if isinstance(value, _SCALARS) or value == ():
            continue
        name = layout.names[k]
        if name in deferred and isinstance(value, (Span, tuple)):
            defer_span(obj, name, _Shifted(anchor, value))
        elif not _defer(value, anchor, seen):
            return False
    return True


class _Mover:
    """A parsed segment moved ``offset`` lines: every :class:`Span` of the model moved, the
    rest shared.  ``syntax.dsl_parser.shift_lines`` does this for any object, diagnostics and
    their messages included; a clean segment has no diagnostics, and this walk (each class's
    fields read at once, those whose annotation holds no span skipped, copies made slot by
    slot) costs a fraction of it.  Used where an anchor cannot be: a segment given twice in
    one text (the second gets nodes of its own) and one whose spans could not be deferred."""

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.memo: dict[int, Any] = {}

    def move(self, obj: Any) -> Any:
        if isinstance(obj, Span):
            off = self.offset
            return Span(obj.line + off, obj.column, obj.end_line + off, obj.end_column)
        if isinstance(obj, tuple):
            items = tuple([x if isinstance(x, _SCALARS) else self.move(x) for x in obj])
            for a, b in zip(items, obj):
                if a is not b:
                    return items
            return obj
        layout = _LAYOUTS.get(type(obj), False)
        if layout is False:
            layout = _layout(type(obj))
        if layout is None:  # raw JSON (schemas, hints): no spans in it
            return obj
        key = id(obj)
        done = self.memo.get(key)
        if done is not None:
            return done
        values = None
        got = layout.read(obj)
        for k in layout.visit:
            value = got[k]
            if isinstance(value, _SCALARS):
                continue
            moved = self.move(value)
            if moved is not value:
                if values is None:
                    values = list(got)
                values[k] = moved
        if values is None:
            out = obj
        elif layout.plain:  # a frozen dataclass copied field by field: what its __init__ does, minus the call
            out = object.__new__(type(obj))
            for name, value in zip(layout.names, values):
                object.__setattr__(out, name, value)
        else:
            out = replace(obj, **dict(zip(layout.names, values)))
        self.memo[key] = out
        return out


def _same_as_pair(piece: _Piece, after: _Piece, file: str | None) -> bool:
    """Whether ``piece`` (broken) followed by ``after`` parse together as they do apart."""
    text = piece.text + "\n" + after.text
    if "#" in text:
        return False
    plan, diags = _parse_at(text, file, piece.line)
    alone = _joined([piece, after], text, file)
    if alone is None or diags != alone.diagnostics or plan != alone.plan:
        return False
    return _placed(plan) == _placed(alone.plan)


def _parse_at(text: str, file: str | None, line: int) -> tuple[Plan, list[Diagnostic]]:
    """``text`` parsed as if it began at ``line`` of a longer text (a broken segment: its
    cost is the blank lines above it, not their statements)."""
    return parse_dsl("\n" * (line - 1) + text, file)


def _placed(plan: Plan) -> tuple:
    """The spans and comments a plan's equality leaves out (its calls' and statements')."""
    out = plan.output
    return (tuple((c.span, c.tool_span, c.attr_spans, c.comments, c.trailing_comment) for c in plan.calls),
            tuple(d.span for d in plan.tools), out.span if out is not None else None,
            plan.comments, plan.field_comments, plan.trailing_comments)
