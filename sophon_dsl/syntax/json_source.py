"""JSON with positions, accepting ``//`` and ``/* */`` comments.

:func:`parse_json` never raises: it returns ``(node, diagnostics)``.  A syntax
error gives one ``E002`` diagnostic at the offending character, saying what was
expected there; duplicate object keys give ``E108`` (the first one is kept) and
parsing goes on.  A key or string holding a lone surrogate (``"\\ud800"``: not
Unicode text, it cannot be written as UTF-8) gives ``E006`` with its JSON path.

Most documents are plain JSON: :func:`json.loads` (C) reads them, and a light walk
over the text, guided by the values already read, only measures where each node
sits. Anything else (comments, errors, duplicate keys, deep nesting, NaN, lone
surrogate escapes, huge numbers) goes to a small hand-written recursive-descent
parser (JSON is LL(1)) that words every diagnostic; both build the same tree. The
parser bounds nesting depth so hostile input cannot exhaust the Python stack.
Apart from comments it is strict JSON: no trailing commas, no single quotes,
no ``NaN``/``Infinity``.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from bisect import bisect_right
from typing import Iterator, Sequence

from ..diagnostics import Diagnostic, Span
from .located import ARRAY, OBJECT, SCALAR, LineIndex, LocatedNode, child_path
# (in a module of their own so that the DSL's reader gets them without this JSON reader;
# re-exported here, where they were defined first)
from .source_limits import (
    LONE_SURROGATE,
    MAX_DEPTH,
    MAX_SOURCE_CHARS,
    MAX_SOURCE_LINES,
    dsl_nesting_problem,
    lone_surrogate_message,
    may_hold_surrogates,
    size_problem,
)

__all__ = ["parse_json", "MAX_DEPTH", "MAX_SOURCE_CHARS", "MAX_SOURCE_LINES", "LONE_SURROGATE",
           "dsl_nesting_problem", "lone_surrogate_message", "lone_surrogates", "may_hold_surrogates",
           "size_problem"]

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_WS = " \t\n\r\ufeff"
_WS_RUN = re.compile("[ \t\n\r\ufeff]*")
# a string without escapes or control characters (most of them): its text is the slice
_PLAIN_STRING = re.compile(r'"([^"\\\x00-\x1f]*)"')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LITERALS = (("true", True), ("false", False), ("null", None))


def lone_surrogates(source: str, node: LocatedNode | None, file: str | None) -> list[Diagnostic]:
    """E006 for each key or string value of the located tree ``node`` holding a lone
    surrogate (the tree of ``source``, which is only walked when it can hold one)."""
    if node is None or not may_hold_surrogates(source):
        return []
    diags: list[Diagnostic] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.kind == OBJECT:
            for key, child in n.value:
                if LONE_SURROGATE.search(key):
                    span = (n.key_spans or {}).get(key) or n.span
                    # the key escaped in the path: it cannot be printed as it is
                    diags.append(Diagnostic("E006", lone_surrogate_message(key), span, file,
                                            f"{n.path}[{json.dumps(key)}]"))
                stack.append(child)
        elif n.kind == ARRAY:
            stack.extend(n.value)
        elif isinstance(n.value, str) and LONE_SURROGATE.search(n.value):
            diags.append(Diagnostic("E006", lone_surrogate_message(n.value), n.span, file, n.path))
    diags.sort(key=lambda d: (d.span.line, d.span.column) if d.span else (0, 0))
    return diags


class _Stop(Exception):
    pass


class _Parser:
    def __init__(self, text: str, file: str | None):
        self.text = text
        self.n = len(text)
        self.pos = 0
        self.file = file
        self.lines = LineIndex(text)
        self.diags: list[Diagnostic] = []

    # -- errors ------------------------------------------------------------
    def fail(self, message: str, offset: int | None = None, path: str | None = None) -> "_Stop":
        off = self.pos if offset is None else offset
        self.diags.append(Diagnostic("E002", message, self.lines.point(off), self.file, path))
        return _Stop()

    def found(self) -> str:
        if self.pos >= self.n:
            return "end of input"
        ch = self.text[self.pos]
        return f"{ch!r}"

    # -- lexing -------------------------------------------------------------
    def skip(self) -> None:
        text, n = self.text, self.n
        while self.pos < n:
            self.pos = _WS_RUN.match(text, self.pos).end()
            if self.pos >= n:
                return
            ch = text[self.pos]
            if ch == "/" and text.startswith("//", self.pos):
                j = text.find("\n", self.pos)
                self.pos = n if j < 0 else j + 1
            elif ch == "/" and text.startswith("/*", self.pos):
                j = text.find("*/", self.pos + 2)
                if j < 0:
                    raise self.fail("unterminated /* comment: expected '*/'")
                self.pos = j + 2
            else:
                return

    # -- grammar --------------------------------------------------------------
    def parse_document(self) -> LocatedNode | None:
        try:
            self.skip()
            if self.pos >= self.n:
                raise self.fail("empty document: expected a JSON value")
            node = self.value("$", 0)
            self.skip()
            if self.pos < self.n:
                raise self.fail(f"unexpected {self.found()} after the JSON value: expected end of input")
            return node
        except _Stop:
            return None
        except RecursionError:  # pragma: no cover - guarded by MAX_DEPTH
            self.diags.append(Diagnostic("E002", "document nested too deeply", self.lines.point(0), self.file))
            return None

    def value(self, path: str, depth: int) -> LocatedNode:
        if self.pos >= self.n:
            raise self.fail("unexpected end of input: expected a value")
        ch = self.text[self.pos]
        if ch == "{" or ch == "[":
            if depth >= MAX_DEPTH:
                raise self.fail(f"nesting deeper than {MAX_DEPTH} levels", path=path)
            return self.obj(path, depth + 1) if ch == "{" else self.arr(path, depth + 1)
        if ch == '"':
            start = self.pos
            s = self.string()
            return LocatedNode(SCALAR, s, self.lines.span(start, self.pos), path, quoted=True)
        if ch == "-" or ch.isdigit():
            return self.number(path)
        for word, val in _LITERALS:
            if self.text.startswith(word, self.pos):
                start = self.pos
                self.pos += len(word)
                return LocatedNode(SCALAR, val, self.lines.span(start, self.pos), path)
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(self.text, self.pos)
        if m:
            word = m.group(0)
            hint = {"True": "true", "False": "false", "None": "null", "NaN": None, "Infinity": None}
            extra = f" (did you mean {hint[word]}?)" if hint.get(word) else ""
            raise self.fail(f"unexpected word {word!r}: expected a value (object, array, string, "
                            f"number, true, false or null){extra}")
        if ch == "'":
            raise self.fail("strings must use double quotes: expected a value")
        raise self.fail(f"unexpected {self.found()}: expected a value (object, array, string, "
                        "number, true, false or null)")

    def number(self, path: str) -> LocatedNode:
        m = _NUMBER.match(self.text, self.pos)
        if not m:
            raise self.fail("malformed number: expected a digit")
        start = self.pos
        self.pos = m.end()
        raw = m.group(0)
        if m.group(1) or m.group(2):
            val: float | int = float(raw)
            if val in (float("inf"), float("-inf")):
                raise self.fail(f"number {raw} is out of range", start)
        else:
            if len(raw) > 4000:
                raise self.fail("integer literal too long", start)
            val = int(raw)
        if self.pos < self.n and (self.text[self.pos].isalnum() or self.text[self.pos] in "._"):
            raise self.fail(f"malformed number: unexpected {self.found()}")
        return LocatedNode(SCALAR, val, self.lines.span(start, self.pos), path)

    def string(self) -> str:
        m = _PLAIN_STRING.match(self.text, self.pos)
        if m is not None:
            self.pos = m.end()
            return m.group(1)
        text, n = self.text, self.n
        start = self.pos
        self.pos += 1
        out: list[str] = []
        while True:
            j = self.pos
            while j < n and text[j] != '"' and text[j] != "\\" and text[j] >= " ":
                j += 1
            out.append(text[self.pos:j])
            self.pos = j
            if j >= n:
                raise self.fail("unterminated string: expected '\"'", start)
            ch = text[j]
            if ch == '"':
                self.pos += 1
                return "".join(out)
            if ch == "\\":
                if j + 1 >= n:
                    raise self.fail("unterminated string: expected '\"'", start)
                esc = text[j + 1]
                if esc in _ESCAPES:
                    out.append(_ESCAPES[esc])
                    self.pos = j + 2
                elif esc == "u":
                    hexa = text[j + 2:j + 6]
                    if len(hexa) != 4 or not all(c in "0123456789abcdefABCDEF" for c in hexa):
                        raise self.fail("malformed \\u escape: expected four hex digits", j)
                    code = int(hexa, 16)
                    self.pos = j + 6
                    if 0xD800 <= code < 0xDC00 and text.startswith("\\u", self.pos):
                        low = text[self.pos + 2:self.pos + 6]
                        if len(low) == 4 and all(c in "0123456789abcdefABCDEF" for c in low):
                            lc = int(low, 16)
                            if 0xDC00 <= lc < 0xE000:
                                code = 0x10000 + ((code - 0xD800) << 10) + (lc - 0xDC00)
                                self.pos += 6
                    out.append(chr(code))  # a lone surrogate stays: parse_json reports it (E006)
                else:
                    raise self.fail(f"invalid escape '\\{esc}' in string: expected one of "
                                    "\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX", j)
            else:
                raise self.fail("control character in string: write it as an escape such as \\n", j)

    def obj(self, path: str, depth: int) -> LocatedNode:
        start = self.pos
        self.pos += 1
        entries: list[tuple[str, LocatedNode]] = []
        key_spans: dict[str, Span] = {}  # also the set of keys seen
        self.skip()
        if self.pos < self.n and self.text[self.pos] == "}":
            self.pos += 1
            return LocatedNode(OBJECT, entries, self.lines.span(start, self.pos), path, key_spans)
        while True:
            self.skip()
            if self.pos >= self.n or self.text[self.pos] != '"':
                what = "'}'" if self.pos < self.n and self.text[self.pos] == "}" else self.found()
                raise self.fail(f"unexpected {what}: expected a property name in double quotes")
            kstart = self.pos
            key = self.string()
            kspan = self.lines.span(kstart, self.pos)
            self.skip()
            if self.pos >= self.n or self.text[self.pos] != ":":
                raise self.fail(f"unexpected {self.found()}: expected ':' after property name")
            self.pos += 1
            self.skip()
            cpath = child_path(path, key)
            val = self.value(cpath, depth)
            if key in key_spans:
                self.diags.append(Diagnostic(
                    "E108", f"duplicate key {key!r}; the first one is kept", kspan, self.file, cpath))
            else:
                entries.append((key, val))
                key_spans[key] = kspan
            self.skip()
            if self.pos < self.n and self.text[self.pos] == ",":
                self.pos += 1
                continue
            if self.pos < self.n and self.text[self.pos] == "}":
                self.pos += 1
                return LocatedNode(OBJECT, entries, self.lines.span(start, self.pos), path, key_spans)
            raise self.fail(f"unexpected {self.found()}: expected ',' or '}}' after a property value")

    def arr(self, path: str, depth: int) -> LocatedNode:
        start = self.pos
        self.pos += 1
        items: list[LocatedNode] = []
        self.skip()
        if self.pos < self.n and self.text[self.pos] == "]":
            self.pos += 1
            return LocatedNode(ARRAY, items, self.lines.span(start, self.pos), path)
        while True:
            self.skip()
            if self.pos < self.n and self.text[self.pos] == "]":
                raise self.fail("unexpected ']' after ',': expected a value (trailing commas are not JSON)")
            items.append(self.value(child_path(path, len(items)), depth))
            self.skip()
            if self.pos < self.n and self.text[self.pos] == ",":
                self.pos += 1
                continue
            if self.pos < self.n and self.text[self.pos] == "]":
                self.pos += 1
                return LocatedNode(ARRAY, items, self.lines.span(start, self.pos), path)
            raise self.fail(f"unexpected {self.found()}: expected ',' or ']' after an array item")


# -- the plain-JSON path ----------------------------------------------------------

class _Unusual(Exception):
    """The document needs the full parser (an error to word, or a value json.loads
    reads differently from the parser)."""


def _no_duplicates(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Unusual  # the parser reports E108 and keeps the first one
    return out


def _refuse_constant(name: str) -> None:
    raise _Unusual  # NaN, Infinity, -Infinity


def _plain_int(text: str) -> int:
    if len(text) > 4000:
        raise _Unusual  # the parser refuses it with its own message
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Unusual  # likewise
    return value


# numbers are refused while the whole document is read, not later when a long array's
# items are measured one by one (where _Unusual could no longer reach the parser)
_PLAIN = dict(object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant, parse_int=_plain_int,
              parse_float=_finite_float)
# one value at an offset of a document json.loads has already read whole
_decode_at = json.JSONDecoder(**_PLAIN).raw_decode


# \uD800-\uDFFF: the parser pairs or replaces surrogates itself
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_BLANK = re.compile(r"[ \t\n\r]*")
_KEY = re.compile(r'[ \t\n\r]*("[^"\\]*(?:\\.[^"\\]*)*")[ \t\n\r]*:[ \t\n\r]*')
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_AFTER_ITEM = re.compile(r"[ \t\n\r]*,?[ \t\n\r]*")
_NEWLINE = re.compile("\n")
_MATCH_END = re.Match.end
_FIRST_LINE = (0,)
_PAST_END = 1 << 62  # past any offset: the last line has no end


class _Measurer:
    """Builds the located tree of a document :func:`json.loads` has read: the values
    come from json.loads, the walk only finds where each one starts and ends."""

    def __init__(self, text: str):
        self.text = text
        # where each line starts, packed (a list holds an int object per line, 40 bytes:
        # a JSON plan prints about nine lines per call, 0.35 KB per call while it loads)
        self.starts = starts = array("q", _FIRST_LINE)
        starts.extend(map(_MATCH_END, _NEWLINE.finditer(text)))
        # the line of the last span asked for: [lo, hi) its offsets.  The walk goes
        # forward through the text, so most spans start on that line or the next one;
        # a bisect of the array (slower than of a list) only for the others
        self._line, self._lo, self._hi = 1, 0, starts[1] if len(starts) > 1 else _PAST_END

    def span(self, start: int, end: int) -> Span:
        lo, hi = self._lo, self._hi
        if lo <= start < hi:
            line = self._line
        else:
            starts = self.starts
            line = self._line + 1
            if hi <= start and line < len(starts) and start < starts[line]:
                lo, hi = hi, starts[line]
            else:
                line = bisect_right(starts, start)
                lo = starts[line - 1]
                hi = starts[line] if line < len(starts) else _PAST_END
            self._line, self._lo, self._hi = line, lo, hi
        if end < hi:
            return Span(line, start - lo + 1, line, end - lo + 1)
        starts = self.starts
        end_line = bisect_right(starts, end)
        return Span(line, start - lo + 1, end_line, end - starts[end_line - 1] + 1)

    def node(self, value, pos: int, path: str, depth: int) -> tuple[LocatedNode, int]:
        """The node of ``value`` written at ``pos``, and the offset just after it."""
        text = self.text
        kind = type(value)
        if kind is str:
            end = _STRING.match(text, pos).end()
            return LocatedNode(SCALAR, value, self.span(pos, end), path, quoted=True), end
        if kind is dict or kind is list:
            if depth >= MAX_DEPTH:
                raise _Unusual
            inner = _BLANK.match(text, pos + 1).end()
            if kind is dict:
                entries: list[tuple[str, LocatedNode]] = []
                key_spans: dict[str, Span] = {}
                for key, item in value.items():
                    m = _KEY.match(text, inner)
                    key_spans[key] = self.span(m.start(1), m.end(1))
                    child, after = self.node(item, m.end(), child_path(path, key), depth + 1)
                    entries.append((key, child))
                    inner = _AFTER_ITEM.match(text, after).end()
                end = inner + 1
                return LocatedNode(OBJECT, entries, self.span(pos, end), path, key_spans), end
            if len(value) >= _LAZY_ITEMS:
                end = _container_end(text, pos, MAX_DEPTH - depth)
                lazy = _Items(self, value, inner, path, depth + 1)
                return LocatedNode(ARRAY, lazy, self.span(pos, end), path), end
            items: list[LocatedNode] = []
            for i, item in enumerate(value):
                child, after = self.node(item, inner, f"{path}[{i}]", depth + 1)
                items.append(child)
                inner = _AFTER_ITEM.match(text, after).end()
            end = inner + 1
            return LocatedNode(ARRAY, items, self.span(pos, end), path), end
        if value is None or value is True:
            end = pos + 4
        elif value is False:
            end = pos + 5
        else:
            end = _NUMBER.match(text, pos).end()
            if kind is int and end - pos > 4000 or kind is float and math.isinf(value):
                raise _Unusual  # the parser refuses these with its own message
        return LocatedNode(SCALAR, value, self.span(pos, end), path), end


# Arrays this long (a plan's calls) are measured item by item as they are read, and
# their items are not kept: the located tree of a whole plan never exists at once.
_LAZY_ITEMS = 32
_LOCATED = object()  # in place of an item's value once it has been located
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def _container_end(text: str, pos: int, levels: int) -> int:
    """The offset just after the array or object that opens at ``pos``; nesting
    ``levels`` deep inside it goes to the parser (its items are measured later, where
    an :class:`_Unusual` could no longer be turned into the parser's diagnostic)."""
    depth = 0
    for m in _STRING_OR_BRACKET.finditer(text, pos):
        ch = text[m.start()]
        if ch == "[" or ch == "{":
            depth += 1
            if depth >= levels:
                raise _Unusual
        elif ch == "]" or ch == "}":
            depth -= 1
            if depth == 0:
                return m.end()
    raise _Unusual  # pragma: no cover - json.loads checked the brackets


class _Items(Sequence):
    """The items of a long array: each located when read, none kept.  json.loads' value
    of an item is let go once the item is located (all of them would cost as much as
    the plan built from them); a later pass over it decodes it again."""

    __slots__ = ("_measurer", "_values", "_count", "_start", "_path", "_depth")

    def __init__(self, measurer: _Measurer, values: list, start: int, path: str, depth: int):
        self._measurer = measurer
        self._values = values
        self._count = len(values)
        self._start = start
        self._path = path
        self._depth = depth

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[LocatedNode]:
        node, text, path, depth = self._measurer.node, self._measurer.text, self._path, self._depth
        pos = self._start
        values = self._values
        for i in range(self._count):
            item = values[i]
            if item is _LOCATED:
                item = _decode_at(text, pos)[0]
            else:
                values[i] = _LOCATED
            child, after = node(item, pos, f"{path}[{i}]", depth)
            yield child
            pos = _AFTER_ITEM.match(text, after).end()

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return list(self)[index]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(index)
        for i, child in enumerate(self):
            if i == index:
                return child
        raise IndexError(index)  # pragma: no cover


def _read_plain(text: str) -> LocatedNode | None:
    """The located tree of a plain JSON document, or ``None`` when it is not one."""
    if _SURROGATE_ESCAPE.search(text):
        return None
    try:
        value = json.loads(text, **_PLAIN)
        measurer = _Measurer(text)
        node, end = measurer.node(value, _BLANK.match(text).end(), "$", 0)
    except (_Unusual, ValueError, RecursionError):
        return None
    except (AttributeError, IndexError):  # pragma: no cover - the walk lost its place
        return None
    if _BLANK.match(text, end).end() != len(text):  # pragma: no cover - json.loads checked it
        return None
    return node


def parse_json(text: str, file: str | None = None) -> tuple[LocatedNode | None, list[Diagnostic]]:
    """Parse JSON (comments allowed) into a :class:`LocatedNode` tree.

    Returns ``(None, diagnostics)`` on a syntax error. Never raises.
    """
    if not isinstance(text, str):
        try:
            text = bytes(text).decode("utf-8")
        except Exception:  # noqa: BLE001 - not bytes, not UTF-8: E002
            return None, [Diagnostic("E002", "input is not UTF-8 text", None, file)]
    too_large = size_problem(text, file)
    if too_large is not None:
        return None, [too_large]
    node = _read_plain(text)
    if node is not None:
        return node, lone_surrogates(text, node, file)
    p = _Parser(text, file)
    node = p.parse_document()
    return node, p.diags + lone_surrogates(text, node, file)
