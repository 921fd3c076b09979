"""Provider failover: :class:`FailoverProvider` and its backoff, :func:`backoff_delay`.

Spec: several specs separated by commas (``"openai,anthropic"``).  Retryable errors (429, 529,
overload, 5xx, connection loss) are retried with exponential backoff (250 ms base, 8 s cap,
+-20 % jitter), then the next provider gets the request.  A failure after text was already
streamed is never retried: it raises :class:`StreamInterruptedError`.
"""

from __future__ import annotations

import asyncio
import random as _random
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

from ...errors import OptionError
from ..provider import Message, Provider, ProviderError, check_ready, close_stream
from .errors import StreamInterruptedError

__all__ = ["FailoverProvider", "backoff_delay"]

Sleep = Callable[[float], Awaitable[Any]]


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
    ``on_event`` (settable later, e.g. by the CLI's progress view) gets a ``provider_failover``
    event each time the request moves on to the next provider (``data``: ``from``, ``to``,
    ``error``, ``attempts``).
    """

    def __init__(self, providers: Sequence[Provider], *, base_delay: float = 0.25,
                 max_delay: float = 8.0, jitter: float = 0.2, max_retries: int = 3,
                 sleep: Sleep | None = None, random: Callable[[], float] | None = None,
                 name: str | None = None, on_event: Callable[[Any], Any] | None = None):
        if not providers:
            raise OptionError("FailoverProvider needs at least one provider")
        self.providers = list(providers)
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.jitter = jitter
        self.max_retries = max(0, int(max_retries))
        self._sleep = sleep or asyncio.sleep
        self._random = random or _random.random
        self.name = name or ",".join(p.name for p in self.providers)
        self.attempts: list[tuple[str, ProviderError | None, float]] = []
        self.on_event = on_event

    def __repr__(self) -> str:
        return f"FailoverProvider({self.providers!r})"

    def narrowed(self, providers: Sequence[Provider]) -> "FailoverProvider":
        """The same failover over ``providers`` only (the ones qualified for a model hint:
        planning/routing.py), so a hinted request never fails over to an unqualified model."""
        out = FailoverProvider(providers, base_delay=self.base_delay, max_delay=self.max_delay,
                               jitter=self.jitter, max_retries=self.max_retries, sleep=self._sleep,
                               random=self._random, on_event=self.on_event)
        out.attempts = self.attempts
        return out

    def check_ready(self) -> None:
        """Every provider named must be usable: a backup without its key would only fail later."""
        for provider in self.providers:
            check_ready(provider)

    def delay(self, attempt: int) -> float:
        return backoff_delay(attempt, base_delay=self.base_delay, max_delay=self.max_delay,
                             jitter=self.jitter, rand=self._random)

    def _failed_over(self, previous: Provider, to: str, err: ProviderError) -> None:
        """Tell ``on_event`` the request moves on from ``previous`` to the provider ``to``."""
        if self.on_event is None:
            return
        from ...runtime.events import make_event

        frm = previous.name
        tries = sum(1 for name, e, _ in self.attempts if name == frm and e is not None)
        event = make_event("provider_failover", "", None, None, 0, "failover", tool=to,
                           reason=f"{frm} failed {tries} time(s) ({err}); trying {to}",
                           data={"from": frm, "to": to, "error": str(err), "attempts": tries})
        try:
            self.on_event(event)
        except Exception:  # noqa: BLE001 - an observer never breaks the request
            pass

    async def stream(self, messages: Sequence[Message], *, model: str | None = None,
                     json_schema: dict | None = None, temperature: float | None = None,
                     max_tokens: int | None = None) -> AsyncIterator[str]:
        kw = {"model": model, "json_schema": json_schema, "temperature": temperature,
              "max_tokens": max_tokens}
        failures: list[str] = []
        last: ProviderError | None = None
        for index, provider in enumerate(self.providers):
            pname = provider.name
            if index and last is not None:
                self._failed_over(self.providers[index - 1], pname, last)
            for attempt in range(self.max_retries + 1):
                streamed = 0
                inner = provider.stream(messages, **kw)
                try:
                    try:
                        async for delta in inner:
                            streamed += len(delta)
                            yield delta
                    finally:
                        await close_stream(inner)
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
