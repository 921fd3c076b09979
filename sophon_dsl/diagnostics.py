"""Diagnostics: where something is wrong, what was expected, under a stable code.

Every loader and the compiler report problems as :class:`Diagnostic` values
instead of raising.  A diagnostic carries a :class:`Span` (1-based line and
column, end exclusive) and, for YAML/JSON sources, the JSON path of the node
it is about.  :func:`render_text` prints them actionlint style::

    plan.plan:3:9: error[E201]: unknown tool 'web.serch'; did you mean 'web.search'?
      3 | †state.hits = web.serch(query="x")
        |               ^~~~~~~~~

The catalogue of codes lives in :data:`CODES`; ``spec/diagnostics.md``
documents each one.  Codes never change meaning once published.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable, Sequence

from .errors import SophonError

__all__ = [
    "CODES",
    "Diagnostic",
    "DiagnosticError",
    "Severity",
    "Span",
    "excerpt",
    "has_errors",
    "render_json",
    "render_text",
    "visible",
]


@dataclass(frozen=True, slots=True)
class Span:
    """A region of source text. Lines and columns are 1-based; the end is exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int

    @staticmethod
    def point(line: int, column: int) -> "Span":
        return Span(line, column, line, column + 1)

    def to_dict(self) -> dict:
        return {
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
        }


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


# code -> (default severity, short title).  The title is the rule name shown in
# docs; messages are written at the point of detection.
CODES: dict[str, tuple[Severity, str]] = {
    # E0xx: reading the source
    "E001": (Severity.ERROR, "syntax error"),
    "E002": (Severity.ERROR, "invalid JSON"),
    "E003": (Severity.ERROR, "invalid YAML"),
    "E004": (Severity.ERROR, "YAML feature refused (unsafe tag, alias bomb or nesting too deep)"),
    "E005": (Severity.ERROR, "unreadable file or unknown format"),
    "E006": (Severity.ERROR, "lone surrogate in a string"),
    "E007": (Severity.ERROR, "plan source too large (characters or lines)"),
    "E008": (Severity.ERROR, "DSL brackets nested too deeply"),
    # E1xx: document shape
    "E101": (Severity.ERROR, "document shape not recognised"),
    "E102": (Severity.ERROR, "call is not an object or lacks _tool"),
    "E103": (Severity.ERROR, "meta-property has the wrong type or value"),
    "E104": (Severity.ERROR, "unknown meta-property"),
    "E105": (Severity.ERROR, "malformed reference or expression"),
    "E106": (Severity.ERROR, "malformed output path"),
    "E107": (Severity.ERROR, "header field has the wrong type or value"),
    "E108": (Severity.ERROR, "duplicate header field or parameter"),
    "E109": (Severity.ERROR, "malformed tool declaration"),
    "E110": (Severity.ERROR, "cannot load tools"),
    "E111": (Severity.ERROR, "step list breaks the planner's rules (JarvisCore PlannedSteps)"),
    # E2xx: tools and parameters
    "E201": (Severity.ERROR, "unknown tool"),
    "E202": (Severity.ERROR, "missing required parameter"),
    "E203": (Severity.ERROR, "unknown parameter"),
    "E204": (Severity.ERROR, "literal does not match the parameter's schema"),
    "E205": (Severity.ERROR, "reference type mismatch"),
    "E206": (Severity.ERROR, "latent call needs an LLM executor"),
    "E207": (Severity.ERROR, "activity without an implementation"),
    "E208": (Severity.ERROR, "output value does not match the plan's output schema"),
    "E209": (Severity.ERROR, "call names an activity that is not registered"),
    "E210": (Severity.ERROR, "output path other than the one the tool prescribes"),
    "E211": (Severity.ERROR, "prescribed output path is not an output path"),
    "E212": (Severity.ERROR, "streamed call writes what an earlier read already consumed"),
    # E3xx: data flow
    "E301": (Severity.ERROR, "read of a path that nothing writes"),
    "E302": (Severity.ERROR, "dependency cycle"),
    "E303": (Severity.ERROR, "duplicate call id"),
    "E304": (Severity.ERROR, "'after' names an unknown call"),
    "E305": (Severity.ERROR, "too many calls"),
    "E306": (Severity.ERROR, "unknown reference kind"),
    "E307": (Severity.ERROR, "output path targets a read-only kind"),
    "E308": (Severity.ERROR, "output path the state schema does not allow"),
    "E309": (Severity.ERROR, "writer's type conflicts with the state schema"),
    "E310": (Severity.ERROR, "read of an input path the run's input does not have"),
    # E4xx: modes
    "E401": (Severity.ERROR, "inline _output not allowed in lazy mode"),
    "E402": (Severity.ERROR, "inline _output on an activity call"),
    # E7xx: where tool calls run (scale-out, docs/scale-out.md)
    "E701": (Severity.ERROR, "executor spec not valid"),
    "E702": (Severity.ERROR, "executor config not valid"),
    "E703": (Severity.ERROR, "Dask cluster unreachable, without workers, or not answering"),
    "E704": (Severity.ERROR, "tool cannot be shipped to or loaded on the workers"),
    "E705": (Severity.ERROR, "no worker has the resources a tool needs"),
    "E706": (Severity.ERROR, "workers lack this sophon-dsl version"),
    # E5xx: map over a list
    "E501": (Severity.ERROR, "malformed map"),
    "E502": (Severity.ERROR, "map over a value that is not a list"),
    "E503": (Severity.ERROR, "map body call writes outside the item's local data"),
    "E504": (Severity.ERROR, "map body reads local data no body call writes"),
    "E505": (Severity.ERROR, "map item type conflicts with a parameter's schema"),
    "E506": (Severity.ERROR, "map item path the list's item schema does not have"),
    "E507": (Severity.ERROR, "duplicate call id in a map body"),
    "E508": (Severity.ERROR, "map body 'after' names an unknown call"),
    "E509": (Severity.ERROR, "map body dependency cycle"),
    # W: warnings
    "W101": (Severity.WARNING, "text that looks like a reference but is not one"),
    "W202": (Severity.WARNING, "call risk lower than its tool's risk"),
    "W301": (Severity.WARNING, "unordered concurrent writers to one path"),
    "W302": (Severity.WARNING, "branch alternative never read"),
    "W303": (Severity.WARNING, "read of a state path nothing in the plan writes (no state schema)"),
    "W304": (Severity.WARNING, "path written both as a list and as an object"),
    "W305": (Severity.WARNING, "reads of input paths without an input schema"),
    "W401": (Severity.WARNING, "branching output path collapsed in eager mode"),
    # N: notes
    "N201": (Severity.NOTE, "tool replaces a standard tool of the same name"),
    "N301": (Severity.NOTE, "read of a collecting branch alternative: [] when no writer takes it"),
}


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem found in a plan. ``path`` is a JSON path such as ``$[1]._outputPath``."""

    code: str
    message: str
    span: Span | None = None
    file: str | None = None
    path: str | None = None
    severity: Severity | None = None
    related: tuple[str, ...] = field(default=())
    # What the diagnostic is about, as data for programs (e.g. E306: {"kind": "draft"});
    # not rendered, not compared.
    data: dict | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.severity is None:
            default = CODES.get(self.code, (Severity.ERROR, ""))[0]
            object.__setattr__(self, "severity", default)

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    @property
    def line(self) -> int | None:
        return self.span.line if self.span else None

    @property
    def column(self) -> int | None:
        return self.span.column if self.span else None

    def with_file(self, file: str | None) -> "Diagnostic":
        if file is None or self.file is not None:
            return self
        return Diagnostic(self.code, self.message, self.span, file, self.path, self.severity, self.related,
                          self.data)

    def to_dict(self) -> dict:
        span = self.span
        return {
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
            "file": self.file,
            "line": span.line if span else None,
            "column": span.column if span else None,
            "end_line": span.end_line if span else None,
            "end_column": span.end_column if span else None,
            "path": self.path,
        }

    def __str__(self) -> str:
        return render_one(self, None)


class DiagnosticError(SophonError):
    """Raised by convenience APIs (``load``/``loads``) when a plan has errors.

    ``diagnostics`` holds every problem found, not only the first.
    """

    def __init__(self, diagnostics: Sequence[Diagnostic], source: str | None = None):
        self.diagnostics = list(diagnostics)
        self.source = source
        super().__init__(render_text(self.diagnostics, source) if self.diagnostics else "invalid plan")


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.is_error for d in diagnostics)


def sort_key(d: Diagnostic) -> tuple:
    span = d.span
    return (d.file or "", span.line if span else 0, span.column if span else 0, d.code)


# control characters (C0 but tab and newline, DEL, C1) and bidirectional overrides /
# isolates, as the approval prompt escapes them (runtime/approval.py): a plan is often
# written by a model or comes with a pull request, and `check` prints its lines and names
# to a terminal, where an escape sequence would run (retitle, clear the screen) and a bidi
# override would show the line reordered, not as the parser read it
_HIDING = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` with control and bidirectional characters written ``\\uXXXX``, never interpreted."""
    return _HIDING.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def render_one(d: Diagnostic, source: str | list[str] | None) -> str:
    where = d.file or "<plan>"
    if d.span:
        where += f":{d.span.line}:{d.span.column}"
    head = visible(f"{where}: {d.severity.value}[{d.code}]: {d.message}")
    if d.path:
        head += f" (at {visible(d.path)})"
    lines = [head]
    if source is not None and d.span is not None:
        lines.extend(excerpt(source, d.span))
    lines.extend(f"  note: {r}" for r in d.related)
    return "\n".join(lines)


_EXCERPT_WIDTH = 160  # longest source excerpt shown; longer lines are cut around the span


def excerpt(source: str | list[str], span: Span) -> list[str]:
    """The span's source line and a ``^~~`` underline. ``source`` is the text, or its lines
    split at ``"\n"`` (the line ends every reader counts; a ``"\r"`` before one is not shown)."""
    src_lines = source.split("\n") if isinstance(source, str) else source
    if not (1 <= span.line <= len(src_lines)):
        return []
    text = src_lines[span.line - 1].rstrip("\r").expandtabs(1)
    gutter = str(span.line)
    start = max(span.column - 1, 0)
    if span.end_line == span.line:
        width = max(span.end_column - span.column, 1)
    else:
        width = max(len(text) - start, 1)
    width = min(width, max(len(text) - start, 1))
    if len(text) > _EXCERPT_WIDTH:
        # a window around the span's start, each cut end marked with "…"
        lo = max(0, min(start - _EXCERPT_WIDTH // 3, len(text) - _EXCERPT_WIDTH))
        hi = lo + _EXCERPT_WIDTH
        shown = ("…" if lo else "") + text[lo:hi] + ("…" if hi < len(text) else "")
        start = start - lo + (1 if lo else 0)
        width = max(1, min(width, hi - (start + lo - (1 if lo else 0))))
        text = shown
    if _HIDING.search(text):  # escaped, and the underline moved to where the span is shown
        start, width = len(visible(text[:start])), max(len(visible(text[start:start + width])), 1)
        text = visible(text)
    marker = "^" + "~" * (width - 1)
    pad = " " * len(gutter)
    return [f"  {gutter} | {text}", f"  {pad} | {' ' * start}{marker}"]


def render_text(diagnostics: Iterable[Diagnostic], source: str | None = None,
                sources: dict[str, str] | None = None) -> str:
    """Render diagnostics for a terminal. ``sources`` maps file names to their text."""
    out = []
    split: dict[int, list[str]] = {}  # each source split into lines once, not per diagnostic
    for d in sorted(diagnostics, key=sort_key):
        text = source
        if sources is not None and d.file in sources:
            text = sources[d.file]
        if text is not None and d.span is not None:
            lines = split.get(id(text))
            if lines is None:
                lines = split[id(text)] = text.split("\n")
            out.append(render_one(d, lines))
        else:
            out.append(render_one(d, text))
    return "\n".join(out)


def render_json(diagnostics: Iterable[Diagnostic]) -> str:
    return json.dumps([d.to_dict() for d in sorted(diagnostics, key=sort_key)], ensure_ascii=False, indent=2)
