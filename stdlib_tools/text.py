"""Text tools: ``text.template``, ``text.split``, ``text.join``, ``text.regex_extract`` and
``text.truncate`` (the JSON-aware result truncation of seed 002)."""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from typing_extensions import TypedDict

from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolSpec

from ._common import Field, make_tool
from .config import StdlibConfig, uses_config
from .errors import ToolError
from .limits import Budget, bounded_json_text

__all__ = ["build", "render_template", "truncate_result", "TruncateResult", "Match",
           "DEFAULT_TRUNCATE_CHARS"]

DEFAULT_TRUNCATE_CHARS = 8000
MAX_REGEX_INPUT = 1_000_000
MAX_MATCHES = 1000
#: seconds of matching a regex tool may spend (a catastrophic pattern, `(a+)+$`, would take years)
REGEX_TIMEOUT = 2.0

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_FLAG_BITS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (bool, int, float, dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _lookup(values: Any, name: str) -> Any:
    cur = values
    for seg in name.split("."):
        if isinstance(cur, dict) and seg in cur:
            cur = cur[seg]
        elif isinstance(cur, list) and re.fullmatch(r"-?\d+", seg) and -len(cur) <= int(seg) < len(cur):
            cur = cur[int(seg)]
        else:
            raise KeyError(name)
    return cur


@contextmanager
def _time_limit(pattern: str):
    """``Text.RegexTimeout`` for a match that ran out of :data:`REGEX_TIMEOUT`."""
    try:
        yield
    except TimeoutError:
        raise ToolError("Text.RegexTimeout",
                        f"regex {pattern[:80]!r} took more than {REGEX_TIMEOUT:g} s to match (it backtracks "
                        "catastrophically on this text): simplify it, e.g. no nested repetition "
                        "like (a+)+") from None


def render_template(template: str, values: dict[str, Any], *, strict: bool = True,
                    max_chars: int = 16 << 20) -> str:
    """Replace ``{name}`` / ``{a.b.0}`` with values; ``{{`` and ``}}`` are literal braces.

    No format-spec or attribute access: only dictionary keys and list indexes.
    Non-string values are written as JSON.  A missing name raises (``strict``) or stays as is.
    The text is bounded as it is built: past ``max_chars``, ``Result.TooLarge``.
    """
    budget = Budget(max_chars, "text.template")
    budget.charge(len(template))

    def sub(m: re.Match[str]) -> str:
        tok = m.group(0)
        if tok == "{{":
            return "{"
        if tok == "}}":
            return "}"
        name = m.group(1).strip()
        try:
            return bounded_json_text(_lookup(values, name), budget)
        except KeyError:
            if strict:
                raise ToolError("Text.MissingValue", f"no value for placeholder {{{name}}}") from None
            return tok

    return _PLACEHOLDER.sub(sub, template)


class TruncateResult(TypedDict):
    text: str
    truncated: bool
    original_chars: int
    shown_items: int | None
    total_items: int | None


def _truncate_text(text: str, max_chars: int) -> str:
    marker = "...[truncated]"
    if max_chars <= len(marker):
        return text[:max_chars]
    cut = text[: max_chars - len(marker)]
    boundary = max(cut.rfind(" "), cut.rfind("\n"), cut.rfind("\t"))
    if boundary > len(cut) // 2:  # the last word boundary, unless it throws away half the text
        cut = cut[:boundary].rstrip()
    return cut + marker


def truncate_result(value: Any, max_chars: int = DEFAULT_TRUNCATE_CHARS) -> TruncateResult:
    """Seed 002's ToolResultTruncator: cap a result at ``max_chars`` characters.

    A JSON array (a list, or a string holding one) keeps the largest prefix of items
    that fits, found by binary search, followed by ``[...truncated, showing X/Y items]``.
    Other values are serialised to text and cut at the last word boundary.
    """
    if max_chars < 1:
        raise ToolError("Text.InvalidArgument", "max_chars must be positive")
    items: list[Any] | None = None
    if isinstance(value, list):
        items = value
        text = json.dumps(value, ensure_ascii=False)
    elif isinstance(value, str):
        text = value
        stripped = value.lstrip()
        if stripped.startswith("[") and len(value) > max_chars:
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = None
            if isinstance(parsed, list):
                items = parsed
    else:
        text = _as_text(value)
    total = len(text)
    if total <= max_chars:
        return TruncateResult(text=text, truncated=False, original_chars=total,
                              shown_items=len(items) if items is not None else None,
                              total_items=len(items) if items is not None else None)
    if items is not None:
        n = len(items)

        def render(k: int) -> str:
            return json.dumps(items[:k], ensure_ascii=False) + f"[...truncated, showing {k}/{n} items]"

        lo, hi = 0, n  # largest k with len(render(k)) <= max_chars
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(render(mid)) <= max_chars:
                lo = mid
            else:
                hi = mid - 1
        out = render(lo)
        if len(out) <= max_chars:
            return TruncateResult(text=out, truncated=True, original_chars=total,
                                  shown_items=lo, total_items=n)
    return TruncateResult(text=_truncate_text(text, max_chars), truncated=True, original_chars=total,
                          shown_items=None, total_items=None)


class Match(TypedDict):
    match: str
    groups: list[str | None]
    named: dict[str, str | None]
    start: int
    end: int


@uses_config("max_result_bytes", "truncate_chars")
def build(config: StdlibConfig) -> list[ToolSpec]:
    def template(template: Annotated[str, Field(description='text with {name} placeholders; '
                                                '{{ and }} are literal braces')],
                 values: dict[str, Any], strict: bool = True) -> str:
        return render_template(template, values, strict=strict, max_chars=config.max_result_bytes)

    def compiled(pattern: str, bits: int):
        # the `regex` module (a dependency) matches like `re` but takes a timeout
        import regex

        try:
            return regex.compile(pattern, bits)
        except (regex.error, re.error) as exc:
            raise ToolError("Text.InvalidRegex", f"invalid regex {pattern!r}: {exc}") from None

    def split(text: str,
              separator: Annotated[str | None, Field(description="None splits on whitespace")] = None,
              regex: bool = False, max_splits: int = -1, strip: bool = True,
              drop_empty: bool = False) -> list[str]:
        if regex:
            if not separator:
                raise ToolError("Text.InvalidArgument", "a regex split needs a separator")
            rx = compiled(separator, 0)
            with _time_limit(separator):
                parts = rx.split(text, maxsplit=max(max_splits, 0), timeout=REGEX_TIMEOUT)
            parts = [p for p in parts if isinstance(p, str)]
        else:
            parts = text.split(separator, max_splits) if separator != "" else list(text)
        if strip:
            parts = [p.strip() for p in parts]
        if drop_empty:
            parts = [p for p in parts if p]
        return parts

    def join(items: list[Any], separator: str = "") -> str:
        budget = Budget(config.max_result_bytes, "text.join")
        budget.charge(len(separator) * max(len(items) - 1, 0))
        return separator.join([bounded_json_text(i, budget) for i in items])

    def regex_extract(text: str, pattern: str,
                      flags: list[Literal["i", "m", "s", "x"]] | None = None,
                      first_only: bool = False) -> list[Match]:
        if len(text) > MAX_REGEX_INPUT:
            raise ToolError("Text.TooLarge", f"text longer than {MAX_REGEX_INPUT} characters")
        bits = 0
        for f in flags or ():
            if f not in _FLAG_BITS:
                raise ToolError("Text.InvalidArgument", f"unknown regex flag {f!r}")
            bits |= _FLAG_BITS[f]
        rx = compiled(pattern, bits)
        out: list[Match] = []
        budget = Budget(config.max_result_bytes, "text.regex_extract")
        with _time_limit(pattern):
            for m in rx.finditer(text, timeout=REGEX_TIMEOUT):
                budget.charge(len(m.group(0)) + sum(len(g) for g in m.groups() if g) + 64)
                out.append(Match(match=m.group(0), groups=list(m.groups()), named=m.groupdict(),
                                 start=m.start(), end=m.end()))
                if first_only or len(out) >= MAX_MATCHES:
                    break
        return out

    def truncate(value: Annotated[Any, Field(description="text or any JSON value")],
                 max_chars: Annotated[int, Field(ge=1)] = config.truncate_chars) -> TruncateResult:
        return truncate_result(value, max_chars)

    return [
        make_tool(template, "text.template", Risk.NONE,
                  "Render a template: each {name} (or {a.b.0}) placeholder is replaced by that value "
                  "from `values`; non-string values are written as JSON."),
        make_tool(split, "text.split", Risk.NONE,
                  "Split text on a separator (whitespace by default, or a regex)."),
        make_tool(join, "text.join", Risk.NONE,
                  "Join items into one string with a separator (non-strings are written as JSON)."),
        make_tool(regex_extract, "text.regex_extract", Risk.NONE,
                  "Find the matches of a regular expression in text, with their groups."),
        make_tool(truncate, "text.truncate", Risk.NONE,
                  f"Cap text or a JSON value at max_chars characters (default {config.truncate_chars}). "
                  "A JSON array keeps as many whole items as fit, followed by "
                  "`[...truncated, showing X/Y items]`; text is cut at a word boundary."),
    ]
