"""Comments of the text DSL attached to statements by line position (they are trivia:
the printer puts them back, nothing else reads them).  The lexer collects them
(``line -> (column, text)``); :func:`attach_comments` runs once the statements are built."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..diagnostics import Span
from ..model import Call

__all__ = ["attach_comments"]


class _Body:
    """The anchor key of a map body call (the comment fields are set on the call itself)."""

    __slots__ = ("call",)

    def __init__(self, call: Call) -> None:
        self.call = call


def _body_anchors(spec: Any, anchors: list) -> None:
    for b in spec.body:
        if b.span is not None:
            anchors.append((b.span.line, b.span.column, b.span.end_line, _Body(b)))
            if b.map is not None:
                _body_anchors(b.map, anchors)


def attach_comments(comments: dict[int, tuple[int, str]], calls: list[Call],
                    fields: Iterable[tuple[str, Span]], lines: list[str]) -> tuple[list[Call], dict[str, Any]]:
    """Attach the collected comments to statements by line position.

    * a comment at the end of a statement's last line is that statement's trailing comment;
    * any other comment inside a statement (between its decorators, label and call, inside
      its argument list or a multi-line value) and a comment on its own line directly
      before a statement is a leading comment of that statement;
    * comments before the first statement that a blank line separates from it open the
      file (``Plan.comments``); comments after the last statement are
      ``Plan.trailing_comments``.

    Statements are the calls and ``fields`` (the header fields, tool declarations
    (``"tool NAME"``) and ``return`` that were built, with their spans); a comment before
    a statement with an error moves on to the next statement.  ``comments`` maps a line
    to the column and text of its comment, ``lines`` are the source's.  Returns the calls
    (with comments) and the comment fields of the plan.
    """
    # (start line, start column, end line, key); key: call index or field key
    anchors: list[tuple[int, int, int, Any]] = []
    for i, c in enumerate(calls):
        if c.span is not None:
            anchors.append((c.span.line, c.span.column, c.span.end_line, i))
            if c.map is not None:  # a map's body calls keep their own comments (nested maps too)
                _body_anchors(c.map, anchors)
    for key, sp in fields:
        anchors.append((sp.line, sp.column, sp.end_line, key))
    anchors.sort(key=lambda a: (a[0], a[1]))

    head: list[str] = []
    tail: list[str] = []
    leading: dict[Any, list[str]] = {}
    trailing: dict[Any, str] = {}
    n = len(anchors)
    # Comments on lines before `first_blank` (the blank line nearest above the first
    # statement, or above the last comment in a file without statements) open the file.
    first_blank = 0
    for ln in range((anchors[0][0] if anchors else max(comments)) - 1, 0, -1):
        if not lines[ln - 1].strip():
            first_blank = ln
            break
    k = 0
    for line in sorted(comments):
        col, text = comments[line]
        while k < n and anchors[k][2] < line:
            k += 1
        if k == n:
            tail.append(text)
            continue
        # the last statement that starts on or before this line and has not ended yet
        j = k
        while j + 1 < n and anchors[j + 1][0] <= line and anchors[j + 1][2] >= line:
            j += 1
        start, _, end, key = anchors[j]
        if start <= line and j + 1 < n and anchors[j + 1][0] > line and anchors[j + 1][2] <= end:
            # inside a map, on a line before one of its body calls: that call's comment
            start, _, end, key = anchors[j + 1]
        if start > line:  # before the statement
            if j == 0 and line < first_blank:
                head.append(text)
            else:
                leading.setdefault(key, []).append(text)
        elif line == end and lines[line - 1][:col - 1].strip():
            trailing[key] = text
        else:
            leading.setdefault(key, []).append(text)

    # The calls were built by this parse and are not shared yet: set the comment fields in
    # place (much cheaper than dataclasses.replace on plans with thousands of comments).
    setattr_ = object.__setattr__
    for key, lead in leading.items():
        if type(key) is int:
            setattr_(calls[key], "comments", tuple(lead))
        elif type(key) is _Body:
            setattr_(key.call, "comments", tuple(lead))
    for key, text in trailing.items():
        if type(key) is int:
            setattr_(calls[key], "trailing_comment", text)
        elif type(key) is _Body:
            setattr_(key.call, "trailing_comment", text)
    fields = []
    for _, _, _, key in anchors:
        if type(key) is str and (key in leading or key in trailing):
            fields.append((key, tuple(leading.get(key, ())), trailing.get(key)))
    if not anchors:  # a file of comments only
        head = [text for line, (_, text) in sorted(comments.items()) if line < first_blank]
        tail = tail[len(head):]
    trivia: dict[str, Any] = {}
    if head:
        trivia["comments"] = tuple(head)
    if fields:
        trivia["field_comments"] = tuple(fields)
    if tail:
        trivia["trailing_comments"] = tuple(tail)
    return calls, trivia
