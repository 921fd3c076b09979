"""Provider specs -> providers: :func:`get_provider` and the table of spec prefixes.

Adding a provider is one module (its class and a ``from_spec(arg, model)`` factory) plus one
line in :data:`PROVIDERS`.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from ..capabilities import parse_declared, split_specs
from ..provider import Provider, ProviderError
from . import anthropic, openai, scripted
from .failover import FailoverProvider

__all__ = ["PROVIDERS", "ProviderFactory", "get_provider"]


class ProviderFactory(NamedTuple):
    usage: str  # the spec's form, shown when a spec names no known provider
    build: Callable[[str, "str | None"], Provider]  # (text after the colon, default model)


PROVIDERS: dict[str, ProviderFactory] = {
    "openai": ProviderFactory("openai[:MODEL]", openai.from_spec),
    "anthropic": ProviderFactory("anthropic[:MODEL]", anthropic.from_spec),
    "scripted": ProviderFactory("scripted:FILE", scripted.from_spec),
    "config": ProviderFactory("config:FILE", lambda arg, model: _routes(arg)),
}


def _routes(path: str) -> Provider:
    """``config:FILE``: several models with their capabilities (sophon_dsl.planning.routing)."""
    from ...planning.routing import load_routes

    if not path:
        raise ProviderError("config provider needs a file: 'config:FILE'", provider="config", retryable=False)
    return load_routes(path, build=get_provider)


def _single(spec: str, model: str | None) -> Provider:
    try:
        spec, caps = parse_declared(spec)
    except ValueError as exc:
        raise ProviderError(str(exc), retryable=False) from None
    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    factory = PROVIDERS.get(kind)
    if factory is None:
        forms = ", ".join(repr(f.usage) for f in PROVIDERS.values())
        raise ProviderError(f"unknown provider {spec!r}; expected {forms}, or several of them "
                            "separated by commas", retryable=False)
    if caps is not None and kind == "config":
        raise ProviderError("config:FILE declares capabilities per model, in the file, not in "
                            "brackets after the spec", provider="config", retryable=False)
    provider = factory.build(arg.strip(), model)
    if caps is not None:
        # ``SPEC[cap,...]`` (llm/capabilities.py): what this provider's model can do, declared by
        # the user; wins over the defaults for the model's name
        provider.capabilities = caps
    return provider


def get_provider(spec: str, *, model: str | None = None) -> Provider:
    """Build a provider from a spec.

    ``"openai"`` / ``"anthropic"`` (optionally ``":MODEL"``, which wins over ``model``),
    ``"scripted:FILE"``, or several specs separated by commas -> a :class:`FailoverProvider`
    over them in that order. A missing SDK raises a :class:`ProviderError` naming the extra to
    install.  Any spec but ``config:`` may end in ``[cap,...]``, the capabilities its model
    has (``"openai:qwen3-32b[reasoning]"``; sophon_dsl.llm.capabilities)."""
    parts = split_specs(spec or "")
    if not parts:
        raise ProviderError("empty provider spec", retryable=False)
    providers = [_single(p, model) for p in parts]
    if len(providers) == 1:
        return providers[0]
    return FailoverProvider(providers)
