"""The provider interface every language-model backend implements.

A provider turns a list of chat messages into a stream of text deltas.  The
agent loop parses the stream incrementally, so streaming is the primary
operation and :meth:`Provider.complete` is derived from it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, AsyncIterator, Literal, Protocol, Sequence, runtime_checkable

from ..errors import SophonError

__all__ = ["Message", "Provider", "ProviderError", "check_ready", "close_stream", "collect"]


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


@runtime_checkable
class Provider(Protocol):
    name: str

    def stream(self, messages: Sequence[Message], *, model: str | None = None,
               json_schema: dict | None = None, temperature: float | None = None,
               max_tokens: int | None = None) -> AsyncIterator[str]:
        """Yield the reply's text as it arrives. ``json_schema`` asks for structured output."""
        ...


def check_ready(provider: Any) -> None:
    """Raise :class:`ProviderError` when ``provider`` cannot send a request at all (no API key):
    called before the first request, so a missing credential is not found mid-run. Providers
    say so with an optional ``check_ready()`` method; one without it is taken as ready."""
    check = getattr(provider, "check_ready", None)
    if callable(check):
        check()


async def collect(provider: Provider, messages: Sequence[Message], **kw: Any) -> str:
    """The whole reply as one string."""
    parts = []
    async for delta in provider.stream(messages, **kw):
        parts.append(delta)
    return "".join(parts)


async def close_stream(stream: Any) -> None:
    """Close a reply stream (an async generator or an SDK stream) that was not read to the end,
    so its connection is released now rather than when it is garbage-collected."""
    closer = getattr(stream, "aclose", None) or getattr(stream, "close", None)
    if closer is not None:
        result = closer()
        if asyncio.iscoroutine(result):
            await result
