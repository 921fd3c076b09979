"""The LLM-suggested alternative on failure (seeds 000, 001): :class:`LLMAdvisor`.

The runtime asks an advisor (``RunOptions.advisor``, the protocol
:class:`sophon_dsl.runtime.retry.Advisor`) once a call has failed after its retry policy; the
runtime itself never talks to a model.  This advisor sends one fast-tier request (256 output
tokens, temperature 0.5) showing the failed call, its error and the compatible tools, and reads
one DSL call back, or ``NO_ALTERNATIVE``.  Whether the alternative may run (same output path,
an output schema that fits the readers, approval when riskier) is the runtime's decision.
"""

from __future__ import annotations

from typing import Any

from ..llm.provider import Message, collect
from ..model import Call
from ..runtime.retry import FailedCall
from .routing import fast_tier

__all__ = ["ADVISOR_MAX_TOKENS", "ADVISOR_TEMPERATURE", "LLMAdvisor", "NO_ALTERNATIVE"]

NO_ALTERNATIVE = "NO_ALTERNATIVE"
ADVISOR_MAX_TOKENS = 256
ADVISOR_TEMPERATURE = 0.5
SYSTEM = ("A call of a plan failed after its retries. Suggest an alternative approach: one call in the sophon "
          "DSL that does the same job another way (other arguments or another listed tool) and keeps the "
          f"same output path. Reply with that one line only, or {NO_ALTERNATIVE} when there is none.")


class LLMAdvisor:
    """``provider`` (fast tier) and ``model`` answer; ``asked`` counts the requests sent."""

    def __init__(self, provider: Any, model: str | None = None, *, max_tools: int = 20):
        self.provider = provider
        self.model = model
        self.max_tools = max_tools
        self.asked = 0

    def messages(self, failure: FailedCall) -> list[Message]:
        from ..llm.prompt import tool_signature

        tools = "\n".join(tool_signature(t) for t in failure.tools[: self.max_tools])
        err = failure.error
        return [Message("system", SYSTEM),
                Message("user", f"Failed call: {failure.text}\nError: {err.error}: {err.cause}\n"
                                f"Tools you may use:\n{tools}")]

    async def suggest(self, failure: FailedCall) -> Call | None:
        self.asked += 1
        provider, model = fast_tier(self.provider, self.model)
        reply = await collect(provider, self.messages(failure), model=model,
                              temperature=ADVISOR_TEMPERATURE, max_tokens=ADVISOR_MAX_TOKENS)
        return parse_suggestion(reply)


def parse_suggestion(reply: str) -> Call | None:
    """The one call of ``reply``; None for NO_ALTERNATIVE, no call, several calls or bad DSL."""
    text = reply.strip().strip("`").strip()
    if not text or text.upper().startswith(NO_ALTERNATIVE):
        return None
    from ..syntax.dsl_parser import parse_dsl

    plan, diags = parse_dsl(text + "\n")
    if any(d.is_error for d in diags) or len(plan.calls) != 1:
        return None
    return plan.calls[0]
