"""The Messages API over the official ``anthropic`` SDK, streamed: :class:`AnthropicProvider`.

Spec: ``anthropic`` or ``anthropic:MODEL``.  ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL`` are
read by the SDK.
"""

from __future__ import annotations

import inspect
import os
from typing import Any, AsyncIterator, Iterable, Sequence

from ..provider import Message, ProviderError
from .sdk import SDKProvider

__all__ = ["AnthropicProvider", "DEFAULT_ANTHROPIC_MAX_TOKENS", "DEFAULT_ANTHROPIC_MODEL", "from_spec"]

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"
DEFAULT_ANTHROPIC_MAX_TOKENS = 4096
_ANTHROPIC_DEFAULT_BASE = "https://api.anthropic.com"


def _merge_roles(messages: Iterable[Message]) -> list[dict[str, str]]:
    """Chat messages as dicts, consecutive messages of the same role joined by a blank line."""
    out: list[dict[str, str]] = []
    for m in messages:
        if out and out[-1]["role"] == m.role:
            out[-1]["content"] += "\n\n" + m.content
        else:
            out.append({"role": m.role, "content": m.content})
    return out


class AnthropicProvider(SDKProvider):
    """The Messages API over the official ``anthropic`` SDK, streamed.

    ``api_key`` / ``base_url`` default to what the SDK reads (``ANTHROPIC_API_KEY``,
    ``ANTHROPIC_BASE_URL``); with neither a key nor a non-default base URL, :meth:`check_ready`
    and the first request raise a :class:`ProviderError` naming ``ANTHROPIC_API_KEY``. System messages
    become the ``system`` parameter; consecutive messages of one role are joined. ``max_tokens`` is
    required by the API and defaults to ``default_max_tokens``. ``json_schema`` is sent as
    ``output_config={"format": {"type": "json_schema", "schema": ...}}`` (structured outputs).
    Parameters the installed SDK's ``messages.create`` does not know travel in ``extra_body``;
    ``temperature`` is dropped when the SDK no longer accepts it (recent SDKs removed sampling
    parameters from the Messages API).
    A stream that ends without ``message_stop`` was cut off and raises a retryable
    :class:`ProviderError` (the SDK itself does not notice a connection closed early).
    """

    package = "anthropic"
    model_env = "SOPHON_ANTHROPIC_MODEL"
    default_model = DEFAULT_ANTHROPIC_MODEL

    def __init__(self, model: str | None = None, *, base_url: str | None = None,
                 api_key: str | None = None, timeout: float | None = 600.0,
                 default_max_tokens: int = DEFAULT_ANTHROPIC_MAX_TOKENS,
                 extra_body: dict | None = None, client: Any = None, name: str = "anthropic"):
        super().__init__(model, base_url=base_url, api_key=api_key, timeout=timeout,
                         extra_body=extra_body, client=client, name=name)
        self.default_max_tokens = default_max_tokens

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r})"

    def client_options(self) -> dict[str, Any]:
        options = super().client_options()
        if self.api_key is not None:
            options["api_key"] = self.api_key
        elif not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
            base = self.base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
            if base in (None, _ANTHROPIC_DEFAULT_BASE):
                raise ProviderError(
                    "anthropic: no API key; set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a "
                    "local Anthropic-compatible server)", provider=self.name, retryable=False)
            options["api_key"] = "sk-no-key-required"  # local compatible servers usually need none
        return options

    def new_client(self, options: dict[str, Any]) -> Any:
        from anthropic import AsyncAnthropic

        return AsyncAnthropic(**options)

    def request_params(self, messages: Sequence[Message], *, model: str | None = None,
                       json_schema: dict | None = None, temperature: float | None = None,
                       max_tokens: int | None = None) -> dict[str, Any]:
        """The keyword arguments passed to ``messages.create`` (without ``stream``)."""
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        chat = _merge_roles(m for m in messages if m.role != "system")
        params: dict[str, Any] = {
            "model": model or self.model,
            "messages": chat,
            "max_tokens": max_tokens if max_tokens is not None else self.default_max_tokens,
        }
        if system:
            params["system"] = system
        if temperature is not None:
            params["temperature"] = temperature
        if json_schema is not None:
            params["output_config"] = {"format": {"type": "json_schema", "schema": json_schema}}
        if self.extra_body:
            params["extra_body"] = dict(self.extra_body)
        return params

    async def open_stream(self, client: Any, params: dict[str, Any]) -> Any:
        return await client.messages.create(stream=True, **_fit_anthropic(client, params))

    async def texts(self, sdk_stream: Any) -> AsyncIterator[str]:
        stopped = False
        async for event in sdk_stream:
            etype = getattr(event, "type", None)
            if etype == "message_stop":
                stopped = True
            if etype != "content_block_delta":
                continue
            delta = event.delta
            if getattr(delta, "type", None) == "text_delta" and delta.text:
                yield delta.text
        if not stopped:
            raise ProviderError(
                f"{self.name}: the stream ended without message_stop (connection lost?)",
                provider=self.name, retryable=True)


def _fit_anthropic(client: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Adapt the request to the installed SDK's ``messages.create`` signature: parameters it does
    not know go in ``extra_body`` (e.g. ``output_config`` on an older SDK), except the sampling
    parameter ``temperature``, which newer SDKs dropped because the API no longer takes it."""
    try:
        accepted = set(inspect.signature(type(client.messages).create).parameters)
    except (TypeError, ValueError, AttributeError):
        return params
    if "kwargs" in accepted:
        return params
    fitted: dict[str, Any] = {}
    extra = dict(params.get("extra_body") or {})
    for key, value in params.items():
        if key == "extra_body" or key in accepted:
            fitted[key] = value
        elif key != "temperature":
            extra[key] = value
    if extra:
        fitted["extra_body"] = extra
    return fitted


def from_spec(arg: str, model: str | None) -> AnthropicProvider:
    """``anthropic[:MODEL]``: the model named in the spec (``arg``), else ``model``, else the default."""
    return AnthropicProvider(arg or model)
