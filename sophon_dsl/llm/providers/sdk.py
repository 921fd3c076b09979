"""What the providers built on an official vendor SDK share: :class:`SDKProvider`.

The SDK is looked up when a provider is built (so a missing one is reported with the extra to
install) and imported with the first client.  Its client is made lazily, one per event loop: an
httpx client must not outlive or cross its loop, and making one costs ~0.1 s (TLS setup), so it
is reused for every call on that loop.  Clients are made with ``max_retries=0``: retrying is the
job of the failover provider, which knows whether text has already been handed to the caller.

A subclass says which SDK it needs, how to make its client, how to build the request and how to
read text out of the SDK's stream; the streaming loop, the error mapping and the closing of an
unfinished stream are here, once.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import weakref
from typing import Any, AsyncIterator, Sequence

from ..capabilities import model_capabilities
from ..provider import Message, ProviderError, close_stream
from .errors import missing_sdk, to_provider_error

__all__ = ["SDKProvider"]


class SDKProvider:
    """Base of the OpenAI and Anthropic providers: settings, per-loop clients, streaming."""

    package = ""  # the SDK's import name, also the name of the extra that installs it
    model_env = ""  # the environment variable naming the default model
    default_model = ""
    # what the model can do when the user declared it (``openai:MODEL[reasoning]``); None: the
    # defaults for the model's name (sophon_dsl.llm.capabilities)
    capabilities: frozenset[str] | None = None

    def __init__(self, model: str | None, *, base_url: str | None, api_key: str | None,
                 timeout: float | None, extra_body: dict | None, client: Any, name: str):
        # found, not imported: the SDK loads with the first client (importing the openai SDK
        # costs more than the rest of the agent's start), so the first request goes out sooner
        try:
            found = client is not None or importlib.util.find_spec(self.package) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise missing_sdk(self.package, self.package)
        self.name = name
        self.model = model or os.environ.get(self.model_env) or self.default_model
        self.base_url = base_url
        self.api_key = api_key
        self.timeout = timeout
        self.extra_body = dict(extra_body or {})
        self._client = client

    def capabilities_for(self, model: str | None) -> frozenset[str]:
        """What ``model`` (None: this provider's) can do: the declared capabilities, else the
        defaults for its name."""
        if self.capabilities is not None:
            return frozenset(self.capabilities)
        return model_capabilities(model or self.model)

    # -- the subclass's part

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for the SDK client's constructor."""
        options: dict[str, Any] = {"max_retries": 0}
        if self.timeout is not None:
            options["timeout"] = self.timeout
        if self.base_url is not None:
            options["base_url"] = self.base_url
        return options

    def new_client(self, options: dict[str, Any]) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def request_params(self, messages: Sequence[Message], *, model: str | None = None,
                       json_schema: dict | None = None, temperature: float | None = None,
                       max_tokens: int | None = None) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    async def open_stream(self, client: Any, params: dict[str, Any]) -> Any:  # pragma: no cover
        raise NotImplementedError

    def texts(self, sdk_stream: Any) -> AsyncIterator[str]:  # pragma: no cover - overridden
        """The reply's text deltas; raises :class:`ProviderError` for a reply that ends badly."""
        raise NotImplementedError

    # -- shared

    def check_ready(self) -> None:
        """Raise :class:`ProviderError` when no request could be sent (no API key), before any is."""
        if self._client is None:
            self.client_options()

    async def stream(self, messages: Sequence[Message], *, model: str | None = None,
                     json_schema: dict | None = None, temperature: float | None = None,
                     max_tokens: int | None = None) -> AsyncIterator[str]:
        params = self.request_params(messages, model=model, json_schema=json_schema,
                                     temperature=temperature, max_tokens=max_tokens)
        client = self._client_for_loop()
        sdk_stream = texts = None
        try:
            try:
                sdk_stream = await self.open_stream(client, params)
                texts = self.texts(sdk_stream)
                async for text in texts:
                    yield text
            except ProviderError:
                raise
            except Exception as exc:
                raise to_provider_error(exc, self.name) from exc
        finally:
            # A caller that stops reading early leaves both open: release the connection now.
            for opened in (texts, sdk_stream):
                if opened is not None:
                    with contextlib.suppress(Exception):
                        await close_stream(opened)

    def _client_for_loop(self) -> Any:
        if self._client is not None:
            return self._client
        clients = self.__dict__.setdefault("_clients", weakref.WeakKeyDictionary())
        loop = asyncio.get_running_loop()
        client = clients.get(loop)
        if client is None:
            client = self._make_client()
            clients[loop] = client
        return client

    def _make_client(self) -> Any:
        options = self.client_options()
        try:
            return self.new_client(options)
        except Exception as exc:  # configuration errors from the SDK
            raise to_provider_error(exc, self.name) from exc

    async def aclose(self) -> None:
        """Close the SDK client made for the running event loop (if any)."""
        clients = self.__dict__.get("_clients")
        if clients is not None:
            client = clients.pop(asyncio.get_running_loop(), None)
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.close()
