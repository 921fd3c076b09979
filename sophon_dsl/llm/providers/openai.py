"""Chat Completions over the official ``openai`` SDK, streamed: :class:`OpenAIProvider`.

Spec: ``openai`` or ``openai:MODEL``.  Honours ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` exactly
as the SDK does, so any OpenAI-compatible server works (vLLM, llama.cpp server, Ollama, ...).
"""

from __future__ import annotations

import os
import re
from typing import Any, AsyncIterator, Sequence

from ..provider import Message, ProviderError
from .sdk import SDKProvider

__all__ = ["DEFAULT_OPENAI_MODEL", "OpenAIProvider", "from_spec", "openai_response_format"]

DEFAULT_OPENAI_MODEL = "gpt-4.1-mini"
_OPENAI_DEFAULT_BASE = "https://api.openai.com/v1"


def _schema_name(schema: dict) -> str:
    title = schema.get("title") if isinstance(schema, dict) else None
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", title).strip("_") if isinstance(title, str) else ""
    return (name or "output")[:64]


def openai_response_format(json_schema: dict) -> dict:
    """The Chat Completions ``response_format`` for a JSON Schema (strict structured output).

    A dict that is already a ``{"name", "schema", ...}`` wrapper is passed through (``strict``
    defaulting to True)."""
    if "schema" in json_schema and "name" in json_schema and isinstance(json_schema["schema"], dict):
        wrapper = {"strict": True, **json_schema}
    else:
        wrapper = {"name": _schema_name(json_schema), "schema": json_schema, "strict": True}
    return {"type": "json_schema", "json_schema": wrapper}


class OpenAIProvider(SDKProvider):
    """Chat Completions over the official ``openai`` SDK, streamed.

    ``base_url`` and ``api_key`` default to what the SDK reads from ``OPENAI_BASE_URL`` and
    ``OPENAI_API_KEY``. When a non-default base URL is configured and no key is set at all, a
    placeholder key is sent, since local OpenAI-compatible servers usually need none.

    ``max_tokens_param`` names the request field ``max_tokens`` is sent as: by default
    ``max_completion_tokens`` against api.openai.com (newer OpenAI models reject ``max_tokens``)
    and ``max_tokens`` elsewhere (what compatible servers understand).

    One SDK client is made per event loop and reused (so the provider is safe to use from
    several event loops, e.g. repeated ``asyncio.run``), unless ``client`` (an ``AsyncOpenAI``)
    is given; :meth:`aclose` closes the running loop's client.

    A stream that ends without any ``finish_reason`` was cut off (the SDK itself does not notice
    a connection closed early) and raises a retryable :class:`ProviderError`; pass
    ``require_finish_reason=False`` for a server that never sends one.
    """

    package = "openai"
    model_env = "SOPHON_OPENAI_MODEL"
    default_model = DEFAULT_OPENAI_MODEL

    def __init__(self, model: str | None = None, *, base_url: str | None = None,
                 api_key: str | None = None, timeout: float | None = 600.0,
                 max_tokens_param: str | None = None, extra_body: dict | None = None,
                 require_finish_reason: bool = True, client: Any = None, name: str = "openai"):
        super().__init__(model, base_url=base_url, api_key=api_key, timeout=timeout,
                         extra_body=extra_body, client=client, name=name)
        self.max_tokens_param = max_tokens_param
        self.require_finish_reason = require_finish_reason

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self.model!r}, base_url={self._effective_base_url()!r})"

    def _effective_base_url(self) -> str | None:
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or None

    def client_options(self) -> dict[str, Any]:
        options = super().client_options()
        api_key = self.api_key or os.environ.get("OPENAI_API_KEY") or None
        if api_key is None and self._effective_base_url() not in (None, _OPENAI_DEFAULT_BASE):
            api_key = "sk-no-key-required"  # local compatible servers usually need none
        if api_key is None:
            raise ProviderError(
                "openai: no API key; set OPENAI_API_KEY (or OPENAI_BASE_URL for a local "
                "OpenAI-compatible server)", provider=self.name, retryable=False)
        options["api_key"] = api_key
        return options

    def new_client(self, options: dict[str, Any]) -> Any:
        from openai import AsyncOpenAI

        return AsyncOpenAI(**options)

    def request_params(self, messages: Sequence[Message], *, model: str | None = None,
                       json_schema: dict | None = None, temperature: float | None = None,
                       max_tokens: int | None = None) -> dict[str, Any]:
        """The keyword arguments passed to ``chat.completions.create`` (without ``stream``)."""
        params: dict[str, Any] = {"model": model or self.model,
                                  "messages": [{"role": m.role, "content": m.content}
                                               for m in messages]}
        if json_schema is not None:
            params["response_format"] = openai_response_format(json_schema)
        if temperature is not None:
            params["temperature"] = temperature
        if max_tokens is not None:
            field = self.max_tokens_param or (
                "max_completion_tokens"
                if self._effective_base_url() in (None, _OPENAI_DEFAULT_BASE) else "max_tokens")
            params[field] = max_tokens
        if self.extra_body:
            params["extra_body"] = dict(self.extra_body)
        return params

    async def open_stream(self, client: Any, params: dict[str, Any]) -> Any:
        return await client.chat.completions.create(stream=True, **params)

    async def texts(self, sdk_stream: Any) -> AsyncIterator[str]:
        finished = False
        refusal: list[str] = []
        streamed = False
        async for chunk in sdk_stream:
            for choice in getattr(chunk, "choices", None) or ():
                if getattr(choice, "index", 0) != 0:
                    continue
                if getattr(choice, "finish_reason", None):
                    finished = True
                delta = getattr(choice, "delta", None)
                text = getattr(delta, "content", None) if delta is not None else None
                if text:
                    streamed = True
                    yield text
                refused = getattr(delta, "refusal", None) if delta is not None else None
                if isinstance(refused, str) and refused:
                    refusal.append(refused)
        if refusal and not streamed:
            raise ProviderError(f"{self.name}: the model refused: {''.join(refusal)}",
                                provider=self.name, retryable=False)
        if self.require_finish_reason and not finished:
            raise ProviderError(
                f"{self.name}: the stream ended without a finish_reason "
                "(connection lost?)", provider=self.name, retryable=True)


def from_spec(arg: str, model: str | None) -> OpenAIProvider:
    """``openai[:MODEL]``: the model named in the spec (``arg``), else ``model``, else the default."""
    return OpenAIProvider(arg or model)
