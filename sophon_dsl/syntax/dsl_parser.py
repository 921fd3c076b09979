"""Parser for the text DSL: ``grammar/sophon.lark`` -> :class:`~sophon_dsl.model.Plan`.

One Lark LALR parser with a basic lexer, a bracket-aware post-lexer and an
inline transformer builds the model while parsing (no parse tree).  The parser is the
module Lark's standalone tool generated from the grammar (:mod:`._lalr_parser`, committed;
``python grammar/generate_parser.py`` regenerates it): importing it costs less than
importing ``lark`` and loading the tables, and ``lark`` is not imported at all.  Spans are
computed from tokens.  The stages around the builder have their own modules:
:mod:`.dsl_lexing` (post-lexer, tokens, string literals), :mod:`.dsl_syntax_errors`
(a Lark error as a diagnostic, where to resume), :mod:`.dsl_comments` (comments
attached to statements).  :func:`parse_dsl` never raises: every problem becomes a
:class:`~sophon_dsl.diagnostics.Diagnostic`; after a syntax error the parser
resynchronises at the next line that starts in column 1 so several errors are
reported in one pass.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import threading
from dataclasses import replace
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from ..diagnostics import Diagnostic, Span
from ..model import (
    Call,
    Expression,
    ListValue,
    Literal,
    Mode,
    ObjectValue,
    OutputMethod,
    OutputTarget,
    Param,
    Plan,
    Reference,
    Risk,
    ToolDecl,
    value_to_json,
)
from .. import refs as _refs
from ..maps import make_map_call
from ..refs import ReferenceSyntaxError, parse_reference
from ._lalr_parser import Lark, Lark_StandAlone, Token, Transformer, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from .attributes import OUTPUT_METHOD_WITHOUT_PATH, convert_attribute
from .map_syntax import map_from_dsl
from .declarations import declaration_problems, refine, value_span
from .dsl_comments import attach_comments
from .dsl_lexing import PostLex, decode_string, join_spans, kwname, literal_error, string_value, tspan
from .dsl_syntax_errors import clamp_diag, describe_token, resume_line, syntax_diag

__all__ = ["parse_dsl", "HEADER_FIELDS", "DECORATORS", "META_KWARGS", "SETOPS"]

HEADER_FIELDS = ("goal", "mode", "id", "input", "state", "output")

# decorator name -> JSON spelling of the attribute it sets
DECORATORS = {
    "id": "_id",
    "risk": "_risk",
    "retry": "_retry",
    "timeout": "_timeout",
    "after": "_after",
    "model": "_modelHint",
    "success": "_successCriterion",
    "activity": "_activity",
    "instance": "_instance",
    "delegate": "_delegate",
    "scopes": "_scopes",
    "reason": "_reasoningForCall",
}

# `_name=value` keyword arguments accepted inside a call's argument list
META_KWARGS = frozenset(DECORATORS.values()) | {"_outputPath", "_outputMethod", "_output"}

SETOPS = {
    "=": OutputMethod.SET,
    "|=": OutputMethod.ASSIGN,
    "&=": OutputMethod.MERGE,
    "+=": OutputMethod.CONCAT,
    "<<=": OutputMethod.PUSH,
}

_BARE_CONSTANTS = {
    "true": True, "false": False, "null": None,
    "True": True, "False": False, "None": None,
}

_MAX_ERRORS = 50
_SKIP = ("skip",)


# ---------------------------------------------------------------------------
# Parse state (one per parse_dsl call; the module-level parser is guarded by a lock)


class _Ctx:
    __slots__ = ("calls", "diags", "header", "header_spans", "tools", "output", "output_seen",
                 "raw", "bad", "comments")

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.diags: list[Diagnostic] = []
        self.header: dict[str, Any] = {}
        self.header_spans: dict[str, Span] = {}
        self.tools: dict[str, ToolDecl] = {}
        self.output: Any = None
        self.output_seen = False
        # id(value) -> (value, raw text) for strings containing a dagger, so that
        # raw-JSON contexts (schemas, decorators) get the text back unchanged.
        self.raw: dict[int, tuple[Any, str]] = {}
        # id(value) -> (value, diagnostic) for values that are errors in a call
        # (bare words, malformed references) but fine in raw contexts.
        self.bad: dict[int, tuple[Any, Diagnostic]] = {}
        # line -> (column, text) of each `#` comment (at most one per line), filled by the
        # lexer callback; attached to statements after parsing (attach_comments).
        self.comments: dict[int, tuple[int, str]] = {}


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


class _Builder(Transformer):
    """Inline transformer: each method gets the children of one reduced rule."""

    def __init__(self) -> None:
        super().__init__(visit_tokens=False)
        self.ctx = _Ctx()
        self._blocks: list[tuple] = []  # open map bodies (see block_open)

    # -- helpers ----------------------------------------------------------

    def comment(self, tok: Token) -> Token:
        """Lexer callback for the (ignored) COMMENT terminal."""
        self.ctx.comments[tok.line] = (tok.column, tok.value.rstrip())
        return tok

    def _err(self, code: str, message: str, span: Span | None) -> None:
        self.ctx.diags.append(Diagnostic(code, message, span))

    def _to_json(self, v: Any) -> Any:
        """A parsed value in a raw-JSON context (schemas, decorators): plain data, strings unparsed."""
        ctx = self.ctx
        key = id(v)
        if ctx.raw or ctx.bad:
            hit = ctx.raw.pop(key, None)
            bad = ctx.bad.pop(key, None)
            if hit is not None:
                return hit[1]
            if bad is not None:
                return v.value
        if isinstance(v, Literal):
            return v.value
        if isinstance(v, ListValue):
            return [self._to_json(x) for x in v.items]
        if isinstance(v, ObjectValue):
            return {k: self._to_json(x) for k, x in v.entries}
        return value_to_json(v)

    def _allow(self, v: Any) -> None:
        """``v`` is fine where it stands (a bare word as a map option): no longer an error."""
        self.ctx.bad.pop(id(v), None)

    def _flush_bad(self) -> None:
        ctx = self.ctx
        if ctx.bad:
            for _, diag in ctx.bad.values():
                ctx.diags.append(diag)
            ctx.bad.clear()
        if ctx.raw:
            ctx.raw.clear()

    def _drop_pending(self) -> None:
        self.ctx.bad.clear()
        self.ctx.raw.clear()

    # -- values -----------------------------------------------------------

    def string(self, c):
        tok = c[0]
        span = Span(tok.line, tok.column, tok.end_line, tok.end_column)
        try:
            text = decode_string(tok)
        except ValueError as e:
            v = Literal(str(tok)[1:-1], span)
            self.ctx.bad[id(v)] = (v, Diagnostic(*literal_error(e), span))
            return v
        if "†" not in text:
            return Literal(text, span)
        try:
            v = string_value(text, span)
        except ReferenceSyntaxError as e:
            v = Literal(text, span)
            col = tok.column + 1 + e.offset if "\\" not in tok else tok.column
            col = min(col, tok.end_column - 1)
            # (a JMESPath error is about the expression, not about a dagger meant as text)
            hint = "" if "††" in str(e) or "JMESPath" in str(e) else " (write '††' for a literal dagger)"
            self.ctx.bad[id(v)] = (v, Diagnostic("E105", f"{e}{hint}", Span(tok.line, col, tok.line, col + 1)))
        self.ctx.raw[id(v)] = (v, text)
        return v

    def number(self, c):
        tok = c[0]
        span = Span(tok.line, tok.column, tok.end_line, tok.end_column)
        try:
            val: Any = float(tok) if "." in tok or "e" in tok or "E" in tok else int(tok)
        except ValueError:
            val = None  # (int() refuses more than 4,300 digits)
        if val is None or (type(val) is float and (val != val or val in (float("inf"), float("-inf")))):
            self._err("E001", f"number {str(tok)[:30]!r} is out of range", span)
            val = 0
        return Literal(val, span)

    def bare(self, c):
        tok = c[0]
        span = Span(tok.line, tok.column, tok.end_line, tok.end_column)
        name = str(tok)
        if name in _BARE_CONSTANTS:
            return Literal(_BARE_CONSTANTS[name], span)
        v = Literal(name, span)
        self.ctx.bad[id(v)] = (v, Diagnostic(
            "E001",
            f"bare word {name!r} is not a value; quote it (\"{name}\") or write a reference "
            f"such as †state.{name}", span))
        return v

    def ref(self, c):
        tok = c[0]
        span = Span(tok.line, tok.column, tok.end_line, tok.end_column)
        text = str(tok)
        if "{" in text or "[" in text:
            try:
                return parse_reference(text, span, "†$")
            except ReferenceSyntaxError as e:  # a malformed JMESPath expression (E105, at its place)
                col = tok.column + e.offset if tok.line == tok.end_line else tok.column
                self._err("E105", str(e), Span(tok.line, col, tok.line, col + 1))
                return Reference(_refs.NAME_RE.match(text, 1 + (text[1] == "{")).group(), (), span)
        parts = text[1:].split(".")
        return Reference(parts[0], tuple(parts[1:]), span)

    def _refs(self, toks):
        out = []
        for tok in toks:
            if tok.type == "REF":
                out.append(self.ref((tok,)))
        return tuple(out)

    def or_expr(self, c):
        refs = self._refs(c)
        return Expression("||", refs, join_spans(refs[0].span, refs[-1].span))

    def and_expr(self, c):
        refs = self._refs(c)
        return Expression("&&", refs, join_spans(refs[0].span, refs[-1].span))

    def badref(self, c):
        tok = c[0]
        span = tspan(tok)
        v = Literal(str(tok), span)
        from .dsl_messages import badref_message  # (error path: a clean parse never imports it)

        self.ctx.bad[id(v)] = (v, Diagnostic("E105", badref_message(str(tok)), span))
        self.ctx.raw[id(v)] = (v, str(tok))
        return v

    def list(self, c):
        return ListValue(tuple(c[1:-1]), join_spans(tspan(c[0]), tspan(c[-1])))

    def pair(self, c):
        k = c[0]
        if k.type == "STRING":
            try:
                key = decode_string(k)
            except ValueError as e:
                self._err(*literal_error(e), tspan(k))
                key = str(k)[1:-1]
        else:
            key = str(k)
        return (key, c[1], k)

    def object(self, c):
        pairs = c[1:-1]
        entries = tuple((k, v) for k, v, _ in pairs)
        if len(pairs) > 1:
            seen = set()
            for k, _, tok in pairs:
                if k in seen:
                    self._err("E108", f"duplicate key {k!r} in object", tspan(tok))
                seen.add(k)
        return ObjectValue(entries, join_spans(tspan(c[0]), tspan(c[-1])))

    # -- statements -------------------------------------------------------

    def header(self, c):
        tok, value = c
        name = kwname(tok)
        span = join_spans(tspan(tok), value.span)
        data = self._to_json(value)
        self._drop_pending()
        ctx = self.ctx
        if name not in HEADER_FIELDS:
            hint = get_close_matches(name, HEADER_FIELDS, 1)
            msg = f"unknown header field {name!r}; expected one of {', '.join(HEADER_FIELDS)}"
            if hint:
                msg += f" (did you mean {hint[0]!r}?)"
            if name == "tool":
                msg += "; declare tools as `tool name = {...}`"
            self._err("E107", msg, tspan(tok))
            return
        if name in ctx.header_spans:
            prev = ctx.header_spans[name]
            self._err("E108", f"duplicate header field {name!r} (first set on line {prev.line})", tspan(tok))
            return
        if name in ("goal", "id"):
            if not isinstance(data, str):
                self._err("E107", f"header field {name!r} must be a string, got {_type_name(data)}", value.span)
                return
        elif name == "mode":
            if not isinstance(data, str) or data.lower() not in ("eager", "lazy"):
                self._err("E107", f"mode must be 'eager' or 'lazy', got {data!r}", value.span)
                return
            data = Mode(data.lower())
        else:
            if data is not None and not isinstance(data, (dict, bool)):
                self._err("E107", f"header field {name!r} must be a JSON Schema object, got {_type_name(data)}",
                          value.span)
                return
        ctx.header[name] = data
        ctx.header_spans[name] = span

    def tooldecl(self, c):
        kw, ntok, value = c
        data = self._to_json(value)
        self._drop_pending()
        if ntok.type == "KW":
            ntok = Token("NAME", kwname(ntok), ntok.start_pos, ntok.line, ntok.column,
                         ntok.end_line, ntok.end_column, ntok.end_pos)
        if str(kw) != "tool":
            self._err("E001", f"unexpected {describe_token(ntok)} after {str(kw)!r}; "
                      f"a call needs '(' and a tool declaration starts with 'tool'", tspan(ntok))
            return
        if ntok.type == "STRING":
            try:
                name = decode_string(ntok)
            except ValueError:
                name = str(ntok)[1:-1]
        else:
            name = str(ntok)
        span = join_spans(tspan(kw), value.span)
        if not isinstance(data, dict):
            self._err("E109", f"tool declaration {name!r} must be an object "
                      "{description, input, output, risk, latent}", value.span)
            return
        kwargs: dict[str, Any] = {}
        ok = True
        for k, v in data.items():
            if k == "description":
                if not isinstance(v, str):
                    self._err("E109", f"tool {name!r}: description must be a string", value.span)
                    ok = False
                else:
                    kwargs["description"] = v
            elif k in ("input", "output"):
                if v is not None and not isinstance(v, (dict, bool)):
                    self._err("E109", f"tool {name!r}: {k} must be a JSON Schema object", value.span)
                    ok = False
                else:
                    kwargs[k + "_schema"] = v
            elif k == "risk":
                try:
                    kwargs["risk"] = Risk.parse(v) if isinstance(v, str) else Risk(-1)
                except ValueError:
                    self._err("E109", f"tool {name!r}: risk must be one of none, low, medium, high, "
                              f"critical, got {v!r}", value.span)
                    ok = False
            elif k == "latent":
                if not isinstance(v, bool):
                    self._err("E109", f"tool {name!r}: latent must be true or false", value.span)
                    ok = False
                else:
                    kwargs["latent"] = v
            else:
                self._err("E109", f"tool {name!r}: unknown field {k!r}; expected description, input, "
                          "output, risk, latent", value.span)
                ok = False
        if not ok:
            return
        for message, path in declaration_problems(data):
            self._err("E109", f"tool {name!r}: {message}", value_span(value, path))
        # a second declaration refines the first (Acts 002): the fields it gives win
        self.ctx.tools[name] = refine(self.ctx.tools.get(name), ToolDecl(name, span=span, **kwargs), kwargs)

    def ret(self, c):
        kw, value = c
        if str(kw) != "return":
            self._drop_pending()
            self._err("E001", f"unexpected value after {str(kw)!r}: a header field is written "
                      f"{kw} = value, a call {kw}(name=value), a label {kw}:", value.span)
            return
        self._flush_bad()
        ctx = self.ctx
        if ctx.output_seen:
            self._err("E108", "duplicate 'return' statement", tspan(kw))
            return
        ctx.output_seen = True
        ctx.output = value

    # -- map bodies -------------------------------------------------------

    def block_open(self, c):
        """A map body starts: its calls and its `return` are collected apart."""
        ctx = self.ctx
        # the map's own arguments wait for the map's statement (the body's calls end first)
        self._blocks.append((len(ctx.calls), ctx.output, ctx.output_seen, ctx.bad, ctx.raw))
        ctx.output, ctx.output_seen, ctx.bad, ctx.raw = None, False, {}, {}
        return c[0]

    def block(self, c):
        ctx = self.ctx
        start, output, seen, bad, raw = self._blocks.pop()
        self._flush_bad()
        ctx.bad, ctx.raw = bad, raw
        body = tuple(ctx.calls[start:])
        del ctx.calls[start:]
        result = ctx.output if ctx.output_seen else None
        ctx.output, ctx.output_seen = output, seen
        return ("block", body, result, join_spans(tspan(c[0]), tspan(c[-1])))

    # -- calls ------------------------------------------------------------

    def decorator(self, c):
        tok = c[0]
        args: list = []
        kwargs: dict = {}
        end = tok
        dup = None
        for ch in c[1:]:
            if type(ch) is Token:
                end = ch
            elif type(ch) is tuple:
                if ch[0] in kwargs:
                    dup = ch
                kwargs[ch[0]] = self._to_json(ch[1])
            else:
                args.append(self._to_json(ch))
        if dup is not None:
            self._err("E108", f"duplicate argument {dup[0]!r} in @{str(tok)[1:]}", join_spans(dup[2], dup[1].span))
        return ("@", str(tok)[1:], args, kwargs, join_spans(tspan(tok), tspan(end)), c[1:] != [])

    def dkwarg(self, c):
        return (kwname(c[0]), c[1], tspan(c[0]))

    def darg(self, c):
        return c[0]

    def label(self, c):
        return ("label", str(c[0]), tspan(c[0]))

    def output(self, c):
        first, last = c[0], c[-1]
        method = OutputMethod.SET
        if last.type == "SETOP":
            method = SETOPS[str(last)]
            c = c[:-1]
        span = join_spans(tspan(first), tspan(c[-1]))
        if first.type == "BADREF":
            text = str(first)
            hint = ("; names are ASCII letters, digits and '_'"
                    if any(ch.isalnum() and not ch.isascii() for ch in text) else "")
            self._err("E106", f"malformed output path {text!r}: expected †kind.name.name[index]{hint}",
                      tspan(first))
            return None
        if len(c) == 1:
            paths, op = (self.ref((first,)),), None
        else:
            paths, op = self._refs(c), "||" if c[1].type == "OROR" else "&&"
        for r in paths:
            if r.query is not None:
                self._err("E106", f"output path {r.text()!r} has a JMESPath expression: a call writes at "
                          "a plain path, †kind.name.name[index]", r.span)
                return None
        return OutputTarget.of(paths, op, method, span)

    def arg(self, c):
        tok, value = c
        name = tok.value
        if tok.type == "KW":
            name = name[:-1].rstrip() if name[-2] in " \t" else name[:-1]
        if name[0] == "_":
            return ("meta", name, value, join_spans(tspan(tok), value.span), tok)
        return Param(name, value, Span(tok.line, tok.column, value.span.end_line, value.span.end_column))

    def shorthand(self, c):
        tok = c[0]
        ref = self.ref(c)
        if not ref.path or not isinstance(ref.path[-1], str) or ref.query is not None:
            # an error unless this is the list of a map (`map(†row) {...}`, see map_syntax)
            self.ctx.bad[id(ref)] = (ref, Diagnostic(
                "E001", f"positional argument {str(tok)!r} must be a reference ending in a name "
                "(it passes `name=†kind...name`); write name=value", ref.span))
            return Param("", ref, ref.span)
        return Param(ref.path[-1], ref, ref.span)

    def qarg(self, c):
        tok, value = c
        try:
            name = decode_string(tok)
        except ValueError as e:
            self._err(*literal_error(e), tspan(tok))
            name = str(tok)[1:-1]
        return Param(name, value, join_spans(tspan(tok), value.span))

    def call_stmt(self, c):
        fields: dict[str, Any] = {}
        spans: list[tuple[str, Span]] = []
        params: list[Param] = []
        attrs: list = []
        output = None
        out_seen = False
        tool_tok = None
        start = None
        end = None
        inline = None
        block = None
        it = iter(c)
        for ch in it:
            tp = type(ch)
            if tp is Param:
                params.append(ch)
            elif tp is Token:
                tt = ch.type
                if tt == "RPAR":
                    end = tspan(ch)
                elif tt == "LPAR":
                    pass
                elif tt == "ARROW":
                    inline = next(it)
                    end = inline.span
                else:
                    tool_tok = ch
                    if start is None:
                        start = tspan(ch)
            elif tp is tuple:
                if ch is _SKIP:
                    continue
                if ch[0] == "block":
                    block = ch
                    end = ch[3]
                    continue
                if ch[0] == "meta":
                    attrs.append(ch)
                else:
                    if start is None:
                        start = ch[-1] if ch[0] == "label" else ch[4]
                    attrs.append(ch)
            elif tp is OutputTarget:
                output = ch
                out_seen = True
                if start is None:
                    start = ch.span
            elif ch is None:  # malformed output path, already reported
                out_seen = True
        if tool_tok.type == "STRING":
            try:
                tool = decode_string(tool_tok)
            except ValueError:
                tool = str(tool_tok)[1:-1]
        else:
            tool = str(tool_tok)
        tool_span = tspan(tool_tok)
        if not tool.strip():
            self._err("E102", "a quoted tool name must not be blank", tool_span)
        span = join_spans(start, end)
        if output is not None:
            spans.append(("_outputPath", output.span))
        if inline is not None:
            fields["inline_output"] = inline
            spans.append(("_output", inline.span))
        if attrs:
            out_method_attr = None
            for a in attrs:
                kind = a[0]
                if kind == "label":
                    self._set(fields, spans, "_id", a[1], a[2])
                elif kind == "@":
                    self._decorator(fields, spans, a)
                else:  # meta kwarg
                    _, name, value, aspan, tok = a
                    if name not in META_KWARGS:
                        hint = get_close_matches(name, sorted(META_KWARGS), 1)
                        msg = f"unknown meta-property {name!r}"
                        if hint:
                            msg += f"; did you mean {hint[0]!r}?"
                        msg += " (quote the name, \"" + name + "\"=..., for a parameter starting with '_')"
                        self._err("E104", msg, tspan(tok))
                        continue
                    if name == "_output":
                        if "inline_output" in fields:
                            self._err("E108", "inline output given twice ('->' and _output)", aspan)
                            continue
                        fields["inline_output"] = value
                        spans.append(("_output", aspan))
                    elif name == "_outputPath":
                        if out_seen:
                            self._err("E108", "output path given twice", aspan)
                            continue
                        out_seen = True
                        output = self._meta_output(value, aspan)
                        if output is not None:
                            spans.append(("_outputPath", aspan))
                    elif name == "_outputMethod":
                        _, method, errors = convert_attribute(name, self._to_json(value))
                        if errors:
                            for e in errors:
                                self._err("E103", e.message, aspan)
                            continue
                        out_method_attr = (method, aspan)
                    else:
                        self._set(fields, spans, name, self._to_json(value), aspan)
            if out_method_attr is not None:
                if output is None:
                    if not out_seen:
                        self._err("E103", OUTPUT_METHOD_WITHOUT_PATH, out_method_attr[1])
                else:
                    output = OutputTarget.of(output.paths, output.op, out_method_attr[0], output.span)
                    spans.append(("_outputMethod", out_method_attr[1]))
        if len(params) > 1:
            seen = set()
            for p in params:
                if p.name in seen:
                    self._err("E108", f"duplicate parameter {p.name!r} in call to {tool!r}", p.span)
                seen.add(p.name)
        if block is not None:
            spec = map_from_dsl(tool, params, block, tool_span, span, err=self._err, to_json=self._to_json,
                                allow=self._allow)
            self._flush_bad()
            if spec is not None:
                call = make_map_call(spec, output=output, span=span, tool_span=tool_span,
                                     attr_spans=tuple(spans), **fields)
                self.ctx.calls.append(call)
            return
        self._flush_bad()
        call = Call(tool, tuple(params), output, span=span, tool_span=tool_span,
                    attr_spans=tuple(spans), **fields)
        self.ctx.calls.append(call)

    def _meta_output(self, value: Any, span: Span) -> OutputTarget | None:
        if isinstance(value, Reference):
            self.ctx.raw.pop(id(value), None)
            return OutputTarget.of((value,), span=value.span)
        if isinstance(value, Expression):
            self.ctx.raw.pop(id(value), None)
            return OutputTarget.of(value.operands, value.op, span=value.span)
        if id(value) not in self.ctx.bad:
            self._err("E106", "_outputPath must be a reference such as \"†state.x\" or an expression "
                      "\"†state.a || †state.b\"", span)
        return None

    def _decorator(self, fields, spans, a) -> None:
        _, name, args, kwargs, span, has_parens = a
        attr = DECORATORS.get(name)
        if attr is None:
            hint = get_close_matches(name, list(DECORATORS), 1)
            msg = f"unknown decorator @{name}; expected one of " + ", ".join("@" + d for d in DECORATORS)
            if hint:
                msg = f"unknown decorator @{name}; did you mean @{hint[0]}?"
            self._err("E104", msg, span)
            return
        if attr in ("_after", "_scopes"):
            if kwargs:
                self._err("E103", f"@{name} takes names, not keyword arguments", span)
                return
            self._set(fields, spans, attr, args, span)
            return
        if attr == "_modelHint":
            if kwargs and args:
                self._err("E103", "@model takes keyword arguments or one value, not both", span)
                return
            if kwargs:
                self._set(fields, spans, attr, kwargs, span)
            elif len(args) == 1:
                self._set(fields, spans, attr, args[0], span)
            elif not args:
                self._set(fields, spans, attr, {}, span)
            else:
                self._err("E103", "@model takes keyword arguments or one value", span)
            return
        if attr == "_retry" and kwargs:
            if args:
                self._err("E103", "@retry takes a number of attempts or keyword arguments, not both", span)
                return
            self._set(fields, spans, attr, kwargs, span)
            return
        if kwargs or len(args) != 1:
            self._err("E103", f"@{name} takes exactly one value", span)
            return
        self._set(fields, spans, attr, args[0], span)

    def _set(self, fields, spans, attr: str, data: Any, span: Span) -> None:
        """Validate one attribute given in JSON form and store it on the call fields."""
        field_name, value, errors = convert_attribute(attr, data)
        if errors:
            for e in errors:
                self._err("E103", e.message, span)
            return
        if field_name in fields:
            self._err("E108", f"attribute {attr} given twice", span)
            return
        fields[field_name] = value
        spans.append((attr, span))


# ---------------------------------------------------------------------------
# Lark instance


def grammar_text() -> str:
    # (the source grammar, for sophon_dsl.llm.constrained's decoder grammars: the parser
    # itself runs the module generated from it)
    # the file next to the package (an ordinary install), else the checkout's grammar/ (an
    # editable one): importlib.resources, needed only for a package inside a zip, imports
    # zipfile and more, which costs more than reading the file
    here = Path(__file__).resolve()
    for path in (here.parents[1] / "_grammar" / "sophon.lark", here.parents[2] / "grammar" / "sophon.lark"):
        if path.is_file():
            return path.read_text(encoding="utf-8")
    from importlib.resources import files

    return files("sophon_dsl").joinpath("_grammar", "sophon.lark").read_text(encoding="utf-8")


_LOCK = threading.Lock()
_PARSER: Lark | None = None
_BUILDER: _Builder | None = None


def build_lark(builder: "_Builder") -> Lark:
    """A parser wired to ``builder``, from the generated module's tables (generated with
    :data:`.lalr_options.LARK_OPTIONS`; nothing is cached per user any more: the tables load
    in ~10 ms, and the ~90 ms of importing ``lark`` are gone)."""
    return Lark_StandAlone(postlex=PostLex(), transformer=builder, lexer_callbacks={"COMMENT": builder.comment})


def _get_parser() -> tuple[Lark, _Builder]:
    """The process's parser, built on first use (importing the package builds nothing)."""
    global _PARSER, _BUILDER
    if _PARSER is None:
        builder = _Builder()
        _PARSER = build_lark(builder)
        _BUILDER = builder
    assert _BUILDER is not None
    return _PARSER, _BUILDER


# ---------------------------------------------------------------------------
# Public API


def parse_dsl(text: str, file: str | None = None, *, first_line: int = 1) -> tuple[Plan, list[Diagnostic]]:
    """Parse DSL text into a :class:`Plan` and diagnostics. Never raises.

    ``first_line`` is the line of the text's first character in a larger document (a
    statement of a streamed reply): spans are given in that document's lines, at the cost
    of the text alone rather than of everything above it."""
    if first_line > 1 and isinstance(text, str):
        plan, diags, comments = _parse_moved(text, file, first_line - 1)
        if not diags and not comments:
            return plan, diags
        # diagnostics and comment trivia are placed by the text's own lines: parse the text
        # alone and move what it gives down by the lines above it (parsing it below that many
        # newlines would cost every line above, for each broken or commented statement of a
        # long streamed reply: quadratic in the reply)
        plan, diags = _parse(text, file)
        return shift_lines(plan, first_line - 1), [shift_lines(d, first_line - 1) for d in diags]
    return _parse(text, file)


_LINE_WORD = re.compile(r"\bline (\d+)")


def shift_lines(obj: Any, offset: int) -> Any:
    """``obj`` (a plan, a call, a diagnostic, any value of the model) with every
    :class:`Span` moved ``offset`` lines down, and "line N" in a diagnostic's message and
    related notes with it."""
    if offset == 0:
        return obj
    return _Shifter(offset).visit(obj)


class _Shifter:
    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.memo: dict[int, Any] = {}

    def text(self, message: str) -> str:
        return _LINE_WORD.sub(lambda m: f"line {int(m.group(1)) + self.offset}", message)

    def visit(self, obj: Any) -> Any:
        if isinstance(obj, Span):
            return Span(obj.line + self.offset, obj.column, obj.end_line + self.offset, obj.end_column)
        if isinstance(obj, (list, tuple)):
            items = [self.visit(x) for x in obj]
            if all(a is b for a, b in zip(items, obj)):
                return obj
            return type(obj)(items) if not hasattr(obj, "_fields") else type(obj)(*items)
        if isinstance(obj, Diagnostic):
            return replace(obj, span=self.visit(obj.span), message=self.text(obj.message),
                           related=tuple(self.text(r) for r in obj.related))
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            key = id(obj)
            if key in self.memo:
                return self.memo[key]
            changes = {}
            for f in dataclasses.fields(obj):
                if not f.init:
                    continue
                value = obj.__dict__.get(f.name, _MISSING_FIELD) if hasattr(obj, "__dict__") else \
                    getattr(obj, f.name, _MISSING_FIELD)
                if value is _MISSING_FIELD:
                    continue
                moved = self.visit(value)
                if moved is not value:
                    changes[f.name] = moved
            out = replace(obj, **changes) if changes else obj
            self.memo[key] = out
            return out
        return obj


_MISSING_FIELD: Any = object()


def _parse_moved(text: str, file: str | None, offset: int) -> tuple[Plan, list[Diagnostic], bool]:
    with _LOCK:
        parser, _ = _get_parser()
        postlex = parser.options.postlex
        postlex.line_offset = offset
        try:
            plan, diags = _parse(text, file, locked=True)
        finally:
            postlex.line_offset = 0
    return plan, diags, bool(plan.comments or plan.trailing_comments or any(c.comments or c.trailing_comment
                                                                          for c in plan.calls))


def _parse(text: str, file: str | None = None, *, locked: bool = False) -> tuple[Plan, list[Diagnostic]]:
    if not isinstance(text, str):
        try:
            text = text.decode("utf-8")  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - not UTF-8 bytes: read as their text
            text = str(text)
    if text.startswith("\ufeff"):
        text = " " + text[1:]
    from .source_limits import dsl_nesting_problem, size_problem  # every form's limits (E007, E008)

    limit = size_problem(text, file) or dsl_nesting_problem(text, file)
    if limit is not None:
        return Plan(file=file, source=text, form="dsl"), [limit]
    with _LOCK if not locked else contextlib.nullcontext():
        parser, builder = _get_parser()
        ctx = builder.ctx = _Ctx()
        builder._blocks.clear()
        try:
            _run(parser, builder, text)
        except Exception as e:  # noqa: BLE001  # pragma: no cover - defensive
            ctx.diags.append(Diagnostic("E001", f"cannot parse: {type(e).__name__}: {e}", Span(1, 1, 1, 2)))
        finally:
            builder.ctx = _Ctx()
    diags = ctx.diags
    lines = text.split("\n")
    diags = [clamp_diag(d, lines) for d in diags]
    if file is not None:
        diags = [d.with_file(file) for d in diags]
    diags.sort(key=lambda d: (d.span.line, d.span.column) if d.span else (0, 0))
    h = ctx.header
    calls = ctx.calls
    trivia: dict[str, Any] = {}
    if ctx.comments:
        try:
            calls, trivia = attach_comments(ctx.comments, ctx.calls, _statements(ctx), lines)
        except Exception:  # noqa: BLE001  # pragma: no cover - defensive: comments are trivia
            calls, trivia = ctx.calls, {}
    try:
        plan = Plan(
            calls=tuple(calls),
            goal=h.get("goal"),
            mode=h.get("mode", Mode.EAGER),
            id=h.get("id"),
            input_schema=h.get("input"),
            state_schema=h.get("state"),
            output_schema=h.get("output"),
            tools=tuple(ctx.tools.values()),
            output=ctx.output,
            file=file,
            source=text,
            form="dsl",
            **trivia,
        )
    except Exception as e:  # noqa: BLE001  # pragma: no cover - defensive
        diags.append(Diagnostic("E001", f"cannot build plan: {e}", Span(1, 1, 1, 2), file))
        plan = Plan(file=file, source=text, form="dsl")
    return plan, diags


def _statements(ctx: _Ctx) -> list[tuple[str, Span]]:
    """The statements besides calls a comment can belong to: header fields, tool
    declarations (``"tool NAME"``) and ``return``, with their spans."""
    out = [(name, sp) for name, sp in ctx.header_spans.items() if name in ctx.header]
    out += [("tool " + name, tool.span) for name, tool in ctx.tools.items() if tool.span is not None]
    if ctx.output_seen and ctx.output is not None and ctx.output.span is not None:
        out.append(("return", ctx.output.span))
    return out


def _run(parser: Lark, builder: _Builder, text: str) -> None:
    ctx = builder.ctx
    lines: list[str] | None = None
    chunk = text
    errors = 0
    while True:
        try:
            parser.parse(chunk)
            return
        except UnexpectedInput as e:
            if lines is None:
                lines = text.split("\n")
            ctx.diags.append(syntax_diag(e, chunk, lines))
            ctx.bad.clear()
            ctx.raw.clear()
            errors += 1
            if errors >= _MAX_ERRORS or isinstance(e, UnexpectedEOF):
                return
            if isinstance(e, UnexpectedToken) and e.token.type == "$END":
                return
            line = getattr(e, "line", None)
            if isinstance(e, UnexpectedToken):
                line = e.token.line
            if not isinstance(line, int) or line < 1:
                return
            nxt = resume_line(lines, line)
            if nxt is None:
                return
            chunk = "\n" * nxt + "\n".join(lines[nxt:])
        except RecursionError:
            ctx.diags.append(Diagnostic("E001", "values are nested too deeply", Span(1, 1, 1, 2)))
            return
