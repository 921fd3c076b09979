"""What every plan source may hold, whatever its form, checked before it is parsed: its size
(E007), the DSL's bracket depth (E008), and lone surrogates in strings (E006's test and
message).  Defined apart from :mod:`.json_source` (which re-exports every name) so that
reading a DSL plan does not import the JSON reader."""

from __future__ import annotations

import re

from ..diagnostics import Diagnostic, Span

__all__ = ["LONE_SURROGATE", "MAX_DEPTH", "MAX_SOURCE_CHARS", "MAX_SOURCE_LINES", "dsl_nesting_problem",
           "lone_surrogate_message", "may_hold_surrogates", "size_problem"]

MAX_DEPTH = 200

# What any plan source may hold, whatever its form (issue 17, Medium 11): reading costs
# about its length and its line count, so both are bounded before anything is parsed.
# Sized so that the plans of 100,000 calls the core issue asks to load fit twice over (its
# benchmark shapes print up to 15.1 Mi characters and 900,000 lines, JSON being the
# longest), while the worst text at the bounds still reads in seconds (2,000,000 blank
# DSL lines 4.6 s, 32 Mi characters of spaces or comment in any form under 1 s).
MAX_SOURCE_CHARS = 32 << 20
MAX_SOURCE_LINES = 2_000_000


def size_problem(text: str, file: str | None = None) -> Diagnostic | None:
    """E007 when ``text`` is over MAX_SOURCE_CHARS characters or MAX_SOURCE_LINES lines,
    placed where the limit is crossed; None for every other text (one C-speed count)."""
    if len(text) > MAX_SOURCE_CHARS:
        line = text.count("\n", 0, MAX_SOURCE_CHARS) + 1
        column = MAX_SOURCE_CHARS - (text.rfind("\n", 0, MAX_SOURCE_CHARS) + 1) + 1
        return Diagnostic("E007", f"the plan is {len(text):,} characters long; at most {MAX_SOURCE_CHARS:,} "
                          "are read", Span(line, column, line, column + 1), file)
    lines = text.count("\n") + 1
    if lines > MAX_SOURCE_LINES:
        return Diagnostic("E007", f"the plan has {lines:,} lines; at most {MAX_SOURCE_LINES:,} are read",
                          Span(MAX_SOURCE_LINES + 1, 1, MAX_SOURCE_LINES + 1, 2), file)
    return None


# the DSL's brackets, skipping strings and comments (which may hold any bracket)
_DSL_NESTING = re.compile(r"""[\[\]{}()]|"[^"\\\n]*(?:\\.[^"\\\n]*)*"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'|#[^\n]*""")
_OPENERS = frozenset("[{(")


def dsl_nesting_problem(text: str, file: str | None = None) -> Diagnostic | None:
    """E008 at the first bracket of a DSL text that opens level MAX_DEPTH + 1: the parser
    itself is not recursive, but everything that walks the values it builds (the
    printer, the checks, the run) is."""
    if text.count("[") + text.count("{") + text.count("(") <= MAX_DEPTH:
        return None
    depth = 0
    for m in _DSL_NESTING.finditer(text):
        ch = m.group()
        if ch in _OPENERS:
            depth += 1
            if depth > MAX_DEPTH:
                start = m.start()
                line = text.count("\n", 0, start) + 1
                column = start - (text.rfind("\n", 0, start) + 1) + 1
                return Diagnostic("E008", f"brackets nested deeper than {MAX_DEPTH} levels",
                                  Span(line, column, line, column + 1), file)
        elif len(ch) == 1 and ch in "]})":
            depth = max(depth - 1, 0)
    return None


# A str holds a code point U+D800..U+DFFF only when it came alone (a paired escape decodes
# to one astral character): such a string is not Unicode text and cannot be written as UTF-8.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# what a source must contain to hold one: an escape of JSON/DSL (\uD8xx) or YAML
# (\U0000D8xx), or the code point itself (text handed over by a program, never ASCII)
_SURROGATE_ESCAPE_HINT = re.compile(r"\\u[dD][89a-fA-F]|\\U0000[dD][89a-fA-F]")


def may_hold_surrogates(source: str) -> bool:
    """Whether ``source`` can hold a surrogate at all (most text cannot: then nothing is walked)."""
    # the escapes first: a regex with a literal prefix is ten times faster than a class scan
    if _SURROGATE_ESCAPE_HINT.search(source) is not None:
        return True
    return not source.isascii() and LONE_SURROGATE.search(source) is not None


def lone_surrogate_message(text: str) -> str:
    """The E006 message for a string ``text`` holding a lone surrogate."""
    code = ord(LONE_SURROGATE.search(text).group())  # type: ignore[union-attr]
    return (f"string holds a lone surrogate \\u{code:04x}: it is not Unicode text and cannot be "
            "written as UTF-8; write the character itself or a complete surrogate pair")
