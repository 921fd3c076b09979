"""What a model can do, for capability routing (seed 000 "Model hints", seed 002 #3).

A model hint (``@model(requiresReasoning=true)``) must never run silently on a model that does
not have the capability, so every provider has to be able to say what its model can do:

* declared in the provider spec, for any provider: ``openai:qwen3-32b[reasoning,code_generation]``,
  ``scripted:replies.yaml[reasoning]`` (``[]`` declares none); a ``capabilities:`` list in a
  script file; ``capabilities=`` on the provider classes; per model in a ``config:FILE``;
* else the defaults for known model names (:data:`KNOWN_MODELS`), looked up by the model the
  request goes to (the spec's, ``--model``, or the provider's default);
* else nothing: an unknown model is taken to have no capability, so a hinted call fails with
  ``Routing.NoQualifiedModel`` and a message saying how to declare one.

Names are free words written snake_case (``requiresCodeGeneration`` asks for
``code_generation``); the usual ones are :data:`USUAL`.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import Iterable, Protocol, runtime_checkable

from ..errors import OptionError

__all__ = ["Capable", "KNOWN_MODELS", "USUAL", "capability_name", "declared", "model_capabilities",
           "parse_declared", "split_specs"]

USUAL = ("reasoning", "code_generation", "vision", "long_context", "fast", "function_calling")

_R, _C, _V, _L, _F, _T = USUAL
# First match wins (fnmatch, case-insensitive), so the narrower patterns come first.  Only
# what the vendor documents: "reasoning" is a model that thinks before answering (OpenAI's o
# series and GPT-5, Claude's extended thinking, DeepSeek-R1, QwQ); "long_context" is 200k tokens
# or more; "fast" the vendor's small, low-latency tier.
KNOWN_MODELS: tuple[tuple[str, frozenset[str]], ...] = tuple((p, frozenset(c)) for p, c in (
    ("o1-mini*", (_R, _C)),
    ("o[1345]*", (_R, _C, _V, _L, _T)),
    ("gpt-5*-nano*", (_R, _C, _V, _L, _T, _F)),
    ("gpt-5*-mini*", (_R, _C, _V, _L, _T, _F)),
    ("gpt-5*", (_R, _C, _V, _L, _T)),
    ("gpt-4.1-mini*", (_C, _V, _L, _T, _F)),
    ("gpt-4.1-nano*", (_C, _V, _L, _T, _F)),
    ("gpt-4.1*", (_C, _V, _L, _T)),
    ("gpt-4o-mini*", (_C, _V, _T, _F)),
    ("gpt-4o*", (_C, _V, _T)),
    ("gpt-3.5*", (_T, _F)),
    ("claude-*haiku*", (_C, _V, _L, _T, _F)),
    ("claude-3-5-sonnet*", (_C, _V, _L, _T)),
    ("claude-3-opus*", (_C, _V, _L, _T)),
    ("claude-3-7-sonnet*", (_R, _C, _V, _L, _T)),
    ("claude-opus-4*", (_R, _C, _V, _L, _T)),
    ("claude-sonnet-4*", (_R, _C, _V, _L, _T)),
    ("claude-4*", (_R, _C, _V, _L, _T)),
    ("gemini-*flash-lite*", (_V, _L, _T, _F)),
    ("gemini-2.5-flash*", (_R, _C, _V, _L, _T, _F)),
    ("gemini-2.5-pro*", (_R, _C, _V, _L, _T)),
    ("gemini-*flash*", (_V, _L, _T, _F)),
    ("deepseek-reasoner*", (_R, _C)),
    ("deepseek-r1*", (_R, _C)),
    ("qwq*", (_R, _C)),
))

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_DECLARED = re.compile(r"(?s)(.*?)\[([^\[\]]*)\]\s*")


@runtime_checkable
class Capable(Protocol):
    """A provider that can say what the model a request goes to can do."""

    def capabilities_for(self, model: str | None) -> frozenset[str]:
        """The capabilities of ``model`` (None: the provider's own model) on this provider."""
        ...


def capability_name(name: str) -> str:
    """``requiresCodeGeneration``'s ``CodeGeneration``, or ``longContext`` -> ``long_context``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def model_capabilities(model: str | None) -> frozenset[str]:
    """The defaults for a known model name (a ``vendor/`` prefix, as routers write it, is
    ignored); an unknown name has none."""
    if not model:
        return frozenset()
    name = model.strip().lower().rsplit("/", 1)[-1]
    for pattern, caps in KNOWN_MODELS:
        if fnmatchcase(name, pattern):
            return caps
    return frozenset()


def declared(names: Iterable[object] | None) -> frozenset[str] | None:
    """A declared list as capability names (None stays None: nothing declared)."""
    if names is None:
        return None
    return frozenset(capability_name(str(n).strip()) for n in names if str(n).strip())


def parse_declared(spec: str) -> tuple[str, frozenset[str] | None]:
    """``"openai:m[reasoning, vision]"`` -> ``("openai:m", {"reasoning", "vision"})``; a spec
    without brackets declares nothing (None).  ValueError for a name that is not a word."""
    m = _DECLARED.fullmatch(spec)
    if m is None:
        return spec, None
    names = [n.strip() for n in m.group(2).replace("+", ",").split(",") if n.strip()]
    bad = [n for n in names if not _NAME.fullmatch(n)]
    if bad:
        raise OptionError(f"{bad[0]!r} in {spec!r} is not a capability name (a word such as reasoning, "
                         "code_generation or vision)")
    return m.group(1).strip(), frozenset(capability_name(n) for n in names)


def split_specs(spec: str) -> list[str]:
    """A failover spec's parts: split on commas outside ``[...]`` (a declared list may hold commas)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(spec):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            parts.append(spec[start:i])
            start = i + 1
    parts.append(spec[start:])
    return [p.strip() for p in parts if p.strip()]
