"""Concrete language-model providers and provider failover, one module each.

* :mod:`.openai` -- :class:`OpenAIProvider`, the official ``openai`` SDK's Chat Completions API
  with streaming; honours ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` as the SDK does, so any
  OpenAI-compatible server works (vLLM, llama.cpp server, Ollama, ...).
* :mod:`.anthropic` -- :class:`AnthropicProvider`, the official ``anthropic`` SDK's Messages API
  with streaming (``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``).
* :mod:`.scripted` -- :class:`ScriptedProvider`, replies from a YAML/JSON file or a list, for
  tests, demos and offline use; can simulate streaming speed and failures.
* :mod:`.failover` -- :class:`FailoverProvider`, retries retryable errors (429, 529, overload,
  5xx, connection loss) with exponential backoff, then moves to the next provider.  A failure
  after text was already streamed is never retried: it raises :class:`StreamInterruptedError`.
* :mod:`.registry` -- :func:`get_provider`, a provider from a spec string such as ``"openai"``,
  ``"anthropic:claude-sonnet-4-5"``, ``"scripted:replies.yaml"`` or ``"openai,anthropic"``;
  adding a provider is one module plus one line in its table.
* :mod:`.sdk` and :mod:`.errors` -- what the SDK-backed providers share: per-event-loop
  clients, the streaming loop, and SDK exceptions mapped to :class:`ProviderError`.

The SDKs are optional extras (``pip install 'sophon-dsl[openai]'``, ``'sophon-dsl[anthropic]'``);
they are imported only when a provider that needs them is built.  Both SDK clients are created
with ``max_retries=0``: retrying is the job of :class:`FailoverProvider`, which knows whether
text has already been handed to the caller.
"""

from __future__ import annotations

from .anthropic import DEFAULT_ANTHROPIC_MAX_TOKENS, DEFAULT_ANTHROPIC_MODEL, AnthropicProvider
from .errors import StreamInterruptedError, is_retryable_status, to_provider_error
from .failover import FailoverProvider, backoff_delay
from .openai import DEFAULT_OPENAI_MODEL, OpenAIProvider, openai_response_format
from .registry import PROVIDERS, get_provider
from .scripted import ScriptedProvider

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
    "DEFAULT_ANTHROPIC_MAX_TOKENS",
    "PROVIDERS",
    "openai_response_format",
]
