"""Reading a JSON reply while it streams: each call as soon as its object closes.

A seed-shaped reply (``{"calls": [{...}, {...}], "output": ...}``, a plan
document with ``calls`` / ``plan``, or a bare list of calls) is scanned
character by character, once: :class:`JsonReplyScanner` tracks strings,
escapes and bracket depth, and reports

* a **call** when an object that is an element of the calls array closes
  (``}`` back at the array's depth; a map call's body, nested in it, closes before it,
  so a map is handed over whole), and
* a **member** when a top-level member other than the calls and the output
  closes (``"tools": {...}``, ``"stateSchema": {...}``, ``"goal": "..."``), so
  declarations written before the calls apply to the calls after them.

Each item comes with a *document* to parse: the item's own text at its place
in the reply, everything before it blanked to spaces (newlines kept) and
wrapped in ``[...]`` or ``{..., "calls": []}``, so the located JSON reader gives
positions in the whole reply and the per-call checks run on a one-call plan.
The blanked prefix grows with the reply (one translation per delta), so
building a document is one string copy.

Why a scanner and not partial parsing of the text so far
(``pydantic_core.from_json(..., allow_partial=True)`` / jiter): partial parsing
of a prefix cannot tell a closed object from one cut short (``[{"a": 1`` and
``[{"a": 1}`` give the same value), so a call could only be taken when the next
element starts, and parsing the growing text again at every delta is quadratic
in the reply.  The scanner knows the moment the ``}`` arrives and costs one
step per character.  ``pydantic_core.from_json`` is used where it fits: a fast
look inside a closed element of a bare list, to tell a call (``_tool``) from a
context message (``{"type": "state", ...}``), which is left to the whole
document at the end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CALL_KEYS", "JsonItem", "JsonReplyScanner", "is_call_object"]

#: Members of a top-level object whose array holds the calls.
CALL_KEYS = frozenset({"calls", "plan"})
_NOT_HEADER = CALL_KEYS | {"output"}
_NOT_NEWLINE = re.compile(r"[^\n]")


@dataclass(frozen=True)
class JsonItem:
    kind: str        # "call" or "member"
    text: str        # the call object, or the member ``"key": value``
    document: str    # a JSON document holding just this item, at its place in the reply
    key: str | None = None


def is_call_object(text: str) -> bool | None:
    """Whether a closed element of a bare list is a call (has ``_tool``, or ``_map``: a map
    call, whose body closes with it); None when it is not valid JSON (the located reader
    will say why)."""
    from pydantic_core import from_json

    try:
        value = from_json(text)
    except (ValueError, TypeError):  # TypeError: a lone surrogate (\udcff) cannot be UTF-8 encoded
        return None
    return isinstance(value, dict) and ("_tool" in value or "_map" in value)


def _blank(text: str) -> str:
    """Spaces for every character but newlines (so lines and columns stay put)."""
    return _NOT_NEWLINE.sub(" ", text)


class JsonReplyScanner:
    """Feed text deltas of a JSON reply; get :class:`JsonItem` s back as they close."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._blanks: list[str] = []
        self._n = 0
        self._depth = 0
        self._quote = False
        self._escape = False
        self._fence = False          # inside a Markdown fence line (```json)
        self._line_start = True
        self._top: str | None = None  # "obj" or "list" once the document starts; "done" after it
        self._doc_start = -1
        self._calls_depth = -1        # depth inside the calls array (its elements open from here)
        self._elem_start = -1
        self._key = ""                # the last string closed at depth 1 (a key, when ':' follows)
        self._str: list[str] | None = None
        self._member_key: str | None = None
        self._member_start = -1
        self._key_start = -1
        self._last_string_start = -1
        self.calls_seen = 0

    # -- the text so far ----------------------------------------------------------

    def _document(self, start: int, end: int, opener: str, closer: str) -> tuple[str, str]:
        """(item text, a document of it in place): blanks before, ``opener`` where the reply's
        document starts, the item, then ``closer``."""
        text = "".join(self._text)
        blank = "".join(self._blanks)
        self._text, self._blanks = [text], [blank]
        item = text[start:end]
        doc = blank[:self._doc_start] + opener + blank[self._doc_start + 1:start] + item + closer
        return item, doc

    # -- scanning -------------------------------------------------------------------

    def feed(self, delta: str) -> list[JsonItem]:
        out: list[JsonItem] = []
        self._text.append(delta)
        self._blanks.append(_blank(delta))
        pos = self._n
        for ch in delta:
            self._step(ch, pos, out)
            pos += 1
        self._n = pos
        return out

    def _step(self, ch: str, pos: int, out: list[JsonItem]) -> None:
        if self._quote:
            if self._escape:
                self._escape = False
            elif ch == "\\":
                self._escape = True
            elif ch == '"':
                self._quote = False
                if self._str is not None:
                    self._key = "".join(self._str)
                    self._str = None
                return
            if self._str is not None:
                self._str.append(ch)
            return
        if self._top is None or self._top == "done":
            self._outside(ch, pos)
            return
        if ch == '"':
            self._quote = True
            if self._depth == 1 and self._top == "obj":
                if self._member_key is not None and self._member_start < 0:
                    self._member_start = pos  # a string value
                self._str = []
                self._last_string_start = pos
            return
        if ch in "[{":
            if self._depth == 1 and self._top == "obj" and self._member_key is not None and self._member_start < 0:
                self._member_start = pos
                if ch == "[" and self._member_key in CALL_KEYS:
                    self._calls_depth = 2
            elif self._depth == self._calls_depth and ch == "{":
                self._elem_start = pos
            self._depth += 1
            return
        if ch in "]}":
            self._depth -= 1
            if self._depth == self._calls_depth and ch == "}" and self._elem_start >= 0:
                self._element(self._elem_start, pos + 1, out)
                self._elem_start = -1
            elif self._depth == self._calls_depth - 1 and ch == "]":
                self._calls_depth = -1  # the calls array is closed
            if self._depth == 0:
                if self._top == "obj":
                    self._member_end(pos, out)
                self._top = "done"
            return
        if self._depth == 1 and self._top == "obj":
            if ch == ":":
                self._member_key = self._key
                self._key_start = self._last_string_start
                self._member_start = -1
            elif ch == ",":
                self._member_end(pos, out)
            elif not ch.isspace() and self._member_key is not None and self._member_start < 0:
                self._member_start = pos  # a scalar value (numbers, true, false, null)

    def _outside(self, ch: str, pos: int) -> None:
        """Before the document (or after it): fences and blank lines are skipped."""
        if self._fence:
            if ch == "\n":
                self._fence = False
                self._line_start = True
            return
        if ch == "\n":
            self._line_start = True
            return
        if ch == "`" and self._line_start:
            self._fence = True
            return
        if ch.isspace():
            return
        self._line_start = False
        if self._top is None and ch in "[{":
            self._top = "list" if ch == "[" else "obj"
            self._doc_start = pos
            self._depth = 1
            if ch == "[":
                self._calls_depth = 1

    def _element(self, start: int, end: int, out: list[JsonItem]) -> None:
        if self._top == "list" and self.calls_seen == 0:
            text = "".join(self._text)[start:end]
            if is_call_object(text) is False:
                # a context list (messages, then a plan message): read whole at the end
                self._calls_depth = -1
                return
        item, doc = self._document(start, end, "[", "]")
        self.calls_seen += 1
        out.append(JsonItem("call", item, doc))

    def _member_end(self, pos: int, out: list[JsonItem]) -> None:
        """The member ending at ``pos`` (a ``,`` or the closing ``}`` at depth 1)."""
        key, start = self._member_key, self._key_start
        self._member_key, self._member_start, self._key_start = None, -1, -1
        if key is None or key in _NOT_HEADER or start < 0:
            return
        item, doc = self._document(start, pos, "{", ', "calls": []}')
        out.append(JsonItem("member", item.rstrip(), doc, key))
