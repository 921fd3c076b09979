"""The text DSL's lexing stage: the bracket-aware post-lexer, token spans and string
literals (JSON and single-quoted, decoded; a reference or template inside read with
:mod:`sophon_dsl.refs`).  Used by :mod:`.dsl_parser` (the generated Lark parser and its builder)."""

from __future__ import annotations

import json
import re
from typing import Any

from ..diagnostics import Span
from ..errors import SophonError
from ..refs import ReferenceSyntaxError, parse_string_value, parse_template
from ._lalr_parser import Token
from .source_limits import LONE_SURROGATE, lone_surrogate_message
from .lalr_options import ALWAYS_ACCEPT

__all__ = ["LoneSurrogate", "PostLex", "decode_string", "join_spans", "kwname", "literal_error", "string_value",
           "tspan"]

_OPEN = frozenset(("LPAR", "LSQB", "LBRACE"))
_CLOSE = frozenset(("RPAR", "RSQB", "RBRACE"))


class PostLex:
    """Drops newlines inside brackets, maps top-level ';' to a newline, collapses separators."""

    always_accept = ALWAYS_ACCEPT

    def __init__(self) -> None:
        # lines above the text being parsed (parse_dsl's first_line): every token is moved
        # down by this much, so a statement parsed alone gets its place in a longer reply
        self.line_offset = 0

    def process(self, stream):
        depth = 0
        prev_sep = True
        off = self.line_offset
        # a map body (`{` right after `)`) separates statements as the top level does:
        # the bracket depth each open body started at
        blocks: list[int] = []
        prev = None
        for tok in stream:
            if off:
                tok.line += off
                tok.end_line += off
            t = tok.type
            if t == "_NL" or t == "_SEMI":
                if depth and not (blocks and blocks[-1] == depth):
                    if t == "_SEMI":
                        yield tok
                    continue
                if prev_sep:
                    continue
                prev_sep = True
                if t == "_SEMI":
                    tok.type = "_NL"
                yield tok
                continue
            prev_sep = False
            if t in _OPEN:
                depth += 1
                if t == "LBRACE" and prev == "RPAR":
                    blocks.append(depth)
                    prev_sep = True  # no separator right after the body's `{`
            elif t in _CLOSE and depth:
                if blocks and blocks[-1] == depth:
                    blocks.pop()
                depth -= 1
            prev = t
            yield tok


def tspan(tok: Token) -> Span:
    return Span(tok.line, tok.column, tok.end_line, tok.end_column)


def join_spans(start: Span, end: Span) -> Span:
    return Span(start.line, start.column, end.end_line, end.end_column)


class LoneSurrogate(SophonError, ValueError):
    """A string literal whose escapes leave a lone surrogate: E006 rather than E001 (a
    ValueError as json's decoding errors are, so one ``except ValueError`` takes both)."""

    code = "E006"


def decode_string(tok: str) -> str:
    if tok[0] == '"':
        if "\\" not in tok and not _CTRL.search(tok):
            return tok[1:-1]
        text = json.loads(tok)
    else:
        body = tok[1:-1]
        body = _SQ_ESC.sub(_sq_repl, body)
        text = json.loads('"' + body + '"')
    if LONE_SURROGATE.search(text):
        raise LoneSurrogate(lone_surrogate_message(text))
    return text


def literal_error(e: ValueError) -> tuple[str, str]:
    """The code and message of a string literal that does not decode."""
    if isinstance(e, LoneSurrogate):
        return e.code, str(e)
    return "E001", f"invalid string literal: {e}"


_SQ_ESC = re.compile(r"\\.|\"")
# characters json.loads must see: controls (refused) and surrogates in text handed over by a
# program (a UTF-8 file cannot hold one), which the E006 check below the decoding reports
_CTRL = re.compile(r"[\x00-\x1f\ud800-\udfff]")


def _sq_repl(m: re.Match) -> str:
    g = m.group(0)
    if g == '"':
        return '\\"'
    if g == "\\'":
        return "'"
    return g


def string_value(text: str, span: Span) -> Any:
    try:
        return parse_string_value(text, span)
    except ReferenceSyntaxError:
        # refs.parse_string_value tries the expression reading for any string that starts
        # with a dagger and contains '||'/'&&' (e.g. "††||", an escaped dagger) and raises
        # instead of falling back to the template reading the rules call for.
        if not text.lstrip().startswith("††"):
            raise
        return parse_template(text, span)


def kwname(tok: Token) -> str:
    text = str(tok)
    return text.rstrip(" \t=") if tok.type == "KW" else text
