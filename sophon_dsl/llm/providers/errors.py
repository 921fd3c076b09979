"""Provider failures: SDK and transport exceptions mapped to :class:`ProviderError`, and
:class:`StreamInterruptedError` for a failure after part of the reply was streamed.

Works by duck typing (``status_code``, an error ``body``, the exception's module), so neither
SDK has to be installed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..provider import ProviderError

__all__ = ["StreamInterruptedError", "is_retryable_status", "missing_sdk", "to_provider_error"]


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


def missing_sdk(package: str, provider: str) -> ProviderError:
    """The error for a provider whose SDK (``package``, also the extra's name) is not installed."""
    return ProviderError(
        f"the {provider} provider needs the '{package}' package, which is not installed; "
        f"install it with: pip install 'sophon-dsl[{package}]'",
        provider=provider, retryable=False)
