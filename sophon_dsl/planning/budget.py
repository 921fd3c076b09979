"""The budget guard (seed 002): tokens and cost per provider and model, with daily and monthly
limits; a request that would go over is refused before it is sent (``Budget.Exceeded``).

Tokens are estimated at :data:`CHARS_PER_TOKEN` characters per token (the prompt before it is
sent, the reply as it streams); a request is counted as its prompt plus its ``max_tokens``
(or :data:`DEFAULT_REPLY_TOKENS`) before sending, and charged what it really used after.
Cost is tokens times the model's price per 1,000 tokens (input and output).

::

    budget = Budget([BudgetLimit(daily_tokens=200_000, monthly_cost=20.0)],
                    prices={"gpt-4o-mini": (0.00015, 0.0006)})
    agent = Agent(provider, tools, budget=budget)
    agent.run("...").to_json()["usage"]     # {"requests", "input_tokens", "output_tokens", "cost"}
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Sequence

from ..llm.provider import Message, ModelBound, Provider, ProviderError, check_ready

__all__ = ["Budget", "BudgetExceeded", "BudgetLimit", "BudgetedProvider", "Usage", "estimate_tokens"]

CHARS_PER_TOKEN = 4
DEFAULT_REPLY_TOKENS = 1024
BUDGET_EXCEEDED = "Budget.Exceeded"


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


class BudgetExceeded(ProviderError):
    """``Budget.Exceeded``: the request was not sent (never retryable: waiting does not help
    before the period ends)."""

    code = BUDGET_EXCEEDED

    def __init__(self, message: str, *, provider: str = "", limit: dict | None = None):
        super().__init__(f"{BUDGET_EXCEEDED}: {message}", provider=provider, retryable=False)
        self.limit = limit or {}

    def to_json(self) -> dict:
        out = super().to_json()
        out["code"] = BUDGET_EXCEEDED
        out["limit"] = self.limit
        return out


@dataclass(frozen=True)
class BudgetLimit:
    """Limits for one provider/model (``"*"`` matches any); None leaves a limit out."""

    provider: str = "*"
    model: str = "*"
    daily_tokens: int | None = None
    monthly_tokens: int | None = None
    daily_cost: float | None = None
    monthly_cost: float | None = None

    def applies(self, provider: str, model: str) -> bool:
        return self.provider in ("*", provider) and self.model in ("*", model)


@dataclass
class Usage:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    def add(self, other: "Usage") -> None:
        self.requests += other.requests
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost += other.cost

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_json(self) -> dict:
        return {"requests": self.requests, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost": round(self.cost, 6)}


@dataclass
class Budget:
    """The ledger: usage per (provider, model, day) and the limits it is checked against.
    ``today`` is injectable (tests move the clock)."""

    limits: Sequence[BudgetLimit] = ()
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)   # model -> per 1k (in, out)
    today: Callable[[], _dt.date] = _dt.date.today
    ledger: dict[tuple[str, str, str], Usage] = field(default_factory=dict)

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float:
        pin, pout = self.prices.get(model, self.prices.get("*", (0.0, 0.0)))
        return (input_tokens * pin + output_tokens * pout) / 1000.0

    def spent(self, limit: BudgetLimit, period: str) -> Usage:
        """What the requests ``limit`` covers used in this day (``period="daily"``) or month."""
        day = self.today().isoformat()
        total = Usage()
        for (prov, model, when), used in self.ledger.items():
            same = when == day if period == "daily" else when[:7] == day[:7]
            if same and limit.applies(prov, model):
                total.add(used)
        return total

    def check(self, provider: str, model: str, input_tokens: int, reply_tokens: int) -> None:
        """Raise :class:`BudgetExceeded` when this request would pass a limit."""
        ask = Usage(1, input_tokens, reply_tokens, self.cost(model, input_tokens, reply_tokens))
        for limit in self.limits:
            if not limit.applies(provider, model):
                continue
            for period in ("daily", "monthly"):
                spent = self.spent(limit, period)
                tokens = getattr(limit, f"{period}_tokens")
                money = getattr(limit, f"{period}_cost")
                if tokens is not None and spent.tokens + ask.tokens > tokens:
                    raise BudgetExceeded(
                        f"{provider}/{model}: {spent.tokens} of {tokens} {period} tokens used; this request "
                        f"needs about {ask.tokens} more", provider=provider,
                        limit={"period": period, "tokens": tokens, "used": spent.tokens, "asked": ask.tokens})
                if money is not None and spent.cost + ask.cost > money:
                    raise BudgetExceeded(
                        f"{provider}/{model}: {spent.cost:.4f} of {money:g} {period} cost used; this request "
                        f"would cost about {ask.cost:.4f}", provider=provider,
                        limit={"period": period, "cost": money, "used": round(spent.cost, 6),
                               "asked": round(ask.cost, 6)})

    def record(self, provider: str, model: str, input_tokens: int, output_tokens: int) -> Usage:
        used = Usage(1, input_tokens, output_tokens, self.cost(model, input_tokens, output_tokens))
        self.ledger.setdefault((provider, model, self.today().isoformat()), Usage()).add(used)
        return used


class BudgetedProvider:
    """A provider behind the budget: checked before each request, charged after it.  ``usage``
    sums what went through this wrapper (the agent's result reports it)."""

    def __init__(self, inner: Provider, budget: Budget, default_model: str | None = None):
        self.inner = inner
        self.budget = budget
        self.name = inner.name
        self.default_model = default_model
        self.usage = Usage()

    def check_ready(self) -> None:
        check_ready(self.inner)

    async def stream(self, messages: Sequence[Message], *, model: str | None = None, **kw: Any) -> AsyncIterator[str]:
        name = model or self.default_model or (self.inner.model if isinstance(self.inner, ModelBound) else None) or "*"
        prompt = estimate_tokens("".join(m.content for m in messages))
        self.budget.check(self.name, name, prompt, kw.get("max_tokens") or DEFAULT_REPLY_TOKENS)
        out_chars = 0
        try:
            async for delta in self.inner.stream(messages, model=model, **kw):
                out_chars += len(delta)
                yield delta
        finally:
            out_tokens = (out_chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
            self.usage.add(self.budget.record(self.name, name, prompt, out_tokens))
