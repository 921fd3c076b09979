"""The provider interface every language-model backend implements.

A provider turns a list of chat messages into a stream of text deltas.  The
agent loop parses the stream incrementally, so streaming is the primary
operation and :meth:`Provider.complete` is derived from it.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from typing import Any, AsyncIterator, Literal, Protocol, Sequence, runtime_checkable

from ..errors import SophonError

__all__ = ["DEFAULT_MAX_REPLY_BYTES", "Message", "ModelBound", "Provider", "ProviderError", "REPLY_TOO_LARGE",
           "ReadyCheck", "ReplyTooLarge", "Wrapper", "check_ready", "close_stream", "collect", "reply_bytes"]

# A model's reply is cut past this many bytes (UTF-8): an endless reply (a stream of
# comments, one string that never closes) would otherwise grow the process until it dies.
# A plan of a few hundred calls is tens of kilobytes; a megabyte leaves room for long
# inline outputs.  Agent(max_reply_bytes=...) and collect(max_bytes=...) change it.
DEFAULT_MAX_REPLY_BYTES = 1 << 20
REPLY_TOO_LARGE = "Reply.TooLarge"


@dataclass(frozen=True, slots=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


class ProviderError(SophonError):
    """A backend failure. ``retryable`` errors (429, 529, overload, connection loss) may be
    retried with backoff and then handed to the next provider; others surface at once."""

    def __init__(self, message: str, *, provider: str = "", status: int | None = None,
                 retryable: bool = False):
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.retryable = retryable

    def to_json(self) -> dict:
        """What went wrong, for a JSON result: this error's class, the provider, the HTTP status
        (None for a transport failure), the message, whether a retry may help, and the class of
        the SDK or transport exception behind it (``cause``) when there is one."""
        out = {"class": type(self).__name__, "provider": self.provider, "status": self.status,
               "message": str(self), "retryable": self.retryable}
        if self.__cause__ is not None:
            out["cause"] = type(self.__cause__).__name__
        return out


class ReplyTooLarge(ProviderError):
    """A reply passed its size limit (``max_bytes``) and was cut there; not retryable: the
    same request would likely stream the same endless reply."""

    code = REPLY_TOO_LARGE

    def __init__(self, max_bytes: int, *, provider: str = "") -> None:
        super().__init__(f"the reply passed {max_bytes:,} bytes (max_reply_bytes) and was cut there",
                         provider=provider)
        self.max_bytes = max_bytes


def reply_bytes(delta: str) -> int:
    """How many bytes ``delta`` takes as UTF-8 (no copy for ASCII text, the common case)."""
    return len(delta) if delta.isascii() else len(delta.encode("utf-8", "surrogatepass"))


@runtime_checkable
class Provider(Protocol):
    name: str

    def stream(self, messages: Sequence[Message], *, model: str | None = None,
               json_schema: dict | None = None, temperature: float | None = None,
               max_tokens: int | None = None) -> AsyncIterator[str]:
        """Yield the reply's text as it arrives. ``json_schema`` asks for structured output."""
        ...


@runtime_checkable
class ReadyCheck(Protocol):
    """A provider that can tell before its first request that it cannot send one at all."""

    def check_ready(self) -> None:
        """Raise :class:`ProviderError` when no request can be sent (no API key)."""
        ...


@runtime_checkable
class ModelBound(Protocol):
    """A provider with a model of its own, used when a request names none (the SDK providers)."""

    model: str | None


@runtime_checkable
class Wrapper(Protocol):
    """A provider in front of another one (the planning guards' budget and context window)."""

    inner: Provider


def check_ready(provider: Provider) -> None:
    """Raise :class:`ProviderError` when ``provider`` cannot send a request at all (no API key):
    called before the first request, so a missing credential is not found mid-run. Providers
    say so with an optional ``check_ready()`` method (:class:`ReadyCheck`); one without it is
    taken as ready."""
    if isinstance(provider, ReadyCheck):
        provider.check_ready()


async def collect(provider: Provider, messages: Sequence[Message], *,
                  max_bytes: int | None = DEFAULT_MAX_REPLY_BYTES, **kw: Any) -> str:
    """The whole reply as one string; :class:`ReplyTooLarge` past ``max_bytes`` (None: no
    limit), the stream closed there."""
    # looked up, not imported (telemetry imports this module's users): every run, agent and
    # goal imports it before a request is made; None unless tracing is on
    tel = sys.modules.get("sophon_dsl.telemetry")
    span = tel.request_span(provider, kw.get("model")) if tel is not None else None
    parts = []
    size = 0
    try:
        stream = provider.stream(messages, **kw)
        async for delta in stream:
            if max_bytes is not None:
                size += reply_bytes(delta)
                if size > max_bytes:
                    await close_stream(stream)
                    raise ReplyTooLarge(max_bytes, provider=provider.name)
            parts.append(delta)
    except Exception as exc:
        if span is not None:
            span.fail(exc)
        raise
    finally:
        if span is not None:
            span.delta("".join(parts))
            span.end(messages)
    return "".join(parts)


async def close_stream(stream: Any) -> None:
    """Close a reply stream (an async generator or an SDK stream) that was not read to the end,
    so its connection is released now rather than when it is garbage-collected."""
    closer = getattr(stream, "aclose", None) or getattr(stream, "close", None)
    if closer is not None:
        result = closer()
        if asyncio.iscoroutine(result):
            await result
