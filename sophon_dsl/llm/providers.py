"""Concrete language-model providers and provider failover.

* :class:`OpenAIProvider` -- the official ``openai`` SDK's Chat Completions API with streaming. It
  honours ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` exactly as the SDK does, so any
  OpenAI-compatible server works (vLLM, llama.cpp server, Ollama, ...).
* :class:`AnthropicProvider` -- the official ``anthropic`` SDK's Messages API with streaming
  (``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``).
* :class:`ScriptedProvider` -- replies from a YAML/JSON file or a list, for tests, demos and offline
  use; can simulate streaming speed and failures.
* :class:`FailoverProvider` -- retries retryable errors (429, 529, overload, 5xx, connection loss)
  with exponential backoff (250 ms base, 8 s cap, +-20 % jitter), then moves to the next provider.
  A failure after text was already streamed is never retried: it raises
  :class:`StreamInterruptedError`.
* :func:`get_provider` -- builds a provider from a spec string such as ``"openai"``,
  ``"anthropic:claude-sonnet-4-5"``, ``"scripted:replies.yaml"`` or ``"openai,anthropic"``.

The SDKs are optional extras (``pip install 'sophon-dsl[openai]'``, ``'sophon-dsl[anthropic]'``);
they are imported only when a provider that needs them is built.

Both SDK clients are created with ``max_retries=0``: retrying is the job of
:class:`FailoverProvider`, which knows whether text has already been handed to the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import random as _random
import re
import weakref
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Sequence

from .provider import Message, Provider, ProviderError

__all__ = [
    "OpenAIProvider",
    "AnthropicProvider",
    "ScriptedProvider",
    "FailoverProvider",
    "StreamInterruptedError",
    "get_provider",
    "is_retryable_status",
    "to_provider_error",
    "backoff_delay",
    "DEFAULT_OPENAI_MODEL",
    "DEFAULT_ANTHROPIC_MODEL",
]

DEFAULT_OPENAI_MODEL = "gpt-4.1-mini"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"
DEFAULT_ANTHROPIC_MAX_TOKENS = 4096
_OPENAI_DEFAULT_BASE = "https://api.openai.com/v1"

Sleep = Callable[[float], Awaitable[Any]]


# --------------------------------------------------------------------------- errors


class StreamInterruptedError(ProviderError):
    """A backend failed after part of the reply had already been streamed to the caller.

    It is never retried transparently (the caller may already have acted on the text), so
    ``retryable`` is False; ``cause`` is the original :class:`ProviderError` and
    ``streamed_chars`` how much text had been yielded before the failure."""

    def __init__(self, cause: ProviderError, *, streamed_chars: int, provider: str = ""):
        super().__init__(
            f"stream interrupted after {streamed_chars} characters: {cause}",
            provider=provider or cause.provider, status=cause.status, retryable=False)
        self.cause = cause
        self.streamed_chars = streamed_chars


def is_retryable_status(status: int | None) -> bool:
    """429 (rate limit), 408 (timeout), 529 (overloaded) and every other 5xx are retryable."""
    return status is not None and (status in (408, 429) or 500 <= status <= 599)


# Error "type" strings the vendors put in error bodies (and in mid-stream error events, which
# arrive on a 200 response) mapped to the HTTP status they stand for.
_ERROR_TYPE_STATUS = {
    "overloaded_error": 529,
    "overloaded": 529,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "api_error": 500,
    "server_error": 500,
    "internal_server_error": 500,
    "timeout_error": 504,
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
}


def _error_type(body: Any) -> str | None:
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            for key in ("type", "code"):
                value = err.get(key)
                if isinstance(value, str) and value:
                    return value
    return None


def _is_connection_error(exc: BaseException) -> bool:
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    if name in ("APIConnectionError", "APITimeoutError"):
        return True
    if module.split(".")[0] in ("httpx", "httpx2", "httpcore", "h11", "h2", "anyio"):
        return True  # transport errors raised while reading a stream
    return isinstance(exc, (OSError, asyncio.TimeoutError, ConnectionError))


def to_provider_error(exc: BaseException, provider: str = "") -> ProviderError:
    """Map an exception raised by an SDK (or its transport) to a :class:`ProviderError`.

    Works by duck typing, so neither SDK has to be installed: an ``APIStatusError`` gives its
    ``status_code``; an error body (also a mid-stream ``error`` event, which arrives with status
    200) gives its type (``overloaded_error`` -> 529, ``rate_limit_error`` -> 429, ...); a
    connection or timeout error is retryable with no status."""
    if isinstance(exc, ProviderError):
        return exc
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = None
    etype = _error_type(getattr(exc, "body", None))
    if (status is None or status < 400) and etype in _ERROR_TYPE_STATUS:
        status = _ERROR_TYPE_STATUS[etype]
    elif status is not None and status < 400:
        status = None
    if status is not None:
        retryable = is_retryable_status(status)
    else:
        retryable = _is_connection_error(exc) or etype in ("overloaded_error", "rate_limit_error")
    message = str(exc) or type(exc).__name__
    label = f"{provider}: " if provider else ""
    if status is not None:
        text = f"{label}HTTP {status}: {message}"
    else:
        text = f"{label}{type(exc).__name__}: {message}"
    err = ProviderError(text, provider=provider, status=status, retryable=retryable)
    err.__cause__ = exc
    return err


def _missing_sdk(package: str, provider: str) -> ProviderError:
    return ProviderError(
        f"the {provider} provider needs the '{package}' package, which is not installed; "
        f"install it with: pip install 'sophon-dsl[{package}]'",
        provider=provider, retryable=False)


# --------------------------------------------------------------------------- helpers


def _merge_roles(messages: Iterable[Message]) -> list[dict[str, str]]:
    """Chat messages as dicts, consecutive messages of the same role joined by a blank line."""
    out: list[dict[str, str]] = []
    for m in messages:
        if out and out[-1]["role"] == m.role:
            out[-1]["content"] += "\n\n" + m.content
        else:
            out.append({"role": m.role, "content": m.content})
    return out


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


async def _aclose(it: Any) -> None:
    closer = getattr(it, "aclose", None) or getattr(it, "close", None)
    if closer is not None:
        result = closer()
        if asyncio.iscoroutine(result):
            await result


# --------------------------------------------------------------------------- SDK clients


class _SDKClients:
    """One SDK client per event loop (an httpx client must not outlive or cross its loop);
    making a client costs ~0.1 s (TLS setup), so it is reused for every call on that loop."""

    _client: Any

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

    def _make_client(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the SDK client made for the running event loop (if any)."""
        clients = self.__dict__.get("_clients")
        if clients is not None:
            client = clients.pop(asyncio.get_running_loop(), None)
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.close()


# --------------------------------------------------------------------------- OpenAI


class OpenAIProvider(_SDKClients):
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

    def __init__(self, model: str | None = None, *, base_url: str | None = None,
                 api_key: str | None = None, timeout: float | None = 600.0,
                 max_tokens_param: str | None = None, extra_body: dict | None = None,
                 require_finish_reason: bool = True, client: Any = None, name: str = "openai"):
        try:
            import openai  # noqa: F401
        except ImportError:
            raise _missing_sdk("openai", "openai") from None
        self.name = name
        self.model = model or os.environ.get("SOPHON_OPENAI_MODEL") or DEFAULT_OPENAI_MODEL
        self.base_url = base_url
        self.api_key = api_key
        self.timeout = timeout
        self.max_tokens_param = max_tokens_param
        self.require_finish_reason = require_finish_reason
        self.extra_body = dict(extra_body or {})
        self._client = client

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self.model!r}, base_url={self._effective_base_url()!r})"

    def _effective_base_url(self) -> str | None:
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or None

    def _make_client(self) -> Any:
        from openai import AsyncOpenAI

        kw: dict[str, Any] = {"max_retries": 0}
        if self.timeout is not None:
            kw["timeout"] = self.timeout
        if self.base_url is not None:
            kw["base_url"] = self.base_url
        api_key = self.api_key or os.environ.get("OPENAI_API_KEY") or None
        if api_key is None and self._effective_base_url() not in (None, _OPENAI_DEFAULT_BASE):
            api_key = "sk-no-key-required"
        if api_key is None:
            raise ProviderError(
                "openai: no API key; set OPENAI_API_KEY (or OPENAI_BASE_URL for a local "
                "OpenAI-compatible server)", provider=self.name, retryable=False)
        kw["api_key"] = api_key
        try:
            return AsyncOpenAI(**kw)
        except Exception as exc:  # configuration errors from the SDK
            raise to_provider_error(exc, self.name) from exc

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

    async def stream(self, messages: Sequence[Message], *, model: str | None = None,
                     json_schema: dict | None = None, temperature: float | None = None,
                     max_tokens: int | None = None) -> AsyncIterator[str]:
        params = self.request_params(messages, model=model, json_schema=json_schema,
                                     temperature=temperature, max_tokens=max_tokens)
        client = self._client_for_loop()
        sdk_stream = None
        try:
            try:
                sdk_stream = await client.chat.completions.create(stream=True, **params)
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
            except ProviderError:
                raise
            except Exception as exc:
                raise to_provider_error(exc, self.name) from exc
        finally:
            if sdk_stream is not None:
                with contextlib.suppress(Exception):
                    await _aclose(sdk_stream)


# --------------------------------------------------------------------------- Anthropic


class AnthropicProvider(_SDKClients):
    """The Messages API over the official ``anthropic`` SDK, streamed.

    ``api_key`` / ``base_url`` default to what the SDK reads (``ANTHROPIC_API_KEY``,
    ``ANTHROPIC_BASE_URL``). System messages become the ``system`` parameter; consecutive
    messages of one role are joined. ``max_tokens`` is required by the API and defaults to
    ``default_max_tokens``. ``json_schema`` is sent as
    ``output_config={"format": {"type": "json_schema", "schema": ...}}`` (structured outputs).
    Parameters the installed SDK's ``messages.create`` does not know travel in ``extra_body``;
    ``temperature`` is dropped when the SDK no longer accepts it (recent SDKs removed sampling
    parameters from the Messages API).
    A stream that ends without ``message_stop`` was cut off and raises a retryable
    :class:`ProviderError` (the SDK itself does not notice a connection closed early).
    """

    def __init__(self, model: str | None = None, *, base_url: str | None = None,
                 api_key: str | None = None, timeout: float | None = 600.0,
                 default_max_tokens: int = DEFAULT_ANTHROPIC_MAX_TOKENS,
                 extra_body: dict | None = None, client: Any = None, name: str = "anthropic"):
        try:
            import anthropic  # noqa: F401
        except ImportError:
            raise _missing_sdk("anthropic", "anthropic") from None
        self.name = name
        self.model = model or os.environ.get("SOPHON_ANTHROPIC_MODEL") or DEFAULT_ANTHROPIC_MODEL
        self.base_url = base_url
        self.api_key = api_key
        self.timeout = timeout
        self.default_max_tokens = default_max_tokens
        self.extra_body = dict(extra_body or {})
        self._client = client

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r})"

    def _make_client(self) -> Any:
        from anthropic import AsyncAnthropic

        kw: dict[str, Any] = {"max_retries": 0}
        if self.timeout is not None:
            kw["timeout"] = self.timeout
        if self.base_url is not None:
            kw["base_url"] = self.base_url
        if self.api_key is not None:
            kw["api_key"] = self.api_key
        try:
            return AsyncAnthropic(**kw)
        except Exception as exc:
            raise to_provider_error(exc, self.name) from exc

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

    async def stream(self, messages: Sequence[Message], *, model: str | None = None,
                     json_schema: dict | None = None, temperature: float | None = None,
                     max_tokens: int | None = None) -> AsyncIterator[str]:
        params = self.request_params(messages, model=model, json_schema=json_schema,
                                     temperature=temperature, max_tokens=max_tokens)
        client = self._client_for_loop()
        sdk_stream = None
        try:
            try:
                sdk_stream = await client.messages.create(stream=True,
                                                          **_fit_anthropic(client, params))
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
            except ProviderError:
                raise
            except Exception as exc:
                raise to_provider_error(exc, self.name) from exc
        finally:
            if sdk_stream is not None:
                with contextlib.suppress(Exception):
                    await _aclose(sdk_stream)


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


# --------------------------------------------------------------------------- Scripted


def _load_turns(source: Any) -> list[Any]:
    if isinstance(source, (str, Path)):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ProviderError(f"scripted: cannot read {path}: not UTF-8 text ({exc.reason} at byte "
                                f"{exc.start})", provider="scripted") from exc
        except OSError as exc:
            raise ProviderError(f"scripted: cannot read {path}: {exc}", provider="scripted") from exc
        if path.suffix.lower() == ".json":
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ProviderError(f"scripted: {path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}",
                                    provider="scripted") from exc
            except RecursionError as exc:
                raise ProviderError(f"scripted: {path}: nested too deeply", provider="scripted") from exc
        else:
            import yaml

            try:
                data = yaml.safe_load(text)  # YAML is a superset of JSON
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
                problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
                raise ProviderError(f"scripted: {where}: not valid YAML: {problem}",
                                    provider="scripted") from exc
            except RecursionError as exc:
                raise ProviderError(f"scripted: {path}: nested too deeply", provider="scripted") from exc
    else:
        data = source
    if isinstance(data, dict) and "turns" in data:
        data = data["turns"]
    if isinstance(data, (str, dict)):
        data = [data]
    if not isinstance(data, list) or not data:
        raise ProviderError("scripted: the script must be a non-empty list of turns",
                            provider="scripted")
    for i, turn in enumerate(data):
        if not isinstance(turn, (str, dict)):
            raise ProviderError(f"scripted: turn {i} must be a string or a mapping, "
                                f"not {type(turn).__name__}", provider="scripted")
        if isinstance(turn, dict) and "reply" not in turn and "error" not in turn:
            raise ProviderError(f"scripted: turn {i} has neither 'reply' nor 'error'",
                                provider="scripted")
    return data


class ScriptedProvider:
    """Replies from a script: a YAML/JSON file (or a list given directly) of turns.

    Each call to :meth:`stream` takes the next turn, cycling back to the first after the last
    (``cycle=False`` raises a non-retryable error instead). A turn is either a string (the reply)
    or a mapping::

        - "plain reply, streamed in chunks"
        - reply: '{"calls": [], "output": 42}'
          chunk_size: 8            # characters per streamed delta (default: the provider's)
          tokens_per_second: 50    # one delta counts as one token; omitted = no delay
        - error: {status: 429, message: "rate limited"}      # fails before any text
        - reply: "partial te"                                 # streams this, then fails
          error: {status: 529, message: "overloaded", retryable: true}

    An error's ``retryable`` defaults to what its status implies (429, 529, 5xx).
    ``calls`` records every request (messages and options) for assertions.
    """

    def __init__(self, script: str | Path | Sequence[Any], *, chunk_size: int = 16,
                 tokens_per_second: float | None = None, cycle: bool = True,
                 sleep: Sleep | None = None, name: str = "scripted"):
        self.name = name
        self.turns = _load_turns(script)
        self.source = str(script) if isinstance(script, (str, Path)) else None
        self.chunk_size = max(1, int(chunk_size))
        self.tokens_per_second = tokens_per_second
        self.cycle = cycle
        self._sleep = sleep or asyncio.sleep
        self._next = 0
        self.calls: list[dict[str, Any]] = []

    def __repr__(self) -> str:
        return f"ScriptedProvider({self.source or f'{len(self.turns)} turns'})"

    def _take(self) -> Any:
        if self._next >= len(self.turns):
            if not self.cycle:
                raise ProviderError(f"scripted: all {len(self.turns)} turns used",
                                    provider=self.name, retryable=False)
            self._next = 0
        turn = self.turns[self._next]
        self._next += 1
        return turn

    async def stream(self, messages: Sequence[Message], *, model: str | None = None,
                     json_schema: dict | None = None, temperature: float | None = None,
                     max_tokens: int | None = None) -> AsyncIterator[str]:
        self.calls.append({"messages": list(messages), "model": model, "json_schema": json_schema,
                           "temperature": temperature, "max_tokens": max_tokens})
        turn = self._take()
        if isinstance(turn, str):
            turn = {"reply": turn}
        reply = turn.get("reply")
        if reply is not None and not isinstance(reply, str):
            reply = json.dumps(reply)  # a structured reply given as YAML data
        reply = reply or ""
        size = max(1, int(turn.get("chunk_size") or self.chunk_size))
        tps = turn.get("tokens_per_second", self.tokens_per_second)
        delay = 1.0 / float(tps) if tps else 0.0
        for i in range(0, len(reply), size):
            if delay:
                await self._sleep(delay)
            yield reply[i:i + size]
        error = turn.get("error")
        if error is not None:
            if not isinstance(error, dict):
                error = {"message": str(error)}
            status = error.get("status")
            status = int(status) if status is not None else None
            retryable = error.get("retryable")
            if retryable is None:
                retryable = is_retryable_status(status)
            raise ProviderError(f"{self.name}: scripted error"
                                + (f" HTTP {status}" if status is not None else "")
                                + f": {error.get('message', 'scripted failure')}",
                                provider=self.name, status=status, retryable=bool(retryable))


# --------------------------------------------------------------------------- Failover


def backoff_delay(attempt: int, *, base_delay: float = 0.25, max_delay: float = 8.0,
                  jitter: float = 0.2, rand: Callable[[], float] = _random.random) -> float:
    """The wait before retry number ``attempt + 1``: ``base_delay * 2**attempt``, jittered by
    +-``jitter`` (``rand()`` in [0, 1) -> a factor in [1 - jitter, 1 + jitter)) and never more
    than ``max_delay``."""
    raw = min(max_delay, base_delay * (2 ** attempt))
    factor = 1.0 + jitter * (2.0 * rand() - 1.0)
    return max(0.0, min(max_delay, raw * factor))


class FailoverProvider:
    """Tries its providers in order; each retryable error is retried on the same provider after
    an exponential backoff (``base_delay * 2**n``, capped at ``max_delay``, +-``jitter``), up to
    ``max_retries`` times, after which the next provider gets the request.

    Non-retryable errors surface at once. Retrying happens only before the first text delta: once
    text has been yielded, a failure raises :class:`StreamInterruptedError` (never retried).
    When every provider is exhausted the last error is raised as a retryable
    :class:`ProviderError` naming every attempt.

    ``sleep`` (an async callable taking seconds) and ``random`` (returning a float in [0, 1)) are
    injectable for tests; ``attempts`` logs ``(provider name, error or None, delay slept)``.
    """

    def __init__(self, providers: Sequence[Provider], *, base_delay: float = 0.25,
                 max_delay: float = 8.0, jitter: float = 0.2, max_retries: int = 3,
                 sleep: Sleep | None = None, random: Callable[[], float] | None = None,
                 name: str | None = None):
        if not providers:
            raise ValueError("FailoverProvider needs at least one provider")
        self.providers = list(providers)
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.jitter = jitter
        self.max_retries = max(0, int(max_retries))
        self._sleep = sleep or asyncio.sleep
        self._random = random or _random.random
        self.name = name or ",".join(getattr(p, "name", "?") for p in self.providers)
        self.attempts: list[tuple[str, ProviderError | None, float]] = []

    def __repr__(self) -> str:
        return f"FailoverProvider({self.providers!r})"

    def delay(self, attempt: int) -> float:
        return backoff_delay(attempt, base_delay=self.base_delay, max_delay=self.max_delay,
                             jitter=self.jitter, rand=self._random)

    async def stream(self, messages: Sequence[Message], *, model: str | None = None,
                     json_schema: dict | None = None, temperature: float | None = None,
                     max_tokens: int | None = None) -> AsyncIterator[str]:
        kw = {"model": model, "json_schema": json_schema, "temperature": temperature,
              "max_tokens": max_tokens}
        failures: list[str] = []
        last: ProviderError | None = None
        for provider in self.providers:
            pname = getattr(provider, "name", type(provider).__name__)
            for attempt in range(self.max_retries + 1):
                streamed = 0
                inner = provider.stream(messages, **kw)
                try:
                    try:
                        async for delta in inner:
                            streamed += len(delta)
                            yield delta
                    finally:
                        await _aclose(inner)
                    self.attempts.append((pname, None, 0.0))
                    return
                except StreamInterruptedError:
                    raise
                except ProviderError as err:
                    if streamed:
                        raise StreamInterruptedError(err, streamed_chars=streamed,
                                                     provider=pname) from err
                    if not err.retryable:
                        raise
                    last = err
                    failures.append(f"{pname}: {err}")
                    if attempt < self.max_retries:
                        wait = self.delay(attempt)
                        self.attempts.append((pname, err, wait))
                        await self._sleep(wait)
                    else:
                        self.attempts.append((pname, err, 0.0))
        assert last is not None
        summary = "; ".join(failures)
        raise ProviderError(f"all providers failed ({len(failures)} attempts): {summary}",
                            provider=self.name, status=last.status, retryable=True) from last


# --------------------------------------------------------------------------- specs


def _single(spec: str, model: str | None) -> Provider:
    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    arg = arg.strip()
    if kind == "openai":
        return OpenAIProvider(arg or model)
    if kind == "anthropic":
        return AnthropicProvider(arg or model)
    if kind == "scripted":
        if not arg:
            raise ProviderError("scripted provider needs a file: 'scripted:FILE'",
                                provider="scripted")
        return ScriptedProvider(arg)
    raise ProviderError(
        f"unknown provider {spec!r}; expected 'openai[:MODEL]', 'anthropic[:MODEL]', "
        "'scripted:FILE', or several of them separated by commas", retryable=False)


def get_provider(spec: str, *, model: str | None = None) -> Provider:
    """Build a provider from a spec.

    ``"openai"`` / ``"anthropic"`` (optionally ``":MODEL"``, which wins over ``model``),
    ``"scripted:FILE"``, or several specs separated by commas -> a :class:`FailoverProvider`
    over them in that order. A missing SDK raises a :class:`ProviderError` naming the extra to
    install."""
    parts = [p.strip() for p in (spec or "").split(",") if p.strip()]
    if not parts:
        raise ProviderError("empty provider spec", retryable=False)
    providers = [_single(p, model) for p in parts]
    if len(providers) == 1:
        return providers[0]
    return FailoverProvider(providers)
