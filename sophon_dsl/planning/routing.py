"""Capability routing (seeds 000, 002): a call's model hint picks a model that has the
capabilities it asks for; when none qualifies, the call fails with ``Routing.NoQualifiedModel``
instead of silently running on an unqualified model.

Models and their capabilities come from a providers config file (``--provider
config:FILE``), YAML or JSON::

    default: fast
    models:
      fast:    {provider: "openai:gpt-4o-mini", capabilities: [fast, function_calling]}
      thinker: {provider: "anthropic:claude-opus-4-1", capabilities: [reasoning, code_generation,
                long_context]}

A hint is the seed's object, ``@model(requiresReasoning=true)`` in the DSL or
``"_modelHint": {"requiresReasoning": true}`` in JSON: every ``requiresX: true`` asks for
capability ``x`` (camelCase to snake_case: ``requiresCodeGeneration`` -> ``code_generation``);
``capabilities: [...]`` lists them directly and ``model: NAME`` names a model.  Of the models
that have all of them, the default wins when it qualifies, else the first in the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Sequence

from ..llm.provider import Message, ProviderError, check_ready
from ..runtime.errors import RunError

__all__ = ["CAPABILITIES", "ModelRoute", "NO_QUALIFIED_MODEL", "RoutingProvider", "fast_tier", "load_routes",
           "required_capabilities", "route_for"]

NO_QUALIFIED_MODEL = "Routing.NoQualifiedModel"
CAPABILITIES = ("reasoning", "code_generation", "vision", "long_context", "fast", "function_calling")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def required_capabilities(hint: Any) -> tuple[frozenset[str], str | None]:
    """(capabilities asked for, the model named or None) of a model hint."""
    if not isinstance(hint, dict):
        return frozenset(), None
    need = {_snake(k[len("requires"):]) for k, v in hint.items()
            if k.startswith("requires") and len(k) > len("requires") and v is True}
    listed = hint.get("capabilities")
    if isinstance(listed, list):
        need |= {_snake(str(c)) for c in listed}
    named = hint.get("model")
    return frozenset(need), named if isinstance(named, str) else None


@dataclass(frozen=True)
class ModelRoute:
    name: str
    spec: str                    # a provider spec for get_provider (no commas: one provider)
    capabilities: frozenset[str]
    model: str | None = None     # the model to ask for (None: the spec's own)


class RoutingProvider:
    """A provider over several models; plain requests go to the default model, requests with a
    hint through :meth:`route`.  Providers are built on first use."""

    def __init__(self, routes: Sequence[ModelRoute], default: str | None = None, *,
                 build: Callable[..., Any] | None = None, providers: dict | None = None):
        if not routes:
            raise ProviderError("config: no models declared", provider="config")
        self.routes = {r.name: r for r in routes}
        self.default = default or routes[0].name
        if self.default not in self.routes:
            raise ProviderError(f"config: default {self.default!r} is not a declared model", provider="config")
        self.name = f"config({', '.join(self.routes)})"
        self._providers: dict[str, Any] = dict(providers or {})
        self._build = build   # spec, model= -> provider (llm.providers.get_provider; injected: no import loop)

    def provider(self, name: str) -> Any:
        if name not in self._providers:
            if self._build is None:
                raise ProviderError(f"config: no way to build model {name!r}", provider="config")
            route = self.routes[name]
            self._providers[name] = self._build(route.spec, model=route.model)
        return self._providers[name]

    def check_ready(self) -> None:
        for name in self.routes:
            check_ready(self.provider(name))

    def route(self, hint: Any) -> tuple[Any, str | None, str]:
        """(provider, model, route name) for ``hint``; RunError Routing.NoQualifiedModel when no
        declared model has every capability asked for."""
        need, named = required_capabilities(hint)
        if named is not None:
            route = self.routes.get(named)
            if route is None or not need <= route.capabilities:
                raise RunError(NO_QUALIFIED_MODEL, f"the hint names model {named!r}, which "
                               + ("is not declared" if route is None else f"lacks {', '.join(sorted(need - route.capabilities))}")
                               + f"; declared: {self._declared()}")
            return self.provider(named), route.model, named
        fits = [r for r in self.routes.values() if need <= r.capabilities]
        if not fits:
            raise RunError(NO_QUALIFIED_MODEL, f"no declared model has {', '.join(sorted(need))}; "
                           f"declared: {self._declared()}")
        pick = self.routes[self.default] if self.routes[self.default] in fits else fits[0]
        return self.provider(pick.name), pick.model, pick.name

    def _declared(self) -> str:
        return "; ".join(f"{r.name} [{', '.join(sorted(r.capabilities)) or 'none'}]" for r in self.routes.values())

    async def stream(self, messages: Sequence[Message], *, model: str | None = None, **kw: Any) -> AsyncIterator[str]:
        name = model if model in self.routes else self.default
        route = self.routes[name]
        inner = self.provider(name)
        async for delta in inner.stream(messages, model=route.model if model in self.routes or model is None
                                        else model, **kw):
            yield delta


def fast_tier(provider: Any, model: str | None) -> tuple[Any, str | None]:
    """The provider and model for the seeds' fast-tier requests (the planning question, the
    alternative advisor): a declared model with capability ``fast`` when ``provider`` routes
    and has one, else ``provider`` and ``model`` as they are."""
    route = getattr(provider, "route", None)
    if not callable(route):
        return provider, model
    try:
        chosen, routed_model, _ = route({"capabilities": ["fast"]})
    except RunError:
        return provider, model
    return chosen, routed_model


def route_for(provider: Any, hint: Any, model: str | None) -> tuple[Any, str | None]:
    """The provider and model a call with ``hint`` runs on: routed when ``provider`` routes, else
    ``provider`` itself -- refused when it declares ``capabilities`` that lack the hint's."""
    if hint is None:
        return provider, model
    route = getattr(provider, "route", None)
    if callable(route):
        chosen, routed_model, _ = route(hint)
        return chosen, routed_model
    declared = getattr(provider, "capabilities", None)
    need, _ = required_capabilities(hint)
    if declared is not None and not need <= set(declared):
        raise RunError(NO_QUALIFIED_MODEL, f"{getattr(provider, 'name', 'the provider')} lacks "
                       f"{', '.join(sorted(need - set(declared)))}")
    return provider, model


def load_routes(path: str | Path, build: Callable[..., Any] | None = None) -> RoutingProvider:
    """A :class:`RoutingProvider` from a providers config file (see the module docstring)."""
    import json

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except (OSError, ValueError) as exc:
        raise ProviderError(f"config: cannot read {p}: {exc}", provider="config") from exc
    except Exception as exc:  # yaml's own errors
        raise ProviderError(f"config: {p} is not valid YAML: {exc}", provider="config") from exc
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict) or not models:
        raise ProviderError(f"config: {p} needs 'models': {{NAME: {{provider, capabilities}}}}", provider="config")
    routes = []
    for name, entry in models.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("provider"), str):
            raise ProviderError(f"config: model {name!r} needs a 'provider' spec", provider="config")
        if "," in entry["provider"] or entry["provider"].startswith("config:"):
            raise ProviderError(f"config: model {name!r}: one provider per model", provider="config")
        caps = entry.get("capabilities") or []
        if not isinstance(caps, list):
            raise ProviderError(f"config: model {name!r}: capabilities must be a list", provider="config")
        spec = entry["provider"]
        if spec.startswith("scripted:") and not Path(spec[9:]).is_absolute():
            spec = "scripted:" + str(p.parent / spec[9:])    # relative to the config file
        routes.append(ModelRoute(str(name), spec, frozenset(_snake(str(c)) for c in caps), entry.get("model")))
    return RoutingProvider(routes, data.get("default"), build=build)
