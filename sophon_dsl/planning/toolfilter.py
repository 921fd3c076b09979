"""The tool filter (seed 002): with more than :data:`MAX_TOOLS` tools, the prompt offers the
ten most relevant to the request.

Each tool scores +1.0 per tag that is a word of the request and +0.5 per word of its
description that is a word of the request (words of three letters or more; each distinct
word counts once).  A tool's tags are its ``tags`` when it has them, else the parts of its
name (``web.search`` -> ``web``, ``search``).  The seed's always-on tools (``datetime.now``
and ``memory.search``) are offered whenever they are registered; the rest of the ten are the
best scores, ties kept in registration order.  Filtering only shapes the prompt: the checker
still accepts a call of any registered tool.
"""

from __future__ import annotations

import re
from typing import Any, Protocol, Sequence, runtime_checkable

__all__ = ["ALWAYS_ON", "MAX_TOOLS", "filter_tools", "tool_score"]

MAX_TOOLS = 10
ALWAYS_ON = ("datetime.now", "memory.search")
TAG_POINTS = 1.0
KEYWORD_POINTS = 0.5
_WORD = re.compile(r"[a-z0-9]{3,}")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


@runtime_checkable
class Tagged(Protocol):
    """A tool that names its own tags (docs/planning.md): matched before the parts of its name."""

    tags: Sequence[str]


def _tags(spec: Any) -> set[str]:
    tags = spec.tags if isinstance(spec, Tagged) else None
    if tags:
        return {str(t).lower() for t in tags}
    return {p for p in re.split(r"[._\-/]", spec.name.lower()) if p}


def tool_score(spec: Any, request_words: set[str]) -> float:
    tags = _tags(spec)
    described = _words(spec.description or "") - tags
    return TAG_POINTS * len(tags & request_words) + KEYWORD_POINTS * len(described & request_words)


def filter_tools(specs: Sequence[Any], request: str, limit: int = MAX_TOOLS,
                 always_on: Sequence[str] = ALWAYS_ON) -> list[Any]:
    """At most ``limit`` of ``specs`` for ``request`` (all of them when there are no more)."""
    if len(specs) <= limit:
        return list(specs)
    words = _words(request)
    fixed = [s for s in specs if s.name in always_on][:limit]
    rest = [s for s in specs if s.name not in always_on]
    ranked = sorted(range(len(rest)), key=lambda i: (-tool_score(rest[i], words), i))
    chosen = {id(s) for s in fixed} | {id(rest[i]) for i in ranked[:limit - len(fixed)]}
    return [s for s in specs if id(s) in chosen]   # registration order, as the prompt lists them
