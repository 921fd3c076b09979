"""Syntax errors of the text DSL explained: the real cause, where it is, and the fix.

The LALR parser stops at the first token it cannot shift and knows only what it
expected there ("unexpected ')'; expected '='").  Most mistakes are habits from
Python or JavaScript (a positional argument, ``or`` for ``||``, ``//`` comments,
an unclosed ``(`` noticed only on the next line), and each has a recognisable
shape in the few tokens before the error.  :func:`explain` looks at those tokens
and at the brackets still open, and returns a message naming the cause and the
fix, with the position of the cause (the unclosed ``(``, the unnamed argument),
or ``None`` to keep the parser's own message.

It runs on error paths only: nothing here costs a plan that parses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

__all__ = ["explain", "badref_message"]

Found = Optional[tuple[str, int, int]]  # (message, line, column)

# A lexical scan good enough to know the open brackets and the last tokens before an
# error (strings and comments must not count their brackets).
_SCAN = re.compile(r"""
  (?P<str>"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?)
| (?P<com>\#[^\n]*)
| (?P<open>[(\[{])
| (?P<close>[)\]}])
| (?P<ref>[†$][^\s,;(){}\[\]|&=<+"'\#]*)
| (?P<kw>[A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*[ \t]*=(?!=))
| (?P<word>[A-Za-z_][A-Za-z0-9_]*(?:[-.][A-Za-z_][A-Za-z0-9_]*)*)
| (?P<num>-?[0-9][0-9A-Za-z_.]*)
| (?P<nl>\n|;)
| (?P<ws>[ \t\r\f]+)
| (?P<op>\|\||&&|<<=|[|&+]=|->|.)
""", re.X)
_CLOSER = {"(": ")", "[": "]", "{": "}"}
_WINDOW = 200  # lines scanned back from an error for its statement's brackets


@dataclass
class _Tok:
    kind: str
    text: str
    line: int
    col: int
    end: int  # offset just past the token


@dataclass
class _Where:
    """What the parser stopped at, and the tokens and brackets before it."""

    found: str  # terminal name, "$END", or "CHAR"
    text: str  # the token's text (the character for CHAR)
    line: int
    col: int
    pos: int
    expected: frozenset
    source: str
    prev: list = field(default_factory=list)  # tokens before, nearest first (no blanks)
    stack: list = field(default_factory=list)  # open brackets, innermost last
    after: str = ""  # the source text right after the error position

    def p(self, i: int = 0) -> _Tok | None:
        return self.prev[i] if i < len(self.prev) else None

    def adjacent(self) -> bool:
        """The previous token ends exactly where the error starts."""
        t = self.p()
        return t is not None and t.end == self.pos and t.kind != "nl"

    def top(self) -> str | None:
        return self.stack[-1][0] if self.stack else None

    def at_statement_start(self, back: int) -> bool:
        t = self.p(back)
        return t is None or t.kind == "nl"


def _scan(source: str, pos: int, line: int) -> tuple[list, list]:
    """Open brackets and previous tokens at ``pos`` (on ``line``), scanning from a
    statement-like line at most ``_WINDOW`` lines above."""
    start_line = max(1, line - _WINDOW)
    offset = 0
    for _ in range(start_line - 1):
        nxt = source.find("\n", offset)
        if nxt < 0:
            break
        offset = nxt + 1
    cur = start_line
    # start at a line that begins a statement (column 1, not a closer)
    while cur < line:
        ch = source[offset:offset + 1]
        if ch and ch not in " \t\r\f)]},#;\n":
            break
        nxt = source.find("\n", offset)
        if nxt < 0 or nxt >= pos:
            break
        offset, cur = nxt + 1, cur + 1
    line_start = offset
    stack: list = []
    toks: list = []
    for m in _SCAN.finditer(source, offset, pos):
        kind = m.lastgroup or "op"
        text = m.group()
        col = m.start() - line_start + 1
        if kind == "ws" or kind == "com":
            continue
        if kind == "nl":
            if text == "\n":
                cur += 1
                line_start = m.end()
            if stack:
                continue  # newlines inside brackets are free
        elif kind == "open":
            stack.append((text, cur, col))
        elif kind == "close" and stack and _CLOSER[stack[-1][0]] == text:
            stack.pop()
        toks.append(_Tok(kind, text, cur, col, m.end()))
    toks.reverse()
    return toks[:4], stack


# ---------------------------------------------------------------------------
# rules: each returns (message, line, column) or None


def _comment_value(w: _Where) -> Found:
    t = w.p()
    if t is None or t.kind != "kw" or w.found not in ("$END", "_NL", "RPAR", "_COMMA", "RSQB", "RBRACE"):
        return None
    end = w.source.find("\n", t.end)
    hash_at = w.source.find("#", t.end, end if end >= 0 else len(w.source))
    if hash_at < 0 or w.source[t.end:hash_at].strip():
        return None
    word = w.source[hash_at:end if end >= 0 else None].split()[0].rstrip("),")
    return (f"'#' starts a comment, so {t.text.rstrip(' =')}= has no value: quote it, \"{word}\"",
            t.line, t.col + hash_at - t.end + len(t.text))


def _brackets(w: _Where) -> Found:
    ends_statement = w.found in ("$END", "_NL") or (
        w.stack and w.line > w.stack[-1][1] and w.col == 1 and w.found not in ("RPAR", "RSQB", "RBRACE"))
    if w.stack and ends_statement:
        o, line, col = w.stack[-1]
        where = "the end of the input" if w.found == "$END" else f"line {w.line}"
        return (f"'{o}' is never closed: add '{_CLOSER[o]}' (the statement runs on to {where})", line, col)
    closer = {"RPAR": ")", "RSQB": "]", "RBRACE": "}"}.get(w.found)
    if closer is None:
        return None
    if w.stack and _CLOSER[w.top()] != closer:
        o, line, col = w.stack[-1]
        return (f"'{o}' is never closed: add '{_CLOSER[o]}' before the '{closer}' at line {w.line}, "
                f"column {w.col}", line, col)
    if not w.stack:
        return (f"unmatched '{closer}': nothing is open here; remove it", w.line, w.col)
    return None


_CONSTANT_WORDS = {"true", "false", "null", "True", "False", "None"}


def _positional(w: _Where) -> Found:
    t = w.p()
    if w.top() != "(" or t is None:
        return None
    fix = ("; only a reference may stand alone ($input.text passes text=$input.text)")
    if w.found in ("RPAR", "_COMMA") and w.expected <= {"_EQ"}:
        if t.kind == "str" or (t.kind == "word" and t.text in _CONSTANT_WORDS):
            return (f"positional argument {t.text}: literal arguments need a name, "
                    f"write name={t.text}" + fix, t.line, t.col)
        if t.kind == "word":
            return (f"argument {t.text!r} has no value: write {t.text}=value, or "
                    f"{t.text}=$state.{t.text} to pass a value the plan holds", t.line, t.col)
    starts_arg = t.text in ("(", ",")
    if starts_arg and w.found in ("NUMBER", "LSQB", "LBRACE"):
        return ("positional argument: literal arguments need a name, write name=value" + fix, w.line, w.col)
    return None


def _operators(w: _Where) -> Found:
    t = w.p()
    if w.found == "NAME" and w.text in ("or", "and") and t is not None and t.kind in ("ref", "close", "str",
                                                                                         "num", "word"):
        op = "||" if w.text == "or" else "&&"
        meaning = "the first that has a value" if op == "||" else "all of them, the value of the last"
        return (f"'{w.text}' is not an operator here: write '{op}' ({meaning})", w.line, w.col)
    if w.found == "NAME" and w.text == "not":
        return ("'not' is not an operator: the DSL passes values, it does not compute them; "
                "let a tool compute the value", w.line, w.col)
    if w.found == "STRING" and t is not None and t.kind == "op" and t.text in ("||", "&&"):
        return (f"'{t.text}' joins references only: a literal cannot be an operand; write the default "
                "into the plan's input or state and refer to it", w.line, w.col)
    return None


def _chars(w: _Where) -> Found:
    if w.found != "CHAR":
        return None
    ch, nxt = w.text, w.after[1:2]
    t = w.p()
    if ch == "/" and nxt in ("/", "*"):
        return ("comments start with '#': write # comment", w.line, w.col)
    if ch == "`":
        return ("backticks do not quote strings: write \"text\"", w.line, w.col)
    if ch in "\u201c\u201d\u2018\u2019":
        return ("curly quotes do not quote strings: write straight quotes \"text\"", w.line, w.col)
    if ch == "+":
        return ("'+' does not join values: the DSL has no arithmetic; to build text write one string "
                "with references in it, \"Hello †{input.name}!\"", w.line, w.col)
    if ch == "?" and nxt == "?":
        return ("'??' is written '||' here: $input.a || $state.b takes the first that has a value",
                w.line, w.col)
    if ch == "?" and nxt == ".":
        return ("'?.' (optional chaining) is not needed: a reference without a value skips the call; "
                "write $input.a.b, or $input.a.b || $state.other for a fallback", w.line, w.col)
    if ch == "!":
        return ("'!' is not an operator: the DSL passes values, it does not compute them; "
                "let a tool compute the value", w.line, w.col)
    if ch == "|":
        return ("a single '|' is not an operator: write '||' (the first operand that has a value)",
                w.line, w.col)
    if ch == "*":
        return ("argument unpacking (*args, **kwargs) is not supported: name each argument, x=value",
                w.line, w.col)
    if ch == "." and t is not None and t.text == ")":
        return ("calls cannot be chained: write two statements, the first storing its result "
                "(†state.a = f(...)) and the second reading it (g(x=†state.a))", w.line, w.col)
    if ch == "." and nxt.isdigit():
        return ("a number starts with a digit: write 0" + w.after[:8].split(")")[0].split(",")[0],
                w.line, w.col)
    if ch == "-":
        return ("'-' must be followed by digits (a negative number such as -1)", w.line, w.col)
    if ch == "<" or ch == ">":
        return (f"'{ch}' is not an operator: the DSL passes values, it does not compare them", w.line, w.col)
    return None


def _assignments(w: _Where) -> Found:
    t, t1, t2 = w.p(), w.p(1), w.p(2)
    if w.found == "_EQ" and t is not None and t.text == "=" and t1 is not None and t1.kind == "ref":
        return ("'==' is not an assignment: write one '=' to store the call's result, "
                f"{t1.text} = tool(...)", t.line, t.col)
    if w.found == "_EQ" and t is not None and t.kind == "kw":
        name = t.text.rstrip(" \t=")
        return (f"'==' is not an operator: write {name}=value", w.line, w.col)
    if w.found == "_COLON" and t is not None and t.kind == "ref":
        return ("':=' is not an output operator: write '=' (or &=, |=, <<=, +=)", w.line, w.col)
    if w.found == "_COLON" and t is not None and t.kind == "word" and w.top() == "(":
        return (f"keyword arguments use '=', not ':': write {t.text}=value", w.line, w.col)
    if w.found == "_EQ" and t is not None and t.text == ")" and w.after.startswith("=>"):
        return ("the output path goes before the call: write †state.x = tool(...)", w.line, w.col)
    if w.found == "_EQ" and t is not None and t.kind == "word" and "." in t.text and w.at_statement_start(1):
        return (f"an output path starts with '†' (or '$'): write ${t.text} = tool(...)", t.line, t.col)
    if w.found == "LPAR" and t is not None and t.kind == "word" and t1 is not None and t1.kind == "kw":
        name = t1.text.rstrip(" \t=")
        if t2 is not None and t2.kind == "word" and t2.text in ("let", "const", "var", "val", "auto"):
            return (f"there are no variables ('{t2.text}'): store the result at an output path, "
                    f"$state.{name} = {t.text}(...)", t2.line, t2.col)
        if w.at_statement_start(2) and name not in ("goal", "mode", "id", "input", "state", "output"):
            return (f"'{name}' is not a variable: store the result at an output path, "
                    f"$state.{name} = {t.text}(...)", t1.line, t1.col)
    if w.found == "LPAR" and t is not None and t1 is not None and t1.kind == "word" and w.at_statement_start(2):
        if t1.text == "await":
            return ("'await' is not needed: a call runs as soon as its inputs have values; "
                    "remove it", t1.line, t1.col)
        if t1.text in ("def", "function", "async", "class", "if", "for", "while"):
            return (f"'{t1.text}' is not part of the DSL: a plan is a list of calls, "
                    "not a program", t1.line, t1.col)
    return None


def _separators(w: _Where) -> Found:
    t = w.p()
    if t is None:
        return None
    if w.found == "_COMMA" and t.text in (",", "(", "[", "{"):
        what = {"(": "argument", "[": "list item", "{": "object member"}.get(w.top() or "", "item")
        return (f"empty {what}: remove the extra ','", w.line, w.col)
    if w.found == "STRING" and t.kind == "word" and w.adjacent() and t.text.lower() in ("f", "r", "b", "u",
                                                                                         "rb", "br", "fr"):
        return (f"string prefixes ({t.text}\"...\") are not supported; to put a value in text write "
                "a reference in the string, \"hi †{input.name}\"", t.line, t.col)
    if w.found == "STRING" and t.kind == "str" and w.adjacent() and t.text in ('""', "''"):
        return ("triple-quoted strings are not supported: write one string on one line, with \\n for "
                "line breaks", t.line, t.col)
    if w.found == "NAME" and t.kind == "num" and w.adjacent():
        if w.text.startswith(("x", "X", "o", "b")) and t.text in ("0", "-0"):
            return ("only decimal numbers are supported: write the number in decimal", t.line, t.col)
        if w.text.startswith("_"):
            return ("underscores in numbers are not supported: write the digits alone, 1000",
                    t.line, t.col)
    if w.found == "NAME" and t.kind == "word" and t.text == "lambda":
        return ("functions are not values: a plan passes data; write a tool for the computation",
                t.line, t.col)
    if w.found in ("STRING", "DOTTED", "NAME") and t.kind == "ref" and t.text in ("$", "†") and w.adjacent() is False:
        return (f"no space may follow '{t.text}': write {t.text}{w.text}", t.line, t.col)
    t1 = w.p(1)
    if w.found == "STRING" and t.text == "[" and t1 is not None and t1.kind == "ref" and t1.end == t.end - 1:
        key = w.text[1:-1]
        return (f"a quoted name in brackets is not a path segment: write {t1.text}.{key}", t.line, t.col)
    starts_value = w.found in ("KW", "NAME", "STRING", "NUMBER", "REF", "LSQB", "LBRACE", "DOTTED")
    if starts_value and "_COMMA" in w.expected and w.top() is not None and (
            w.line == t.line or (w.found == "KW" and w.top() == "(")):
        what = {"(": "arguments", "[": "list items", "{": "object members"}[w.top()]
        return (f"missing ',' between {what}: add ',' before this", w.line, w.col)
    if w.found in ("STRING", "NUMBER", "NAME") and w.top() == "{" and w.expected <= {"_COLON"}:
        return ("missing ':' after the key: object members are written key: value", w.line, w.col)
    if w.found == "KW" and w.top() == "{":
        return ("object members are written key: value, not key=value", w.line, w.col)
    if not w.stack and t.text == ")" and w.found in ("NAME", "DOTTED", "REF", "DECO", "KW", "STRING"):
        return ("two statements on one line: put the second on its own line, or separate them "
                "with ';'", w.line, w.col)
    if w.found == "KW" and t.kind == "word" and w.at_statement_start(1):
        return (f"a call needs parentheses: write {t.text}({w.text.rstrip(' =')}=...)", w.line, w.col)
    return None


def _ref_brackets(w: _Where) -> Found:
    """`$input.items[abc]`: a bracket after a reference that is neither an index nor JMESPath."""
    if w.found != "RSQB":
        return None
    k = next((n for n in range(len(w.prev)) if w.prev[n].text == "["), None)
    if k is None or k + 1 >= len(w.prev):
        return None
    bracket, ref = w.prev[k], w.prev[k + 1]
    if ref.kind != "ref" or ref.end != bracket.end - 1:
        return None
    inner = w.source[bracket.end:w.pos]
    name = ref.text.rstrip(".")
    if ref.text.endswith("."):
        return (f"no '.' goes before '[': write {name}[{inner}]", ref.line, ref.col)
    hint = f"; for a name write {name}.{inner}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", inner) else ""
    return (f"'[{inner}]' after a reference: a bracket holds an index ([0], [-1]), a slice ([1:3]), [*], [] "
            f"or a filter ([?price > `10`]){hint}", ref.line, ref.col)


def _endings(w: _Where) -> Found:
    t = w.p()
    if t is None or w.found not in ("$END", "_NL"):
        return None
    if t.text == "->":
        return ("'->' needs a value: the call's inline output, for example -> {\"ok\": true}", t.line, t.col)
    if t.kind == "word" and t.text == "return" and w.at_statement_start(1):
        return ("'return' needs a value: the plan's final output, for example return †state.answer",
                t.line, t.col)
    if t.kind == "kw":
        return (f"'{t.text.rstrip(' =')}' needs a value after '='", t.line, t.col)
    if t.kind == "op" and t.text.startswith("@"):
        return None
    return None


def _decorators(w: _Where) -> Found:
    t, t1, t2 = w.p(), w.p(1), w.p(2)
    if t is None or t1 is None:
        return None
    if t.kind == "word" and t1.text == "@" and w.found in ("STRING", "NUMBER"):
        return (f"decorator arguments go in parentheses: @{t.text}({w.text})", w.line, w.col)
    if t2 is not None and t2.text == "@" and t1.kind == "word" and t.kind in ("word", "str", "num") \
            and w.found in ("_NL", "$END", "NAME", "DOTTED"):
        return (f"decorator arguments go in parentheses: @{t1.text}({t.text})", t.line, t.col)
    return None


_RULES: tuple[Callable[[_Where], Found], ...] = (
    _chars, _comment_value, _brackets, _ref_brackets, _decorators, _positional, _operators, _assignments, _separators,
    _endings)


def explain(found: str, text: str, line: int, col: int, pos: int, expected: Any, source: str) -> Found:
    """A message naming the cause and the fix of a syntax error, and its position, or None.

    ``found`` is the terminal the parser could not shift (``"$END"`` at the end,
    ``"CHAR"`` when the lexer met a character no token starts with), ``text`` its text,
    ``line``/``col``/``pos`` where it is in ``source``, ``expected`` the terminals the
    parser would have taken."""
    try:
        prev, stack = _scan(source, pos, line)
        w = _Where(found, text, line, col, pos, frozenset(expected or ()), source, prev, stack,
                   source[pos:pos + 16])
        for rule in _RULES:
            hit = rule(w)
            if hit is not None:
                return hit
    except Exception:  # noqa: BLE001  # pragma: no cover - an explanation must never break the parse
        return None
    return None


def badref_message(text: str) -> str:
    """The E105 message of a malformed bare reference, naming what is wrong in it."""
    body = text[1:]
    tail = "(`$` is the ASCII alias of `†`)"
    if not body or not (body[0].isalpha() or body[0] == "_"):
        return (f"malformed reference {text!r}: a reference starts with a kind right after the dagger, "
                f"such as $input.name or $state.items[0] {tail}")
    if body.endswith("."):
        return f"malformed reference {text!r}: a reference cannot end with '.'; remove it or add a name"
    if ".." in body:
        return f"malformed reference {text!r}: '..' leaves a name out; write one '.' between names"
    if "[" in body:
        return (f"malformed reference {text!r}: a bracket must hold an index ([0], [-1]), a slice ([1:3]), "
                f"[*] or a filter ([?price > `10`]), and be closed with ']'")
    if "-" in body:
        return (f"malformed reference {text!r}: a name in a reference cannot contain '-'; "
                "use the name with '_', or quote it in braces: †{input.\"user-name\"}")
    return f"malformed reference {text!r}: expected †kind.name.name[index] {tail}"
