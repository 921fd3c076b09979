"""Retry policies: which policy applies to a call, and the delay before each new attempt."""

from __future__ import annotations

import random
from typing import Any

from ..model import Call, RetryPolicy

__all__ = ["policy_for", "retry_delay"]


def retry_delay(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> float:
    """Delay before attempt ``attempt + 1`` (``attempt`` >= 1 failed attempts so far)."""
    delay = max(policy.interval, 0.0) * (policy.backoff_rate ** (attempt - 1))
    if policy.max_delay is not None:
        delay = min(delay, policy.max_delay)
    if policy.jitter:
        delay = (rng or random).uniform(0, delay)
    return delay


def policy_for(call: Call, default: Any) -> RetryPolicy | None:
    """The call's own ``@retry``, else the run's ``retry`` option: one policy for every
    tool, or ``{tool name: policy}`` with ``"*"`` for the rest."""
    if call.retry is not None:
        return call.retry
    if default is None:
        return None
    if isinstance(default, RetryPolicy):
        return default
    if isinstance(default, dict):
        return default.get(call.tool) or default.get("*")
    return None
