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

from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Sequence

from ..llm.capabilities import Capable, capability_name, split_specs
from ..llm.provider import Message, ProviderError, check_ready
from ..llm.providers.failover import FailoverProvider
from ..llm.providers.sdk import SDKProvider
from ..runtime.errors import RunError
from .budget import BudgetedProvider
from .context import ContextWindowProvider

__all__ = ["CAPABILITIES", "ModelRoute", "NO_QUALIFIED_MODEL", "RoutingProvider", "capabilities_of", "fast_tier",
           "load_routes", "required_capabilities", "route_for"]

NO_QUALIFIED_MODEL = "Routing.NoQualifiedModel"
CAPABILITIES = ("reasoning", "code_generation", "vision", "long_context", "fast", "function_calling")


def required_capabilities(hint: Any) -> tuple[frozenset[str], str | None]:
    """(capabilities asked for, the model named or None) of a model hint."""
    if not isinstance(hint, dict):
        return frozenset(), None
    need = {capability_name(k[len("requires"):]) for k, v in hint.items()
            if k.startswith("requires") and len(k) > len("requires") and v is True}
    listed = hint.get("capabilities")
    if isinstance(listed, list):
        need |= {capability_name(str(c)) for c in listed}
    named = hint.get("model")
    return frozenset(need), named if isinstance(named, str) else None


@dataclass(frozen=True)
class ModelRoute:
    name: str
    spec: str                    # a provider spec for get_provider (no commas: one provider)
    capabilities: frozenset[str] | None   # None: not declared, what the provider says (its model's defaults)
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

    def route_capabilities(self, name: str) -> frozenset[str]:
        """What model ``name`` can do: its declared list, else what its provider says."""
        route = self.routes[name]
        if route.capabilities is not None:
            return route.capabilities
        return capabilities_of(self.provider(name), route.model)

    def route(self, hint: Any) -> tuple[Any, str | None, str]:
        """(provider, model, route name) for ``hint``; RunError Routing.NoQualifiedModel when no
        declared model has every capability asked for."""
        need, named = required_capabilities(hint)
        if named is not None:
            route = self.routes.get(named)
            if route is None or not need <= self.route_capabilities(named):
                lacks = "is not declared" if route is None else \
                    f"lacks {', '.join(sorted(need - self.route_capabilities(named)))}"
                raise RunError(NO_QUALIFIED_MODEL, f"the hint names model {named!r}, which {lacks}; "
                               f"declared: {self._declared()}")
            return self.provider(named), route.model, named
        fits = [r for r in self.routes.values() if need <= self.route_capabilities(r.name)]
        if not fits:
            raise RunError(NO_QUALIFIED_MODEL, f"no declared model has {', '.join(sorted(need))}; "
                           f"declared: {self._declared()}")
        pick = self.routes[self.default] if self.routes[self.default] in fits else fits[0]
        return self.provider(pick.name), pick.model, pick.name

    def _declared(self) -> str:
        return "; ".join(f"{n} [{', '.join(sorted(self.route_capabilities(n))) or 'none'}]" for n in self.routes)

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
    and has one, else ``provider`` and ``model`` as they are (a preference, not a requirement)."""
    if not isinstance(provider, RoutingProvider):
        return provider, model
    try:
        chosen, routed_model, _ = provider.route({"capabilities": ["fast"]})
    except RunError:
        return provider, model
    return chosen, routed_model


def capabilities_of(provider: Any, model: str | None) -> frozenset[str]:
    """What ``model`` on ``provider`` can do: what the provider says (declared, else the defaults
    for the model's name); a provider that cannot say has none."""
    return provider.capabilities_for(model) if isinstance(provider, Capable) else frozenset()


def route_for(provider: Any, hint: Any, model: str | None) -> tuple[Any, str | None]:
    """The provider and model a call with ``hint`` runs on, whatever the provider: a config
    routes to a qualified model; a failover keeps only its qualified providers; the guards'
    wrappers (budget, context window) route what they wrap; any other provider must itself have
    every capability asked for.  RunError ``Routing.NoQualifiedModel`` when nothing qualifies:
    a hinted call never runs on a model that lacks what it asks for (seed 000)."""
    if hint is None:
        return provider, model
    if isinstance(provider, RoutingProvider):
        chosen, routed_model, _ = provider.route(hint)
        return chosen, routed_model
    if isinstance(provider, BudgetedProvider):
        inner, routed_model = route_for(provider.inner, hint, model)
        if inner is provider.inner:
            return provider, routed_model
        return BudgetedProvider(inner, provider.budget, routed_model or provider.default_model), routed_model
    if isinstance(provider, ContextWindowProvider):
        inner, routed_model = route_for(provider.inner, hint, model)
        return (provider if inner is provider.inner else ContextWindowProvider(inner, provider.window)), routed_model
    need, named = required_capabilities(hint)
    model = named or model   # a hint naming a model asks this provider for that model
    if isinstance(provider, FailoverProvider):
        keep = [p for p in provider.providers if need <= capabilities_of(p, model)]
        if not keep:
            raise RunError(NO_QUALIFIED_MODEL, f"no provider of {provider.name} has {', '.join(sorted(need))}; "
                           + "; ".join(_described(p, model) for p in provider.providers) + _HOW)
        return (provider if len(keep) == len(provider.providers) else provider.narrowed(keep)), model
    if not need <= capabilities_of(provider, model):
        raise RunError(NO_QUALIFIED_MODEL, f"{_described(provider, model)} lacks "
                       f"{', '.join(sorted(need - capabilities_of(provider, model)))}" + _HOW)
    return provider, model


_HOW = (" (declare what a model can do in its provider spec, e.g. --provider 'openai:MODEL[reasoning]', "
        "or route hints over several models with --provider config:FILE)")


def _described(provider: Any, model: str | None) -> str:
    """``openai (gpt-4o) [code_generation, vision]``: a provider, its model, what it can do."""
    own = model or (provider.model if isinstance(provider, SDKProvider) else None)
    caps = capabilities_of(provider, model)
    return (provider.name + (f" ({own})" if own else "")
            + f" [{', '.join(sorted(caps)) or 'no capabilities'}]")


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
        if len(split_specs(entry["provider"])) != 1 or entry["provider"].startswith("config:"):
            raise ProviderError(f"config: model {name!r}: one provider per model", provider="config")
        caps = entry.get("capabilities")
        if caps is not None and not isinstance(caps, list):
            raise ProviderError(f"config: model {name!r}: capabilities must be a list", provider="config")
        spec = entry["provider"]
        if spec.startswith("scripted:") and not Path(spec[9:]).is_absolute():
            spec = "scripted:" + str(p.parent / spec[9:])    # relative to the config file
        # no capabilities key: what the model's provider says (its spec's [...], else the
        # defaults for the model's name; sophon_dsl.llm.capabilities)
        declared = None if caps is None else frozenset(capability_name(str(c)) for c in caps)
        routes.append(ModelRoute(str(name), spec, declared, entry.get("model")))
    return RoutingProvider(routes, data.get("default"), build=build)
