"""The context-window guard (seed 002): keep a request inside the model's window.

When the estimated prompt passes :data:`COMPACT_AT` (80 %) of the window, the oldest
:data:`COMPACT_SHARE` (60 %) of the conversation (every message but the system prompt and the
last one) is replaced by a summary the model writes (:data:`SUMMARY_TIMEOUT`, 30 s).  When that
times out, fails or is still too long, the request is hard-truncated to :data:`TRUNCATE_TO`
(70 %) of the window: the system prompt and the most recent messages are kept whole while they
fit, and what no longer fits is cut from its middle with a note of how much was left out.

The agent builds two messages per turn (the system prompt and one context message).  With a
context window set it also carries its conversation: each earlier turn's reply and what came
of its calls, between those two (:meth:`ContextWindow.carry`).  Past 80 % the oldest 60 % of
that conversation is summarised once, and the summary replaces it in every later turn's
request; the rest of the conversation goes on growing after it until the next compaction.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Sequence

from ..llm.provider import Message, Provider, check_ready, collect
from .budget import estimate_tokens

__all__ = ["COMPACT_AT", "ContextWindow", "ContextWindowProvider", "SUMMARY_NOTE"]

COMPACT_AT = 0.80
COMPACT_SHARE = 0.60
TRUNCATE_TO = 0.70
SUMMARY_TIMEOUT = 30.0
SUMMARY_TOKENS = 512
SUMMARY_NOTE = "(Summary of {n} earlier messages) "   # how the summary opens in the request
SUMMARY_PROMPT = ("Summarise this conversation so far in a few sentences: keep every fact, value, "
                  "decision and open question a later step may need. Reply with the summary only.")


def _tokens(messages: Sequence[Message]) -> int:
    return sum(estimate_tokens(m.content) for m in messages)


@dataclass
class ContextWindow:
    """``max_tokens``: the model's window.  ``summarizer``: a provider for the summary (None:
    truncate at once).  ``actions`` logs what was done to each oversized request."""

    max_tokens: int
    summarizer: Any = None
    summary_model: str | None = None
    timeout: float = SUMMARY_TIMEOUT
    actions: list[dict] = field(default_factory=list)
    # the last compaction's request, before any truncation (what carry() keeps)
    _compacted: list[Message] | None = field(default=None, init=False, repr=False, compare=False)

    async def fit(self, messages: Sequence[Message]) -> list[Message]:
        msgs = list(messages)
        before = _tokens(msgs)
        if before <= COMPACT_AT * self.max_tokens:
            return msgs
        compacted = await self._compact(msgs)
        if compacted is not None and _tokens(compacted) <= COMPACT_AT * self.max_tokens:
            self.actions.append({"action": "compacted", "tokens_before": before, "tokens_after": _tokens(compacted)})
            return compacted
        out = truncate_messages(compacted or msgs, int(TRUNCATE_TO * self.max_tokens))
        self.actions.append({"action": "truncated", "tokens_before": before, "tokens_after": _tokens(out),
                             "reason": self._why})
        return out

    async def _compact(self, msgs: list[Message]) -> list[Message] | None:
        self._why = "no summarizer"
        head = 1 if msgs and msgs[0].role == "system" else 0
        history = msgs[head:-1]
        n = int(len(history) * COMPACT_SHARE)
        if self.summarizer is None:
            return None
        if n < 1:
            self._why = "too few messages to summarise"
            return None
        old = history[:n]
        ask = [Message("system", SUMMARY_PROMPT),
               Message("user", "\n\n".join(f"{m.role}: {m.content}" for m in old))]
        try:
            async with asyncio.timeout(self.timeout):
                summary = await collect(self.summarizer, ask, model=self.summary_model, temperature=0.0,
                                        max_tokens=SUMMARY_TOKENS)
        except TimeoutError:
            self._why = f"the summary took longer than {self.timeout:g} s"
            return None
        except Exception as exc:  # noqa: BLE001 - any failure: truncate instead
            self._why = f"the summary failed: {type(exc).__name__}: {exc}"
            return None
        self._why = "still too long after the summary"
        note = Message("user", SUMMARY_NOTE.format(n=n) + summary.strip())
        self._compacted = msgs[:head] + [note] + history[n:] + msgs[-1:]
        return self._compacted

    async def carry(self, msgs: Sequence[Message], conversation: Sequence[Message]) -> tuple[list[Message],
                                                                                           list[Message]]:
        """A turn's request, ``msgs`` = [system prompt, the turn's context message], with the
        ``conversation`` carried from earlier turns placed between the two and the whole fitted
        (:meth:`fit`); and the conversation the next turn carries: when this request was
        compacted, the summary and what followed the summarised part (even if the request was
        then truncated too), else the conversation as it was.  So a summary is asked for once,
        and every later turn sends it in place of what it summarised."""
        msgs = list(msgs)
        head = 1 if msgs and msgs[0].role == "system" else 0
        self._compacted = None
        fitted = await self.fit(msgs[:head] + list(conversation) + msgs[head:])
        if self._compacted is not None:
            return fitted, self._compacted[head:-1]
        return fitted, list(conversation)


def truncate_messages(msgs: Sequence[Message], budget: int) -> list[Message]:
    """The system prompt and the latest messages whole while they fit in ``budget`` tokens;
    the newest message that does not fit is cut in its middle; older ones are dropped."""
    head = [m for m in msgs[:1] if m.role == "system"]
    rest = list(msgs[len(head):])
    left = budget - _tokens(head)
    kept: list[Message] = []
    dropped = 0
    for idx, m in enumerate(reversed(rest)):
        cost = estimate_tokens(m.content)
        if cost <= left:
            kept.append(m)
            left -= cost
            continue
        if not kept and left > 64:      # the newest message alone is too long: keep its ends
            kept.append(Message(m.role, _cut_middle(m.content, left * 4)))
            idx += 1
        dropped = len(rest) - idx      # older messages go: the conversation stays contiguous
        break
    kept.reverse()
    if dropped:
        kept.insert(0, Message("user", f"({dropped} earlier messages were left out to fit the context window)"))
    return head + kept


def _cut_middle(text: str, chars: int) -> str:
    """The start and the end of ``text`` in ``chars`` characters, cut at line breaks when it can."""
    note_room = 80
    keep = max(0, chars - note_room)
    first, last = text[: keep // 2], text[len(text) - keep // 2:]
    nl = first.rfind("\n")
    if nl > len(first) // 2:
        first = first[:nl + 1]
    nl = last.find("\n")
    if 0 <= nl < len(last) // 2:
        last = last[nl:]
    left_out = len(text) - len(first) - len(last)
    return f"{first}\n[... {left_out} characters left out to fit the context window ...]\n{last}"


class ContextWindowProvider:
    """A provider whose requests first pass :meth:`ContextWindow.fit`."""

    def __init__(self, inner: Provider, window: ContextWindow):
        self.inner = inner
        self.window = window
        self.name = inner.name

    def check_ready(self) -> None:
        check_ready(self.inner)

    async def stream(self, messages: Sequence[Message], **kw: Any) -> AsyncIterator[str]:
        fitted = await self.window.fit(messages)
        async for delta in self.inner.stream(fitted, **kw):
            yield delta
