"""Helpers for the goal-loop tests: one scripted provider per role, keyed by request pattern,
and a wrapper that records when each request starts and ends (to see parallel steps)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from sophon_dsl.llm.providers.scripted import KeyedReply, ScriptedProvider


def plan_reply(*steps: dict) -> str:
    return json.dumps({"steps": list(steps)})


def step(task: str, criterion: str, findings=(), depends_on=(), hint=None) -> dict:
    out: dict[str, Any] = {"task": task, "success_criterion": criterion, "expected_findings": list(findings),
                           "depends_on": list(depends_on)}
    if hint is not None:
        out["subagent_hint"] = hint
    return out


def verdict(kind: str, note: str = "", confidence: float = 0.9, **facts: Any) -> str:
    return json.dumps({"verdict": kind, "confidence": confidence, "note": note, "facts": facts})


def keyed(*pairs: tuple[str, Any]) -> ScriptedProvider:
    return ScriptedProvider(keyed=[KeyedReply(p, r) for p, r in pairs])


class Timeline:
    """Wraps a provider: logs ``("start", key)`` / ``("end", key)`` around each request whose
    text holds one of ``keys``, and waits ``delay`` seconds inside it."""

    def __init__(self, inner: Any, keys: list[str], delay: float = 0.05):
        self.inner, self.keys, self.delay = inner, keys, delay
        self.name = "timeline"
        self.log: list[tuple[str, str]] = []

    @property
    def calls(self):
        return self.inner.calls

    async def stream(self, messages, **kw):
        text = "\n".join(m.content for m in messages)
        key = next((k for k in self.keys if k in text), "?")
        self.log.append(("start", key))
        await asyncio.sleep(self.delay)
        async for delta in self.inner.stream(messages, **kw):
            yield delta
        self.log.append(("end", key))
