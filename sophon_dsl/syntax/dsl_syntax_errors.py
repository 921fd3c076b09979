"""The text DSL's syntax errors as diagnostics: a Lark error -> E001 at a position inside
the text, with the tokens the grammar expected and, where :mod:`.dsl_messages` knows it,
the cause and the fix; and where the parser resumes after one (the next statement)."""

from __future__ import annotations

from typing import Any

from ..diagnostics import Diagnostic, Span
from ._lalr_parser import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

__all__ = ["clamp_diag", "describe_token", "resume_line", "syntax_diag"]

_TOKEN_NAMES = {
    "NAME": "a name",
    "KW": "a keyword argument (name=value)",
    "DOTTED": "a dotted tool name",
    "STRING": "a string",
    "NUMBER": "a number",
    "REF": "a reference",
    "BADREF": "a reference",
    "DECO": "a decorator",
    "SETOP": "an output operator ('|=', '&=', '+=', '<<=')",
    "OROR": "'||'",
    "ANDAND": "'&&'",
    "ARROW": "'->'",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "_COMMA": "','",
    "_COLON": "':'",
    "_EQ": "'='",
    "_SEMI": "';'",
    "_NL": "a new line",
    "$END": "end of input",
}


def describe_token(tok: Any) -> str:
    t = getattr(tok, "type", None)
    if t == "$END":
        return "end of input"
    if t == "_NL":
        return "end of line" if str(tok) != ";" else "';'"
    text = str(tok)
    if len(text) > 30:
        text = text[:27] + "..."
    name = _TOKEN_NAMES.get(t or "", "token").split(" ", 1)[-1]
    if t in ("NAME", "DOTTED", "STRING", "NUMBER", "REF", "DECO", "BADREF"):
        return f"{name} {text!r}" if t != "DECO" else f"decorator {text}"
    return f"{text!r}"


def _expected(names) -> str:
    shown = []
    for n in sorted(set(names)):
        d = _TOKEN_NAMES.get(n)
        if d is None or n in ("BADREF", "_SEMI"):
            continue
        if d not in shown:
            shown.append(d)
    if not shown:
        return ""
    if len(shown) > 8:
        shown = shown[:8] + ["..."]
    return "; expected " + (shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1])


def syntax_diag(e: UnexpectedInput, text: str, lines: list[str]) -> Diagnostic:
    line = getattr(e, "line", None)
    col = getattr(e, "column", None)
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if 0 <= e.pos_in_stream < len(text) else ""
        if ch in "\"'":
            msg = "unterminated string literal (strings end on the same line; write \\n for a line break)"
        elif ch == "@":
            msg = "'@' must be followed by a decorator name"
        elif ch.isalnum() and not ch.isascii():
            # a label or a path spelt in another script (`café:`, `$state.ü`): names are ASCII,
            # any text can be an id, and data keys are quoted
            msg = (f"unexpected character {ch!r}: names are ASCII letters, digits and '_' "
                   f"(a call's id can be any text: @id(\"...\"); a key: \"...\")")
        else:
            msg = f"unexpected character {ch!r}"
        allowed = getattr(e, "allowed", None) or ()
        if ch not in "\"'" and allowed and not (ch.isalnum() and not ch.isascii()):
            msg += _expected(allowed)
    elif isinstance(e, UnexpectedToken):
        tok = e.token
        expected = _accepted(e)
        msg = f"unexpected {describe_token(tok)}" + _expected(expected)
        if tok.type == "$END":
            line, col = _end_position(lines)
        else:
            line, col = tok.line, tok.column
    elif isinstance(e, UnexpectedEOF):
        msg = "unexpected end of input" + _expected(getattr(e, "expected", ()) or ())
        line, col = _end_position(lines)
    else:  # pragma: no cover
        msg = str(e)
    better = _explain_syntax(e, text)
    if better is not None:
        msg, line, col = better
    line, col = _clamp(line, col, lines)
    # data marks what the grammar itself rejects (the builder's E001s are accepted by it)
    return Diagnostic("E001", msg, Span(line, col, line, col + 1), data={"grammar": True})


def _accepted(e: UnexpectedToken) -> Any:
    """What the parser accepts where it stopped: the interactive parser's view when it has one
    (exact for this state), else the token's static expected set."""
    try:
        if e.interactive_parser is not None:
            return e.interactive_parser.accepts() or e.expected
    except Exception:  # noqa: BLE001 - (a parser state it cannot replay: the static set then)
        pass
    return e.expected


def _explain_syntax(e: UnexpectedInput, text: str) -> tuple[str, int, int] | None:
    """The cause and fix of a syntax error (sophon_dsl.syntax.dsl_messages), or None."""
    from .dsl_messages import explain  # (an error's explanation: a clean parse never imports it)

    if isinstance(e, UnexpectedCharacters):
        pos = e.pos_in_stream
        return explain("CHAR", text[pos:pos + 1], e.line, e.column, pos, e.allowed, text)
    if isinstance(e, UnexpectedToken):
        tok = e.token
        expected = _accepted(e)
        if tok.type == "$END":
            return explain("$END", "", text.count("\n") + 1, 1, len(text), expected, text)
        return explain(tok.type, str(tok), tok.line, tok.column, tok.start_pos, expected, text)
    return None


def _end_position(lines: list[str]) -> tuple[int, int]:
    n = len(lines)
    while n > 1 and not lines[n - 1].strip():
        n -= 1
    return n, len(lines[n - 1]) + 1


def _clamp(line: Any, col: Any, lines: list[str]) -> tuple[int, int]:
    if not isinstance(line, int) or line < 1:
        line = 1
    if line > len(lines):
        line = len(lines)
    if not isinstance(col, int) or col < 1:
        col = 1
    col = min(col, len(lines[line - 1]) + 1)
    return line, col


def resume_line(lines: list[str], after: int) -> int | None:
    """Index (0-based) of the first line after ``after`` (1-based) that looks like a new statement."""
    for i in range(max(after, 0), len(lines)):
        s = lines[i]
        if s and s[0] not in " \t\r\f)]},#;" and not s.startswith("->"):
            return i
    return None


def clamp_diag(d: Diagnostic, lines: list[str]) -> Diagnostic:
    s = d.span
    if s is None:
        return d
    line, col = _clamp(s.line, s.column, lines)
    eline, ecol = _clamp(s.end_line, s.end_column, lines)
    if (eline, ecol) < (line, col):
        eline, ecol = line, col
    if (line, col, eline, ecol) == (s.line, s.column, s.end_line, s.end_column):
        return d
    return Diagnostic(d.code, d.message, Span(line, col, eline, ecol), d.file, d.path, d.severity, d.related,
                      d.data)
